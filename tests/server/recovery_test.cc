// Recovery at start (controller_recovery.cc) from a store whose contents were damaged by hand: a
// meta value of the wrong type refuses the start with a message naming the recovery, never aborts;
// a meta key this release does not write is skipped.
#include <gtest/gtest.h>

#include <filesystem>

#include "server/controller.h"
#include "server/server_main.h"
#include "server_process.h"

namespace tessera::server {
namespace {

TEST(Recovery, DamagedMetaRefusesTheStartInsteadOfAborting) {
  const std::string dir = testing::make_temp_dir("tessera-recover");
  auto cfg = load_server_config("");
  ASSERT_TRUE(cfg.ok());
  {
    auto store = open_sqlite_store(dir);
    ASSERT_TRUE(store.ok()) << store.error().message;
    WriteBatch b;
    b.meta.push_back({"mig/node-0/not-a-number", R"({"enabled": true, "layout": []})"});  // skipped
    b.meta.push_back({"node/node-1", R"({"state": 5})"});                                 // a number, not a name
    ASSERT_TRUE((*store)->write_sync(std::move(b)).ok());
    auto c = Controller::start(*cfg, store->get(), ControllerOptions{});
    ASSERT_FALSE(c.ok()) << "a damaged value is refused";
    EXPECT_NE(c.error().message.find("admin restore"), std::string::npos) << c.error().message;
  }
  {
    auto store = open_sqlite_store(dir);
    ASSERT_TRUE(store.ok());
    WriteBatch b;
    b.meta.push_back({"node/node-1", R"({"state": "cordoned", "reason": "maintenance"})"});
    ASSERT_TRUE((*store)->write_sync(std::move(b)).ok());
    auto c = Controller::start(*cfg, store->get(), ControllerOptions{});
    ASSERT_TRUE(c.ok()) << c.error().message;
    const Principal admin{"admin", Role::kAdmin, "", ""};
    auto nodes = (*c)->nodes(admin);
    ASSERT_TRUE(nodes.ok());
    for (const Json& n : (*nodes)["nodes"]) {
      if (n["name"] == "node-1") {
        EXPECT_EQ(n["state"], "cordoned");
      }
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera::server
