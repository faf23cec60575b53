// Tests for the GPU catalog: built-in tables, lookups and validation of declared models.
#include "core/gpu_catalog.h"

#include <gtest/gtest.h>

#include <bit>

namespace tessera {
namespace {

const GpuModel& model(std::string_view name) {
  auto m = GpuCatalog::builtin().find(name);
  EXPECT_TRUE(m.ok()) << name;
  return **m;
}

GpuModel custom(std::string name, std::vector<std::string> aliases = {}) {
  GpuModel m;
  m.name = std::move(name);
  m.aliases = std::move(aliases);
  m.memory = MiB(8192);
  m.sms = 10;
  return m;
}

TEST(GpuCatalog, BuiltinHasAllModelsSorted) {
  const std::vector<std::string> want = {
      "A10",           "A100-40GB", "A100-80GB",  "A30", "G1",   "G2",   "G3", "H100-80GB-PCIE",
      "H100-80GB-SXM", "H100-NVL",  "H200-141GB", "L4",  "L40S", "P100", "T4", "V100-16GB",
      "V100-32GB"};
  EXPECT_EQ(GpuCatalog::builtin().names(), want);
  EXPECT_EQ(&GpuCatalog::builtin(), &GpuCatalog::builtin());  // one static instance
}

TEST(GpuCatalog, FindByAliasIsCaseInsensitive) {
  const GpuCatalog& c = GpuCatalog::builtin();
  EXPECT_EQ((*c.find("NVIDIA A100-SXM4-80GB"))->name, "A100-80GB");
  EXPECT_EQ((*c.find("nvidia a100-sxm4-80gb"))->name, "A100-80GB");
  EXPECT_EQ((*c.find("NVIDIA A100-SXM4-40GB"))->name, "A100-40GB");
  EXPECT_EQ((*c.find("NVIDIA H100 80GB HBM3"))->name, "H100-80GB-SXM");
  EXPECT_EQ((*c.find("NVIDIA H100 PCIe"))->name, "H100-80GB-PCIE");
  EXPECT_EQ((*c.find("NVIDIA H100 NVL"))->name, "H100-NVL");
  EXPECT_EQ((*c.find("NVIDIA H200"))->name, "H200-141GB");
  EXPECT_EQ((*c.find("v100m16"))->name, "V100-16GB");
  EXPECT_EQ((*c.find("V100M32"))->name, "V100-32GB");
  EXPECT_EQ((*c.find("Tesla T4"))->name, "T4");
  EXPECT_EQ((*c.find("a30"))->name, "A30");
  EXPECT_EQ((*c.find(" g2 "))->name, "G2");  // surrounding blanks ignored
}

TEST(GpuCatalog, UnknownModelErrorListsKnownNamesAndHowToDeclare) {
  auto r = GpuCatalog::builtin().find("B300");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  const std::string& msg = r.error().message;
  EXPECT_NE(msg.find("\"B300\""), std::string::npos) << msg;
  for (const std::string& n : GpuCatalog::builtin().names()) {
    EXPECT_NE(msg.find(n), std::string::npos) << n;
  }
  EXPECT_NE(msg.find("declare it under gpu_models in the cluster config"), std::string::npos) << msg;
}

TEST(GpuCatalog, FactsOfNonMigModels) {
  for (const char* n : {"V100-16GB", "V100-32GB", "T4", "P100", "A10", "L4", "L40S", "G1", "G2", "G3"}) {
    const GpuModel& m = model(n);
    EXPECT_FALSE(m.mig_capable()) << n;
    EXPECT_EQ(m.compute_slices, 0) << n;
    EXPECT_TRUE(m.mig_profiles.empty()) << n;
    EXPECT_EQ(m.find_profile("1g"), nullptr) << n;
  }
  EXPECT_EQ(model("V100-16GB").memory, MiB(16384));
  EXPECT_EQ(model("V100-32GB").memory, MiB(32768));
  EXPECT_EQ(model("V100-16GB").nvlink_generation, 2);
  EXPECT_EQ(model("V100-16GB").sms, 80);
  EXPECT_EQ(model("T4").nvlink_generation, 0);
  EXPECT_EQ(model("L40S").memory, MiB(48 * 1024));
  EXPECT_EQ(model("G1").memory, MiB(0));  // unknown in the trace
}

TEST(GpuCatalog, FactsOfMigModels) {
  EXPECT_EQ(model("A100-40GB").memory, MiB(40960));
  EXPECT_EQ(model("A100-40GB").nvlink_generation, 3);
  EXPECT_EQ(model("H100-80GB-SXM").nvlink_generation, 4);
  EXPECT_EQ(model("H100-80GB-SXM").sms, 132);
  EXPECT_EQ(model("H100-80GB-PCIE").sms, 114);
  EXPECT_EQ(model("A30").memory_slices, 4);
  EXPECT_EQ(model("A30").compute_slices, 4);
  const GpuModel& a100 = model("A100-40GB");
  EXPECT_EQ(a100.memory_slices, 8);
  EXPECT_EQ(a100.compute_slices, 7);
  EXPECT_EQ(a100.find_profile("1g.5gb")->memory, MiB(4864));    // 4.75 GiB
  EXPECT_EQ(a100.find_profile("2g.10gb")->memory, MiB(9984));   // 9.75 GiB
  EXPECT_EQ(a100.find_profile("3g.20gb")->memory, MiB(20096));  // 19.62 GiB
  EXPECT_EQ(a100.find_profile("7g.40gb")->sms, 98);
  // SXM5 and PCIe H100 share the table but not the SM counts.
  EXPECT_EQ(model("H100-80GB-SXM").find_profile("3g")->sms, 60);
  EXPECT_EQ(model("H100-80GB-PCIE").find_profile("3g")->sms, 46);
  EXPECT_EQ(model("H100-80GB-SXM").find_profile("1g.20gb")->sms, 26);
  EXPECT_EQ(model("H200-141GB").find_profile("1g.18gb")->memory, MiB(16384));
}

TEST(GpuCatalog, FindProfileByNameIdAndShortForm) {
  const GpuModel& a100 = model("A100-40GB");
  EXPECT_EQ(a100.find_profile("3G.20GB")->id, 9);
  EXPECT_EQ(a100.find_profile("1g.5gb+me")->id, 20);
  EXPECT_EQ(a100.find_profile("1g")->name, "1g.5gb");  // fewest memory slices, never +me
  EXPECT_EQ(a100.find_profile("2g")->name, "2g.10gb");
  EXPECT_EQ(a100.find_profile("3g")->name, "3g.20gb");
  EXPECT_EQ(a100.find_profile("4g")->name, "4g.20gb");
  EXPECT_EQ(a100.find_profile("7g")->name, "7g.40gb");
  EXPECT_EQ(a100.find_profile("5g"), nullptr);
  EXPECT_EQ(a100.find_profile("g"), nullptr);
  EXPECT_EQ(a100.find_profile("3g.40gb"), nullptr);
  EXPECT_EQ(a100.find_profile_id(15)->name, "1g.10gb");
  EXPECT_EQ(a100.find_profile_id(42), nullptr);
  EXPECT_EQ(model("A100-80GB").find_profile("1g")->name, "1g.10gb");
  EXPECT_EQ(model("A30").find_profile("2g")->name, "2g.12gb");
  EXPECT_EQ(model("A30").find_profile_id(21)->name, "1g.6gb+me");
  EXPECT_EQ(model("H200-141GB").find_profile("3g")->name, "3g.71gb");
  EXPECT_EQ(model("H100-NVL").find_profile("7g")->name, "7g.94gb");
}

// Every built-in MIG table is consistent with hardware.md §6.
TEST(GpuCatalog, MigTablesAreSane) {
  int mig_models = 0;
  for (const std::string& n : GpuCatalog::builtin().names()) {
    const GpuModel& m = model(n);
    if (!m.mig_capable()) continue;
    ++mig_models;
    SCOPED_TRACE(n);
    const int axis = m.memory_slices;
    ASSERT_TRUE(axis == 8 || axis == 4);
    EXPECT_EQ(m.compute_slices, axis == 8 ? 7 : 4);
    int whole = 0, one_g_max = 0;
    for (const MigProfile& p : m.mig_profiles) {
      SCOPED_TRACE(p.name);
      EXPECT_EQ(p.name.substr(0, p.name.find('.')), std::to_string(p.compute_slices) + "g");
      EXPECT_EQ(p.media_extension, p.name.ends_with("+me"));
      if (p.media_extension) {
        EXPECT_EQ(p.max_instances, 1);
      }
      EXPECT_NE(p.allowed_starts, 0);
      for (int s = 0; s < 8; ++s) {
        if (p.allowed_starts >> s & 1) {
          EXPECT_LE(s + p.memory_slices, axis) << "start " << s;
        }
      }
      // Starts are aligned to the size, and max_instances is what fits side by side.
      for (int s = 0; s < axis; ++s) {
        if (p.allowed_starts >> s & 1) {
          EXPECT_EQ(s % p.memory_slices, 0) << "start " << s;
        }
      }
      if (!p.media_extension) {
        EXPECT_EQ(p.max_instances,
                  std::min(std::popcount(p.allowed_starts), m.compute_slices / p.compute_slices));
      }
      EXPECT_GT(p.memory, MiB(0));
      EXPECT_LE(p.memory, m.memory);
      EXPECT_GT(p.sms, 0);
      EXPECT_LE(p.sms, m.sms);
      EXPECT_EQ(m.find_profile_id(p.id), &p);
      if (p.compute_slices == m.compute_slices) {
        ++whole;
        EXPECT_EQ(p.memory_slices, axis);  // 7g (4g on A30) covers the whole axis
        EXPECT_EQ(p.allowed_starts, 1);
        EXPECT_EQ(p.id, 0);
      }
      if (p.compute_slices == 1 && p.memory_slices == 1 && !p.media_extension) one_g_max = p.max_instances;
      // Profiles of the same memory size have the same memory.
      for (const MigProfile& q : m.mig_profiles) {
        if (q.memory_slices == p.memory_slices) {
          EXPECT_EQ(q.memory, p.memory) << q.name;
        }
        if (q.memory_slices > p.memory_slices) {
          EXPECT_GT(q.memory, p.memory) << q.name;
        }
      }
    }
    EXPECT_EQ(whole, 1);
    EXPECT_EQ(one_g_max, m.compute_slices);
    // A 1-slice profile never starts at the last slice on the 8-wide axis.
    if (axis == 8) {
      EXPECT_FALSE(m.find_profile("1g")->allowed_starts >> 7 & 1);
    }
  }
  EXPECT_EQ(mig_models, 7);
}

TEST(GpuCatalog, WithExtraAddsDeclaredModels) {
  auto c = GpuCatalog::with_extra({custom("RTX-4090", {"NVIDIA GeForce RTX 4090"})});
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ((*c->find("nvidia geforce rtx 4090"))->name, "RTX-4090");
  EXPECT_TRUE(c->find("A100-80GB").ok());
  EXPECT_EQ(c->names().size(), GpuCatalog::builtin().names().size() + 1);
  EXPECT_FALSE(GpuCatalog::builtin().find("RTX-4090").ok());  // the built-in catalog is untouched
}

TEST(GpuCatalog, AddRejectsDuplicatesCaseInsensitively) {
  GpuCatalog c;
  ASSERT_TRUE(c.add(custom("X1", {"Ex One"})).ok());
  Status s = c.add(custom("x1"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("already known"), std::string::npos) << s.message();
  EXPECT_FALSE(c.add(custom("X2", {"EX ONE"})).ok());
  EXPECT_FALSE(c.add(custom("X3", {"X3"})).ok());      // alias repeats its own name
  EXPECT_FALSE(c.add(custom("X4", {"a", "A"})).ok());  // alias listed twice
  EXPECT_FALSE(c.add(custom("X5", {""})).ok());        // empty alias
  EXPECT_EQ(c.names(), std::vector<std::string>{"X1"});
  auto r = GpuCatalog::with_extra({custom("my-v100", {"V100M16"})});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("V100-16GB"), std::string::npos) << r.error().message;
  EXPECT_FALSE(GpuCatalog::with_extra({custom("t4")}).ok());
}

TEST(GpuCatalog, AddValidatesFields) {
  GpuCatalog c;
  EXPECT_FALSE(c.add(custom("")).ok());
  EXPECT_FALSE(c.add(custom("  ")).ok());
  GpuModel neg = custom("neg");
  neg.memory = MiB(-1);
  EXPECT_FALSE(c.add(neg).ok());

  // Start from a valid MIG model and break one thing at a time.
  GpuModel good = *GpuCatalog::builtin().find("A100-40GB").value();
  good.name = "A100-copy";
  good.aliases.clear();
  ASSERT_TRUE(GpuCatalog().add(good).ok());
  auto rejects = [&](auto edit, std::string_view expect) {
    GpuModel m = good;
    edit(m);
    Status s = GpuCatalog().add(m);
    ASSERT_FALSE(s.ok()) << expect;
    EXPECT_NE(s.message().find(expect), std::string::npos) << s.message();
  };
  rejects([](GpuModel& m) { m.memory_slices = 6; }, "memory_slices must be 0");
  rejects([](GpuModel& m) { m.compute_slices = 9; }, "compute_slices must be in 1..8");
  rejects([](GpuModel& m) { m.compute_slices = 0; }, "compute_slices must be in 1..8");
  rejects([](GpuModel& m) { m.mig_profiles.clear(); }, "needs mig_profiles");
  rejects([](GpuModel& m) { m.mig_profiles[2].allowed_starts = 0xD5; }, "start 7 + size 2 runs past");
  rejects([](GpuModel& m) { m.mig_profiles[4].allowed_starts = 0x31; }, "start 5 + size 4 runs past");
  rejects([](GpuModel& m) { m.mig_profiles[4].memory_slices = 9; }, "memory_slices must be in 1..8");
  rejects([](GpuModel& m) { m.mig_profiles[4].compute_slices = 8; }, "compute_slices must be in 1..7");
  rejects([](GpuModel& m) { m.mig_profiles[1].id = 19; }, "duplicate profile id");
  rejects([](GpuModel& m) { m.mig_profiles[1].name = "1G.5GB"; }, "duplicate profile name");
  rejects([](GpuModel& m) { m.mig_profiles[2].max_instances = 0; }, "max_instances");
  rejects([](GpuModel& m) { m.mig_profiles[2].allowed_starts = 0; }, "allowed_starts is empty");
  rejects([](GpuModel& m) { m.mig_profiles[6].memory = MiB(1 << 30); }, "memory and sms");
  rejects([](GpuModel& m) { m.memory_slices = 0; }, "need memory_slices 4 or 8");
}

TEST(GpuCatalog, SliceSetString) {
  EXPECT_EQ(slice_set_string(0), "{}");
  EXPECT_EQ(slice_set_string(0x11), "{0,4}");
  EXPECT_EQ(slice_set_string(0x7F), "{0,1,2,3,4,5,6}");
}

}  // namespace
}  // namespace tessera
