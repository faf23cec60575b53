// Agent liveness runs on the controller's injected monotonic clock (issue 19, section 5): a node
// goes NotReady when the clock passes its agent's timeout, and not before, without waiting real time.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>

#include "server/controller.h"
#include "server/server_main.h"
#include "server_process.h"

namespace tessera::server {
namespace {

TEST(AgentLiveness, NotReadyFollowsTheInjectedClock) {
  const std::string dir = testing::make_temp_dir("tessera-live");
  std::atomic<int64_t> ms{0};
  const auto origin = std::chrono::steady_clock::now();
  ControllerOptions opt;
  opt.agents_required = true;
  opt.agent_timeout_ms = 15000;
  opt.cycle_interval_ms = 20;
  opt.steady_clock = [&] { return origin + std::chrono::milliseconds(ms.load()); };
  const Principal admin{"admin", Role::kAdmin, "", ""};
  auto store = open_sqlite_store(dir);
  ASSERT_TRUE(store.ok()) << store.error().message;
  auto cfg = load_server_config("");
  ASSERT_TRUE(cfg.ok());
  auto c = Controller::start(*cfg, store->get(), opt);
  ASSERT_TRUE(c.ok()) << c.error().message;
  Json gpus = Json::array();
  for (int i = 0; i < 8; ++i) gpus.push_back(Json{{"model", "A100-80GB"}, {"mig_enabled", false}});
  const Json reg{{"node", "node-0"}, {"address", "127.0.0.1"}, {"log_port", 0}, {"inventory", {{"gpus", gpus}}}};
  ASSERT_TRUE((*c)->agent_register(admin, reg).ok());
  auto agent_state = [&] {
    auto n = (*c)->nodes(admin);
    for (const Json& x : (*n)["nodes"])
      if (x["name"] == "node-0") return x.value("agent", "");
    return std::string("?");
  };
  ASSERT_EQ(agent_state(), "ready");
  // Real time passes, the injected clock does not: still ready.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  (*c)->wait_for_cycle();
  EXPECT_EQ(agent_state(), "ready");
  // The clock passes the timeout: NotReady at the next check.
  ms += 16000;
  EXPECT_TRUE(testing::eventually([&] { return agent_state() == "not-ready"; }, 5));
  // A heartbeat brings it back; its age is measured on the same clock.
  ASSERT_TRUE((*c)->agent_heartbeat(admin, Json{{"node", "node-0"}}).ok());
  EXPECT_EQ(agent_state(), "ready");
  c->reset();
  store->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera::server
