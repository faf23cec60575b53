// The openb node reader with a catalog extended by a declared GPU model (config/gpu_models.h).
#include <gtest/gtest.h>

#include <sstream>

#include "config/gpu_models.h"
#include "sim/openb.h"

namespace tessera::sim {
namespace {

using config::parse_gpu_models;

const char* kB200 = R"({"gpu_models": [{"name": "B200", "aliases": ["NVIDIA B200"], "memory_mib": 184320,
  "sms": 148, "nvlink_generation": 5, "memory_slices": 8, "compute_slices": 7,
  "mig_profiles": [
    {"id": 19, "name": "1g.23gb", "compute_slices": 1, "memory_slices": 1, "starts": [0,1,2,3,4,5,6], "max_instances": 7, "memory_mib": 23552},
    {"id": 9, "name": "3g.90gb", "compute_slices": 3, "memory_slices": 4, "starts": [0,4], "max_instances": 2, "memory_mib": 92160},
    {"id": 0, "name": "7g.180gb", "compute_slices": 7, "memory_slices": 8, "starts": [0], "max_instances": 1, "memory_mib": 184320}]}]})";

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
