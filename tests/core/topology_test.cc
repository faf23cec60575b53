#include "core/topology.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(NodeTopology, NvswitchIsAllToAll) {
  auto t = NodeTopology::nvswitch(8, 18);
  EXPECT_EQ(t.link(0, 7).level, LinkLevel::kNvLink);
  EXPECT_EQ(t.link(0, 7).nvlinks, 18);
  EXPECT_EQ(t.link(3, 3).level, LinkLevel::kSelf);
  EXPECT_EQ(t.min_link_score({0, 3, 5, 7}), 118);
}

TEST(NodeTopology, NvlinkPairsOnlyBridgesPairs) {
  auto t = NodeTopology::nvlink_pairs(4, 3);
  EXPECT_EQ(t.link(0, 1).level, LinkLevel::kNvLink);
  EXPECT_EQ(t.link(2, 3).level, LinkLevel::kNvLink);
  EXPECT_EQ(t.link(0, 2).level, LinkLevel::kSys);
  EXPECT_GT(t.min_link_score({0, 1}), t.min_link_score({1, 2}));
}

TEST(NodeTopology, ParsesNvidiaSmiTopoMatrix) {
  const char* text =
      "        GPU0  GPU1  GPU2  GPU3  mlx5_0  CPU Affinity\n"
      "GPU0     X    NV3   SYS   SYS   NODE    0-63\n"
      "GPU1    NV3    X    SYS   SYS   NODE    0-63\n"
      "GPU2    SYS   SYS    X    NV3   SYS     64-127\n"
      "GPU3    SYS   SYS   NV3    X    SYS     64-127\n"
      "mlx5_0 NODE  NODE  SYS   SYS     X\n";
  auto t = NodeTopology::parse_topo_matrix(text);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->gpu_count(), 4);
  EXPECT_EQ(t->link(0, 1).nvlinks, 3);
  EXPECT_EQ(t->link(1, 2).level, LinkLevel::kSys);
  EXPECT_EQ(t->kind_name(), "custom");
}

TEST(NodeTopology, ParseErrorNamesRowAndToken) {
  auto t = NodeTopology::parse_topo_matrix("GPU0 GPU1\nGPU0 X FOO\nGPU1 NV4 X\n");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("FOO"), std::string::npos);
  EXPECT_NE(t.error().message.find("row GPU0"), std::string::npos);
}

TEST(NetworkLevels, NodeIsInnermostAndUnknownLevelsListKnown) {
  NetworkLevels l({"spine", "leaf"});
  EXPECT_EQ(*l.level_index("spine"), 0);
  EXPECT_EQ(*l.level_index("leaf"), 1);
  EXPECT_EQ(*l.level_index("node"), 2);
  auto bad = l.level_index("rack");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("spine, leaf, node"), std::string::npos);
}

}  // namespace
}  // namespace tessera
