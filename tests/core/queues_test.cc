// Tests for QueueTree (validation, ids) and FairShare (guarantees, weighted water-filling, limits,
// saturation ordering, usage, limits checks, borrowing, add/remove). Numbers are hand-computed.
#include "core/sched/queues.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace tessera {
namespace {

constexpr int64_t G = 1000;  // one GPU in milli

QueueSpec spec(std::string name, std::string parent = "", ClassAmounts guaranteed = {}, int64_t weight = 1,
               ClassAmounts limit = {}) {
  return QueueSpec{std::move(name), std::move(parent), std::move(guaranteed), std::move(limit), weight};
}

QueueTree tree_of(const std::vector<QueueSpec>& specs) {
  Result<QueueTree> t = QueueTree::build(specs);
  EXPECT_TRUE(t.ok()) << t.error().message;
  return std::move(t).value();
}

std::string build_error(const std::vector<QueueSpec>& specs) {
  Result<QueueTree> t = QueueTree::build(specs);
  if (t.ok()) return "<ok>";
  EXPECT_EQ(t.error().code, ErrorCode::kInvalidArgument);
  return t.error().message;
}

// Loads by queue name.
struct Loads {
  const QueueTree& tree;
  std::vector<QueueLoad> v = std::vector<QueueLoad>(tree.size());
  QueueLoad& operator[](const std::string& name) { return v[tree.find(name).value().value]; }
};

QueueId id(const QueueTree& t, const std::string& name) { return t.find(name).value(); }

// ---- QueueTree ----

TEST(QueueTree, ValidationErrorsNameQueueAndField) {
  EXPECT_EQ(build_error({spec("a"), spec("")}), "queue #2: name: must not be empty");
  EXPECT_EQ(build_error({spec("team-a", "", {}, 0)}), "queue \"team-a\": weight: must be >= 1 (got 0)");
  EXPECT_EQ(build_error({spec("a", "", {{"h100", -1}})}), "queue \"a\": guaranteed[h100]: must be >= 0 (got -1)");
  EXPECT_EQ(build_error({spec("a", "", {}, 1, {{"a100", -5}})}), "queue \"a\": limit[a100]: must be >= 0 (got -5)");
  EXPECT_EQ(build_error({spec("a", "", {{"", 1}})}), "queue \"a\": guaranteed: class name must not be empty");
  EXPECT_EQ(build_error({spec("a", "", {{"h100", 5 * G}}, 1, {{"h100", 4 * G}})}),
            "queue \"a\": guaranteed 5000 milli of class h100 exceeds its limit 4000");
  EXPECT_EQ(build_error({spec("a"), spec("b"), spec("a")}), "queue \"a\": name: defined more than once");
  EXPECT_EQ(build_error({spec("p1", "nope")}), "queue \"p1\": parent \"nope\" does not exist");
  EXPECT_EQ(build_error({spec("a", "a")}), "queue \"a\": parent: cycle a -> a");
  // c hangs below the a<->b cycle; the smallest id on the cycle is reported.
  EXPECT_EQ(build_error({spec("c", "a"), spec("b", "a"), spec("a", "b")}), "queue \"a\": parent: cycle a -> b -> a");
  EXPECT_EQ(build_error({spec("org", "", {{"h100", 64 * G}}), spec("t1", "org", {{"h100", 50 * G}}),
                         spec("t2", "org", {{"h100", 30 * G}})}),
            "queue \"org\": children guarantee 80000 milli of class h100 but the queue guarantees only 64000");
  EXPECT_EQ(build_error({spec("org", "", {{"h100", 64 * G}}), spec("t1", "org", {{"a100", 1}})}),
            "queue \"org\": children guarantee 1 milli of class a100 but the queue guarantees only 0");
  // Equal sums and guaranteed == limit are fine; top-level guarantees are not checked here.
  EXPECT_EQ(build_error({spec("org", "", {{"h100", 64 * G}}, 1, {{"h100", 64 * G}}),
                         spec("t1", "org", {{"h100", 32 * G}}), spec("t2", "org", {{"h100", 32 * G}}),
                         spec("x", "", {{"h100", 1000 * G}})}),
            "<ok>");
  EXPECT_EQ(build_error({}), "<ok>");
}

TEST(QueueTree, IdsInNameOrderIndependentOfSpecOrder) {
  std::vector<QueueSpec> specs = {spec("zeta", "alpha"), spec("alpha"), spec("mid", "alpha", {}, 3), spec("beta"),
                                  spec("leaf", "zeta")};
  std::vector<QueueSpec> reversed(specs.rbegin(), specs.rend());
  for (const auto& s : {specs, reversed}) {
    QueueTree t = tree_of(s);
    ASSERT_EQ(t.size(), 5u);
    std::vector<std::string> names;
    for (const Queue& q : t.queues()) names.push_back(q.name);
    EXPECT_EQ(names, (std::vector<std::string>{"alpha", "beta", "leaf", "mid", "zeta"}));
    EXPECT_EQ(t.top_level(), (std::vector<QueueId>{QueueId(0), QueueId(1)}));
    EXPECT_EQ(t.queue(QueueId(0)).children, (std::vector<QueueId>{QueueId(3), QueueId(4)}));
    EXPECT_EQ(t.queue(QueueId(4)).children, (std::vector<QueueId>{QueueId(2)}));
    EXPECT_FALSE(t.queue(QueueId(0)).parent.valid());
    EXPECT_EQ(t.queue(QueueId(2)).parent, QueueId(4));
    EXPECT_EQ(t.queue(QueueId(2)).depth, 2);
    EXPECT_EQ(t.queue(QueueId(4)).depth, 1);
    EXPECT_EQ(t.queue(QueueId(1)).depth, 0);
    EXPECT_EQ(t.queue(QueueId(3)).weight, 3);
    EXPECT_TRUE(t.queue(QueueId(2)).leaf());
    EXPECT_FALSE(t.queue(QueueId(0)).leaf());
    EXPECT_EQ(id(t, "mid"), QueueId(3));
    EXPECT_EQ(t.path_to_root(QueueId(2)), (std::vector<QueueId>{QueueId(2), QueueId(4), QueueId(0)}));
    EXPECT_EQ(t.path_to_root(QueueId(1)), (std::vector<QueueId>{QueueId(1)}));
  }
  QueueTree t = tree_of(specs);
  Result<QueueId> missing = t.find("gamma");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(missing.error().message, "queue \"gamma\" does not exist");
}

// ---- FairShare::compute ----

TEST(FairShare, GuaranteesThenWeights) {
  // 100 GPUs; A: 40 guaranteed, weight 1; B: 20 guaranteed, weight 3; both want 100.
  // Guarantees 40 + 20, remaining 40 split 1:3 -> A 40+10 = 50, B 20+30 = 50.
  QueueTree t = tree_of({spec("A", "", {{"h100", 40 * G}}, 1), spec("B", "", {{"h100", 20 * G}}, 3)});
  Loads l{t};
  l["A"].demand = {{"h100", 100 * G}};
  l["B"].demand = {{"h100", 100 * G}};
  FairShare fs = FairShare::compute(t, {{"h100", 100 * G}}, l.v);
  EXPECT_EQ(fs.fair_share(id(t, "A"), "h100"), 50 * G);
  EXPECT_EQ(fs.fair_share(id(t, "B"), "h100"), 50 * G);
  EXPECT_EQ(fs.fair_share(id(t, "A"), "a100"), 0);

  // A 40 guaranteed; B and C none, weights 1 and 2: remaining 60 -> A +15, B 15, C 30.
  QueueTree t3 = tree_of({spec("A", "", {{"h100", 40 * G}}), spec("B"), spec("C", "", {}, 2)});
  Loads l3{t3};
  for (const char* q : {"A", "B", "C"}) l3[q].demand = {{"h100", 500 * G}};
  FairShare fs3 = FairShare::compute(t3, {{"h100", 100 * G}}, l3.v);
  EXPECT_EQ(fs3.fair_share(id(t3, "A"), "h100"), 55 * G);
  EXPECT_EQ(fs3.fair_share(id(t3, "B"), "h100"), 15 * G);
  EXPECT_EQ(fs3.fair_share(id(t3, "C"), "h100"), 30 * G);
}

TEST(FairShare, DemandCapsAndRedistribution) {
  // 100 GPUs, weights 1/1/2 -> 25/25/50, but A wants only 10: A 10, then 90 split 1:2 -> B 30, C 60.
  QueueTree t = tree_of({spec("A"), spec("B"), spec("C", "", {}, 2)});
  Loads l{t};
  l["A"].demand = {{"h100", 10 * G}};
  l["B"].demand = {{"h100", 100 * G}};
  l["C"].demand = {{"h100", 100 * G}};
  FairShare fs = FairShare::compute(t, {{"h100", 100 * G}}, l.v);
  EXPECT_EQ(fs.fair_share(id(t, "A"), "h100"), 10 * G);
  EXPECT_EQ(fs.fair_share(id(t, "B"), "h100"), 30 * G);
  EXPECT_EQ(fs.fair_share(id(t, "C"), "h100"), 60 * G);

  // C (weight 2) wants only 40: its part 50 of 100 caps it in the same round as A; B takes the 50 left.
  l["C"].demand = {{"h100", 40 * G}};
  fs = FairShare::compute(t, {{"h100", 100 * G}}, l.v);
  EXPECT_EQ(fs.fair_share(id(t, "A"), "h100"), 10 * G);
  EXPECT_EQ(fs.fair_share(id(t, "B"), "h100"), 50 * G);
  EXPECT_EQ(fs.fair_share(id(t, "C"), "h100"), 40 * G);

  // A guarantee is capped by demand: G guarantees 50 but wants 5; H takes the rest up to its demand.
  QueueTree t2 = tree_of({spec("G", "", {{"h100", 50 * G}}), spec("H")});
  Loads l2{t2};
  l2["G"].demand = {{"h100", 5 * G}};
  l2["H"].demand = {{"h100", 80 * G}};
  FairShare fs2 = FairShare::compute(t2, {{"h100", 100 * G}}, l2.v);
  EXPECT_EQ(fs2.fair_share(id(t2, "G"), "h100"), 5 * G);
  EXPECT_EQ(fs2.fair_share(id(t2, "H"), "h100"), 80 * G);  // 15 GPUs stay unassigned

  // No demand, no share.
  l2["G"].demand = {};
  l2["H"].demand = {};
  fs2 = FairShare::compute(t2, {{"h100", 100 * G}}, l2.v);
  EXPECT_EQ(fs2.fair_share(id(t2, "G"), "h100"), 0);
  EXPECT_EQ(fs2.fair_share(id(t2, "H"), "h100"), 0);
}

TEST(FairShare, LimitsCapTheShare) {
  // A limited to 20 of 100 GPUs: A 20, B 80.
  QueueTree t = tree_of({spec("A", "", {}, 1, {{"h100", 20 * G}}), spec("B")});
  Loads l{t};
  l["A"].demand = {{"h100", 100 * G}};
  l["B"].demand = {{"h100", 100 * G}};
  FairShare fs = FairShare::compute(t, {{"h100", 100 * G}}, l.v);
  EXPECT_EQ(fs.fair_share(id(t, "A"), "h100"), 20 * G);
  EXPECT_EQ(fs.fair_share(id(t, "B"), "h100"), 80 * G);

  // An inner limit caps the subtree: org (limit 30) gets 30, split 15/15; other gets 70.
  QueueTree t2 = tree_of({spec("org", "", {}, 1, {{"h100", 30 * G}}), spec("t1", "org"), spec("t2", "org"), spec("other")});
  Loads l2{t2};
  for (const char* q : {"t1", "t2", "other"}) l2[q].demand = {{"h100", 100 * G}};
  FairShare fs2 = FairShare::compute(t2, {{"h100", 100 * G}}, l2.v);
  EXPECT_EQ(fs2.fair_share(id(t2, "org"), "h100"), 30 * G);
  EXPECT_EQ(fs2.fair_share(id(t2, "t1"), "h100"), 15 * G);
  EXPECT_EQ(fs2.fair_share(id(t2, "t2"), "h100"), 15 * G);
  EXPECT_EQ(fs2.fair_share(id(t2, "other"), "h100"), 70 * G);
}

QueueTree three_level() {
  return tree_of({
      spec("orgA", "", {{"h100", 32 * G}}),
      spec("orgB", "", {{"h100", 16 * G}}),
      spec("teamA1", "orgA", {{"h100", 16 * G}}),
      spec("teamA2", "orgA", {{"h100", 8 * G}}, 3),
      spec("teamB1", "orgB", {{"h100", 16 * G}}),
      spec("projX", "teamA1", {{"h100", 8 * G}}),
      spec("projY", "teamA1"),
  });
}

TEST(FairShare, ThreeLevelTree) {
  QueueTree t = three_level();
  Loads l{t};
  l["projX"].demand = {{"h100", 20 * G}};
  l["projY"].demand = {{"h100", 20 * G}};
  l["teamA2"].demand = {{"h100", 40 * G}};
  l["teamB1"].demand = {{"h100", 8 * G}};
  l["projX"].allocated = {{"h100", 4 * G}};
  l["teamA2"].allocated = {{"h100", 6 * G}};
  l["orgA"].allocated = {{"h100", 999 * G}};  // inner entries are ignored
  FairShare fs = FairShare::compute(t, {{"h100", 64 * G}}, l.v);
  auto fair = [&](const char* q) { return fs.fair_share(id(t, q), "h100"); };
  // Root (64): orgA min(32, 80) = 32, orgB min(16, 8) = 8; the 24 left go to orgA (orgB is at demand).
  EXPECT_EQ(fair("orgA"), 56 * G);
  EXPECT_EQ(fair("orgB"), 8 * G);
  // orgA (56): teamA1 16, teamA2 8; 32 left split 1:3 -> teamA1 24, teamA2 32.
  EXPECT_EQ(fair("teamA1"), 24 * G);
  EXPECT_EQ(fair("teamA2"), 32 * G);
  // teamA1 (24): projX 8 guaranteed; 16 left split 1:1 -> projX 16, projY 8.
  EXPECT_EQ(fair("projX"), 16 * G);
  EXPECT_EQ(fair("projY"), 8 * G);
  EXPECT_EQ(fair("teamB1"), 8 * G);
  // Demand and allocated aggregate over subtrees.
  EXPECT_EQ(fs.demand(id(t, "teamA1"), "h100"), 40 * G);
  EXPECT_EQ(fs.demand(id(t, "orgA"), "h100"), 80 * G);
  EXPECT_EQ(fs.allocated(id(t, "teamA1"), "h100"), 4 * G);
  EXPECT_EQ(fs.allocated(id(t, "orgA"), "h100"), 10 * G);
  EXPECT_EQ(fs.allocated(id(t, "orgB"), "h100"), 0);
}

TEST(FairShare, MultipleClassesAreIndependentAndSaturationIsDominant) {
  QueueTree t = tree_of({spec("A", "", {{"h100", 8 * G}}), spec("B")});
  Loads l{t};
  l["A"].demand = {{"h100", 16 * G}, {"a100", 8 * G}};
  l["B"].demand = {{"h100", 16 * G}, {"a100", 8 * G}, {"l4", 4 * G}};
  FairShare fs = FairShare::compute(t, {{"h100", 16 * G}, {"a100", 8 * G}}, l.v);
  QueueId a = id(t, "A"), b = id(t, "B");
  // h100: A 8 guaranteed, 8 left split 4/4. a100: 4/4. l4 is not in the cluster: 0.
  EXPECT_EQ(fs.fair_share(a, "h100"), 12 * G);
  EXPECT_EQ(fs.fair_share(b, "h100"), 4 * G);
  EXPECT_EQ(fs.fair_share(a, "a100"), 4 * G);
  EXPECT_EQ(fs.fair_share(b, "a100"), 4 * G);
  EXPECT_EQ(fs.fair_share(b, "l4"), 0);
  // Dominant: A h100 6/12 = 0.5, a100 3/4 = 0.75 -> 0.75.
  fs.add(a, {{"h100", 6 * G}, {"a100", 3 * G}}, +1);
  EXPECT_DOUBLE_EQ(fs.saturation(a), 0.75);
  // A class with no fair share but an allocation counts as very large.
  fs.add(b, {{"h100", 1 * G}, {"l4", 1}}, +1);
  EXPECT_DOUBLE_EQ(fs.saturation(b), FairShare::kUnfundedSaturation);
  EXPECT_TRUE(fs.before(a, b));
}

TEST(FairShare, RemainderGoesToChildrenInIdOrder) {
  // 1000 milli among three equal queues: 333 each, the leftover milli to the smallest id ("a").
  QueueTree t = tree_of({spec("c"), spec("b"), spec("a")});
  Loads l{t};
  for (const char* q : {"a", "b", "c"}) l[q].demand = {{"h100", 10 * G}};
  FairShare fs = FairShare::compute(t, {{"h100", 1000}}, l.v);
  EXPECT_EQ(fs.fair_share(id(t, "a"), "h100"), 334);
  EXPECT_EQ(fs.fair_share(id(t, "b"), "h100"), 333);
  EXPECT_EQ(fs.fair_share(id(t, "c"), "h100"), 333);
  // 2 milli: floor parts are 0; leftover one each to a, b.
  fs = FairShare::compute(t, {{"h100", 2}}, l.v);
  EXPECT_EQ(fs.fair_share(id(t, "a"), "h100"), 1);
  EXPECT_EQ(fs.fair_share(id(t, "b"), "h100"), 1);
  EXPECT_EQ(fs.fair_share(id(t, "c"), "h100"), 0);

  // Weights 2:1 of 1001: floors 667 + 333, leftover 1 to x (smaller id).
  QueueTree t2 = tree_of({spec("y"), spec("x", "", {}, 2)});
  Loads l2{t2};
  l2["x"].demand = {{"h100", 10 * G}};
  l2["y"].demand = {{"h100", 10 * G}};
  FairShare fs2 = FairShare::compute(t2, {{"h100", 1001}}, l2.v);
  EXPECT_EQ(fs2.fair_share(id(t2, "x"), "h100"), 668);
  EXPECT_EQ(fs2.fair_share(id(t2, "y"), "h100"), 333);

  // Over-committed guarantees are served in id order while capacity lasts.
  QueueTree t3 = tree_of({spec("B", "", {{"h100", 60 * G}}), spec("A", "", {{"h100", 60 * G}})});
  Loads l3{t3};
  l3["A"].demand = {{"h100", 100 * G}};
  l3["B"].demand = {{"h100", 100 * G}};
  FairShare fs3 = FairShare::compute(t3, {{"h100", 100 * G}}, l3.v);
  EXPECT_EQ(fs3.fair_share(id(t3, "A"), "h100"), 60 * G);
  EXPECT_EQ(fs3.fair_share(id(t3, "B"), "h100"), 40 * G);
}

// Random trees: siblings never exceed the parent, nobody exceeds its cap, and the split is
// work-conserving (all of a parent's amount is handed out unless every child is capped).
TEST(FairShare, RandomTreesKeepInvariants) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 200; ++iter) {
    std::vector<QueueSpec> specs;
    int n = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) {
      std::string parent = (i == 0 || rng() % 3 == 0) ? "" : "q" + std::to_string(rng() % i);
      ClassAmounts lim;
      if (rng() % 4 == 0) lim["h100"] = static_cast<int64_t>(rng() % 50000);
      specs.push_back(spec("q" + std::to_string(i), parent, {}, 1 + static_cast<int64_t>(rng() % 5), lim));
    }
    QueueTree t = tree_of(specs);
    std::vector<QueueLoad> load(t.size());
    for (const Queue& q : t.queues())
      if (q.leaf()) load[q.id.value].demand["h100"] = static_cast<int64_t>(rng() % 40000);
    int64_t cap = static_cast<int64_t>(rng() % 100000);
    FairShare fs = FairShare::compute(t, {{"h100", cap}}, load);
    auto check = [&](int64_t amount, const std::vector<QueueId>& kids) {
      int64_t sum = 0;
      bool all_capped = true;
      for (QueueId k : kids) {
        int64_t f = fs.fair_share(k, "h100");
        auto it = t.queue(k).limit.find("h100");
        int64_t c = std::min(fs.demand(k, "h100"), it == t.queue(k).limit.end() ? INT64_MAX : it->second);
        EXPECT_GE(f, 0);
        EXPECT_LE(f, c);
        all_capped = all_capped && f == c;
        sum += f;
      }
      EXPECT_LE(sum, amount);
      if (!all_capped) {
        EXPECT_EQ(sum, amount);
      }
    };
    check(cap, t.top_level());
    for (const Queue& q : t.queues())
      if (!q.leaf()) check(fs.fair_share(q.id, "h100"), q.children);
  }
}

// ---- ordering ----

QueueTree two_equal() { return tree_of({spec("A"), spec("B")}); }

TEST(FairShare, SaturationOrdersSiblings) {
  QueueTree t = two_equal();
  Loads l{t};
  l["A"].demand = {{"h100", 100 * G}};
  l["B"].demand = {{"h100", 100 * G}};
  l["A"].allocated = {{"h100", 40 * G}};
  l["B"].allocated = {{"h100", 20 * G}};
  FairShare fs = FairShare::compute(t, {{"h100", 100 * G}}, l.v);
  QueueId a = id(t, "A"), b = id(t, "B");
  EXPECT_DOUBLE_EQ(fs.saturation(a), 0.8);
  EXPECT_DOUBLE_EQ(fs.saturation(b), 0.4);
  EXPECT_TRUE(fs.before(b, a));
  EXPECT_FALSE(fs.before(a, b));
  EXPECT_FALSE(fs.before(a, a));
  // Equal saturation and usage: id decides.
  fs.add(b, {{"h100", 20 * G}}, +1);
  EXPECT_DOUBLE_EQ(fs.saturation(b), 0.8);
  EXPECT_TRUE(fs.before(a, b));
  EXPECT_FALSE(fs.before(b, a));
}

TEST(FairShare, BelowGuaranteeComesFirst) {
  // A guaranteed 40 (weight 1), B weight 9: A 40 + 60/10 = 46, B 54.
  QueueTree t = tree_of({spec("A", "", {{"h100", 40 * G}}), spec("B", "", {}, 9)});
  Loads l{t};
  l["A"].demand = {{"h100", 100 * G}};
  l["B"].demand = {{"h100", 100 * G}};
  l["A"].allocated = {{"h100", 30 * G}};
  l["B"].allocated = {{"h100", 5 * G}};
  FairShare fs = FairShare::compute(t, {{"h100", 100 * G}}, l.v);
  QueueId a = id(t, "A"), b = id(t, "B");
  EXPECT_EQ(fs.fair_share(a, "h100"), 46 * G);
  EXPECT_EQ(fs.fair_share(b, "h100"), 54 * G);
  // B is less saturated (5/54 < 30/46), but A is below its guarantee with demand left.
  EXPECT_LT(fs.saturation(b), fs.saturation(a));
  EXPECT_TRUE(fs.below_guarantee(a));
  EXPECT_FALSE(fs.below_guarantee(b));
  EXPECT_TRUE(fs.before(a, b));
  // Once A reaches its guarantee, saturation decides again.
  fs.add(a, {{"h100", 10 * G}}, +1);
  EXPECT_FALSE(fs.below_guarantee(a));
  EXPECT_TRUE(fs.before(b, a));
  // Below the guarantee but with nothing more wanted does not count.
  l["A"].demand = {{"h100", 30 * G}};
  fs = FairShare::compute(t, {{"h100", 100 * G}}, l.v);
  EXPECT_EQ(fs.fair_share(a, "h100"), 30 * G);
  EXPECT_EQ(fs.fair_share(b, "h100"), 70 * G);
  EXPECT_FALSE(fs.below_guarantee(a));
  EXPECT_TRUE(fs.before(b, a));
}

TEST(FairShare, DecayedUsageLowersPriority) {
  QueueTree t = two_equal();
  Loads l{t};
  l["A"].demand = {{"h100", 100 * G}};
  l["B"].demand = {{"h100", 100 * G}};
  l["A"].allocated = {{"h100", 20 * G}};
  l["B"].allocated = {{"h100", 20 * G}};
  l["A"].decayed_usage = 0.5;
  FairShare fs = FairShare::compute(t, {{"h100", 100 * G}}, l.v);
  QueueId a = id(t, "A"), b = id(t, "B");
  EXPECT_DOUBLE_EQ(fs.raw_saturation(a), 0.4);
  EXPECT_DOUBLE_EQ(fs.saturation(a), 0.4 * 1.5);
  EXPECT_DOUBLE_EQ(fs.saturation(b), 0.4);
  EXPECT_TRUE(fs.before(b, a));  // same allocation, A used more in the past
  // Usage scales, it does not override: A at 10 (0.2 * 1.5 = 0.3) still precedes B at 0.4.
  fs.add(a, {{"h100", 10 * G}}, -1);
  EXPECT_DOUBLE_EQ(fs.saturation(a), 0.3);
  EXPECT_TRUE(fs.before(a, b));
  // With nothing allocated, saturation is 0 for both and the lower usage goes first.
  fs.add(a, {{"h100", 10 * G}}, -1);
  fs.add(b, {{"h100", 20 * G}}, -1);
  EXPECT_TRUE(fs.before(b, a));

  // Deserved quota takes precedence over usage.
  QueueTree t2 = tree_of({spec("A", "", {{"h100", 10 * G}}), spec("B")});
  Loads l2{t2};
  l2["A"].demand = {{"h100", 100 * G}};
  l2["B"].demand = {{"h100", 100 * G}};
  l2["A"].allocated = {{"h100", 5 * G}};
  l2["A"].decayed_usage = 10;
  FairShare fs2 = FairShare::compute(t2, {{"h100", 100 * G}}, l2.v);
  EXPECT_TRUE(fs2.before(id(t2, "A"), id(t2, "B")));
}

TEST(FairShare, UsageAggregatesOverSubtree) {
  QueueTree t = tree_of({spec("org1"), spec("org2"), spec("t1", "org1"), spec("t2", "org1"), spec("t3", "org2")});
  Loads l{t};
  for (const char* q : {"t1", "t2", "t3"}) {
    l[q].demand = {{"h100", 10 * G}};
    l[q].allocated = {{"h100", 5 * G}};
  }
  l["t1"].decayed_usage = 0.25;
  l["t2"].decayed_usage = 0.25;
  l["t3"].decayed_usage = 0.25;
  // 20 GPUs, org1 wants 20, org2 wants 10: 10 each.
  FairShare fs = FairShare::compute(t, {{"h100", 20 * G}}, l.v);
  QueueId o1 = id(t, "org1"), o2 = id(t, "org2");
  EXPECT_EQ(fs.fair_share(o1, "h100"), 10 * G);
  EXPECT_EQ(fs.fair_share(o2, "h100"), 10 * G);
  // org1: 10/10 * (1 + 0.5) = 1.5; org2: 5/10 * 1.25 = 0.625.
  EXPECT_DOUBLE_EQ(fs.saturation(o1), 1.5);
  EXPECT_DOUBLE_EQ(fs.saturation(o2), 0.625);
  EXPECT_TRUE(fs.before(o2, o1));
}

// ---- limits, borrowing, add ----

TEST(FairShare, WithinLimitsAtLeafAndAncestor) {
  QueueTree t = tree_of({spec("org", "", {}, 1, {{"h100", 64 * G}}), spec("team-a", "org", {}, 1, {{"h100", 32 * G}}),
                         spec("team-b", "org"), spec("small", "", {}, 1, {{"h100", 1500}, {"a100", 1 * G}})});
  Loads l{t};
  l["team-a"].allocated = {{"h100", 30 * G}};
  l["team-b"].allocated = {{"h100", 30 * G}};
  FairShare fs = FairShare::compute(t, {{"h100", 100 * G}}, l.v);
  QueueId ta = id(t, "team-a"), tb = id(t, "team-b"), sm = id(t, "small");
  EXPECT_TRUE(fs.within_limits(ta, {{"h100", 2 * G}}).ok());  // exactly at both limits
  Status st = fs.within_limits(ta, {{"h100", 2001}});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(st.message(), "queue team-a at its limit of 32 GPUs of class h100");
  EXPECT_TRUE(fs.within_limits(tb, {{"h100", 4 * G}}).ok());
  st = fs.within_limits(tb, {{"h100", 5 * G}});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "queue org at its limit of 64 GPUs of class h100");
  EXPECT_TRUE(fs.within_limits(tb, {{"a100", 500 * G}}).ok());  // no limit in that class
  EXPECT_TRUE(fs.within_limits(tb, {}).ok());
  // After team-b takes 4 more, org is full: team-a (1 below its own limit) is stopped by org.
  fs.add(tb, {{"h100", 4 * G}}, +1);
  st = fs.within_limits(ta, {{"h100", 1 * G}});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "queue org at its limit of 64 GPUs of class h100");
  // Non-whole limits are spelled in milli-GPU; one GPU in the singular.
  EXPECT_TRUE(fs.within_limits(sm, {{"h100", 1500}}).ok());
  EXPECT_EQ(fs.within_limits(sm, {{"h100", 1501}}).message(), "queue small at its limit of 1500 milli-GPU of class h100");
  EXPECT_EQ(fs.within_limits(sm, {{"a100", 2 * G}}).message(), "queue small at its limit of 1 GPU of class a100");
}

TEST(FairShare, Borrowing) {
  QueueTree t = tree_of({spec("org", "", {{"h100", 32 * G}}), spec("team-a", "org", {{"h100", 16 * G}}),
                         spec("team-b", "org", {{"h100", 16 * G}})});
  Loads l{t};
  l["team-a"].allocated = {{"h100", 20 * G}};
  l["team-b"].allocated = {{"h100", 4 * G}};
  FairShare fs = FairShare::compute(t, {{"h100", 64 * G}}, l.v);
  QueueId ta = id(t, "team-a"), tb = id(t, "team-b"), org = id(t, "org");
  EXPECT_TRUE(fs.borrowing(ta, "h100"));   // 20 > 16
  EXPECT_FALSE(fs.borrowing(tb, "h100"));  // 4 <= 16, org 24 <= 32
  EXPECT_FALSE(fs.borrowing(org, "h100"));
  EXPECT_FALSE(fs.borrowing(tb, "a100"));  // nothing allocated there
  // team-b at exactly its guarantee, but org is now over its own: team-b borrows through org.
  fs.add(tb, {{"h100", 12 * G}}, +1);
  EXPECT_EQ(fs.allocated(tb, "h100"), 16 * G);
  EXPECT_TRUE(fs.borrowing(tb, "h100"));
  EXPECT_TRUE(fs.borrowing(org, "h100"));
  // Any allocation in a class without a guarantee is borrowed.
  fs.add(tb, {{"a100", 1}}, +1);
  EXPECT_TRUE(fs.borrowing(tb, "a100"));
}

TEST(FairShare, AddAndRemoveUpdateAncestorsOnly) {
  QueueTree t = three_level();
  Loads l{t};
  l["projX"].demand = {{"h100", 20 * G}};
  l["projY"].demand = {{"h100", 20 * G}};
  FairShare fs = FairShare::compute(t, {{"h100", 64 * G}}, l.v);
  QueueId px = id(t, "projX"), py = id(t, "projY"), ta1 = id(t, "teamA1"), oa = id(t, "orgA"), ob = id(t, "orgB");
  // orgA takes everything it asks (40 of 64): teamA1 40, projX 20, projY 20.
  EXPECT_EQ(fs.fair_share(px, "h100"), 20 * G);
  EXPECT_TRUE(fs.before(px, py));  // projX is below its guarantee of 8
  fs.add(px, {{"h100", 9 * G}, {"a100", 500}}, +1);
  EXPECT_EQ(fs.allocated(px, "h100"), 9 * G);
  EXPECT_EQ(fs.allocated(ta1, "h100"), 9 * G);
  EXPECT_EQ(fs.allocated(oa, "h100"), 9 * G);
  EXPECT_EQ(fs.allocated(oa, "a100"), 500);
  EXPECT_EQ(fs.allocated(py, "h100"), 0);
  EXPECT_EQ(fs.allocated(ob, "h100"), 0);
  EXPECT_TRUE(fs.before(py, px));  // projX reached its guarantee; 9/20 > 0/20
  fs.add(px, {{"h100", 9 * G}, {"a100", 500}}, -1);
  EXPECT_EQ(fs.allocated(px, "h100"), 0);
  EXPECT_EQ(fs.allocated(oa, "h100"), 0);
  EXPECT_EQ(fs.allocated(oa, "a100"), 0);
  EXPECT_EQ(fs.fair_share(px, "h100"), 20 * G);  // fair shares are fixed for the cycle
  EXPECT_TRUE(fs.before(px, py));                 // below its guarantee again
}

TEST(FairShare, ShortLoadVectorMeansNoLoad) {
  QueueTree t = two_equal();
  FairShare fs = FairShare::compute(t, {{"h100", 8 * G}}, {});
  EXPECT_EQ(fs.fair_share(id(t, "A"), "h100"), 0);
  EXPECT_DOUBLE_EQ(fs.saturation(id(t, "A")), 0.0);
  EXPECT_TRUE(fs.before(id(t, "A"), id(t, "B")));
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

TEST(DecayUsage, HalfLifeHalvesHistoryAndMovesTowardTheShare) {
  EXPECT_DOUBLE_EQ(decay_usage(0.8, 0.0, 3600, 3600), 0.4);   // one half-life idle: half is left
  EXPECT_DOUBLE_EQ(decay_usage(0.8, 0.0, 7200, 3600), 0.2);
  EXPECT_DOUBLE_EQ(decay_usage(0.0, 0.6, 3600, 3600), 0.3);   // half way to a steady share
  EXPECT_DOUBLE_EQ(decay_usage(0.5, 0.5, 100000, 3600), 0.5); // at the share it stays
  EXPECT_DOUBLE_EQ(decay_usage(0.7, 0.2, 0, 3600), 0.7);      // no time, no change
  // In steps or at once: the same.
  EXPECT_NEAR(decay_usage(decay_usage(0.1, 0.9, 1000, 3600), 0.9, 2000, 3600), decay_usage(0.1, 0.9, 3000, 3600), 1e-12);
  EXPECT_DOUBLE_EQ(decay_usage(1.0, 0.0, 1, 0), 0.5);          // half-life at least 1 s
}

}  // namespace
}  // namespace tessera
