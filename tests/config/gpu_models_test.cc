#include "config/gpu_models.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/mig.h"

namespace tessera::config {
namespace {

// A declared B200 (tests/data/b200_gpu_models.json, shared with the other GPU-model tests).
const std::string kB200 = [] {
  std::ifstream in(TESSERA_SOURCE_DIR "/tests/data/b200_gpu_models.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}();

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
