// Agents' watches (issue 23): a start or an exit travels at once, not on the next heartbeat. A real
// `tessera server` whose agents beat only every 20 s, and a real agent with fake GPUs: short jobs
// on 4 GPUs run wave after wave within seconds, which heartbeats alone could not do. And the watch
// protocol itself: checked at the edge, answered at once when the number differs, held otherwise.
#include <gtest/gtest.h>

#include <chrono>

#include "agent_process.h"

namespace tessera::testing {
namespace {

const std::string kCluster = TESSERA_SOURCE_DIR "/tests/agent/data/agents_cluster.yaml";
using Ms = std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

// A server whose agents heartbeat every 20 s (NotReady after a minute).
void start_slow_beating_server(ServerProcess& server) {
  server.with_agents({"--heartbeat-interval-ms", "20000", "--missed-heartbeats", "3"});
  std::string out;
  ASSERT_TRUE(server.start(&out)) << out;
}

bool node_ready(ServerProcess& server, const std::string& node) {
  for (const Json& n : server.get("/api/v1/nodes", server.admin_token()).body.value("nodes", Json::array()))
    if (n.value("name", "") == node && n.value("agent", "") == "ready") return true;
  return false;
}

TEST(AgentWatch, StartsAndExitsTravelAtOnceNotOnTheNextHeartbeat) {
  ServerProcess server(kCluster);
  start_slow_beating_server(server);
  AgentProcess agent("gpu-0", "fake:4xH100-80GB-SXM,nvswitch");
  agent.set_heartbeat_ms(0);  // as the controller says: every 20 s
  agent.start(server.port(), server.admin_token());
  ASSERT_TRUE(eventually([&] { return node_ready(server, "gpu-0"); }, 20)) << agent.output();
  // 12 one-GPU jobs on 4 GPUs: three waves. On heartbeats alone each wave would wait up to 20 s
  // for its start and 20 s for its exit to be heard.
  const auto t0 = SteadyClock::now();
  std::vector<int64_t> ids;
  for (int i = 0; i < 12; ++i) {
    auto r = server.post("/api/v1/jobs", server.admin_token(),
                         Json{{"name", "w" + std::to_string(i)}, {"queue", "default"}, {"resources", {{"gpus", 1}}}, {"command", {"/bin/true"}}});
    ASSERT_EQ(r.status, 201) << r.raw;
    ids.push_back(r.body.value("id", int64_t(0)));
  }
  auto all_succeeded = [&] {
    for (int64_t id : ids)
      if (server.get("/api/v1/jobs/" + std::to_string(id), server.admin_token()).body.value("state", "") != "succeeded") return false;
    return true;
  };
  EXPECT_TRUE(eventually(all_succeeded, 15)) << agent.output();
  const double took = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  EXPECT_LT(took, 15.0);
  std::printf("12 jobs in 3 waves on 20 s heartbeats: %.2f s\n", took);
  // Millisecond times agree with the seconds and with each other.
  for (int64_t id : ids) {
    const Json j = server.get("/api/v1/jobs/" + std::to_string(id), server.admin_token()).body;
    const int64_t sub = j.value("submitted_ms", int64_t(-1)), start = j.value("started_ms", int64_t(-1)),
                  end = j.value("finished_ms", int64_t(-1));
    EXPECT_EQ(sub / 1000, j.value("submitted", int64_t(0))) << j.dump();
    EXPECT_EQ(start / 1000, j.value("started", int64_t(0))) << j.dump();
    EXPECT_EQ(end / 1000, j.value("finished", int64_t(0))) << j.dump();
    EXPECT_LE(sub, start);
    EXPECT_LE(start, end);
  }
  // The latencies are in /metrics: every job's submit→start and start→first report, and heartbeats.
  const std::string metrics = server.get("/metrics", server.admin_token()).raw;
  auto count_of = [&](const std::string& name) {
    const auto at = metrics.find("\n" + name + "_count ");
    return at == std::string::npos ? -1.0 : std::stod(metrics.substr(at + name.size() + 8));
  };
  EXPECT_GE(count_of("tessera_job_submit_to_start_seconds"), 12) << metrics;
  EXPECT_GE(count_of("tessera_task_start_to_running_seconds"), 12) << metrics;
  EXPECT_GE(count_of("tessera_agent_heartbeat_seconds"), 3) << metrics;
  EXPECT_GE(count_of("tessera_agent_heartbeat_round_trip_seconds"), 1) << metrics;
}

TEST(AgentWatch, RequestsAreCheckedAndAnsweredWhenTheNumberDiffersOrTheWaitEnds) {
  ServerProcess server(kCluster);
  start_slow_beating_server(server);
  const std::string t = server.admin_token();
  auto r = server.post("/api/v1/agent/watch", t, Json::object());
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.raw.find("node"), std::string::npos) << r.raw;
  r = server.post("/api/v1/agent/watch", t, Json{{"node", "gpu-1"}, {"seen", 0}, {"wait_ms", 70000}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.raw.find("wait_ms"), std::string::npos) << r.raw;
  r = server.post("/api/v1/agent/watch", t, Json{{"node", "gpu-1"}, {"seen", "x"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.raw.find("seen"), std::string::npos) << r.raw;
  EXPECT_EQ(server.post("/api/v1/agent/watch", t, Json{{"node", "nope"}, {"seen", 0}}).status, 404);
  // A number the agent has not seen: answered at once with the current one.
  auto t0 = SteadyClock::now();
  r = server.post("/api/v1/agent/watch", t, Json{{"node", "gpu-1"}, {"seen", 0}, {"wait_ms", 5000}});
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_LT(SteadyClock::now() - t0, Ms(2000));
  const int64_t seq = r.body.value("seq", int64_t(0));
  EXPECT_GT(seq, 0);
  // The current number and nothing to tell: held until the wait ends, then the same number.
  t0 = SteadyClock::now();
  r = server.post("/api/v1/agent/watch", t, Json{{"node", "gpu-1"}, {"seen", seq}, {"wait_ms", 300}});
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_GE(SteadyClock::now() - t0, Ms(290));
  EXPECT_EQ(r.body.value("seq", int64_t(0)), seq);
  // A heartbeat answer carries the same number.
  Json reg{{"node", "gpu-1"}, {"address", "127.0.0.1"}, {"log_port", 0}, {"inventory", {{"source", "fake"}, {"gpus", Json::array()}}}};
  for (int i = 0; i < 4; ++i) reg["inventory"]["gpus"].push_back(Json{{"index", i}, {"model", "H100-80GB-SXM"}, {"mig_enabled", false}});
  ASSERT_EQ(server.post("/api/v1/agent/register", t, reg).status, 200);
  r = server.post("/api/v1/agent/heartbeat", t, Json{{"node", "gpu-1"}, {"tasks", Json::array()}});
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body.value("seq", int64_t(0)), seq);
}

}  // namespace
}  // namespace tessera::testing
