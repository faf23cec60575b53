// End to end, spot recovery: a real `tessera server` and two real `tessera agent`s (one owned node,
// one spot node) on loopback, and a real checkpointing task (python3, the protocol of
// docs/checkpointing.md). The spot node's agent asks for periodic `save`s (the task goes on, the
// cost is measured); then a notice file appears: the job checkpoints within the notice, is requeued
// onto the owned node resuming from that checkpoint, and the interruption is counted. At the
// reclaim time the node goes NotReady; its agent registers again and the node is ready again.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "agent_process.h"

namespace tessera::testing {
namespace {

const std::string kSpotCluster = TESSERA_SOURCE_DIR "/tests/agent/data/spot_cluster.yaml";

// Counts steps; on a `save` request saves (0.3 s) and goes on, on a stop request (or SIGUSR1)
// saves and exits 0. Appends "ATTEMPT NODE RESUME_FROM" to OUT/starts and one line per save to OUT/saves.
const char* kTask = R"PY(
import os, signal, sys, time
d, out = os.environ["TESSERA_CHECKPOINT_DIR"], sys.argv[1]
resume = os.environ.get("TESSERA_RESUME_FROM", "")
with open(os.path.join(out, "starts"), "a") as f:
    f.write("%s %s %s\n" % (os.environ["TESSERA_ATTEMPT"], os.environ["TESSERA_NODE"], resume or "-"))
asked = False
def on_signal(s, f):
    global asked
    asked = True
signal.signal(signal.SIGUSR1, on_signal)
step = int(open(resume).read()) if resume else 0
served = None
while True:
    step += 1
    time.sleep(0.05)
    try:
        req = open(os.path.join(d, ".request")).read().splitlines()
    except OSError:
        req = None
    mode = (req[2] if len(req) > 2 else "stop") if req else None
    if not (asked or mode == "stop" or (mode == "save" and req != served)):
        continue
    time.sleep(0.3)
    path = os.path.join(d, "ckpt-%d" % step)
    with open(path, "w") as f:
        f.write(str(step))
    with open(os.path.join(d, ".ack.tmp"), "w") as f:
        f.write(path + "\n")
    os.replace(os.path.join(d, ".ack.tmp"), os.path.join(d, ".ack"))
    if asked or mode == "stop":
        sys.exit(0)
    served = req
    with open(os.path.join(out, "saves"), "a") as f:
        f.write(path + "\n")
)PY";

std::vector<std::string> lines_of(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream in(path);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

std::string event_reason(const Json& job, const std::string& kind) {
  for (const Json& e : job.value("events", Json::array()))
    if (e.value("kind", "") == kind) return e["detail"].value("reason", "");
  return "";
}

TEST(SpotAgents, PeriodicSavesThenANoticeFileCheckpointsAndRequeues) {
  const std::string out = task_writable_dir("tessera-spot-e2e");  // the task runs as nobody
  std::filesystem::create_directories(out + "/ckpt");
  ::chmod((out + "/ckpt").c_str(), 0777);
  { std::ofstream(out + "/task.py") << kTask; }
  const std::string notice = out + "/notice";
  ServerProcess server(kSpotCluster);
  server.with_agents({"--heartbeat-interval-ms", "200", "--missed-heartbeats", "8", "--task-lease-ms", "6000"});
  std::string text;
  ASSERT_TRUE(server.start(&text)) << text;
  AgentProcess owned("gpu", "fake:4xH100-80GB-SXM,nvswitch"), spot("spot", "fake:4xH100-80GB-SXM,nvswitch");
  owned.start(server.port(), server.admin_token());
  spot.start(server.port(), server.admin_token(), {"--interruption-notice-file", notice});
  const std::string admin = server.admin_token();
  auto node = [&](const std::string& name) {
    for (const Json& n : server.get("/api/v1/nodes", admin).body.value("nodes", Json::array()))
      if (n["name"] == name) return n;
    return Json();
  };
  ASSERT_TRUE(eventually([&] { return node("gpu").value("agent", "") == "ready" && node("spot").value("agent", "") == "ready"; }, 20))
      << owned.output() << spot.output();
  auto sub = server.post("/api/v1/jobs", admin,
                         Json{{"name", "spotty"}, {"queue", "default"}, {"resources", {{"gpus", 4}}},
                              {"command", {"/usr/bin/python3", out + "/task.py", out}}, {"spot", "preferred"},
                              {"checkpoint", {{"interval", 3600}, {"grace", 2}, {"dir", out + "/ckpt"}}}});
  ASSERT_EQ(sub.status, 201) << sub.raw;
  const std::string path = "/api/v1/jobs/" + std::to_string(sub.body["id"].get<int64_t>());
  auto job = [&] { return server.get(path, admin).body; };

  // Periodic saves on spot: measured, and the task keeps running (same attempt, one start).
  ASSERT_TRUE(eventually([&] { return lines_of(out + "/saves").size() >= 2 && !job()["checkpoint_cost_ms"].is_null(); }, 30))
      << job().dump() << spot.output();
  Json j = job();
  EXPECT_EQ(j["state"], "running");
  EXPECT_EQ(j["attempt"], 1);
  EXPECT_EQ(j["placement"][0]["node"], "spot");
  EXPECT_GE(j["checkpoint_cost_ms"].get<int64_t>(), 250);  // the task takes 0.3 s per save
  EXPECT_EQ(lines_of(out + "/starts").size(), 1u);
  EXPECT_NE(spot.output().find("event=checkpoint_saved"), std::string::npos);

  // The notice: an empty file (the pool's 6 s notice applies).
  { std::ofstream(notice) << ""; }
  ASSERT_TRUE(eventually([&] { return job().value("spot_interruptions", 0) == 1; }, 10)) << job().dump();
  EXPECT_EQ(node("spot")["state"], "cordoned");
  // Checkpointed within the notice, requeued, resumed on the owned node from that checkpoint.
  ASSERT_TRUE(eventually([&] {
    const Json x = job();
    return x.value("state", "") == "running" && x.value("attempt", 0) == 2;
  }, 20)) << job().dump() << spot.output();
  j = job();
  EXPECT_EQ(j["placement"][0]["node"], "gpu");
  EXPECT_EQ(j["spot_interruptions"], 1);
  ASSERT_TRUE(j["resume_from"].is_string()) << j.dump();
  const std::string reason = event_reason(j, "spot_interrupted");
  EXPECT_NE(reason.find("checkpoint fits in the"), std::string::npos) << reason;
  // The job's state is read from memory and its events from the store, which commits in groups:
  // the requeue's events may land a moment after the new attempt shows.
  EXPECT_TRUE(eventually([&] { return event_reason(job(), "preempted") == "checkpointed and stopped as asked"; }, 5))
      << job().dump();
  ASSERT_TRUE(eventually([&] { return lines_of(out + "/starts").size() == 2; }, 10));
  const std::string second = lines_of(out + "/starts")[1];
  EXPECT_EQ(second, "2 gpu " + j["resume_from"].get<std::string>());
  EXPECT_EQ(j["resume_from"].get<std::string>().rfind(out + "/ckpt/ckpt-", 0), 0u);
  const size_t saves_on_spot = lines_of(out + "/saves").size();
  // At the reclaim time the node goes away; the agent (still alive here) registers again and the
  // node is ready and uncordoned; the same notice is not counted twice.
  ASSERT_TRUE(eventually([&] { return spot.output().find("event=reregister") != std::string::npos; }, 15)) << spot.output();
  ASSERT_TRUE(eventually([&] { return node("spot").value("state", "") == "ready" && node("spot").value("agent", "") == "ready"; }, 10))
      << node("spot").dump();
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_EQ(node("spot")["state"], "ready");
  EXPECT_EQ(job()["spot_interruptions"], 1);
  EXPECT_EQ(lines_of(out + "/saves").size(), saves_on_spot) << "no saves are asked off spot";
  std::error_code ec;
  std::filesystem::remove_all(out, ec);
}

}  // namespace
}  // namespace tessera::testing
