// GPU discovery: the fake backend's spec parsing, UUIDs, topologies, MIG rules (through core's
// MigLayout), apply_mig_layout, load; the JSON and report forms; the NVML backend's absence.
#include "agent/gpu_inventory.h"

#include <gtest/gtest.h>

#include <set>

#include "agent/gpu_internal.h"

namespace tessera::agent {
namespace {

const GpuCatalog& cat() { return GpuCatalog::builtin(); }

std::unique_ptr<GpuBackend> make(const std::string& spec, const std::string& node = "node-a") {
  auto b = make_fake_backend(spec, node, cat());
  EXPECT_TRUE(b.ok()) << spec << ": " << (b.ok() ? "" : b.error().message);
  return b.ok() ? std::move(*b) : nullptr;
}

Inventory inv_of(GpuBackend& b) {
  auto inv = b.inventory();
  EXPECT_TRUE(inv.ok());
  return *inv;
}

std::string error_of(const std::string& spec) {
  auto b = make_fake_backend(spec, "node-a", cat());
  EXPECT_FALSE(b.ok()) << spec << " was accepted";
  return b.ok() ? "" : b.error().message;
}

TEST(FakeGpus, ParsesCountModelTopologyAndMig) {
  auto b = make("fake:8xH100-80GB-SXM,nvswitch,mig=3g.40gb@0+3g.40gb@4");
  ASSERT_TRUE(b);
  const Inventory inv = inv_of(*b);
  EXPECT_EQ(inv.source, "fake");
  EXPECT_EQ(inv.driver_version, "");
  ASSERT_EQ(inv.gpus.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    const GpuInfo& g = inv.gpus[i];
    EXPECT_EQ(g.index, static_cast<int>(i));
    EXPECT_EQ(g.model, "H100-80GB-SXM");
    EXPECT_EQ(g.nvml_name, "");
    EXPECT_EQ(g.memory_mib, 80 * 1024);
    EXPECT_TRUE(g.mig_enabled);
    ASSERT_EQ(g.instances.size(), 2u);
    EXPECT_EQ(g.instances[0].profile, "3g.40gb");
    EXPECT_EQ(g.instances[0].start, 0);
    EXPECT_EQ(g.instances[0].size, 4);
    EXPECT_EQ(g.instances[1].start, 4);
    EXPECT_EQ(g.instances[1].size, 4);
    EXPECT_EQ(g.instances[0].gpu_instance_id, -1);
    EXPECT_EQ(g.instances[0].uuid.rfind("MIG-fake-", 0), 0u);
    EXPECT_NE(g.instances[0].uuid, g.instances[1].uuid);
  }
}

TEST(FakeGpus, AcceptsAliasesAndShortProfileNames) {
  auto b = make("fake:2xNVIDIA H100 80GB HBM3,mig=4g+3g@4");
  ASSERT_TRUE(b);
  const Inventory inv = inv_of(*b);
  EXPECT_EQ(inv.gpus[0].model, "H100-80GB-SXM");
  ASSERT_EQ(inv.gpus[0].instances.size(), 2u);
  EXPECT_EQ(inv.gpus[0].instances[0].profile, "4g.40gb");  // no start: NVIDIA's first fit, only 0 allowed
  EXPECT_EQ(inv.gpus[0].instances[0].start, 0);
  EXPECT_EQ(inv.gpus[0].instances[1].profile, "3g.40gb");

  auto a = make("fake:1xA100-SXM4-80GB,mig=on");
  ASSERT_TRUE(a);
  const Inventory ia = inv_of(*a);
  EXPECT_EQ(ia.gpus[0].model, "A100-80GB");
  EXPECT_TRUE(ia.gpus[0].mig_enabled);
  EXPECT_TRUE(ia.gpus[0].instances.empty());
}

TEST(FakeGpus, MediaExtensionProfileIsNotSplitAtPlus) {
  auto b = make("fake:1xA100-80GB,mig=1g.10gb+me@0+1g.10gb@1+2g.20gb@2");
  ASSERT_TRUE(b);
  const Inventory inv = inv_of(*b);
  const auto& in = inv.gpus[0].instances;
  ASSERT_EQ(in.size(), 3u);
  EXPECT_EQ(in[0].profile, "1g.10gb+me");
  EXPECT_EQ(in[1].profile, "1g.10gb");
  EXPECT_EQ(in[2].profile, "2g.20gb");
  EXPECT_EQ(in[2].size, 2);
  // Two +me instances break the one-per-GPU rule.
  EXPECT_NE(error_of("fake:1xA100-80GB,mig=1g.10gb+me@0+1g.10gb+me@1").find("+me"), std::string::npos);
}

TEST(FakeGpus, WithoutStartsUsesNvidiaOrder) {
  // nvidia-smi -cgi 9,9 puts the first 3g in the upper half.
  auto b = make("fake:1xA100-80GB,mig=3g+3g");
  ASSERT_TRUE(b);
  const Inventory inv = inv_of(*b);
  const auto& in = inv.gpus[0].instances;
  ASSERT_EQ(in.size(), 2u);
  EXPECT_EQ(in[0].start, 0);
  EXPECT_EQ(in[1].start, 4);
}

TEST(FakeGpus, BadSpecsNameThePart) {
  struct Case {
    std::string spec;
    std::vector<std::string> want;  // substrings of the error
  };
  const std::vector<Case> cases = {
      {"8xH100-80GB-SXM", {"fake:"}},
      {"fake:0xT4", {"'0xT4'", "1 to 64"}},
      {"fake:65xT4", {"1 to 64"}},
      {"fake:twoxT4", {"1 to 64"}},
      {"fake:T4", {"COUNTxMODEL"}},
      {"fake:2xNoSuchGPU", {"'2xNoSuchGPU'", "NoSuchGPU"}},
      {"fake:8xH100-80GB", {"ambiguous", "H100-80GB-SXM", "H100-80GB-PCIE"}},
      {"fake:2xT4,nvswitch", {"'nvswitch'", "no NVLink", "pcie"}},
      {"fake:2xT4,mig=on", {"'mig=on'", "not MIG-capable"}},
      {"fake:2xH100-80GB-SXM,torus", {"'torus'", "nvswitch, nvlink, pcie-pairs, pcie"}},
      {"fake:2xH100-80GB-SXM,nvswitch,pcie", {"'pcie'", "already"}},
      {"fake:2xH100-80GB-SXM,mig=on,mig=on", {"twice"}},
      {"fake:2xH100-80GB-SXM,mig=", {"empty"}},
      {"fake:2xA100-80GB,mig=5g.50gb@0", {"'5g.50gb@0'", "no MIG profile", "3g.40gb"}},
      {"fake:2xA100-80GB,mig=3g@x", {"'3g@x'", "not a number"}},
  };
  for (const Case& c : cases) {
    const std::string msg = error_of(c.spec);
    for (const std::string& w : c.want) EXPECT_NE(msg.find(w), std::string::npos) << c.spec << " -> " << msg;
  }
}

TEST(FakeGpus, MigPlacementFollowsNvidiaRules) {
  // 3g.40gb may start at 0 or 4 only; the error names the instance and the allowed starts.
  std::string msg = error_of("fake:1xH100-80GB-SXM,mig=3g.40gb@2");
  EXPECT_NE(msg.find("'3g.40gb@2'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("{0,4}"), std::string::npos) << msg;
  // 4g must start at 0.
  msg = error_of("fake:1xA100-80GB,mig=4g.40gb@4");
  EXPECT_NE(msg.find("{0}"), std::string::npos) << msg;
  // 1g never starts at slice 7.
  msg = error_of("fake:1xA100-80GB,mig=1g.10gb@7");
  EXPECT_NE(msg.find("{0,1,2,3,4,5,6}"), std::string::npos) << msg;
  // Overlap: the fix lists the starts still free for that profile.
  msg = error_of("fake:1xA100-80GB,mig=3g.40gb@0+3g.40gb@0");
  EXPECT_NE(msg.find("fix"), std::string::npos) << msg;
  EXPECT_NE(msg.find("{4}"), std::string::npos) << msg;
  // Compute slices: 4g + 4g would need 8 of 7 (and 4g has max 1 per GPU anyway).
  EXPECT_FALSE(make_fake_backend("fake:1xA100-80GB,mig=4g@0+4g@4", "n", cat()).ok());
  // A30's 4-slice axis: 2g.12gb starts at 0 or 2.
  msg = error_of("fake:1xA30,mig=2g.12gb@1");
  EXPECT_NE(msg.find("{0,2}"), std::string::npos) << msg;
  // Valid: 4g + 3g (all 7 compute slices), seven 1g's.
  EXPECT_TRUE(make_fake_backend("fake:1xA100-80GB,mig=4g.40gb@0+3g.40gb@4", "n", cat()).ok());
  EXPECT_TRUE(make_fake_backend("fake:1xH100-80GB-SXM,mig=1g@0+1g@1+1g@2+1g@3+1g@4+1g@5+1g@6", "n", cat()).ok());
}

TEST(FakeGpus, UuidsAreStableAndDistinct) {
  // "GPU-fake-" then lower-case hex in groups 8-4-4-4-12.
  auto shaped = [](const std::string& u) {
    const std::string pattern = "GPU-fake-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";
    if (u.size() != pattern.size()) return false;
    for (size_t i = 0; i < u.size(); ++i) {
      const bool hex = (u[i] >= '0' && u[i] <= '9') || (u[i] >= 'a' && u[i] <= 'f');
      if (i >= 9 && pattern[i] == 'x' ? !hex : u[i] != pattern[i]) return false;
    }
    return true;
  };
  const Inventory a1 = inv_of(*make("fake:4xT4", "node-a"));
  const Inventory a2 = inv_of(*make("fake:4xT4", "node-a"));
  const Inventory b = inv_of(*make("fake:4xT4", "node-b"));
  std::set<std::string> all;
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(shaped(a1.gpus[i].uuid)) << a1.gpus[i].uuid;
    EXPECT_EQ(a1.gpus[i].uuid, a2.gpus[i].uuid);
    all.insert(a1.gpus[i].uuid);
    all.insert(b.gpus[i].uuid);
  }
  EXPECT_EQ(all.size(), 8u);
  // Known values: FNV-1a is fixed, so the UUID of node-a's GPU 0 never changes across builds.
  EXPECT_EQ(a1.gpus[0].uuid, "GPU-fake-bb3f510b-4d36-8b1f-ffce-7ef92f5c74ac");
  EXPECT_EQ(detail::fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(detail::fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  // MIG uuids are stable too, and differ per GPU.
  const Inventory m1 = inv_of(*make("fake:2xA100-80GB,mig=7g@0", "node-a"));
  const Inventory m2 = inv_of(*make("fake:2xA100-80GB,mig=7g@0", "node-a"));
  EXPECT_EQ(m1.gpus[0].instances[0].uuid, m2.gpus[0].instances[0].uuid);
  EXPECT_NE(m1.gpus[0].instances[0].uuid, m1.gpus[1].instances[0].uuid);
}

TEST(FakeGpus, DefaultTopologyDependsOnNvlink) {
  const Inventory h = inv_of(*make("fake:8xH100-80GB-SXM"));
  const Inventory a = inv_of(*make("fake:8xA100-80GB"));
  for (size_t i = 0; i < 8; ++i) {
    for (size_t j = 0; j < 8; ++j) {
      EXPECT_EQ(h.links[i][j], i == j ? GpuLink::kSelf : GpuLink::kNvSwitch);
      EXPECT_EQ(h.nvlink_count[i][j], i == j ? 0 : 18);  // NVLink4
      EXPECT_EQ(a.nvlink_count[i][j], i == j ? 0 : 12);  // NVLink3
    }
  }
  // T4 has no NVLink: plain PCIe, PHB within a socket, SYS across.
  const Inventory t = inv_of(*make("fake:4xT4"));
  EXPECT_EQ(t.links[0][1], GpuLink::kHostBridge);
  EXPECT_EQ(t.links[0][2], GpuLink::kSystem);
  EXPECT_EQ(t.links[3][2], GpuLink::kHostBridge);
  EXPECT_EQ(t.nvlink_count[0][1], 0);
}

TEST(FakeGpus, PciePairsAndNvlinkPairsMatrices) {
  const Inventory p = inv_of(*make("fake:8xL4,pcie-pairs"));
  using L = GpuLink;
  const std::vector<L> row0 = {L::kSelf, L::kPciSwitch, L::kNuma, L::kNuma, L::kSystem, L::kSystem, L::kSystem,
                               L::kSystem};
  EXPECT_EQ(p.links[0], row0);
  EXPECT_EQ(p.links[5][4], L::kPciSwitch);
  EXPECT_EQ(p.links[5][6], L::kNuma);
  EXPECT_EQ(p.links[5][1], L::kSystem);
  for (size_t i = 0; i < 8; ++i) {
    for (size_t j = 0; j < 8; ++j) EXPECT_EQ(p.links[i][j], p.links[j][i]);
  }

  const Inventory n = inv_of(*make("fake:4xA100-80GB,nvlink"));
  EXPECT_EQ(n.links[0][1], L::kNvLink);
  EXPECT_EQ(n.nvlink_count[0][1], 4);
  EXPECT_EQ(n.links[2][3], L::kNvLink);
  EXPECT_EQ(n.links[1][2], L::kSystem);
  EXPECT_EQ(n.nvlink_count[1][2], 0);
}

TEST(FakeGpus, ApplyMigLayoutKeepsUnchangedInstances) {
  auto b = make("fake:2xA100-80GB,mig=3g.40gb@0+3g.40gb@4");
  const Inventory before = inv_of(*b);
  const std::string kept = before.gpus[0].instances[1].uuid;  // 3g@4
  // 3g@4 is busy but stays; 3g@0 (idle) becomes 2g@0 + 1g@2 + 1g@3.
  ASSERT_TRUE(b->apply_mig_layout({0, {{"2g.20gb", 0}, {"1g.10gb", 2}, {"1g.10gb", 3}, {"3g.40gb", 4}}}, {kept}).ok());
  const Inventory after = inv_of(*b);
  const auto& in = after.gpus[0].instances;
  ASSERT_EQ(in.size(), 4u);
  EXPECT_EQ(in[0].profile, "2g.20gb");
  EXPECT_EQ(in[1].start, 2);
  EXPECT_EQ(in[2].start, 3);
  EXPECT_EQ(in[3].profile, "3g.40gb");
  EXPECT_EQ(in[3].uuid, kept);
  std::set<std::string> uuids;
  for (const auto& m : in) uuids.insert(m.uuid);
  EXPECT_EQ(uuids.size(), 4u);
  EXPECT_EQ(after.gpus[1].instances, before.gpus[1].instances);  // other GPU untouched
  // Emptying the GPU is a layout too.
  ASSERT_TRUE(b->apply_mig_layout({1, {}}, {}).ok());
  EXPECT_TRUE(inv_of(*b).gpus[1].instances.empty());
}

TEST(FakeGpus, ApplyMigLayoutRefusesBusyInvalidAndMigOff) {
  auto b = make("fake:2xA100-80GB,mig=3g.40gb@0+3g.40gb@4");
  const Inventory before = inv_of(*b);
  const std::string busy = before.gpus[0].instances[0].uuid;  // 3g@0
  Status s = b->apply_mig_layout({0, {{"4g.40gb", 0}, {"3g.40gb", 4}}}, {busy});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(s.message().find(busy), std::string::npos) << s.message();
  EXPECT_EQ(inv_of(*b).gpus[0].instances, before.gpus[0].instances);  // nothing changed
  // The same change is fine once the instance is idle.
  EXPECT_TRUE(b->apply_mig_layout({0, {{"4g.40gb", 0}, {"3g.40gb", 4}}}, {}).ok());
  EXPECT_EQ(inv_of(*b).gpus[0].instances[0].profile, "4g.40gb");

  // Placement rules.
  s = b->apply_mig_layout({1, {{"3g.40gb", 2}}}, {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("{0,4}"), std::string::npos) << s.message();
  s = b->apply_mig_layout({1, {{"3g.40gb", 0}, {"2g.20gb", 2}}}, {});
  EXPECT_FALSE(s.ok());
  s = b->apply_mig_layout({1, {{"9g.90gb", 0}}}, {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("9g.90gb"), std::string::npos);
  EXPECT_EQ(inv_of(*b).gpus[1].instances, before.gpus[1].instances);
  // Out of range GPU.
  EXPECT_FALSE(b->apply_mig_layout({2, {}}, {}).ok());

  // MIG mode off: refused, the agent never turns it on.
  auto off = make("fake:1xA100-80GB");
  s = off->apply_mig_layout({0, {{"7g.80gb", 0}}}, {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("MIG mode off"), std::string::npos) << s.message();
  EXPECT_FALSE(inv_of(*off).gpus[0].mig_enabled);
  // Not MIG-capable.
  s = make("fake:1xT4")->apply_mig_layout({0, {}}, {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not MIG-capable"), std::string::npos);
}

TEST(FakeGpus, LoadSetsUtilisationAndMemory) {
  auto b = make("fake:3xH100-80GB-SXM");
  Inventory inv = inv_of(*b);
  EXPECT_EQ(inv.gpus[0].utilization_pct, 0);
  EXPECT_EQ(inv.gpus[0].memory_used_mib, 0);
  b->set_fake_load({500, 1500});
  inv = inv_of(*b);
  EXPECT_EQ(inv.gpus[0].utilization_pct, 50);
  EXPECT_EQ(inv.gpus[0].memory_used_mib, 40960);
  EXPECT_EQ(inv.gpus[1].utilization_pct, 100);
  EXPECT_EQ(inv.gpus[1].memory_used_mib, 81920);
  EXPECT_EQ(inv.gpus[2].utilization_pct, 0);
  b->set_fake_load({});
  EXPECT_EQ(inv_of(*b).gpus[0].utilization_pct, 0);
}

TEST(GpuInventory, JsonShape) {
  const Inventory inv = inv_of(*make("fake:2xH100-80GB-SXM,mig=3g.40gb@4"));
  const nlohmann::json j = inventory_to_json(inv);
  EXPECT_EQ(j["source"], "fake");
  EXPECT_EQ(j["driver_version"], "");
  ASSERT_EQ(j["gpus"].size(), 2u);
  const auto& g = j["gpus"][0];
  for (const char* k : {"index", "uuid", "model", "nvml_name", "memory_mib", "mig_enabled", "instances",
                        "utilization_pct", "memory_used_mib"}) {
    EXPECT_TRUE(g.contains(k)) << k;
  }
  EXPECT_EQ(g["model"], "H100-80GB-SXM");
  EXPECT_EQ(g["memory_mib"], 81920);
  EXPECT_EQ(g["mig_enabled"], true);
  ASSERT_EQ(g["instances"].size(), 1u);
  EXPECT_EQ(g["instances"][0]["profile"], "3g.40gb");
  EXPECT_EQ(g["instances"][0]["start"], 4);
  EXPECT_EQ(g["instances"][0]["size"], 4);
  EXPECT_EQ(g["instances"][0]["gpu_instance_id"], -1);
  EXPECT_EQ(g["instances"][0]["uuid"], inv.gpus[0].instances[0].uuid);
  EXPECT_EQ(j["links"][0][0], "X");
  EXPECT_EQ(j["links"][0][1], "NVS");
  EXPECT_EQ(j["nvlink_count"][1][0], 18);
}

TEST(GpuInventory, ReportHasTableInstancesAndMatrix) {
  const std::string r = inventory_report(inv_of(*make("fake:2xH100-80GB-SXM,mig=3g.40gb@0")));
  EXPECT_NE(r.find("source fake"), std::string::npos) << r;
  EXPECT_NE(r.find("H100-80GB-SXM"), std::string::npos);
  EXPECT_NE(r.find("80.0 GiB"), std::string::npos) << r;
  EXPECT_NE(r.find("3g.40gb"), std::string::npos);
  EXPECT_NE(r.find("0:4"), std::string::npos);
  EXPECT_NE(r.find("GPU0  X     NV18"), std::string::npos) << r;
  EXPECT_NE(r.find("GPU1  NV18  X"), std::string::npos) << r;

  const std::string p = inventory_report(inv_of(*make("fake:4xL4,pcie-pairs")));
  EXPECT_NE(p.find("GPU0  X     PIX   SYS   SYS"), std::string::npos) << p;
  EXPECT_EQ(p.find("MIG instances"), std::string::npos);
}

TEST(GpuInventory, LinkNamesAreShortAndDistinct) {
  std::set<std::string> names;
  for (GpuLink l : {GpuLink::kSelf, GpuLink::kNvSwitch, GpuLink::kNvLink, GpuLink::kPciSwitch, GpuLink::kHostBridge,
                    GpuLink::kNuma, GpuLink::kSystem}) {
    const std::string n = gpu_link_name(l);
    EXPECT_LE(n.size(), 4u);
    names.insert(n);
  }
  EXPECT_EQ(names.size(), 7u);
  EXPECT_STREQ(gpu_link_name(GpuLink::kSelf), "X");
  EXPECT_STREQ(gpu_link_name(GpuLink::kSystem), "SYS");
}

TEST(GpuInventory, MatchesNvmlNamesToCatalog) {
  auto name = [](const char* n) {
    const GpuModel* m = detail::match_model(cat(), n);
    return m ? m->name : std::string("-");
  };
  EXPECT_EQ(name("NVIDIA H100 80GB HBM3"), "H100-80GB-SXM");
  EXPECT_EQ(name("NVIDIA A100-SXM4-40GB"), "A100-40GB");
  EXPECT_EQ(name("Tesla T4"), "T4");
  EXPECT_EQ(name("NVIDIA L40S"), "L40S");
  EXPECT_EQ(name("NVIDIA GeForce RTX 4090"), "-");
  EXPECT_EQ(detail::profile_name(*cat().find("A100-80GB"), 9), "3g.40gb");
  EXPECT_EQ(detail::profile_name(nullptr, 9), "profile-9");
}

TEST(GpuInventory, PlanRefusesUnknownModel) {
  GpuInfo g;
  g.model = "NVIDIA Mystery";
  g.mig_enabled = true;
  auto plan = detail::plan_mig_layout(nullptr, g, {0, {}}, {});
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.error().message.find("catalog"), std::string::npos);
}

TEST(NvmlBackend, UnavailableWithoutLibrary) {
  auto b = make_nvml_backend(cat());
  if (b.ok()) GTEST_SKIP() << "libnvidia-ml.so.1 with GPUs is present on this machine";
  EXPECT_EQ(b.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(b.error().message.find("NVML"), std::string::npos) << b.error().message;
  EXPECT_NE(b.error().message.find("fake:"), std::string::npos) << b.error().message;
}

}  // namespace
}  // namespace tessera::agent
