// Spot interruptions in the controller (docs/server.md, "Spot interruptions"): the notice's two
// paths (checkpoint within the notice, or requeue from the last checkpoint), the per-job counter and
// the avoid-spot preference after spot_max_interruptions, the save interval sent to agents, and the
// REST route and CLI verb against the real binary.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>

#include "core/pool.h"
#include "server/controller.h"
#include "server/server_main.h"
#include "agentless_controller.h"
#include "server_process.h"

namespace tessera::server {
namespace {

const std::string kSpotCluster = TESSERA_SOURCE_DIR "/tests/server/data/spot_cluster.yaml";

// An agentless controller on the spot cluster with a fixed clock.
class SpotController : public testing::AgentlessController {
 protected:
  void SetUp() override { start(kSpotCluster); }
  int64_t submit(int64_t grace = 60) {
    return submit_json(
        R"({"name": "train", "queue": "default", "resources": {"gpus": 8}, "command": ["x"], "spot": "preferred",
            "checkpoint": {"interval": 3600, "grace": )" + std::to_string(grace) + "}}");
  }
};

TEST_F(SpotController, NoticeThatFitsAsksForACheckpointByTheReclaimTime) {
  const int64_t id = submit(60);
  const std::string first = wait_running(id);
  ASSERT_EQ(first.rfind("spot-", 0), 0u) << "spot: preferred lands on spot: " << first;
  // The desired state carries the save interval from Young's rule (pool's 0.5/h, grace 60 s as the cost).
  Pool spot;
  spot.kind = PoolKind::kSpot;
  spot.interruptions_per_million_hours = 500000;
  const Json ans = heartbeat(first, Json::array({Json{{"job", id}, {"attempt", 1}, {"task", 0}, {"state", "running"}}}));
  ASSERT_EQ(ans["run"].size(), 1u) << ans.dump();
  EXPECT_EQ(ans["run"][0]["checkpoint_every_s"], spot_checkpoint_interval(spot, 60, 1, 3600));
  EXPECT_LT(ans["run"][0]["checkpoint_every_s"].get<int64_t>(), 3600);

  auto r = ctl->node_interrupt(admin, first, 120, -1);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ((*r)["jobs"].size(), 1u);
  EXPECT_EQ((*r)["jobs"][0]["path"], "checkpoint");
  EXPECT_NE((*r)["jobs"][0]["reason"].get<std::string>().find("checkpoint fits in the 120 s notice"), std::string::npos)
      << (*r).dump();
  Json j = job(id);
  EXPECT_EQ(j["state"], "checkpointing");
  EXPECT_EQ(j["spot_interruptions"], 1);
  EXPECT_EQ(event_of(j, "checkpoint_requested")["detail"]["evict_by"], now.load() + 120);
  EXPECT_EQ(event_of(j, "spot_interrupted")["detail"]["path"], "checkpoint");
  const Json n = node(first);
  EXPECT_EQ(n["state"], "cordoned");
  EXPECT_NE(n["reason"].get<std::string>().find("spot interruption"), std::string::npos);
  // The same notice again is not a second interruption.
  auto again = ctl->node_interrupt(admin, first, 120, -1);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->contains("note"));
  EXPECT_EQ(job(id)["spot_interruptions"], 1);

  // The task checkpoints and stops: the job is requeued, resumes from it, elsewhere.
  heartbeat(first, Json::array({Json{{"job", id}, {"attempt", 1}, {"task", 0}, {"state", "checkpointed"},
                                     {"checkpoint", "/ck/step-7"}, {"checkpoint_requested", true},
                                     {"checkpoint_saves", 1}, {"checkpoint_cost_ms", 2500}}}));
  const std::string second = wait_running(id, 1);
  EXPECT_NE(second, first);
  j = job(id);
  EXPECT_EQ(j["resume_from"], "/ck/step-7");
  EXPECT_EQ(j["checkpoint_cost_ms"], 2500);
  EXPECT_EQ(j["spot_interruptions"], 1);
  const std::string text = metrics::render(ctl->metric_families());
  EXPECT_NE(text.find("tessera_spot_interruptions_total{pool=\"spot-a\",path=\"checkpoint\"} 1"), std::string::npos) << text;
}

TEST_F(SpotController, NoticeShorterThanTheCheckpointRequeuesFromTheLastCheckpoint) {
  const int64_t id = submit(60);
  const std::string first = wait_running(id);
  // A periodic save was acknowledged and timed at 300 s.
  heartbeat(first, Json::array({Json{{"job", id}, {"attempt", 1}, {"task", 0}, {"state", "running"},
                                     {"checkpoint", "/ck/periodic-1"}, {"checkpoint_saves", 1},
                                     {"checkpoint_cost_ms", 300000}}}));
  Json j = job(id);
  EXPECT_EQ(j["checkpoint_cost_ms"], 300000);
  EXPECT_EQ(j["resume_from"], "/ck/periodic-1");
  auto r = ctl->node_interrupt(admin, first, 30, -1);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ((*r)["jobs"].size(), 1u);
  EXPECT_EQ((*r)["jobs"][0]["path"], "requeue");
  const std::string why = (*r)["jobs"][0]["reason"];
  EXPECT_NE(why.find("checkpoint takes ~300 s (measured), more than the 30 s notice"), std::string::npos) << why;
  EXPECT_NE(why.find("resuming from the last periodic checkpoint at /ck/periodic-1"), std::string::npos) << why;
  j = job(id);
  EXPECT_NE(j["state"], "checkpointing");
  EXPECT_EQ(j["spot_interruptions"], 1);
  EXPECT_EQ(j["resume_from"], "/ck/periodic-1");
  EXPECT_TRUE(has_event(j, "spot_interrupted"));
  EXPECT_TRUE(has_event(j, "requeued"));
  EXPECT_NE(wait_running(id, 1), first);
  EXPECT_EQ(job(id)["resume_from"], "/ck/periodic-1");
}

TEST_F(SpotController, AfterMaxInterruptionsTheJobPrefersOtherPools) {
  // grace 600 > any notice given here: every notice requeues at once.
  const int64_t id = submit(600);
  const std::string n1 = wait_running(id);
  ASSERT_EQ(n1.rfind("spot-", 0), 0u);
  ASSERT_TRUE(ctl->node_interrupt(admin, n1, 10, -1).ok());
  const std::string n2 = wait_running(id, 1);
  EXPECT_EQ(n2.rfind("spot-", 0), 0u) << "one interruption: still prefers spot, got " << n2;
  EXPECT_NE(n2, n1);
  EXPECT_FALSE(job(id).contains("spot_avoid"));
  ASSERT_TRUE(ctl->node_interrupt(admin, n2, 10, -1).ok());
  // Interrupted twice (the config's spot_max_interruptions): the free third spot node is passed over.
  const std::string n3 = wait_running(id, 2);
  EXPECT_EQ(n3, "owned");
  const Json j = job(id);
  EXPECT_EQ(j["spot_interruptions"], 2);
  EXPECT_EQ(j["spot_avoid"], "interrupted 2 times on spot: now prefers other pools");
  EXPECT_EQ(event_of(j, "spot_avoided")["detail"]["reason"], "interrupted 2 times on spot: now prefers other pools");
  // At the reclaim time the node is gone (reclaimed); it stays cordoned until it comes back.
  now += 11;
  ctl->wait_for_cycle();
  ctl->wait_for_cycle();
  EXPECT_EQ(node(n1)["state"], "cordoned");
}

TEST_F(SpotController, AgentNoticesInHeartbeats) {
  // With a reclaim time: that time; handled once however often the agent repeats it.
  heartbeat("spot-0", Json::array());
  auto r = ctl->agent_heartbeat(admin, Json{{"node", "spot-0"}, {"tasks", Json::array()},
                                             {"interruption_notice", {{"noticed_at", now.load()}, {"reclaim_at", now.load() + 45}}}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(node("spot-0")["state"], "cordoned");
  EXPECT_EQ(node("spot-0")["reclaim_at"], now.load() + 45);
  // Without one: noticed_at plus the pool's 120 s notice.
  r = ctl->agent_heartbeat(admin, Json{{"node", "spot-1"}, {"interruption_notice", {{"noticed_at", now.load() - 20}}}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(node("spot-1")["reclaim_at"], now.load() + 100);
  // Bad input names the field; a notice from a node outside spot pools changes nothing.
  r = ctl->agent_heartbeat(admin, Json{{"node", "spot-2"}, {"interruption_notice", {{"reclaim_at", "soon"}}}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("interruption_notice.reclaim_at"), std::string::npos) << r.error().message;
  r = ctl->agent_heartbeat(admin, Json{{"node", "owned"}, {"interruption_notice", {{"noticed_at", now.load()}}}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(node("owned")["state"], "ready");
  EXPECT_TRUE(node("owned")["reclaim_at"].is_null());
}

TEST_F(SpotController, RouteChecks) {
  EXPECT_EQ(ctl->node_interrupt(admin, "nope", 10, -1).error().code, ErrorCode::kNotFound);
  auto owned = ctl->node_interrupt(admin, "owned", 10, -1);
  ASSERT_FALSE(owned.ok());
  EXPECT_EQ(owned.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(owned.error().message.find("kind owned"), std::string::npos) << owned.error().message;
  auto past = ctl->node_interrupt(admin, "spot-0", -1, now.load() - 5);
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.error().message.find("reclaim_at"), std::string::npos);
  const Principal member{"bob", Role::kMember, "default", ""};
  EXPECT_EQ(ctl->node_interrupt(member, "spot-0", 10, -1).error().code, ErrorCode::kPermissionDenied);
  // Default notice: the pool's 120 s.
  auto ok = ctl->node_interrupt(admin, "spot-0", -1, -1);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ((*ok)["reclaim_at"], now.load() + 120);
}

}  // namespace
}  // namespace tessera::server

namespace tessera::testing {
namespace {

TEST(SpotApi, InterruptionRouteAndCli) {
  ServerProcess server(TESSERA_SOURCE_DIR "/tests/server/data/spot_cluster.yaml");
  std::string out;
  ASSERT_TRUE(server.start(&out)) << out;
  const std::string admin = server.admin_token();
  auto post = [&](const std::string& node, const Json& body, const std::string& token) {
    return server.post("/api/v1/nodes/" + node + "/interruption", token, body);
  };
  EXPECT_EQ(post("nope", Json{{"notice_s", 10}}, admin).status, 404);
  auto r = post("owned", Json{{"notice_s", 10}}, admin);
  EXPECT_EQ(r.status, 409);
  EXPECT_NE(r.raw.find("kind owned"), std::string::npos) << r.raw;
  r = post("spot-0", Json{{"notice_s", "soon"}}, admin);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.raw.find("notice_s"), std::string::npos) << r.raw;
  r = post("spot-0", Json{{"notice_s", 10}, {"reclaim_at", 2000000000}}, admin);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.raw.find("not both"), std::string::npos) << r.raw;
  r = post("spot-0", Json{{"notice", 10}}, admin);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.raw.find("notice: unknown field"), std::string::npos) << r.raw;
  const std::string viewer = server.token("vera", "viewer");
  EXPECT_EQ(post("spot-0", Json{{"notice_s", 10}}, viewer).status, 403);

  // A running job on spot, then the CLI verb.
  auto sub = server.post("/api/v1/jobs", admin,
                         Json{{"name", "t"}, {"queue", "default"}, {"resources", {{"gpus", 8}}}, {"command", {"sleep", "60"}},
                              {"spot", "preferred"}, {"checkpoint", {{"interval", 3600}, {"grace", 600}}}});
  ASSERT_EQ(sub.status, 201) << sub.raw;
  const int64_t id = sub.body["id"];
  std::string node;
  ASSERT_TRUE(eventually([&] {
    auto j = server.get("/api/v1/jobs/" + std::to_string(id), admin).body;
    if (j.value("state", "") != "running") return false;
    node = j["placement"][0]["node"];
    return true;
  }));
  const CliResult cli = run_cli({"interrupt", node, "--notice", "30", "--server", "http://127.0.0.1:" + std::to_string(server.port()),
                                 "--token", admin});
  EXPECT_EQ(cli.status, 0) << cli.err;
  EXPECT_NE(cli.out.find("reclaimed in 30 s"), std::string::npos) << cli.out;
  EXPECT_NE(cli.out.find("requeue"), std::string::npos) << cli.out;
  const CliResult bad = run_cli({"interrupt", "owned", "--server", "http://127.0.0.1:" + std::to_string(server.port()),
                                 "--token", admin});
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("kind owned"), std::string::npos) << bad.err;
  // The counter and the node's interruption survive a restart.
  server.kill(SIGTERM);
  ASSERT_TRUE(server.restart());
  auto j = server.get("/api/v1/jobs/" + std::to_string(id), admin);
  EXPECT_EQ(j.body["spot_interruptions"], 1) << j.raw;
  bool cordoned = false;
  const Json nodes = server.get("/api/v1/nodes", admin).body;
  for (const Json& n : nodes["nodes"])
    if (n["name"] == node) cordoned = n["state"] == "cordoned";
  EXPECT_TRUE(cordoned) << nodes.dump();
  const CliResult show = run_cli({"show", std::to_string(id), "--server", "http://127.0.0.1:" + std::to_string(server.port()),
                                  "--token", admin});
  EXPECT_NE(show.out.find("interrupted 1 time"), std::string::npos) << show.out;
}

}  // namespace
}  // namespace tessera::testing
