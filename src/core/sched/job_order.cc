// The job orders (core/sched/job_order.h): hierarchical fair share in priority tiers, the static
// baselines (FIFO, Slurm's multifactor, Tiresias' least attained service) and DRF's dynamic pick of
// the leaf queue with the lowest dominant share; and the registry.
#include "core/sched/job_order.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>

namespace tessera {
namespace {

constexpr const char* kAny = "any";  // the quota class every GPU counts in

// Fair share: priority tiers (highest first), then inside a tier, repeatedly, the leaf reached by
// walking down the queue tree by FairShare::before (live: starts change it), and that queue's best
// job: lower attained-service level (in_queue_las), then the user holding fewer GPUs (counting this
// cycle's starts), then the oldest, then the lowest id.
class FairShareCursor final : public JobOrderCursor {
 public:
  explicit FairShareCursor(OrderInput in) : in_(std::move(in)) {
    for (const OrderJob& j : in_.jobs) tiers_.push_back(j.prio);
    std::sort(tiers_.begin(), tiers_.end(), std::greater<>());
    tiers_.erase(std::unique(tiers_.begin(), tiers_.end()), tiers_.end());
  }

  std::optional<int64_t> next_tier() override {
    if (next_tier_ >= tiers_.size()) return std::nullopt;
    const int64_t tier = tiers_[next_tier_++];
    const QueueTree& tree = *in_.tree;
    cand_.assign(tree.size(), {});
    sorted_at_.assign(tree.size(), kUnsorted);
    remaining_.assign(tree.size(), 0);
    left_ = 0;
    last_pick_ = QueueId();  // other queues wait in this tier
    for (size_t k = 0; k < in_.jobs.size(); ++k) {
      if (in_.jobs[k].prio != tier) continue;
      cand_[in_.jobs[k].queue.value].push_back(k);
      for (QueueId q : tree.path_to_root(in_.jobs[k].queue)) ++remaining_[q.value];
      ++left_;
    }
    return tier;
  }

  std::optional<size_t> next() override {
    if (left_ == 0) return std::nullopt;
    --left_;
    const QueueTree& tree = *in_.tree;
    QueueId pick;
    if (last_pick_.valid() && remaining_[last_pick_.value] > 0 && in_.fair_share->generation() == last_generation_) {
      // The queues compare as they did at the last pick (nothing started since) and only jobs were
      // taken: the least-served queue at each level on the last pick's path is still the least served.
      pick = last_pick_;
    } else {
      const std::vector<QueueId>* level = &tree.top_level();
      for (;;) {
        QueueId best;
        for (QueueId q : *level)
          if (remaining_[q.value] > 0 && (!best.valid() || in_.fair_share->before(q, best))) best = q;
        pick = best;
        if (tree.queue(best).leaf()) break;
        level = &tree.queue(best).children;
      }
    }
    last_pick_ = pick;
    last_generation_ = in_.fair_share->generation();
    // The queue's jobs not yet yielded. Kept sorted, best last, while no start changes a user's usage
    // (job_before reads it): the best is then popped from the back. After a start the list is sorted
    // again once picks come without starts (most jobs then find no room); while starts are frequent
    // the best is searched for instead (a sort per start would cost more).
    std::vector<size_t>& c = cand_[pick.value];
    ++picks_since_start_;
    if (sorted_at_[pick.value] != usage_version_ && picks_since_start_ >= kSortAfterPicks) {
      std::sort(c.begin(), c.end(), [&](size_t a, size_t b) { return job_before(b, a); });
      sorted_at_[pick.value] = usage_version_;
    }
    size_t k;
    if (sorted_at_[pick.value] == usage_version_) {
      k = c.back();
      c.pop_back();
    } else {
      auto it = std::min_element(c.begin(), c.end(), [&](size_t a, size_t b) { return job_before(a, b); });
      k = *it;
      c.erase(it);
    }
    for (QueueId q : tree.path_to_root(pick)) --remaining_[q.value];
    return k;
  }

  // The last pick's queue's best job, while that queue's jobs are sorted (the pick stays there
  // while nothing starts).
  std::optional<size_t> likely_next() const override {
    if (!last_pick_.valid() || sorted_at_[last_pick_.value] != usage_version_) return std::nullopt;
    const std::vector<size_t>& c = cand_[last_pick_.value];
    return c.empty() ? std::nullopt : std::optional<size_t>(c.back());
  }

  void started(const OrderJob& job, const OrderUsage& took) override {
    if (job.user < in_.user_usage.size() && took.gpu_milli != 0) {
      in_.user_usage[job.user] += took.gpu_milli;
      ++usage_version_;
      picks_since_start_ = 0;
    }
  }

 private:
  bool job_before(size_t a, size_t b) const {
    const OrderJob& x = in_.jobs[a];
    const OrderJob& y = in_.jobs[b];
    if (x.prio != y.prio) return x.prio > y.prio;
    if (in_.in_queue_las && x.las != y.las) return x.las < y.las;
    const int64_t ux = in_.user_usage[x.user], uy = in_.user_usage[y.user];
    if (ux != uy) return ux < uy;
    if (x.submitted != y.submitted) return x.submitted < y.submitted;
    return x.id < y.id;
  }

  OrderInput in_;
  std::vector<int64_t> tiers_;
  size_t next_tier_ = 0;
  static constexpr uint64_t kUnsorted = ~uint64_t(0);
  std::vector<std::vector<size_t>> cand_;  // per leaf queue: the current tier's jobs not yet yielded
  std::vector<uint64_t> sorted_at_;        // per leaf queue: usage_version_ when cand_ was sorted
  uint64_t usage_version_ = 0;             // advanced by every start that changes a user's usage
  static constexpr int kSortAfterPicks = 8;
  int picks_since_start_ = 0;
  std::vector<int> remaining_;             // per queue: those jobs in its subtree
  size_t left_ = 0;                        // the current tier's jobs not yet yielded
  QueueId last_pick_;                      // the leaf of the last pick, and the fair share's
  uint64_t last_generation_ = 0;           // generation then (FairShare::generation)
};

// A static order in one tier: key descending (computed once), then submitted, then id.
class ListCursor final : public JobOrderCursor {
 public:
  ListCursor(const OrderInput& in, const std::vector<int64_t>& key) {
    order_.resize(in.jobs.size());
    for (size_t k = 0; k < order_.size(); ++k) order_[k] = k;
    std::sort(order_.begin(), order_.end(), [&](size_t a, size_t b) {
      if (key[a] != key[b]) return key[a] > key[b];
      const OrderJob& x = in.jobs[a];
      const OrderJob& y = in.jobs[b];
      return x.submitted != y.submitted ? x.submitted < y.submitted : x.id < y.id;
    });
  }
  std::optional<int64_t> next_tier() override {
    if (tier_given_) return std::nullopt;
    tier_given_ = true;
    return kOneTier;
  }
  std::optional<size_t> next() override {
    if (!tier_given_ || at_ >= order_.size()) return std::nullopt;
    return order_[at_++];
  }
  std::optional<size_t> likely_next() const override {
    return tier_given_ && at_ < order_.size() ? std::optional<size_t>(order_[at_]) : std::nullopt;
  }

 private:
  std::vector<size_t> order_;
  size_t at_ = 0;
  bool tier_given_ = false;
};

// Slurm's multifactor priority, x1000 rounded: age/max_age, 2^(-usage/shares) of the job's leaf
// queue (usage: its allocated GPUs over the cluster's plus its decayed usage; shares: the product of
// its and its ancestors' weight among their siblings), GPUs asked over the cluster's, class value
// over the top class's; each times its weight.
std::vector<int64_t> multifactor_keys(const OrderInput& in) {
  const QueueTree& tree = *in.tree;
  const double cap_any = double(in.capacity.gpu_milli);
  std::vector<double> fs_factor(tree.size(), 1);
  for (const Queue& q : tree.queues()) {
    if (!q.leaf()) continue;
    double shares = 1;
    for (QueueId a : tree.path_to_root(q.id)) {
      int64_t sum = 0;
      for (QueueId sib : tree.queue(a).parent.valid() ? tree.queue(tree.queue(a).parent).children : tree.top_level())
        sum += tree.queue(sib).weight;
      shares *= double(tree.queue(a).weight) / double(std::max<int64_t>(1, sum));
    }
    const double hist = q.id.value < in.decayed_usage.size() ? in.decayed_usage[q.id.value] : 0;
    const double usage = double(in.fair_share->allocated(q.id, kAny)) / cap_any + hist;
    fs_factor[q.id.value] = std::exp2(-usage / shares);
  }
  const MultifactorWeights& w = in.multifactor;
  std::vector<int64_t> key(in.jobs.size(), 0);
  for (size_t k = 0; k < in.jobs.size(); ++k) {
    const OrderJob& j = in.jobs[k];
    const double age = double(std::clamp<Duration>(in.now - j.submitted, 0, w.max_age)) / double(std::max<Duration>(1, w.max_age));
    const double p = double(w.age) * age + double(w.fairshare) * fs_factor[j.queue.value] +
                     double(w.job_size) * std::min(1.0, double(j.milli) / cap_any) +
                     double(w.qos) * double(std::max(0, j.class_value)) / double(in.top_class_value);
    key[k] = int64_t(std::llround(p * 1000));
  }
  return key;
}

// DRF: one tier; repeatedly the leaf queue with the lowest dominant share (GPU, CPU, memory of what
// runs and what started, over the cluster's; ties to the lower queue id), and its oldest job.
class DrfCursor final : public JobOrderCursor {
 public:
  explicit DrfCursor(const OrderInput& in)
      : cap_(in.capacity), use_(in.queue_usage), by_queue_(in.tree->size()), pos_(in.tree->size(), 0) {
    use_.resize(in.tree->size());
    std::vector<size_t> order(in.jobs.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      const OrderJob& x = in.jobs[a];
      const OrderJob& y = in.jobs[b];
      return x.submitted != y.submitted ? x.submitted < y.submitted : x.id < y.id;
    });
    for (size_t k : order) by_queue_[in.jobs[k].queue.value].push_back(k);
    left_ = order.size();
  }
  std::optional<int64_t> next_tier() override {
    if (tier_given_) return std::nullopt;
    tier_given_ = true;
    return kOneTier;
  }
  std::optional<size_t> next() override {
    if (!tier_given_ || left_ == 0) return std::nullopt;
    --left_;
    size_t best = by_queue_.size();
    for (size_t q = 0; q < by_queue_.size(); ++q)
      if (pos_[q] < by_queue_[q].size() && (best == by_queue_.size() || share(q) < share(best))) best = q;
    return by_queue_[best][pos_[best]++];
  }
  void started(const OrderJob& job, const OrderUsage& took) override {
    OrderUsage& u = use_[job.queue.value];
    u.gpu_milli += job.milli;  // what it asked for, as the running jobs' share counts what they hold
    u.cpu += took.cpu;
    u.memory += took.memory;
  }

 private:
  double share(size_t q) const {
    const OrderUsage& u = use_[q];
    return std::max({double(u.gpu_milli) / double(cap_.gpu_milli), double(u.cpu) / double(cap_.cpu),
                     double(u.memory) / double(cap_.memory)});
  }
  OrderUsage cap_;
  std::vector<OrderUsage> use_;               // per queue
  std::vector<std::vector<size_t>> by_queue_; // per leaf queue: its jobs, oldest first
  std::vector<size_t> pos_;                   // per queue: the next of them
  size_t left_ = 0;
  bool tier_given_ = false;
};

class FairShareOrder final : public JobOrderPolicy {
 public:
  JobOrder kind() const override { return JobOrder::kFairShare; }
  OrderRules rules() const override { return {true, true}; }
  int64_t tier_of(const OrderJob& job) const override { return job.prio; }
  std::unique_ptr<JobOrderCursor> begin(OrderInput in) const override {
    return std::make_unique<FairShareCursor>(std::move(in));
  }
};

// FIFO (every key 0), multifactor, least attained service (key: the rank with its level bonus).
class StaticOrder final : public JobOrderPolicy {
 public:
  explicit StaticOrder(JobOrder kind) : kind_(kind) {}
  JobOrder kind() const override { return kind_; }
  OrderRules rules() const override { return {true, false}; }
  int64_t tier_of(const OrderJob&) const override { return kOneTier; }
  std::unique_ptr<JobOrderCursor> begin(OrderInput in) const override {
    std::vector<int64_t> key(in.jobs.size(), 0);
    if (kind_ == JobOrder::kMultifactor) key = multifactor_keys(in);
    else if (kind_ == JobOrder::kLeastAttained)
      for (size_t k = 0; k < in.jobs.size(); ++k) key[k] = in.jobs[k].prio;
    return std::make_unique<ListCursor>(in, key);
  }

 private:
  JobOrder kind_;
};

// DRF holds no reservation and defers nothing: as the baseline always behaved (a held
// reservation's holder takes its turn by dominant share like any job).
class DrfOrder final : public JobOrderPolicy {
 public:
  JobOrder kind() const override { return JobOrder::kDrf; }
  OrderRules rules() const override { return {false, false}; }
  int64_t tier_of(const OrderJob&) const override { return kOneTier; }
  std::unique_ptr<JobOrderCursor> begin(OrderInput in) const override { return std::make_unique<DrfCursor>(in); }
};

}  // namespace

const JobOrderPolicy& job_order_policy(JobOrder order) {
  static const FairShareOrder fair_share;
  static const StaticOrder fifo(JobOrder::kFifo), multifactor(JobOrder::kMultifactor),
      least_attained(JobOrder::kLeastAttained);
  static const DrfOrder drf;
  switch (order) {
    case JobOrder::kFairShare: return fair_share;
    case JobOrder::kFifo: return fifo;
    case JobOrder::kMultifactor: return multifactor;
    case JobOrder::kLeastAttained: return least_attained;
    case JobOrder::kDrf: return drf;
  }
  return fair_share;
}

}  // namespace tessera
