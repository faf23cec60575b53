// The openb node reader with a catalog extended by a declared GPU model (config/gpu_models.h).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <sstream>

#include "config/gpu_models.h"
#include "sim/openb.h"

namespace tessera::sim {
namespace {

using config::parse_gpu_models;

// A declared B200 (tests/data/b200_gpu_models.json, shared with the other GPU-model tests).
const std::string kB200 = [] {
  std::ifstream in(TESSERA_SOURCE_DIR "/tests/data/b200_gpu_models.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}();

TEST(GpuModelsFile, UnknownModelInATraceIsAnErrorUntilDeclared) {
  const std::string csv = "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,8,B200\n";
  std::istringstream a(csv);
  auto plain = parse_openb_nodes(a, "nodes.csv", GpuCatalog::builtin());
  ASSERT_FALSE(plain.ok());
  EXPECT_NE(plain.error().message.find("H100"), std::string::npos) << "lists the known models: " << plain.error().message;
  EXPECT_NE(plain.error().message.find("declare it"), std::string::npos) << plain.error().message;
  auto cat = GpuCatalog::with_extra(*parse_gpu_models(kB200));
  std::istringstream b(csv);
  auto declared = parse_openb_nodes(b, "nodes.csv", *cat);
  ASSERT_TRUE(declared.ok()) << declared.error().message;
  EXPECT_EQ(declared->total_gpus(), 8);
}

}  // namespace
}  // namespace tessera::sim
