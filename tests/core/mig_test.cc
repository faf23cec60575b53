// Tests for MigLayout: NVIDIA's placement rules (hardware.md §1.3) and the layout invariants.
#include "core/mig.h"

#include <gtest/gtest.h>

#include <bit>
#include <random>

namespace tessera {
namespace {

const GpuModel* model(std::string_view name) { return GpuCatalog::builtin().find(name).value(); }
const MigProfile& prof(const GpuModel* m, std::string_view name) {
  const MigProfile* p = m->find_profile(name);
  EXPECT_NE(p, nullptr) << name;
  return *p;
}
const MigProfile& prof_id(const GpuModel* m, int id) { return *m->find_profile_id(id); }

struct Placed {
  int id, start, size;
  bool operator==(const Placed&) const = default;
};
std::vector<Placed> placed(const MigLayout& l) {
  std::vector<Placed> out;
  for (const MigInstance& in : l.instances()) out.push_back({in.profile_id, in.start, in.size});
  return out;
}

TEST(MigLayout, StartOrderIsUpperHalfFirst) {
  EXPECT_EQ(MigLayout::start_order(8), (std::vector<int>{4, 5, 6, 7, 0, 1, 2, 3}));
  EXPECT_EQ(MigLayout::start_order(4), (std::vector<int>{2, 3, 0, 1}));
}

// MIG user guide: `-cgi 9,19,14,19` succeeds with 1g@0:1, 1g@1:1, 2g@2:2, 3g@4:4.
TEST(MigLayout, GuideExampleOrder9_19_14_19Succeeds) {
  const GpuModel* a100 = model("A100-40GB");
  MigLayout l(a100);
  std::vector<int> starts;
  for (int id : {9, 19, 14, 19}) {
    auto r = l.create_first_fit(prof_id(a100, id));
    ASSERT_TRUE(r.ok()) << r.error().message;
    starts.push_back(*r);
  }
  EXPECT_EQ(starts, (std::vector<int>{4, 0, 2, 1}));
  EXPECT_EQ(placed(l), (std::vector<Placed>{{19, 0, 1}, {19, 1, 1}, {14, 2, 2}, {9, 4, 4}}));
  EXPECT_EQ(l.occupied_mask(), 0xFF);
  EXPECT_EQ(l.free_memory_slices(), 0);
  EXPECT_EQ(l.used_compute_slices(), 7);
  EXPECT_TRUE(l.check().ok());
}

// MIG user guide: `-cgi 19,19,14,9` fails for the 3g: the 1g's and the 2g broke the {0,4}:4 alignment.
TEST(MigLayout, GuideExampleOrder19_19_14_9FailsForThe3g) {
  const GpuModel* a100 = model("A100-40GB");
  MigLayout l(a100);
  EXPECT_EQ(*l.create_first_fit(prof_id(a100, 19)), 4);
  EXPECT_EQ(*l.create_first_fit(prof_id(a100, 19)), 5);
  EXPECT_EQ(*l.create_first_fit(prof_id(a100, 14)), 0);
  auto r = l.create_first_fit(prof_id(a100, 9));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(r.error().message.find("insufficient resources"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("{0,4}"), std::string::npos) << r.error().message;
  EXPECT_TRUE(l.feasible_starts(prof_id(a100, 9)).empty());
  // Memory and compute are left over, but in the wrong places.
  EXPECT_EQ(l.free_memory_slices(), 4);
  EXPECT_EQ(l.used_compute_slices(), 4);
  EXPECT_EQ(l.creatable_count(prof(a100, "3g")), 0);
  EXPECT_EQ(l.creatable_count(prof(a100, "1g")), 3);  // slices 2, 3 and 6 (7 is never a 1g start)
  EXPECT_EQ(l.instances().size(), 3u);
  EXPECT_TRUE(l.check().ok());
}

TEST(MigLayout, FourGOnlyAtZero) {
  const GpuModel* a100 = model("A100-80GB");
  const MigProfile& g4 = prof(a100, "4g");
  MigLayout l(a100);
  EXPECT_EQ(l.feasible_starts(g4), std::vector<int>{0});
  Status s = l.create(g4, 4);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "4g.40gb cannot start at slice 4: allowed starts are {0}");
  ASSERT_TRUE(l.create(prof(a100, "1g"), 0).ok());
  EXPECT_TRUE(l.feasible_starts(g4).empty());
  EXPECT_FALSE(l.create_first_fit(g4).ok());
}

TEST(MigLayout, ThreeGStartsOnlyAt0Or4) {
  const GpuModel* a100 = model("A100-40GB");
  MigLayout l(a100);
  Status s = l.create(prof(a100, "3g"), 2);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "3g.20gb cannot start at slice 2: allowed starts are {0,4}");
  EXPECT_EQ(l.feasible_starts(prof(a100, "3g")), (std::vector<int>{0, 4}));
}

TEST(MigLayout, ThreeGPlusThreeGStrandsAComputeSlice) {
  const GpuModel* a100 = model("A100-40GB");
  MigLayout l(a100);
  EXPECT_EQ(*l.create_first_fit(prof(a100, "3g")), 4);
  EXPECT_EQ(*l.create_first_fit(prof(a100, "3g")), 0);
  EXPECT_EQ(l.occupied_mask(), 0xFF);
  EXPECT_EQ(l.used_compute_slices(), 6);  // 7th compute slice stranded
  for (const MigProfile& p : a100->mig_profiles) {
    EXPECT_EQ(l.creatable_count(p), 0) << p.name;
    EXPECT_TRUE(l.feasible_starts(p).empty()) << p.name;
  }
  EXPECT_TRUE(l.check().ok());
}

TEST(MigLayout, FourGPlusThreeGUsesAllComputeSlices) {
  const GpuModel* a100 = model("H100-80GB-SXM");
  MigLayout l(a100);
  ASSERT_TRUE(l.create(prof(a100, "4g"), 0).ok());
  EXPECT_EQ(l.feasible_starts(prof(a100, "3g")), std::vector<int>{4});
  EXPECT_EQ(*l.create_first_fit(prof(a100, "3g")), 4);
  EXPECT_EQ(l.used_compute_slices(), 7);
  EXPECT_EQ(l.free_memory_slices(), 0);
  EXPECT_TRUE(l.check().ok());
}

TEST(MigLayout, SevenGOnlyAtZeroAndAlone) {
  const GpuModel* h200 = model("H200-141GB");
  const MigProfile& g7 = prof(h200, "7g");
  MigLayout l(h200);
  EXPECT_EQ(l.feasible_starts(g7), std::vector<int>{0});
  for (int s = 1; s < 8; ++s) EXPECT_FALSE(l.can_create(g7, s)) << s;
  EXPECT_EQ(*l.create_first_fit(g7), 0);
  EXPECT_EQ(l.occupied_mask(), 0xFF);
  EXPECT_EQ(l.used_compute_slices(), 7);
  for (const MigProfile& p : h200->mig_profiles) EXPECT_EQ(l.creatable_count(p), 0) << p.name;
  Status s = l.create(g7, 0);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("occupied"), std::string::npos) << s.message();
}

TEST(MigLayout, OneGNeverAtSlice7) {
  const GpuModel* a100 = model("A100-40GB");
  MigLayout l(a100);
  for (const char* name : {"1g.5gb", "1g.5gb+me"}) {
    Status s = l.create(prof(a100, name), 7);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("allowed starts are {0,1,2,3,4,5,6}"), std::string::npos) << s.message();
  }
  // Seven 1g.5gb fill slices 0..6 and leave 7 empty.
  EXPECT_EQ(l.creatable_count(prof(a100, "1g")), 7);
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(l.create_first_fit(prof(a100, "1g")).ok());
  EXPECT_EQ(l.occupied_mask(), 0x7F);
  EXPECT_EQ(l.used_compute_slices(), 7);
  auto r = l.create_first_fit(prof(a100, "1g"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("insufficient resources"), std::string::npos) << r.error().message;
  // The double-memory 1g may take [6,8) though.
  MigLayout l2(a100);
  EXPECT_TRUE(l2.create(prof(a100, "1g.10gb"), 6).ok());
  EXPECT_EQ(l2.occupied_mask(), 0xC0);
}

TEST(MigLayout, AtMostOneMediaExtensionInstance) {
  const GpuModel* a100 = model("A100-40GB");
  MigLayout l(a100);
  const MigProfile& me = prof(a100, "1g.5gb+me");
  ASSERT_TRUE(l.create(me, 3).ok());
  EXPECT_FALSE(l.can_create(me, 0));
  Status s = l.create(me, 0);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("max_instances is 1"), std::string::npos) << s.message();

  // On A30 two different +me profiles exist; still only one +me instance per GPU.
  const GpuModel* a30 = model("A30");
  MigLayout m(a30);
  ASSERT_TRUE(m.create(prof(a30, "1g.6gb+me"), 0).ok());
  Status t = m.create(prof(a30, "2g.12gb+me"), 2);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.message().find("at most one +me instance per GPU"), std::string::npos) << t.message();
  EXPECT_TRUE(m.create(prof(a30, "2g.12gb"), 2).ok());
  EXPECT_TRUE(m.check().ok());
}

TEST(MigLayout, MaxInstancesPerProfile) {
  const GpuModel* a100 = model("A100-80GB");
  const MigProfile& g2 = prof(a100, "2g");
  MigLayout l(a100);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(l.create_first_fit(g2).ok());
  EXPECT_EQ(placed(l), (std::vector<Placed>{{14, 0, 2}, {14, 2, 2}, {14, 4, 2}}));
  // [6,8) is free but 2g may not start at 6 (and three is its maximum anyway).
  EXPECT_EQ(l.free_memory_slices(), 2);
  EXPECT_FALSE(l.create_first_fit(g2).ok());
  // 1g.20gb: at most 4 even though it is 1 compute slice.
  MigLayout m(a100);
  const MigProfile& g1d = prof(a100, "1g.20gb");
  EXPECT_EQ(m.creatable_count(g1d), 4);
  for (int s : {0, 2, 4, 6}) ASSERT_TRUE(m.create(g1d, s).ok());
  EXPECT_EQ(m.used_compute_slices(), 4);
  EXPECT_EQ(m.creatable_count(g1d), 0);
}

TEST(MigLayout, A30HasFourSliceAxis) {
  const GpuModel* a30 = model("A30");
  MigLayout l(a30);
  EXPECT_EQ(l.free_memory_slices(), 4);
  EXPECT_EQ(l.feasible_starts(prof(a30, "1g")), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(l.feasible_starts(prof(a30, "2g")), (std::vector<int>{0, 2}));
  EXPECT_EQ(l.feasible_starts(prof(a30, "4g")), std::vector<int>{0});
  Status s = l.create(prof(a30, "1g"), 4);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("axis is [0,4)"), std::string::npos) << s.message();
  EXPECT_FALSE(l.create(prof(a30, "2g"), 1).ok());
  EXPECT_EQ(*l.create_first_fit(prof(a30, "2g")), 2);  // upper half first
  EXPECT_EQ(*l.create_first_fit(prof(a30, "1g")), 0);
  EXPECT_EQ(*l.create_first_fit(prof(a30, "1g")), 1);
  EXPECT_EQ(l.occupied_mask(), 0x0F);
  EXPECT_EQ(l.used_compute_slices(), 4);
  EXPECT_EQ(l.creatable_count(prof(a30, "1g")), 0);
  EXPECT_TRUE(l.check().ok());
}

TEST(MigLayout, DestroyAndInUse) {
  const GpuModel* a100 = model("A100-40GB");
  MigLayout l(a100);
  ASSERT_TRUE(l.create(prof(a100, "3g"), 0).ok());
  ASSERT_TRUE(l.create(prof(a100, "2g"), 4).ok());
  ASSERT_TRUE(l.set_in_use(4, true).ok());
  EXPECT_TRUE(l.instances()[1].in_use);
  Status s = l.destroy(4);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("in use"), std::string::npos);
  EXPECT_EQ(l.instances().size(), 2u);
  EXPECT_EQ(l.destroy(5).error().code, ErrorCode::kNotFound);  // inside an instance, not its start
  EXPECT_EQ(l.set_in_use(6, true).error().code, ErrorCode::kNotFound);
  ASSERT_TRUE(l.destroy(0).ok());
  EXPECT_EQ(l.occupied_mask(), 0x30);
  EXPECT_EQ(l.used_compute_slices(), 2);
  ASSERT_TRUE(l.set_in_use(4, false).ok());
  ASSERT_TRUE(l.destroy(4).ok());
  EXPECT_EQ(l.occupied_mask(), 0);
  EXPECT_TRUE(l.instances().empty());
  // After destroying, the space is reusable: 7g fits again.
  EXPECT_TRUE(l.create(prof(a100, "7g"), 0).ok());
}

TEST(MigLayout, InstancesStaySortedByStart) {
  const GpuModel* a100 = model("A100-40GB");
  MigLayout l(a100);
  for (int s : {6, 2, 4, 0}) ASSERT_TRUE(l.create(prof(a100, "1g"), s).ok());
  EXPECT_EQ(placed(l), (std::vector<Placed>{{19, 0, 1}, {19, 2, 1}, {19, 4, 1}, {19, 6, 1}}));
}

TEST(MigLayout, RejectsProfilesOfOtherModelsAndMissingModels) {
  const GpuModel* a100 = model("A100-40GB");
  const GpuModel* h100 = model("H100-80GB-SXM");
  MigLayout l(a100);
  Status s = l.create(prof(h100, "3g"), 0);  // same id 9, different profile
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not a profile of GPU model A100-40GB"), std::string::npos) << s.message();
  EXPECT_FALSE(l.create_first_fit(prof(h100, "3g")).ok());
  MigLayout none;
  EXPECT_FALSE(none.can_create(prof(a100, "1g"), 0));
  EXPECT_FALSE(none.create(prof(a100, "1g"), 0).ok());
  EXPECT_EQ(none.free_memory_slices(), 0);
  EXPECT_TRUE(none.check().ok());
  MigLayout t4(model("T4"));
  Status t = t4.create(prof(a100, "1g"), 0);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.message().find("not MIG-capable"), std::string::npos) << t.message();
}

// A hand-rolled model where only the compute rule forbids a placement (the built-in tables never
// reach it, since their placements already encode the compute limit).
TEST(MigLayout, ComputeSliceLimit) {
  GpuModel m;
  m.name = "tiny";
  m.memory = MiB(1000);
  m.sms = 30;
  m.memory_slices = 4;
  m.compute_slices = 3;
  m.mig_profiles = {MigProfile{1, "2g.x", 2, 1, 0x0F, 4, false, MiB(100), 10},
                    MigProfile{0, "3g.all", 3, 4, 0x01, 1, false, MiB(1000), 30}};
  GpuCatalog c;
  ASSERT_TRUE(c.add(m).ok());
  const GpuModel* tiny = c.find("tiny").value();
  MigLayout l(tiny);
  ASSERT_TRUE(l.create(tiny->mig_profiles[0], 0).ok());
  EXPECT_FALSE(l.can_create(tiny->mig_profiles[0], 1));
  Status s = l.create(tiny->mig_profiles[0], 1);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "2g.x needs 2 compute slices but only 1 of 3 are free");
  EXPECT_EQ(l.creatable_count(tiny->mig_profiles[0]), 0);
  EXPECT_EQ(l.free_memory_slices(), 3);
}

TEST(MigLayout, OverlapMessageNamesTheSlices) {
  const GpuModel* a100 = model("A100-40GB");
  MigLayout l(a100);
  ASSERT_TRUE(l.create(prof(a100, "1g"), 5).ok());
  Status s = l.create(prof(a100, "3g"), 4);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "3g.20gb at slice 4 needs memory slices [4,8) but {5} are occupied");
}

// Reference rules, computed from scratch, to cross-check can_create.
bool reference_can_create(const MigLayout& l, const MigProfile& p, int start) {
  const GpuModel& m = *l.model();
  if (start < 0 || start >= m.memory_slices || !(p.allowed_starts >> start & 1)) return false;
  int compute = 0, same = 0, me = 0;
  for (const MigInstance& in : l.instances()) {
    if (in.start < start + p.memory_slices && start < in.start + in.size) return false;
    const MigProfile& q = *m.find_profile_id(in.profile_id);
    compute += q.compute_slices;
    same += q.id == p.id;
    me += q.media_extension;
  }
  return same < p.max_instances && !(p.media_extension && me > 0) &&
         compute + p.compute_slices <= m.compute_slices;
}

TEST(MigLayout, RandomizedOperationsKeepInvariants) {
  std::vector<const GpuModel*> models;
  for (const std::string& n : GpuCatalog::builtin().names()) {
    if (model(n)->mig_capable()) models.push_back(model(n));
  }
  std::mt19937 rng(12345);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  int created = 0, destroyed = 0, refused = 0;
  for (int round = 0; round < 200; ++round) {
    const GpuModel* m = models[pick(static_cast<int>(models.size()))];
    MigLayout l(m);
    for (int op = 0; op < 60; ++op) {
      const MigProfile& p = m->mig_profiles[pick(static_cast<int>(m->mig_profiles.size()))];
      const MigLayout before = l;
      switch (pick(5)) {
        case 0:
        case 1: {  // explicit placement, sometimes off the axis
          const int start = pick(m->memory_slices + 2) - 1;
          const bool can = l.can_create(p, start);
          ASSERT_EQ(can, reference_can_create(l, p, start)) << m->name << " " << p.name << "@" << start;
          Status s = l.create(p, start);
          ASSERT_EQ(s.ok(), can) << (s.ok() ? "" : s.message());
          if (can) {
            ++created;
            ASSERT_EQ(l.occupied_mask(), before.occupied_mask() | (((1 << p.memory_slices) - 1) << start));
          } else {
            ++refused;
            ASSERT_FALSE(s.message().empty());
            ASSERT_EQ(l.instances(), before.instances());
          }
          break;
        }
        case 2: {  // first fit agrees with feasible_starts and the NVIDIA start order
          const std::vector<int> feasible = l.feasible_starts(p);
          const int count = l.creatable_count(p);
          ASSERT_EQ(count > 0, !feasible.empty());
          auto r = l.create_first_fit(p);
          ASSERT_EQ(r.ok(), !feasible.empty());
          if (r.ok()) {
            ++created;
            for (int s : MigLayout::start_order(m->memory_slices)) {
              if (s == *r) break;
              ASSERT_FALSE(before.can_create(p, s)) << "skipped a feasible earlier start " << s;
            }
            ASSERT_EQ(l.creatable_count(p), count - 1);
          }
          break;
        }
        case 3: {  // destroy an instance (or a start with none)
          if (l.instances().empty()) break;
          const MigInstance in = l.instances()[pick(static_cast<int>(l.instances().size()))];
          Status s = l.destroy(in.start);
          ASSERT_EQ(s.ok(), !in.in_use);
          if (s.ok()) {
            ++destroyed;
            ASSERT_EQ(l.instances().size(), before.instances().size() - 1);
            ASSERT_EQ(l.free_memory_slices(), before.free_memory_slices() + in.size);
          }
          break;
        }
        default: {  // flip in_use
          if (l.instances().empty()) break;
          const MigInstance in = l.instances()[pick(static_cast<int>(l.instances().size()))];
          ASSERT_TRUE(l.set_in_use(in.start, !in.in_use).ok());
        }
      }
      Status c = l.check();
      ASSERT_TRUE(c.ok()) << c.message();
      ASSERT_TRUE(
          std::is_sorted(l.instances().begin(), l.instances().end(),
                         [](const MigInstance& a, const MigInstance& b) { return a.start < b.start; }));
      ASSERT_EQ(l.free_memory_slices(), m->memory_slices - std::popcount(l.occupied_mask()));
      ASSERT_LE(l.used_compute_slices(), m->compute_slices);
      for (int s = -1; s <= m->memory_slices; ++s) {
        for (const MigProfile& q : m->mig_profiles)
          ASSERT_EQ(l.can_create(q, s), reference_can_create(l, q, s));
      }
    }
  }
  // The run exercised every branch many times.
  EXPECT_GT(created, 1000);
  EXPECT_GT(destroyed, 500);
  EXPECT_GT(refused, 1000);
}

}  // namespace
}  // namespace tessera
