// Workload loaders: Philly (Gavel) traces with the throughput table, openb pods with times, and the
// seeded synthetic mix. Hand-made fixtures check the arithmetic; the real traces (when present) check
// the whole load.
#include "sim/workload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

namespace tessera::sim {
namespace {
namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("tessera-wl-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                         "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  void write(const std::string& name, const std::string& text) const { std::ofstream(path_ / name) << text; }

 private:
  fs::path path_;
};

// Throughputs (steps/s): Net 1 GPU 10, 2 GPUs 16 (spread 8), 8 GPUs 40 (spread 20); Solo only 1 GPU.
const char* kThroughputs = R"JSON({
  "v100": {
    "('Net (batch size 8)', 1)": {"null": 10.0},
    "('Net (batch size 8)', 2)": {"null": 16.0},
    "('Net (batch size 8)', 8)": {"null": 40.0},
    "('Solo', 1)": {"null": 4.0}
  },
  "v100_unconsolidated": {
    "('Net (batch size 8)', 2)": {"null": 8.0},
    "('Net (batch size 8)', 8)": {"null": 20.0}
  }
})JSON";

TEST(PhillyWorkload, RunTimeFromThroughputAndSpreadPenaltyFromTheMeasuredRatio) {
  TempDir d;
  d.write("simulation_throughputs.json", kThroughputs);
  d.write("teamb.trace",
          "Net (batch size 8)\tcmd\t-step\t1\t1000\t5.000000\t1\n"     // 1000 / 10 = 100 s, 1 task
          "Net (batch size 8)\tcmd\t-step\t1\t1600\t7.000000\t2\n"     // 1600 / 16 = 100 s, penalty 2.0
          "Net (batch size 8)\tcmd\t-step\t1\t800\t9.000000\t4\n"      // 4 GPUs: 16 * 4/2 = 32/s -> 25 s
          "Net (batch size 8)\tcmd\t-step\t1\t8000\t11.000000\t16\n"   // 16: 40 * 2 = 80/s -> 100 s, 2 x 8
          "Solo\tcmd\t-step\t1\t100\t3.000000\t4\n");                  // 4 * 4 = 16/s -> 7 s, no penalty known
  d.write("teama.trace", "Solo\tcmd\t-step\t1\t40\t0.000000\t1\n");
  auto w = load_workload("philly:" + d.path().string());
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_EQ(w->teams, (std::vector<std::string>{"teama", "teamb"}));
  ASSERT_EQ(w->jobs.size(), 6u);
  std::map<std::string, const WorkloadJob*> by;
  for (const WorkloadJob& j : w->jobs) by[j.name] = &j;
  // Sorted by arrival.
  EXPECT_EQ(w->jobs[0].name, "teama-1");
  EXPECT_EQ(w->jobs[0].work, 10);
  const WorkloadJob& one = *by.at("teamb-1");
  EXPECT_EQ(one.arrival, 5);
  EXPECT_EQ(one.work, 100);
  EXPECT_EQ(one.gang.tasks, 1);
  EXPECT_EQ(one.spread_slowdown_milli, 1000);
  EXPECT_EQ(one.kind, "Net (batch size 8)");
  EXPECT_EQ(one.team, "teamb");
  EXPECT_GT(one.checkpoint.interval, 0);
  const WorkloadJob& two = *by.at("teamb-2");
  EXPECT_EQ(two.work, 100);
  EXPECT_EQ(two.gang.tasks, 2);
  EXPECT_EQ(two.gang.task.gpu_count, 1);
  EXPECT_EQ(two.spread_slowdown_milli, 2000);
  const WorkloadJob& four = *by.at("teamb-3");
  EXPECT_EQ(four.work, 25);
  EXPECT_EQ(four.spread_slowdown_milli, 2000);  // from the largest measured scale below (2)
  const WorkloadJob& sixteen = *by.at("teamb-4");
  EXPECT_EQ(sixteen.work, 100);
  EXPECT_EQ(sixteen.gang.tasks, 2);
  EXPECT_EQ(sixteen.gang.task.gpu_count, 8);
  EXPECT_EQ(sixteen.spread_slowdown_milli, 2000);  // 40 / 20 at 8 GPUs
  const WorkloadJob& solo = *by.at("teamb-5");
  EXPECT_EQ(solo.work, 7);  // ceil(100 / 16)
  EXPECT_EQ(solo.spread_slowdown_milli, 1000);
}

TEST(PhillyWorkload, ErrorsNameTheFileLineAndField) {
  TempDir d;
  d.write("simulation_throughputs.json", kThroughputs);
  d.write("t.trace", "Unknown\tcmd\t-step\t1\t100\t0\t1\n");
  auto w = load_workload("philly:" + d.path().string());
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().message.find("t.trace:1"), std::string::npos) << w.error().message;
  EXPECT_NE(w.error().message.find("job_type \"Unknown\""), std::string::npos) << w.error().message;

  d.write("t.trace", "Solo\tcmd\t-step\t1\tmany\t0\t1\n");
  w = load_workload("philly:" + d.path().string());
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().message.find("total_steps"), std::string::npos) << w.error().message;

  d.write("t.trace", "Solo\tcmd\t-step\t1\t100\t0\t1.5\n");
  w = load_workload("philly:" + d.path().string());
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().message.find("scale_factor"), std::string::npos) << w.error().message;

  auto missing = load_workload("philly:" + (d.path() / "nope").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("not a directory"), std::string::npos);
}

TEST(OpenbWorkload, ArrivalAndRunTimeFromTheTimes) {
  TempDir d;
  d.write("pods.csv",
          "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
          "p0,4000,8192,1,1000,,LS,Running,100,1100,160\n"
          "p1,2000,4096,1,250,V100M16,BE,Running,50,650,50\n");
  auto w = load_workload("openb:" + (d.path() / "pods.csv").string());
  ASSERT_TRUE(w.ok()) << w.error().message;
  ASSERT_EQ(w->jobs.size(), 2u);
  EXPECT_EQ(w->jobs[0].name, "p1");
  EXPECT_EQ(w->jobs[0].arrival, 50);
  EXPECT_EQ(w->jobs[0].work, 600);
  EXPECT_EQ(w->jobs[0].gang.task.milli_per_gpu.v, 250);
  EXPECT_EQ(w->jobs[1].arrival, 100);
  EXPECT_EQ(w->jobs[1].work, 940);  // deletion - scheduled
  EXPECT_EQ(w->teams, std::vector<std::string>{"default"});

  // Never scheduled (empty scheduled_time): runs from creation to deletion.
  d.write("pending.csv",
          "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
          "p2,1000,1024,1,1000,,LS,Pending,300,420,\n");
  auto pending = load_workload("openb:" + (d.path() / "pending.csv").string());
  ASSERT_TRUE(pending.ok()) << pending.error().message;
  EXPECT_EQ(pending->jobs[0].work, 120);
  EXPECT_EQ(pending->jobs[0].kind, "openb-LS");

  d.write("bad.csv",
          "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
          "p3,1000,1024,1,1000,,LS,Running,soon,420,300\n");
  auto bad = load_workload("openb:" + (d.path() / "bad.csv").string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("bad.csv:2: field 'creation_time'"), std::string::npos) << bad.error().message;

  d.write("nt.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,1,1000\n");
  auto nt = load_workload("openb:" + (d.path() / "nt.csv").string());
  ASSERT_FALSE(nt.ok());
  EXPECT_NE(nt.error().message.find("creation_time"), std::string::npos) << nt.error().message;
}

TEST(SyntheticWorkload, SeededMixOfServicesOnSlicesAndTrainingGangs) {
  auto a = load_workload("synthetic:seed=7,days=2,gpus=64");
  auto b = load_workload("synthetic:seed=7,days=2,gpus=64");
  auto c = load_workload("synthetic:seed=8,days=2,gpus=64");
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  ASSERT_EQ(a->jobs.size(), b->jobs.size());
  for (size_t i = 0; i < a->jobs.size(); ++i) {
    EXPECT_EQ(a->jobs[i].name, b->jobs[i].name);
    EXPECT_EQ(a->jobs[i].arrival, b->jobs[i].arrival);
    EXPECT_EQ(a->jobs[i].work, b->jobs[i].work);
  }
  bool differs = a->jobs.size() != c->jobs.size();
  for (size_t i = 0; !differs && i < a->jobs.size(); ++i) differs = a->jobs[i].arrival != c->jobs[i].arrival;
  EXPECT_TRUE(differs);

  int services = 0, mig = 0, training = 0, multi_node = 0;
  for (const WorkloadJob& j : a->jobs) {
    EXPECT_LT(j.arrival, 2 * 86400);
    if (j.service) {
      ++services;
      EXPECT_EQ(j.team, "inference");
      EXPECT_EQ(j.priority_class, "production-inference");
      if (j.gang.task.mig()) {
        ++mig;
        EXPECT_TRUE(j.gang.task.mig_profile == "2g.20gb" || j.gang.task.mig_profile == "3g.40gb");
        EXPECT_GT(j.useful_milli_per_task, 0);
        EXPECT_LT(j.useful_milli_per_task, 1000);
      }
    } else {
      ++training;
      EXPECT_EQ(j.team.rfind("train-", 0), 0u);
      EXPECT_GE(j.work, 600);
      EXPECT_LE(j.work, 86400);
      EXPECT_GT(j.checkpoint.interval, 0);
      if (j.gang.tasks > 1) ++multi_node;
    }
  }
  // 16 services (gpus / 4), each a base replica and one peak replica per day.
  EXPECT_EQ(services, 16 * 3);
  EXPECT_GT(mig, services / 2);
  EXPECT_GT(training, 20);
  EXPECT_EQ(a->teams, (std::vector<std::string>{"inference", "train-a", "train-b", "train-c"}));
  for (size_t i = 1; i < a->jobs.size(); ++i) EXPECT_LE(a->jobs[i - 1].arrival, a->jobs[i].arrival);
}

TEST(SyntheticWorkload, BadSpecsSayWhichKey) {
  for (auto [spec, word] : {std::pair{"synthetic:days=0", "days"}, {"synthetic:color=3", "unknown key \"color\""},
                            {"synthetic:gpus=lots", "gpus"}, {"synthetic:seed", "KEY=VALUE"}, {"nothing:x", "expected philly"}}) {
    auto w = load_workload(spec);
    ASSERT_FALSE(w.ok()) << spec;
    EXPECT_NE(w.error().message.find(word), std::string::npos) << spec << ": " << w.error().message;
  }
}

TEST(PhillyWorkload, LoadsTheWholeSharedTrace) {
  const fs::path dir = fs::path(TESSERA_SHARED_DATA) / "philly-gavel";
  if (!fs::exists(dir)) GTEST_SKIP() << "shared data absent (" << dir << "): Philly trace test skipped";
  auto w = load_workload("philly:" + dir.string());
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_EQ(w->jobs.size(), 15264u);
  EXPECT_EQ(w->teams.size(), 15u);
  int64_t gpus = 0;
  for (const WorkloadJob& j : w->jobs) {
    EXPECT_GT(j.work, 0);
    gpus = std::max<int64_t>(gpus, int64_t(j.gang.tasks) * j.gang.task.gpu_count);
  }
  EXPECT_EQ(gpus, 64);
  EXPECT_GT(w->jobs.back().arrival, 100 * 86400);  // about 125 days
}

TEST(OpenbWorkload, LoadsTheSharedPodList) {
  const fs::path f = fs::path(TESSERA_SHARED_DATA) / "openb" / "openb_pod_list_default.csv";
  if (!fs::exists(f)) GTEST_SKIP() << "shared data absent (" << f << "): openb workload test skipped";
  auto w = load_workload("openb:" + f.string());
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_EQ(w->jobs.size(), 8152u);
}

TEST(InferenceWorkload, SteadyServicesWithADiurnalReplicaAndCombinedSpecs) {
  auto w = load_workload("inference:services=3,gpus=2,days=2,seed=5");
  ASSERT_TRUE(w.ok()) << w.error().message;
  ASSERT_EQ(w->jobs.size(), 3u * (1 + 2));  // a steady replica and one per day
  int steady = 0;
  for (const WorkloadJob& j : w->jobs) {
    EXPECT_EQ(j.team, "inference");
    EXPECT_EQ(j.gang.kind, JobKind::kInference);
    EXPECT_EQ(j.gang.task.gpu_count, 2);
    EXPECT_EQ(j.checkpoint.interval, 0);  // services do not checkpoint: never on spot
    if (j.work == 2 * 86400) ++steady;
    else EXPECT_EQ(j.work, 12 * 3600);
  }
  EXPECT_EQ(steady, 3);
  auto both = load_workload("inference:services=2,days=1+synthetic:seed=2,days=1,gpus=16,load_pct=50");
  ASSERT_TRUE(both.ok()) << both.error().message;
  EXPECT_GT(both->jobs.size(), 4u);
  EXPECT_TRUE(std::is_sorted(both->jobs.begin(), both->jobs.end(),
                             [](const WorkloadJob& a, const WorkloadJob& b) { return a.arrival < b.arrival; }));
  EXPECT_NE(std::find(both->teams.begin(), both->teams.end(), "inference"), both->teams.end());
  auto bad = load_workload("inference:services=0");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("services must be 1..10000"), std::string::npos);
  EXPECT_FALSE(load_workload("inference:color=red").ok());
  auto dup = load_workload("inference:services=1,days=1+inference:services=1,days=1");
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.error().message.find("occurs in two parts"), std::string::npos);
}

}  // namespace
}  // namespace tessera::sim
