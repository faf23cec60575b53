#include "config/gpu_models.h"

#include <gtest/gtest.h>

#include "core/mig.h"

namespace tessera::config {
namespace {

const char* kB200 = R"({"gpu_models": [{"name": "B200", "aliases": ["NVIDIA B200"], "memory_mib": 184320,
  "sms": 148, "nvlink_generation": 5, "memory_slices": 8, "compute_slices": 7,
  "mig_profiles": [
    {"id": 19, "name": "1g.23gb", "compute_slices": 1, "memory_slices": 1, "starts": [0,1,2,3,4,5,6], "max_instances": 7, "memory_mib": 23552},
    {"id": 9, "name": "3g.90gb", "compute_slices": 3, "memory_slices": 4, "starts": [0,4], "max_instances": 2, "memory_mib": 92160},
    {"id": 0, "name": "7g.180gb", "compute_slices": 7, "memory_slices": 8, "starts": [0], "max_instances": 1, "memory_mib": 184320}]}]})";

TEST(GpuModelsFile, DeclaredModelJoinsTheCatalog) {
  auto models = parse_gpu_models(kB200);
  ASSERT_TRUE(models.ok()) << models.error().message;
  auto cat = GpuCatalog::with_extra(*models);
  ASSERT_TRUE(cat.ok()) << cat.error().message;
  auto b200 = cat->find("nvidia b200");
  ASSERT_TRUE(b200.ok());
  const MigProfile* three = (*b200)->find_profile("3g");
  ASSERT_NE(three, nullptr);
  MigLayout layout(*b200);
  EXPECT_FALSE(layout.can_create(*three, 2));
  EXPECT_TRUE(layout.can_create(*three, 4));
  EXPECT_EQ(layout.creatable_count(*three), 2);
}

TEST(GpuModelsFile, ErrorsNameTheField) {
  auto r = parse_gpu_models(R"({"gpu_models": [{"name": "X"}]})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "gpu_models[0].memory_mib: required");
  r = parse_gpu_models(R"({"gpu_models": [{"name": "X", "memory_mib": "lots"}]})");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("gpu_models[0].memory_mib: wrong type"), std::string::npos);
  r = parse_gpu_models(
      R"({"gpu_models": [{"name": "X", "memory_mib": 1, "mig_profiles": [{"id": 1, "name": "1g", "compute_slices": 1,
          "memory_slices": 1, "starts": [9], "max_instances": 1}]}]})");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("gpu_models[0].mig_profiles[0].starts: slice 9"), std::string::npos);
  auto dup = GpuCatalog::with_extra(*parse_gpu_models(R"({"gpu_models": [{"name": "t4", "memory_mib": 1}]})"));
  EXPECT_FALSE(dup.ok()) << "a declared model may not shadow a built-in one";
  EXPECT_FALSE(parse_gpu_models("{").ok());
}

}  // namespace
}  // namespace tessera::config
