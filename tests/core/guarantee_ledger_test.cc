// Tests for GuaranteeLedger (issue 20): owed classes, borrowing at leaf and ancestor level, the
// owed-GPU check on borrowers, reclaim's victims, the owed-sum cache and keeping guarantees in a
// deep tree, on hand-built queue trees. Numbers are hand-computed.
#include "core/sched/guarantee_ledger.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace tessera::sched {
namespace {

constexpr int64_t G = 1000;  // one GPU in milli

QueueSpec spec(std::string name, std::string parent = "", ClassAmounts guaranteed = {}) {
  return QueueSpec{std::move(name), std::move(parent), std::move(guaranteed), {}, 1};
}

QueueTree tree_of(const std::vector<QueueSpec>& specs) {
  Result<QueueTree> t = QueueTree::build(specs);
  EXPECT_TRUE(t.ok()) << t.error().message;
  return std::move(t).value();
}

// Leaf loads by queue name.
struct Loads {
  const QueueTree& tree;
  std::vector<QueueLoad> v = std::vector<QueueLoad>(tree.size());
  QueueLoad& operator[](const std::string& name) { return v[tree.find(name).value().value]; }
  // Running `amounts` in queue `name` (allocated and demand).
  void run(const std::string& name, const ClassAmounts& amounts) {
    for (const auto& [c, x] : amounts) (*this)[name].allocated[c] += x, (*this)[name].demand[c] += x;
  }
  // Waiting `amounts` in queue `name` (demand only).
  void wait(const std::string& name, const ClassAmounts& amounts) {
    for (const auto& [c, x] : amounts) (*this)[name].demand[c] += x;
  }
};

QueueId id(const QueueTree& t, const std::string& name) { return t.find(name).value(); }

GuaranteeLedger ledger_of(const QueueTree& t, const ClassAmounts& capacity, const Loads& l, bool reclaim = true) {
  return GuaranteeLedger(t, capacity, FairShare::compute(t, capacity, l.v), reclaim);
}

// A job the ledger is asked about: view() as a pending request, running() as a running job.
struct TestJob {
  QueueId queue;
  int64_t milli = 0;
  ClassAmounts amounts;
  std::vector<std::string> classes;  // sorted
  int value = 100;
  bool preemptible = true;
  GuaranteeJob view() const { return {queue, milli, nullptr, &amounts, &classes, value, preemptible}; }
  GuaranteeJob running() const { return {queue, milli, &amounts, nullptr, nullptr, value, preemptible}; }
};

// A whole-GPU request of n GPUs of one class.
TestJob of_class(QueueId q, const std::string& cls, int64_t n) {
  return {q, n * G, {{"any", n * G}, {cls, n * G}}, {cls}};
}
// A request of n GPUs allowing models of several classes: it counts in "any" alone.
TestJob of_classes(QueueId q, std::vector<std::string> classes, int64_t n) {
  return {q, n * G, {{"any", n * G}}, std::move(classes)};
}

using Classes = std::vector<std::string>;

TEST(GuaranteeLedger, OwedClassesOfSingleAndMultiModelRequests) {
  QueueTree t = tree_of({spec("a", "", {{"any", 16 * G}, {"h100", 8 * G}})});
  const ClassAmounts cap = {{"any", 32 * G}, {"a100", 16 * G}, {"h100", 16 * G}};
  Loads l{t};
  l.run("a", {{"any", 4 * G}, {"h100", 4 * G}});
  GuaranteeLedger led = ledger_of(t, cap, l);
  const QueueId a = id(t, "a");

  EXPECT_EQ(led.owed_classes(of_class(a, "h100", 4).view()), (Classes{"any", "h100"}));
  // 4 + 5 H100s would pass the H100 guarantee; "any" (4 + 5 <= 16) still owes it.
  EXPECT_EQ(led.owed_classes(of_class(a, "h100", 5).view()), (Classes{"any"}));
  // No A100 guarantee: only "any" owes an A100 request.
  EXPECT_EQ(led.owed_classes(of_class(a, "a100", 2).view()), (Classes{"any"}));
  // A request allowing [A100, H100] is owed by the H100 guarantee although A100 comes first.
  EXPECT_EQ(led.owed_classes(of_classes(a, {"a100", "h100"}, 2).view()), (Classes{"any", "h100"}));
  EXPECT_TRUE(led.owed(of_classes(a, {"a100", "h100"}, 2).view()));
  // Past both guarantees: nothing is owed.
  EXPECT_EQ(led.owed_classes(of_class(a, "h100", 13).view()), Classes{});
  EXPECT_FALSE(led.owed(of_class(a, "h100", 13).view()));

  // Without reclaim nothing is ever owed.
  GuaranteeLedger off = ledger_of(t, cap, l, false);
  EXPECT_EQ(off.owed_classes(of_class(a, "h100", 4).view()), Classes{});
  EXPECT_FALSE(off.owed(of_class(a, "h100", 4).view()));
}

TEST(GuaranteeLedger, OwedClassesOfAMultiModelRequestWithoutAnyGuarantee) {
  QueueTree t = tree_of({spec("a", "", {{"h100", 8 * G}})});
  const ClassAmounts cap = {{"any", 32 * G}, {"a100", 16 * G}, {"h100", 16 * G}};
  Loads l{t};
  GuaranteeLedger led = ledger_of(t, cap, l);
  const QueueId a = id(t, "a");
  EXPECT_EQ(led.owed_classes(of_classes(a, {"a100", "h100"}, 8).view()), (Classes{"h100"}));
  EXPECT_EQ(led.owed_classes(of_classes(a, {"a100"}, 8).view()), Classes{});
  EXPECT_EQ(led.owed_classes(of_class(a, "a100", 1).view()), Classes{});
}

// org (8 H100s guaranteed, in "any" too) > x (4) and y (none).
TEST(GuaranteeLedger, WouldBorrowAtTheLeafOrAnAncestor) {
  QueueTree t = tree_of({spec("org", "", {{"any", 8 * G}, {"h100", 8 * G}}),
                         spec("x", "org", {{"any", 4 * G}, {"h100", 4 * G}}), spec("y", "org")});
  const ClassAmounts cap = {{"any", 16 * G}, {"h100", 16 * G}};
  Loads l{t};
  l.run("x", {{"any", 2 * G}, {"h100", 2 * G}});
  l.run("y", {{"any", 6 * G}, {"h100", 6 * G}});  // org at 8 of its 8
  GuaranteeLedger led = ledger_of(t, cap, l);
  const QueueId x = id(t, "x");
  const FairShare& fs = led.fair_share();

  // x stays within its 4 with one more, but org would pass its 8.
  EXPECT_TRUE(led.would_borrow(fs, x, "h100", 1 * G));
  EXPECT_TRUE(led.borrows_after(of_class(x, "h100", 1).view()));
  // Past x's own guarantee too.
  EXPECT_TRUE(led.would_borrow(fs, x, "h100", 3 * G));

  // With y at 2, org has room: x may add 2 (x at 4, org at 6) but not 3 (x at 5).
  Loads l2{t};
  l2.run("x", {{"any", 2 * G}, {"h100", 2 * G}});
  l2.run("y", {{"any", 2 * G}, {"h100", 2 * G}});
  GuaranteeLedger led2 = ledger_of(t, cap, l2);
  EXPECT_FALSE(led2.would_borrow(led2.fair_share(), x, "h100", 2 * G));
  EXPECT_TRUE(led2.would_borrow(led2.fair_share(), x, "h100", 3 * G));
  EXPECT_FALSE(led2.borrows_after(of_class(x, "h100", 2).view()));
  EXPECT_TRUE(led2.borrows_after(of_class(x, "h100", 3).view()));
  // A100s are guaranteed nowhere: any one is borrowed.
  EXPECT_TRUE(led2.would_borrow(led2.fair_share(), x, "a100", 1));
  EXPECT_TRUE(led2.borrows_after(of_class(x, "a100", 1).view()));
}

TEST(GuaranteeLedger, InsideOwnGuaranteeWhileAnAncestorBorrows) {
  QueueTree t = tree_of({spec("org", "", {{"h100", 8 * G}}), spec("x", "org", {{"h100", 4 * G}}), spec("y", "org")});
  const ClassAmounts cap = {{"any", 16 * G}, {"h100", 16 * G}};
  Loads l{t};
  l.run("x", {{"any", 2 * G}, {"h100", 2 * G}});
  l.run("y", {{"any", 7 * G}, {"h100", 7 * G}});  // org at 9 of its 8
  GuaranteeLedger led = ledger_of(t, cap, l);
  const QueueId x = id(t, "x"), y = id(t, "y");
  const Classes h100 = {"h100"};

  EXPECT_TRUE(led.inside_own_guarantee(x, h100));
  EXPECT_TRUE(led.still_borrows(led.fair_share(), x, h100)) << "org borrows";
  EXPECT_FALSE(led.inside_own_guarantee(y, h100));
  EXPECT_TRUE(led.still_borrows(led.fair_share(), y, h100));
  // No classes asked: nothing to be outside of, nothing borrowed.
  EXPECT_TRUE(led.inside_own_guarantee(y, {}));
  EXPECT_FALSE(led.still_borrows(led.fair_share(), y, {}));

  // Once 1 of y's GPUs is gone, org is at its guarantee: x no longer borrows, y (6 of none) does.
  FairShare after = led.fair_share();
  after.add(y, {{"any", 1 * G}, {"h100", 1 * G}}, -1);
  EXPECT_FALSE(led.still_borrows(after, x, h100));
  EXPECT_TRUE(led.still_borrows(after, y, h100));
  EXPECT_TRUE(led.still_borrows(led.fair_share(), y, h100)) << "the ledger's own share is unchanged";
}

// owner: 8 H100s guaranteed, nothing running, 8 waiting that fit the free GPUs; borrower: none
// guaranteed, 4 running.
struct Owed {
  QueueTree t = tree_of({spec("borrower"), spec("owner", "", {{"h100", 8 * G}})});
  QueueId owner = id(t, "owner"), borrower = id(t, "borrower");
  Loads l{t};
  Owed() {
    l.run("borrower", {{"any", 4 * G}, {"h100", 4 * G}});
    l.wait("borrower", {{"any", 16 * G}, {"h100", 16 * G}});
    l.wait("owner", {{"any", 8 * G}, {"h100", 8 * G}});
  }
  GuaranteeLedger ledger(int64_t gpus, bool usable = true, bool reclaim = true) {
    GuaranteeLedger led = ledger_of(t, {{"any", gpus * G}, {"h100", gpus * G}}, l, reclaim);
    if (usable) led.add_usable(of_class(owner, "h100", 8).view());
    return led;
  }
};

TEST(GuaranteeLedger, TakesOwedRefusesABorrowerWhatAnotherLeafIsOwed) {
  Owed w;
  GuaranteeLedger led = w.ledger(16);
  const ClassAmounts eight = {{"any", 8 * G}, {"h100", 8 * G}};
  const ClassAmounts four = {{"any", 4 * G}, {"h100", 4 * G}};
  EXPECT_EQ(led.leaf_owed(led.fair_share(), w.owner, "h100"), 8 * G);
  EXPECT_EQ(led.owed_to_others(led.fair_share(), w.borrower, "h100"), 8 * G);
  // 16 - 4 used - 8 owed leaves 4: eight are refused, four allowed.
  EXPECT_EQ(led.takes_owed(led.fair_share(), w.borrower, eight),
            "guarantee: would borrow 8 GPUs of class h100 that queue owner is owed (below its guarantee, with jobs "
            "waiting)");
  EXPECT_EQ(led.takes_owed(led.fair_share(), w.borrower, four), "");
  // The owner takes its own room.
  EXPECT_EQ(led.takes_owed(led.fair_share(), w.owner, eight), "");
  // Under a trial with the borrower's 4 gone, 16 - 0 - 8 leaves its eight.
  FairShare trial = led.fair_share();
  trial.add(w.borrower, four, -1);
  EXPECT_EQ(led.takes_owed(trial, w.borrower, eight), "");
  // The borrower's start is deferred to the owed queue's; the owner's is not.
  EXPECT_TRUE(led.defers_to_owed(of_class(w.borrower, "h100", 1).view()));
  EXPECT_FALSE(led.defers_to_owed(of_class(w.owner, "h100", 8).view()));
}

TEST(GuaranteeLedger, TakesOwedAllowsWhenCapacityLeavesEnough) {
  Owed w;
  const ClassAmounts eight = {{"any", 8 * G}, {"h100", 8 * G}};
  GuaranteeLedger big = w.ledger(20);  // 20 - 4 - 8 = 8
  EXPECT_EQ(big.takes_owed(big.fair_share(), w.borrower, eight), "");
  EXPECT_NE(big.takes_owed(big.fair_share(), w.borrower, {{"any", 9 * G}, {"h100", 9 * G}}), "");
  // Owed no more than its waiting jobs could use of the free GPUs: none fit, nothing is owed.
  GuaranteeLedger unusable = w.ledger(16, false);
  EXPECT_EQ(unusable.leaf_owed(unusable.fair_share(), w.owner, "h100"), 0);
  EXPECT_EQ(unusable.takes_owed(unusable.fair_share(), w.borrower, eight), "");
  EXPECT_FALSE(unusable.defers_to_owed(of_class(w.borrower, "h100", 1).view()));
  // Without reclaim nothing is owed.
  GuaranteeLedger off = w.ledger(16, true, false);
  EXPECT_EQ(off.takes_owed(off.fair_share(), w.borrower, eight), "");
  EXPECT_FALSE(off.defers_to_owed(of_class(w.borrower, "h100", 1).view()));
}

TEST(GuaranteeLedger, UsableDemandOfAMultiClassRequestCountsInEachGuaranteedClass) {
  Owed w;
  GuaranteeLedger led = w.ledger(16, false);
  led.add_usable(of_classes(w.owner, {"a100", "h100"}, 3).view());
  EXPECT_EQ(led.leaf_owed(led.fair_share(), w.owner, "h100"), 3 * G);
  EXPECT_EQ(led.leaf_owed(led.fair_share(), w.owner, "a100"), 0) << "not guaranteed";
  EXPECT_EQ(led.leaf_owed(led.fair_share(), w.borrower, "h100"), 0) << "no guarantee";
}

TEST(GuaranteeLedger, ReclaimableRespectsClassValuesAndNonPreemptibleJobs) {
  Owed w;
  GuaranteeLedger led = w.ledger(16);
  const TestJob claimant = of_class(w.owner, "h100", 8);
  const Classes h100 = {"h100"};
  TestJob v = of_class(w.borrower, "h100", 4);  // preemptible, class value 100
  EXPECT_TRUE(led.borrows(v.running()));
  EXPECT_TRUE(led.reclaimable(v.running(), claimant.view(), h100));
  // Not in a class the claimant is owed.
  EXPECT_FALSE(led.reclaimable(v.running(), claimant.view(), {}));
  EXPECT_FALSE(led.reclaimable(of_class(w.borrower, "a100", 4).running(), claimant.view(), h100));
  // A non-preemptible job of a higher class is never reclaimed; of the same or a lower one it is.
  v.preemptible = false;
  v.value = 1000;
  EXPECT_FALSE(led.reclaimable(v.running(), claimant.view(), h100));
  v.value = 100;
  EXPECT_TRUE(led.reclaimable(v.running(), claimant.view(), h100));
  v.value = 50;
  EXPECT_TRUE(led.reclaimable(v.running(), claimant.view(), h100));
  // A preemptible job of a higher class is.
  v.preemptible = true;
  v.value = 1000;
  EXPECT_TRUE(led.reclaimable(v.running(), claimant.view(), h100));
  // A job of a queue that does not borrow is not.
  const TestJob own = of_class(w.owner, "h100", 4);
  EXPECT_FALSE(led.reclaimable(own.running(), claimant.view(), h100));
  EXPECT_FALSE(led.borrows(own.running()));
}

// Guarantees in two classes that overlap on the same GPUs: q0 is guaranteed 8 GPUs of any model, q1
// 8 H100s, on 8 H100s; each holds 4. Each borrows in the other's class ("any" for q1, h100 for q0),
// but taking a job would take its queue below its own guarantee, so neither is reclaimable for the
// other. A queue over its own guarantee in every class it holds is.
TEST(GuaranteeLedger, ReclaimNeverTakesAQueueBelowAGuaranteeInAnotherClass) {
  QueueTree t = tree_of({spec("q0", "", {{"any", 8 * G}}), spec("q1", "", {{"h100", 8 * G}})});
  const ClassAmounts cap = {{"any", 8 * G}, {"h100", 8 * G}};
  Loads l{t};
  l.run("q0", {{"any", 4 * G}, {"h100", 4 * G}});
  l.run("q1", {{"any", 4 * G}, {"h100", 4 * G}});
  l.wait("q0", {{"any", 4 * G}});
  l.wait("q1", {{"any", 4 * G}, {"h100", 4 * G}});
  GuaranteeLedger led = ledger_of(t, cap, l);
  const QueueId q0 = id(t, "q0"), q1 = id(t, "q1");
  const TestJob j0 = of_class(q0, "h100", 4), j1 = of_class(q1, "h100", 4);
  EXPECT_TRUE(led.still_borrows(led.fair_share(), q1, Classes{"any"})) << "q1 has no guarantee in any";
  EXPECT_TRUE(led.still_borrows(led.fair_share(), q0, Classes{"h100"})) << "q0 has no guarantee in h100";
  EXPECT_FALSE(led.reclaim_keeps_guarantee(led.fair_share(), j1.running(), q0, Classes{"any"}));
  EXPECT_FALSE(led.reclaim_keeps_guarantee(led.fair_share(), j0.running(), q1, Classes{"h100"}));
  EXPECT_FALSE(led.reclaimable(j1.running(), of_class(q0, "h100", 4).view(), Classes{"any"}));
  EXPECT_FALSE(led.reclaimable(j0.running(), of_class(q1, "h100", 4).view(), Classes{"h100"}));
  EXPECT_FALSE(led.may_reclaim_from(led.fair_share(), j1.running(), q0, Classes{"any"}));

  // In the class reclaimed, rule (b) alone: a queue still borrowing gives a job up even if that
  // overshoots its guarantee there.
  EXPECT_TRUE(led.reclaim_keeps_guarantee(led.fair_share(), j1.running(), q0, Classes{"any", "h100"}));
  // q1 at 12 H100s (4 over its own guarantee): one 4-GPU job may go, a second may not.
  Loads over{t};
  over.run("q1", {{"any", 12 * G}, {"h100", 12 * G}});
  over.wait("q0", {{"any", 4 * G}});
  const ClassAmounts cap16 = {{"any", 16 * G}, {"h100", 16 * G}};
  GuaranteeLedger led2 = ledger_of(t, cap16, over);
  EXPECT_TRUE(led2.reclaimable(j1.running(), of_class(q0, "h100", 4).view(), Classes{"any"}));
  FairShare after = led2.fair_share();
  EXPECT_TRUE(led2.may_reclaim_from(after, j1.running(), q0, Classes{"any"}));
  after.add(q1, {{"any", 4 * G}, {"h100", 4 * G}}, -1);
  EXPECT_FALSE(led2.may_reclaim_from(after, j1.running(), q0, Classes{"any"}));
}

// Within one org the shared ancestor is not judged: moving GPUs from sibling b to owed sibling a
// leaves org's total as it was.
TEST(GuaranteeLedger, ReclaimBetweenSiblingsIgnoresTheSharedAncestor) {
  QueueTree t = tree_of({spec("org", "", {{"any", 8 * G}}), spec("a", "org", {{"any", 4 * G}}), spec("b", "org")});
  const ClassAmounts cap = {{"any", 8 * G}};
  Loads l{t};
  l.run("b", {{"any", 8 * G}});
  l.wait("a", {{"any", 4 * G}});
  GuaranteeLedger led = ledger_of(t, cap, l);
  const TestJob v{id(t, "b"), 4 * G, {{"any", 4 * G}}, {}};
  EXPECT_TRUE(led.reclaim_keeps_guarantee(led.fair_share(), v.running(), id(t, "a"), Classes{}));
  EXPECT_FALSE(led.keeps_guarantee(led.fair_share(), v.running())) << "org would drop below 8 without a's start";
}

TEST(GuaranteeLedger, OwedSumCacheStaysCurrentAfterAdd) {
  QueueTree t = tree_of({spec("b"), spec("o1", "", {{"h100", 8 * G}}), spec("o2", "", {{"h100", 8 * G}})});
  const QueueId b = id(t, "b"), o1 = id(t, "o1"), o2 = id(t, "o2");
  Loads l{t};
  l.wait("o1", {{"any", 8 * G}, {"h100", 8 * G}});
  l.wait("o2", {{"any", 8 * G}, {"h100", 8 * G}});
  GuaranteeLedger led = ledger_of(t, {{"any", 32 * G}, {"h100", 32 * G}}, l);
  led.add_usable(of_class(o1, "h100", 8).view());
  led.add_usable(of_class(o2, "h100", 8).view());
  // Fresh sums, under a copy of the ledger's fair share.
  auto fresh = [&](QueueId q) {
    FairShare copy = led.fair_share();
    return led.owed_to_others(copy, q, "h100");
  };

  EXPECT_EQ(led.owed_to_others(led.fair_share(), b, "h100"), 16 * G);  // fills the cache
  led.add(o1, {{"any", 3 * G}, {"h100", 3 * G}}, +1);
  EXPECT_EQ(led.owed_to_others(led.fair_share(), b, "h100"), 13 * G);
  EXPECT_EQ(fresh(b), 13 * G);
  EXPECT_EQ(led.owed_to_others(led.fair_share(), o2, "h100"), 5 * G);
  EXPECT_EQ(led.owed_to_others(led.fair_share(), o1, "h100"), 8 * G);
  // Past its guarantee a leaf is owed nothing (not less than nothing).
  led.add(o2, {{"any", 10 * G}, {"h100", 10 * G}}, +1);
  EXPECT_EQ(led.owed_to_others(led.fair_share(), b, "h100"), 5 * G);
  EXPECT_EQ(fresh(b), 5 * G);
  // Releases too.
  led.add(o1, {{"any", 3 * G}, {"h100", 3 * G}}, -1);
  led.add(o2, {{"any", 10 * G}, {"h100", 10 * G}}, -1);
  EXPECT_EQ(led.owed_to_others(led.fair_share(), b, "h100"), 16 * G);
  EXPECT_EQ(fresh(b), 16 * G);
  // A borrower's start does not change what others are owed.
  led.add(b, {{"any", 4 * G}, {"h100", 4 * G}}, +1);
  EXPECT_EQ(led.owed_to_others(led.fair_share(), b, "h100"), 16 * G);
  EXPECT_EQ(led.fair_share().allocated(b, "h100"), 4 * G);
}

// org (16 H100s) > team (12) > leaf (8) and leaf2 (none); org > other (none).
TEST(GuaranteeLedger, KeepsGuaranteeAtEveryLevelOfADepthThreeTree) {
  QueueTree t = tree_of({spec("org", "", {{"h100", 16 * G}}), spec("team", "org", {{"h100", 12 * G}}),
                         spec("leaf", "team", {{"h100", 8 * G}}), spec("leaf2", "team"), spec("other", "org")});
  const QueueId leaf2 = id(t, "leaf2"), other = id(t, "other");
  Loads l{t};
  l.run("leaf", {{"any", 12 * G}, {"h100", 12 * G}});
  l.run("leaf2", {{"any", 4 * G}, {"h100", 4 * G}});  // team at 16
  l.run("other", {{"any", 4 * G}, {"h100", 4 * G}});  // org at 20
  GuaranteeLedger led = ledger_of(t, {{"any", 32 * G}, {"h100", 32 * G}}, l);
  const TestJob v = of_class(id(t, "leaf"), "h100", 4);
  const FairShare& fs = led.fair_share();

  // Without v: leaf 8 >= 8, team 12 >= 12, org 16 >= 16.
  EXPECT_TRUE(led.keeps_guarantee(fs, v.running()));
  // Leaf level: 12 - 5 < 8.
  EXPECT_FALSE(led.keeps_guarantee(fs, of_class(id(t, "leaf"), "h100", 5).running()));
  // Team level only: one GPU moves from leaf2 to other (team 15 - 4 < 12, org stays at 20).
  FairShare moved = fs;
  moved.add(leaf2, {{"any", G}, {"h100", G}}, -1);
  moved.add(other, {{"any", G}, {"h100", G}}, +1);
  EXPECT_FALSE(led.keeps_guarantee(moved, v.running()));
  // Org level only: other loses one (org 19 - 4 < 16; team still 16 - 4 = 12).
  FairShare less = fs;
  less.add(other, {{"any", G}, {"h100", G}}, -1);
  EXPECT_FALSE(led.keeps_guarantee(less, v.running()));
  // A job of the sibling without a guarantee: team (16 - 4) and org (20 - 4) keep theirs, until org
  // has one less.
  EXPECT_TRUE(led.keeps_guarantee(fs, of_class(leaf2, "h100", 4).running()));
  EXPECT_FALSE(led.keeps_guarantee(less, of_class(leaf2, "h100", 4).running()));
}

}  // namespace
}  // namespace tessera::sched
