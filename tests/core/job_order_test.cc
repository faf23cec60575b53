// Tests for the job-order policies (core/sched/job_order.h) on hand-built inputs: each order's
// sequence (ties by id), tiers, fair share's pick of the least-served queue after each start, the
// user and attained-service keys inside a queue, multifactor's factors, DRF's dominant shares, and
// the registry.
#include "core/sched/job_order.h"

#include <gtest/gtest.h>

#include "core/rng.h"

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

namespace tessera {
namespace {

constexpr int64_t G = 1000;  // one GPU in milli

QueueTree tree_of(const std::vector<QueueSpec>& specs) {
  Result<QueueTree> t = QueueTree::build(specs);
  EXPECT_TRUE(t.ok()) << t.error().message;
  return std::move(t).value();
}

OrderJob job(uint32_t id, QueueId queue, Time submitted, int64_t prio = 0, uint32_t user = 0, int64_t milli = G) {
  OrderJob j;
  j.id = JobId(id);
  j.queue = queue;
  j.user = user;
  j.submitted = submitted;
  j.prio = prio;
  j.class_value = int(prio / 16);
  j.milli = milli;
  return j;
}

// The whole sequence as job ids, with each tier's key; `on_pick` runs after each pick (to start it).
struct Drained {
  std::vector<uint32_t> ids;
  std::vector<int64_t> tiers;
};
Drained drain(JobOrderCursor& c, const OrderInput& in, const std::function<void(const OrderJob&)>& on_pick = {}) {
  Drained d;
  while (const std::optional<int64_t> t = c.next_tier()) {
    d.tiers.push_back(*t);
    while (const std::optional<size_t> k = c.next()) {
      d.ids.push_back(in.jobs[*k].id.value);
      if (on_pick) on_pick(in.jobs[*k]);
    }
  }
  return d;
}

Drained run(JobOrder order, const OrderInput& in, const std::function<void(JobOrderCursor&, const OrderJob&)>& on_pick = {}) {
  std::unique_ptr<JobOrderCursor> c = job_order_policy(order).begin(in);
  JobOrderCursor& cur = *c;
  return drain(cur, in, on_pick ? std::function<void(const OrderJob&)>([&](const OrderJob& j) { on_pick(cur, j); })
                                : std::function<void(const OrderJob&)>());
}

using Ids = std::vector<uint32_t>;

TEST(JobOrderRegistry, EveryOrderHasItsPolicyAndRules) {
  for (JobOrder o : {JobOrder::kFairShare, JobOrder::kFifo, JobOrder::kMultifactor, JobOrder::kLeastAttained, JobOrder::kDrf})
    EXPECT_EQ(job_order_policy(o).kind(), o) << job_order_name(o);
  const OrderRules fs = job_order_policy(JobOrder::kFairShare).rules();
  EXPECT_TRUE(fs.holds_reservation);
  EXPECT_TRUE(fs.defers_to_owed);
  for (JobOrder o : {JobOrder::kFifo, JobOrder::kMultifactor, JobOrder::kLeastAttained}) {
    EXPECT_TRUE(job_order_policy(o).rules().holds_reservation) << job_order_name(o);
    EXPECT_FALSE(job_order_policy(o).rules().defers_to_owed) << job_order_name(o);
  }
  EXPECT_FALSE(job_order_policy(JobOrder::kDrf).rules().holds_reservation);
  EXPECT_FALSE(job_order_policy(JobOrder::kDrf).rules().defers_to_owed);
  const OrderJob j = job(1, QueueId(0), 0, 48);
  EXPECT_EQ(job_order_policy(JobOrder::kFairShare).tier_of(j), 48);
  EXPECT_EQ(job_order_policy(JobOrder::kFifo).tier_of(j), kOneTier);
  EXPECT_EQ(job_order_policy(JobOrder::kDrf).tier_of(j), kOneTier);
}

TEST(JobOrderFifo, SubmitTimeThenIdInOneTier) {
  OrderInput in;
  in.jobs = {job(5, QueueId(0), 20), job(3, QueueId(0), 10), job(9, QueueId(0), 10), job(1, QueueId(0), 30),
             job(2, QueueId(0), 10, 64)};  // class ignored
  const Drained d = run(JobOrder::kFifo, in);
  EXPECT_EQ(d.ids, (Ids{2, 3, 9, 5, 1}));
  EXPECT_EQ(d.tiers, (std::vector<int64_t>{kOneTier}));
}

TEST(JobOrderFifo, EmptyInputHasOneEmptyTier) {
  const Drained d = run(JobOrder::kFifo, OrderInput{});
  EXPECT_TRUE(d.ids.empty());
  EXPECT_EQ(d.tiers.size(), 1u);
}

TEST(JobOrderLeastAttained, RankThenSubmitThenId) {
  // prio = class x16 + (15 - level): a lower level of the same class comes first, a higher class first of all.
  OrderInput in;
  in.jobs = {job(1, QueueId(0), 0, 16 + 13),  // class 1, level 2, oldest
             job(2, QueueId(0), 50, 16 + 15), job(3, QueueId(0), 40, 16 + 15), job(4, QueueId(0), 40, 16 + 15),
             job(5, QueueId(0), 90, 32 + 13)};  // class 2, level 2
  EXPECT_EQ(run(JobOrder::kLeastAttained, in).ids, (Ids{5, 3, 4, 2, 1}));
}

TEST(JobOrderMultifactor, FairShareAgeSizeAndClassFactors) {
  QueueTree tree = tree_of({{"a", "", {}, {}, 1}, {"b", "", {}, {}, 1}});
  const QueueId a = tree.find("a").value(), b = tree.find("b").value();
  std::vector<QueueLoad> load(tree.size());
  load[a.value].allocated["any"] = 8 * G;  // a holds the whole cluster
  load[a.value].demand["any"] = 10 * G;
  load[b.value].demand["any"] = 2 * G;
  FairShare fs = FairShare::compute(tree, {{"any", 8 * G}}, load);
  OrderInput in;
  in.tree = &tree;
  in.fair_share = &fs;
  in.capacity.gpu_milli = 8 * G;
  in.now = 7 * 24 * 3600;
  in.top_class_value = 4;
  in.multifactor = MultifactorWeights{};  // age 1000, fairshare 10000, job_size 1000, qos 2000, max_age 7 days
  // b's fair-share factor is 2^0 = 1, a's 2^(-1 / 0.5) = 0.25: 7500 points apart, more than age,
  // size and class together can make up.
  in.jobs = {job(1, a, 0, 4 * 16, 0, 8 * G),  // a: oldest (age 1), biggest, top class
             job(2, b, in.now, 0, 0, G),      // b: new, small, class 0
             job(3, b, in.now, 0, 0, G),      // ties with 2: by id
             job(4, b, in.now - 3 * 24 * 3600 - 12 * 3600, 0, 0, G)};  // b, half the max age
  EXPECT_EQ(run(JobOrder::kMultifactor, in).ids, (Ids{4, 2, 3, 1}));
  // Without the fair-share weight, a's job leads on age, size and class.
  in.multifactor.fairshare = 0;
  EXPECT_EQ(run(JobOrder::kMultifactor, in).ids, (Ids{1, 4, 2, 3}));
}

TEST(JobOrderDrf, LowestDominantShareThenOldestAndStartsCount) {
  QueueTree tree = tree_of({{"a", "", {}, {}, 1}, {"b", "", {}, {}, 1}, {"c", "", {}, {}, 1}});
  const QueueId a = tree.find("a").value(), b = tree.find("b").value(), c = tree.find("c").value();
  OrderInput in;
  in.tree = &tree;
  in.capacity = {10 * G, 100000 + 1, 1000000 + 1};
  in.queue_usage.assign(tree.size(), {});
  in.queue_usage[a.value] = {2 * G, 0, 0};         // GPU share 0.2
  in.queue_usage[b.value] = {0, 50000, 0};         // CPU share ~0.5: dominant
  in.queue_usage[c.value] = {G, 0, 200000};        // memory share ~0.2 (just below a's 0.2 GPU share)
  in.jobs = {job(1, a, 5), job(2, a, 1), job(3, b, 0), job(4, c, 9), job(5, c, 9)};
  // c (0.19999...) first, its oldest (4 before 5 by id); starting 4 takes c to 0.2 GPU, a tie with
  // a: the lower queue id (a) goes, its oldest (2); a is then at 0.3, so c (5); then a and c tie at
  // 0.3: a (1); b (0.49999...) last.
  const Drained d = run(JobOrder::kDrf, in, [](JobOrderCursor& cur, const OrderJob& j) {
    cur.started(j, {j.milli, 0, 0});
  });
  EXPECT_EQ(d.ids, (Ids{4, 2, 5, 1, 3}));
  // Nothing starts: shares stay, a queue is drained before the next.
  EXPECT_EQ(run(JobOrder::kDrf, in).ids, (Ids{4, 5, 2, 1, 3}));
}

// Fair share: two equal queues; the cycle adds each start to the FairShare (as commit_start in place.cc
// does) and the cursor picks the least-served queue again.
class JobOrderFairShare : public ::testing::Test {
 protected:
  void SetUp() override {
    tree = tree_of({{"a", "", {}, {}, 1}, {"b", "", {}, {}, 1}});
    a = tree.find("a").value();
    b = tree.find("b").value();
  }
  void compute(int64_t demand_a, int64_t demand_b) {
    std::vector<QueueLoad> load(tree.size());
    load[a.value].demand["any"] = demand_a;
    load[b.value].demand["any"] = demand_b;
    fs.emplace(FairShare::compute(tree, {{"any", 8 * G}}, load));
    in.tree = &tree;
    in.fair_share = &*fs;
  }
  // Runs the order; every pick starts and is added to the fair share and reported.
  Drained start_all() {
    return run(JobOrder::kFairShare, in, [&](JobOrderCursor& cur, const OrderJob& j) {
      fs->add(j.queue, {{"any", j.milli}}, +1);
      cur.started(j, {j.milli, 0, 0});
    });
  }
  QueueTree tree;
  QueueId a, b;
  std::optional<FairShare> fs;
  OrderInput in;
};

TEST_F(JobOrderFairShare, AlternatesQueuesAsJobsStart) {
  compute(4 * G, 4 * G);
  in.user_usage = {0};
  in.jobs = {job(1, a, 0), job(2, a, 1), job(3, b, 5), job(4, b, 6), job(5, a, 2)};
  // Equal shares: a (lower id) first; then b is less served, then a, ...; a's jobs oldest first.
  EXPECT_EQ(start_all().ids, (Ids{1, 3, 2, 4, 5}));
}

TEST_F(JobOrderFairShare, WithoutStartsAQueueKeepsItsTurn) {
  compute(4 * G, 4 * G);
  in.user_usage = {0};
  in.jobs = {job(1, a, 0), job(2, a, 1), job(3, b, 5)};
  EXPECT_EQ(run(JobOrder::kFairShare, in).ids, (Ids{1, 2, 3}));  // nothing changed between picks
}

TEST_F(JobOrderFairShare, TiersFirstHighestDown) {
  compute(4 * G, 4 * G);
  in.user_usage = {0};
  in.jobs = {job(1, a, 0, 16), job(2, b, 0, 48), job(3, a, 0, 48), job(4, b, 0, 16), job(5, a, 0, 32)};
  const Drained d = start_all();
  EXPECT_EQ(d.tiers, (std::vector<int64_t>{48, 32, 16}));
  // Tier 48: a, then b (a started); tier 32: a alone; tier 16: b is less served (1 vs 2).
  EXPECT_EQ(d.ids, (Ids{3, 2, 5, 4, 1}));
}

TEST_F(JobOrderFairShare, InsideAQueueTheLighterUserThenAge) {
  compute(8 * G, 0);
  in.user_usage = {3 * G, 0, G};  // users 0, 1, 2
  in.jobs = {job(1, a, 0, 0, 0), job(2, a, 9, 0, 1), job(3, a, 5, 0, 1), job(4, a, 1, 0, 2)};
  // User 1 (0 GPUs) first, its older job 3; user 1 then holds 1 GPU, as user 2 does: user 2's job 4
  // is older than user 1's job 2; then user 1 (1) before user 2 (2); user 0 last.
  EXPECT_EQ(start_all().ids, (Ids{3, 4, 2, 1}));
}

TEST_F(JobOrderFairShare, InQueueLasPutsLowerLevelsFirst) {
  compute(8 * G, 0);
  in.user_usage = {0, 0};
  OrderJob long_runner = job(1, a, 0, 0, 0);
  long_runner.las = 2;
  OrderJob fresh = job(2, a, 50, 0, 1);
  in.jobs = {long_runner, fresh};
  EXPECT_EQ(run(JobOrder::kFairShare, in).ids, (Ids{1, 2}));  // oldest first
  in.in_queue_las = true;
  EXPECT_EQ(run(JobOrder::kFairShare, in).ids, (Ids{2, 1}));  // level 0 before level 2
}

TEST(JobOrderFairShareTree, WalksDownTheTreeByFairShare) {
  // org (weight 1) holds x and y; z is org's sibling. The least-served top-level queue, then inside
  // it the least-served child.
  QueueTree tree = tree_of({{"org", "", {}, {}, 1}, {"x", "org", {}, {}, 1}, {"y", "org", {}, {}, 1}, {"z", "", {}, {}, 1}});
  const QueueId x = tree.find("x").value(), y = tree.find("y").value(), z = tree.find("z").value();
  std::vector<QueueLoad> load(tree.size());
  for (QueueId q : {x, y, z}) load[q.value].demand["any"] = 4 * G;
  FairShare fs = FairShare::compute(tree, {{"any", 8 * G}}, load);
  OrderInput in;
  in.tree = &tree;
  in.fair_share = &fs;
  in.user_usage = {0};
  in.jobs = {job(1, x, 0), job(2, x, 1), job(3, y, 0), job(4, z, 0), job(5, z, 1), job(6, y, 1)};
  const Drained d = run(JobOrder::kFairShare, in, [&](JobOrderCursor& cur, const OrderJob& j) {
    fs.add(j.queue, {{"any", j.milli}}, +1);
    cur.started(j, {j.milli, 0, 0});
  });
  // Fair shares: org and z 4 GPUs each, x and y 2. org (lower id) first, its x (1); then z (org at
  // 1/4 of its share, z at 0: 4); org and z tie at 1/4: org, now y (x at 1/2: 3); z (5); org and z
  // tie at 1/2: org, x and y tie at 1/2: x (2); z has no job left: org, y (6).
  EXPECT_EQ(d.ids, (Ids{1, 4, 3, 5, 2, 6}));
}

// The cursor keeps its last pick while nothing started (FairShare::generation), and a queue's jobs
// sorted while no start changes a user's usage: on random trees, jobs and tiers, where a random part
// of the picks start (a third of them, or one in 25 so that queues are sorted and popped between
// starts), every pick is the one a fresh walk from the root makes (the least-served queue at each
// level with jobs left, then the job first by class, user usage, submit time and id).
TEST(JobOrderFairShareTree, EveryPickIsTheWalkFromTheRootWhateverStarts) {
  for (uint64_t seed = 1; seed <= 120; ++seed) {
    Rng rng(seed);
    const uint64_t start_one_in = seed % 2 ? 3 : 25;
    std::vector<QueueSpec> specs;
    const int orgs = 1 + int(rng.uniform(4));
    for (int o = 0; o < orgs; ++o) specs.push_back({"org" + std::to_string(o), "", {}, {}, int64_t(1 + rng.uniform(3))});
    const int leaves = 2 + int(rng.uniform(10));
    for (int l = 0; l < leaves; ++l) {
      QueueSpec q{"leaf" + std::to_string(l), rng.uniform(4) ? "org" + std::to_string(rng.uniform(uint64_t(orgs))) : "", {}, {},
                  int64_t(1 + rng.uniform(3))};
      if (rng.uniform(2)) q.guaranteed["any"] = int64_t(rng.uniform(4)) * G;
      if (!q.parent.empty()) specs[size_t(std::stoi(q.parent.substr(3)))].guaranteed["any"] += q.guaranteed["any"];
      specs.push_back(q);
    }
    QueueTree tree = tree_of(specs);
    std::vector<QueueId> leaf_ids;
    for (const Queue& q : tree.queues())
      if (q.leaf() && q.name.rfind("leaf", 0) == 0) leaf_ids.push_back(q.id);
    OrderInput in;
    const int users = 1 + int(rng.uniform(5));
    in.user_usage.assign(size_t(users), 0);
    for (int64_t& u : in.user_usage) u = int64_t(rng.uniform(3)) * G;
    std::vector<QueueLoad> load(tree.size());
    const int jobs = int(rng.uniform(start_one_in == 3 ? 60 : 200));
    for (int k = 0; k < jobs; ++k) {
      const QueueId q = leaf_ids[rng.uniform(leaf_ids.size())];
      in.jobs.push_back(job(uint32_t(k + 1), q, Time(rng.uniform(20)), 16 * int64_t(rng.uniform(3)),
                            uint32_t(rng.uniform(uint64_t(users))), int64_t(1 + rng.uniform(4)) * G));
      load[q.value].demand["any"] += in.jobs.back().milli;
    }
    FairShare fs = FairShare::compute(tree, {{"any", 16 * G}}, load);
    in.tree = &tree;
    in.fair_share = &fs;
    std::vector<int64_t> usage = in.user_usage;  // the reference's own copy, as the cursor's grows
    std::vector<bool> taken(in.jobs.size(), false);
    std::unique_ptr<JobOrderCursor> cur = job_order_policy(JobOrder::kFairShare).begin(in);
    size_t picks = 0;
    while (const std::optional<int64_t> tier = cur->next_tier()) {
      auto left_in = [&](QueueId q) {  // jobs of this tier not yet picked in q's subtree
        int n = 0;
        for (size_t k = 0; k < in.jobs.size(); ++k)
          if (!taken[k] && in.jobs[k].prio == *tier)
            for (QueueId p : tree.path_to_root(in.jobs[k].queue)) n += p == q;
        return n;
      };
      while (const std::optional<size_t> k = cur->next()) {
        const std::vector<QueueId>* level = &tree.top_level();
        QueueId pick;
        for (;;) {
          QueueId best;
          for (QueueId q : *level)
            if (left_in(q) > 0 && (!best.valid() || fs.before(q, best))) best = q;
          ASSERT_TRUE(best.valid()) << "seed " << seed;
          pick = best;
          if (tree.queue(best).leaf()) break;
          level = &tree.queue(best).children;
        }
        std::optional<size_t> want;
        for (size_t c = 0; c < in.jobs.size(); ++c) {
          const OrderJob& x = in.jobs[c];
          if (taken[c] || x.prio != *tier || x.queue != pick) continue;
          if (!want) {
            want = c;
            continue;
          }
          const OrderJob& y = in.jobs[*want];
          const auto kx = std::make_tuple(usage[x.user], x.submitted, x.id), ky = std::make_tuple(usage[y.user], y.submitted, y.id);
          if (kx < ky) want = c;
        }
        ASSERT_TRUE(want.has_value()) << "seed " << seed;
        ASSERT_EQ(*k, *want) << "seed " << seed << " pick " << picks;
        taken[*k] = true;
        ++picks;
        if (rng.uniform(start_one_in) == 0) {  // it starts
          const OrderJob& j = in.jobs[*k];
          fs.add(j.queue, {{"any", j.milli}}, +1);
          usage[j.user] += j.milli;
          cur->started(j, {j.milli, 0, 0});
        }
      }
    }
    EXPECT_EQ(picks, in.jobs.size()) << "seed " << seed;
  }
}

}  // namespace
}  // namespace tessera
