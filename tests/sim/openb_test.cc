// openb CSV loading: columns by header name, both pod column sets, errors naming file/line/field.
#include "sim/openb.h"

#include <gtest/gtest.h>

#include <sstream>

namespace tessera::sim {
namespace {

Result<ClusterState> nodes(const std::string& text) {
  std::istringstream in(text);
  return parse_openb_nodes(in, "nodes.csv");
}
Result<std::vector<OpenbPod>> pods(const std::string& text) {
  std::istringstream in(text);
  return parse_openb_pods(in, "pods.csv");
}

TEST(Openb, NodesBecomeAClusterWithCatalogModels) {
  auto c = nodes("sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\nn1,32000,131072,0,\n"
                 "n2,96000,393216,8,G2\r\nn3,8000,32768,1,V100M16\n");
  ASSERT_TRUE(c.ok()) << c.error().message;
  ASSERT_EQ(c->node_count(), 4u);
  EXPECT_EQ(c->total_gpus(), 11);
  EXPECT_EQ(c->node(NodeId(0)).cpu_capacity.v, 64000);
  EXPECT_TRUE(c->node(NodeId(1)).gpus.empty());
  EXPECT_EQ(c->node(NodeId(3)).gpu_model()->name, "V100-16GB");
  // Columns are found by name, in any order.
  auto swapped = nodes("model,gpu,sn,memory_mib,cpu_milli\nT4,2,x,1024,4000\n");
  ASSERT_TRUE(swapped.ok()) << swapped.error().message;
  EXPECT_EQ(swapped->node(NodeId(0)).gpus.size(), 2u);
}

TEST(Openb, NodeErrorsNameFileLineAndField) {
  auto bad = nodes("sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\nn1,6x,1,0,\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("nodes.csv:3: field 'cpu_milli': expected an integer, got \"6x\""),
            std::string::npos)
      << bad.error().message;
  auto model = nodes("sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,2,K80X\n");
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.error().message.find("nodes.csv:2: field 'model'"), std::string::npos) << model.error().message;
  auto header = nodes("sn,cpu_milli,memory_mib,model\n");
  ASSERT_FALSE(header.ok());
  EXPECT_NE(header.error().message.find("nodes.csv:1: missing column 'gpu'"), std::string::npos);
  auto gpus = nodes("sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,17,T4\n");
  ASSERT_FALSE(gpus.ok());
  EXPECT_NE(gpus.error().message.find("field 'gpu': must be in 0..16"), std::string::npos) << gpus.error().message;
  auto dup = nodes("sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,1,T4\nn0,1,1,1,T4\n");
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.error().message.find("nodes.csv:3"), std::string::npos) << dup.error().message;
}

TEST(Openb, PodsMapToTaskRequests) {
  const std::string full =
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
      "cpu,4000,1024,0,0,,LS,Running,0,1,0\n"
      "share,3152,5600,1,810,,LS,Running,0,1,0\n"
      "one,11300,49152,1,1000,,LS,Running,0,1,0\n"
      "eight,64200,263168,8,1000,T4|V100M16,LS,Running,0,1,0\n";
  auto p = pods(full);
  ASSERT_TRUE(p.ok()) << p.error().message;
  ASSERT_EQ(p->size(), 4u);
  EXPECT_TRUE((*p)[0].task.cpu_only());
  EXPECT_TRUE((*p)[1].task.gpu_share());
  EXPECT_EQ((*p)[1].task.milli_per_gpu.v, 810);
  EXPECT_TRUE((*p)[2].task.whole_gpus());
  EXPECT_EQ((*p)[3].task.gpu_count, 8);
  EXPECT_EQ((*p)[3].task.gpu_models, (std::vector<std::string>{"T4", "V100-16GB"}));
  EXPECT_EQ((*p)[3].name, "eight");
  // The short column set (gpushare40 / multigpu50 style).
  auto short_set = pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,12000,16384,1,460\n");
  ASSERT_TRUE(short_set.ok()) << short_set.error().message;
  EXPECT_EQ((*short_set)[0].task.milli_per_gpu.v, 460);
}

TEST(Openb, PodErrorsNameFileLineAndField) {
  const std::string head = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n";
  auto milli = pods(head + "a,1,1,1,500\nb,1,1,1,1200\n");
  ASSERT_FALSE(milli.ok());
  EXPECT_NE(milli.error().message.find("pods.csv:3: field 'gpu_milli': must be in 1..1000, got 1200"),
            std::string::npos)
      << milli.error().message;
  auto width = pods(head + "a,1,1\n");
  ASSERT_FALSE(width.ok());
  EXPECT_NE(width.error().message.find("pods.csv:2: has 3 fields, the header has 5"), std::string::npos)
      << width.error().message;
  auto spec = pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\na,1,1,1,1000,T4|Z9\n");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.error().message.find("pods.csv:2: field 'gpu_spec'"), std::string::npos) << spec.error().message;
  auto missing = load_openb_pods("/nonexistent/pods.csv");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("/nonexistent/pods.csv: cannot open file"), std::string::npos);
}

}  // namespace
}  // namespace tessera::sim
