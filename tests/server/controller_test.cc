// The controller in-process, with a controllable clock and a real SQLite store in a temp dir.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <string>

#include "server/controller.h"
#include "server/server_main.h"
#include "agentless_controller.h"
#include "server_process.h"

namespace tessera::server {
namespace {

// A controller on the test's clock `now`, cycling every 50 ms.
ControllerOptions clocked(std::atomic<int64_t>& now) {
  ControllerOptions opt;
  opt.clock = [&now] { return now.load(); };
  opt.cycle_interval_ms = 50;
  return opt;
}

// Each queue's fair-share usage as GET /queues shows it, by name.
std::map<std::string, double> usage_by_queue(Controller& c, const Principal& who) {
  std::map<std::string, double> out;
  auto q = c.queues(who);
  EXPECT_TRUE(q.ok());
  if (q.ok())
    for (const auto& x : (*q)["queues"]) out[x["name"].get<std::string>()] = x["usage"].get<double>();
  return out;
}

TEST(ControllerTest, FairShareUsageSurvivesARestart) {
  const std::string dir = testing::make_temp_dir("tessera-ctl");
  std::atomic<int64_t> now{1'000'000};
  const ControllerOptions opt = clocked(now);
  const Principal admin{"admin", Role::kAdmin, "", ""};
  double before = 0;
  {
    auto store = open_sqlite_store(dir);
    ASSERT_TRUE(store.ok()) << store.error().message;
    auto cfg = load_server_config("");
    ASSERT_TRUE(cfg.ok());
    auto c = Controller::start(*cfg, store->get(), opt);
    ASSERT_TRUE(c.ok()) << c.error().message;
    auto spec = config::parse_job_spec_json(R"({"name": "u", "queue": "team-a", "resources": {"gpus": 8}, "command": ["x"]})");
    ASSERT_TRUE(spec.ok());
    ASSERT_TRUE((*c)->submit(admin, *spec, "", nullptr).ok());
    (*c)->wait_for_cycle();
    // An hour at 8 of 32 GPUs, then a cycle saves the usage.
    now += 3600;
    (*c)->wait_for_cycle();
    now += 61;
    (*c)->wait_for_cycle();
    auto usage = usage_by_queue(**c, admin);
    ASSERT_EQ(usage.count("team-a"), 1u);
    before = usage["team-a"];
    EXPECT_GT(before, 0.0);
  }
  auto store = open_sqlite_store(dir);
  ASSERT_TRUE(store.ok());
  auto c = Controller::start(*load_server_config(""), store->get(), opt);
  ASSERT_TRUE(c.ok());
  auto usage = usage_by_queue(**c, admin);
  ASSERT_EQ(usage.count("team-a"), 1u);
  ASSERT_EQ(usage.count("team-b"), 1u);
  EXPECT_NEAR(usage["team-a"], before, before * 0.01);
  EXPECT_EQ(usage["team-b"], 0.0);
  c->reset();
  store->reset();
  std::filesystem::remove_all(dir);
}

// Usage is integrated at every change of what is placed (as the simulator integrates between
// events), not sampled at cycles: an hour at 8 of 32 GPUs counts although the job ended before the
// next cycle looked, and to the millisecond of its start and end.
TEST(ControllerTest, FairShareUsageCountsAJobThatEndedBetweenCycles) {
  const std::string dir = testing::make_temp_dir("tessera-ctl");
  std::atomic<int64_t> now{1'000'000};
  const ControllerOptions opt = clocked(now);
  const Principal admin{"admin", Role::kAdmin, "", ""};
  auto store = open_sqlite_store(dir);
  ASSERT_TRUE(store.ok()) << store.error().message;
  auto cfg = load_server_config("");
  ASSERT_TRUE(cfg.ok());
  const int64_t half_life = cfg->scheduler.usage_half_life;
  auto c = Controller::start(*cfg, store->get(), opt);
  ASSERT_TRUE(c.ok()) << c.error().message;
  auto spec = config::parse_job_spec_json(R"({"name": "u", "queue": "team-a", "resources": {"gpus": 8}, "command": ["x"]})");
  ASSERT_TRUE(spec.ok());
  auto sub = (*c)->submit(admin, *spec, "", nullptr);
  ASSERT_TRUE(sub.ok()) << sub.error().message;
  const int64_t id = (*sub)["id"];
  (*c)->wait_for_cycle();
  auto j = (*c)->show_job(admin, id);
  ASSERT_TRUE(j.ok());
  ASSERT_EQ((*j)["state"], "running") << j->dump();
  now += 3600;
  ASSERT_TRUE((*c)->cancel_job(admin, id).ok());
  j = (*c)->show_job(admin, id);
  ASSERT_TRUE(j.ok());
  ASSERT_EQ((*j)["state"], "cancelled") << j->dump();
  now += 600;
  (*c)->wait_for_cycle();
  auto usage = usage_by_queue(**c, admin);
  ASSERT_EQ(usage.count("team-a"), 1u);
  ASSERT_EQ(usage.count("team-b"), 1u);
  // 3,600 s at 8 / 32 GPUs, then 600 s at nothing.
  const double expected = decay_usage(decay_usage(0, 0.25, 3600, half_life), 0.0, 600, half_life);
  EXPECT_NEAR(usage["team-a"], expected, expected * 1e-9);
  EXPECT_EQ(usage["team-b"], 0.0);
  c->reset();
  store->reset();
  std::filesystem::remove_all(dir);
}

// A job stopped at its time limit ends `timeout` (as Slurm's TIMEOUT), not failed, and says the limit.
class TimeLimit : public testing::AgentlessController {
 protected:
  void SetUp() override { start(TESSERA_SOURCE_DIR "/tests/server/data/defrag_cluster.yaml"); }
};

TEST_F(TimeLimit, AJobPastItsTimeLimitEndsTimeoutWithTheLimitInItsReason) {
  const int64_t id = submit_json(R"({"name": "long", "queue": "team-a", "resources": {"gpus": 1}, "max_runtime": "2h",
      "command": ["x"]})");
  ASSERT_TRUE(testing::eventually([&] { return job(id)["state"] == "running"; }, 5)) << job(id).dump();
  now += 7199;
  ctl->wait_for_cycle();
  EXPECT_EQ(job(id)["state"], "running");  // not a second early
  now += 1;
  // The state, and the timed_out event once it is stored.
  auto timed_out = [&] {
    const Json k = job(id);
    bool event = false;
    for (const Json& e : k["events"]) event = event || e["kind"] == "timed_out";
    return k["state"] == "timeout" && event;
  };
  EXPECT_TRUE(testing::eventually(timed_out, 5)) << job(id).dump(2);
  const Json j = job(id);
  EXPECT_NE(j["reason"].get<std::string>().find("time limit of 2h"), std::string::npos) << j.dump(2);
  // The state filter knows it.
  JobFilter f;
  f.states = {"timeout"};
  auto list = ctl->list_jobs(admin, f);
  ASSERT_TRUE(list.ok()) << list.error().message;
  EXPECT_EQ((*list)["jobs"].size(), 1u);
}

// A defragmenting move through the controller (docs/scheduling.md): the moved job is asked to
// checkpoint with the move's reason, restarts on the GPUs held for it, and the gang gets its node.
class DefragController : public testing::AgentlessController {
 protected:
  void SetUp() override { start(TESSERA_SOURCE_DIR "/tests/server/data/defrag_cluster.yaml"); }
};

TEST_F(DefragController, AMovedJobRestartsOnItsHeldGpusAndTheOwedGangGetsTheNode) {
  const std::string b = R"({"name": "b", "queue": "team-b", "resources": {"gpus": 1}, "command": ["x"],
                            "checkpoint": {"interval": 3600, "grace": 120}})";
  const int64_t b0 = submit_json(b), b1 = submit_json(b);
  const std::string n0 = wait_running(b0), n1 = wait_running(b1);
  ASSERT_NE(n0, n1) << "spread: one per node";
  const int64_t gang = submit_json(R"({"name": "gang", "queue": "team-a", "resources": {"gpus": 4}, "command": ["x"]})");
  int64_t moved = -1;
  for (int i = 0; i < 50 && moved < 0; ++i) {
    ctl->wait_for_cycle();
    for (int64_t id : {b0, b1})
      if (job(id)["state"] == "checkpointing") moved = id;
  }
  ASSERT_GT(moved, 0) << job(gang).dump();
  const std::string from = moved == b0 ? n0 : n1, to = moved == b0 ? n1 : n0;
  Json asked;  // the store writes events in groups: wait for it
  for (int i = 0; i < 50 && asked.is_null(); ++i, ctl->wait_for_cycle()) asked = event_of(job(moved), "checkpoint_requested");
  ASSERT_TRUE(asked.contains("detail")) << job(moved).dump();
  const std::string why = asked["detail"].value("reason", "");
  EXPECT_EQ(why, "move: checkpoints and restarts at once on node " + to +
                     " so that job gang of queue team-a, owed its guarantee, fits whole");
  EXPECT_EQ(job(gang)["state"], "pending");
  // Its task acknowledges the checkpoint and stops: it restarts on `to`, the gang runs whole on `from`.
  heartbeat(from, Json::array({Json{{"job", moved}, {"attempt", 1}, {"task", 0}, {"state", "checkpointed"},
                                    {"checkpoint", "/ck/1"}, {"checkpoint_requested", true}}}));
  EXPECT_EQ(wait_running(moved, 1), to);
  EXPECT_EQ(wait_running(gang), from);
  EXPECT_EQ(job(moved)["resume_from"], "/ck/1");
}


// A job whose tasks differ (a CPU-only launcher and a 3-GPU worker) through the controller: each task
// is placed with its own request, the API counts the GPUs its tasks ask, the spec survives a restart
// from the store, and a worker larger than any node is refused at submission naming the task.
TEST_F(DefragController, TasksThatDifferArePlacedEachWithItsOwnRequest) {
  const int64_t id = submit_json(R"({"name": "mpi", "queue": "team-a", "command": ["x"],
      "resources": {"gpus": 3, "cpu": 8, "memory": "16Gi"}, "tasks": [{"gpus": 0, "cpu": 1, "memory": "1Gi"}, {}]})");
  wait_running(id);
  const Json j = job(id);
  EXPECT_EQ(j["tasks"], 2);
  EXPECT_EQ(j["gpus"], 3);
  ASSERT_EQ(j["placement"].size(), 2u) << j.dump();
  EXPECT_EQ(j["placement"][0]["gpus"].size(), 0u);
  EXPECT_EQ(j["placement"][0]["cpu_milli"], 1000);
  EXPECT_EQ(j["placement"][0]["memory_mib"], 1024);
  EXPECT_EQ(j["placement"][1]["gpus"].size(), 3u);
  EXPECT_EQ(j["placement"][1]["cpu_milli"], 8000);
  ASSERT_TRUE(j["spec"]["tasks"].is_array()) << j.dump();
  restart(TESSERA_SOURCE_DIR "/tests/server/data/defrag_cluster.yaml");
  const Json again = job(id);
  EXPECT_EQ(again["state"], "running");
  EXPECT_EQ(again["spec"]["tasks"], j["spec"]["tasks"]) << again.dump();
  EXPECT_EQ(again["placement"], j["placement"]);
  auto spec = config::parse_job_spec_json(R"({"name": "big", "queue": "team-a", "command": ["x"],
      "tasks": [{"gpus": 1}, {"gpus": 6}]})");
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  auto r = ctl->submit(admin, *spec, "", nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("can never fit the cluster: task 1 (6 GPUs"), std::string::npos) << r.error().message;
  // Uniform tasks larger than any node: the answer names the largest node and a split that fits
  // (issue 22), not MIG.
  int most = 0;
  const Json view = ctl->nodes(admin).value();
  for (const Json& n : view["nodes"]) most = std::max<int>(most, int(n["gpus"].size()));
  ASSERT_GT(most, 0);
  auto wide = config::parse_job_spec_json(R"({"name": "wide", "queue": "team-a", "command": ["x"], "tasks": 1,
      "resources": {"gpus": )" + std::to_string(2 * most) + "}}");
  ASSERT_TRUE(wide.ok()) << wide.error().message;
  r = ctl->submit(admin, *wide, "", nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("asks " + std::to_string(2 * most) + " GPUs per task; the largest node has " + std::to_string(most)),
            std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("use tasks: 2, gpus: " + std::to_string(most)), std::string::npos) << r.error().message;
  EXPECT_EQ(r.error().message.find("MIG"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace tessera::server
