// The controller in-process, with a controllable clock and a real SQLite store in a temp dir.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>

#include "server/controller.h"
#include "server/server_main.h"
#include "server_process.h"

namespace tessera::server {
namespace {

TEST(ControllerTest, FairShareUsageSurvivesARestart) {
  const std::string dir = testing::make_temp_dir("tessera-ctl");
  std::atomic<int64_t> now{1'000'000};
  ControllerOptions opt;
  opt.clock = [&now] { return now.load(); };
  opt.cycle_interval_ms = 50;
  const Principal admin{"admin", Role::kAdmin, ""};
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
    auto q = (*c)->queues(admin);
    ASSERT_TRUE(q.ok());
    for (const auto& x : (*q)["queues"])
      if (x["name"] == "team-a") before = x["usage"];
    EXPECT_GT(before, 0.0);
  }
  auto store = open_sqlite_store(dir);
  ASSERT_TRUE(store.ok());
  auto c = Controller::start(*load_server_config(""), store->get(), opt);
  ASSERT_TRUE(c.ok());
  double after = 0, other = 1;
  auto queues = (*c)->queues(admin);
  ASSERT_TRUE(queues.ok());
  for (const auto& x : (*queues)["queues"]) {
    if (x["name"] == "team-a") after = x["usage"];
    if (x["name"] == "team-b") other = x["usage"];
  }
  EXPECT_NEAR(after, before, before * 0.01);
  EXPECT_EQ(other, 0.0);
  c->reset();
  store->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera::server
