// Guarantee questions: what a queue is owed, whether a start would borrow or take what others
// are owed, which running jobs reclaim may take.
#include "core/sched/cycle.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace tessera::sched {

// Would e's leaf queue stay within its guarantee after starting e? `classes`: the guaranteed classes.
// A request is owed by every guaranteed class it could be placed in (all, if it names no model; those
// of all its models, not only the first listed).
bool Cycle::below_guarantee_after(const Entry& e, std::vector<std::string>& classes) const {
  const Queue& q = tree_.queue(e.job->queue);
  const ClassAmounts need = amounts(e);
  for (auto& [c, g] : q.guaranteed) {
    if (g <= 0) continue;
    const bool usable = need.count(c) || (c != kAnyClass && could_use(e, c));
    if (usable && fs_->allocated(q.id, c) + e.milli <= g) classes.push_back(c);
  }
  return !classes.empty();
}

bool Cycle::reclaimable(const Entry& v, const Entry& e, const std::vector<std::string>& classes) const {
  if (!(v.pc->preemptible || v.pc->value <= e.pc->value)) return false;
  const ClassAmounts va = amounts(v);
  for (const std::string& c : classes)
    if (va.count(c) && fs_->borrowing(v.job->queue, c)) return true;
  return false;
}

bool Cycle::inside_own_guarantee(const Entry& v, const std::vector<std::string>& classes) const {
  const Queue& leaf = tree_.queue(v.job->queue);
  for (const std::string& c : classes)
    if (fs_->allocated(leaf.id, c) > get_or(leaf.guaranteed, c)) return false;
  return true;
}

bool Cycle::could_host(const Node& n, const TaskRequest& t) const {
  if (!n.schedulable || n.gpus.empty() || n.cpu_capacity < t.cpu || n.memory_capacity < t.memory) return false;
  if (!(t.pool_kinds & pool_kind_bit(n.pool_kind))) return false;
  const GpuModel* m = n.gpu_model();
  return m && (t.gpu_models.empty() || std::any_of(t.gpu_models.begin(), t.gpu_models.end(), [&](const std::string& x) {
                 auto f = work_.catalog().find(x);
                 return f.ok() && f.value() == m;
               }));
}

// Could the pending job start on the free GPUs, with those of jobs already leaving (ignoring other jobs)? MIG requests count
// as able (the MIG planner turns idle GPUs into the slices they need); whole-GPU and shared tasks
// when the nodes they fit on hold enough of them.
bool Cycle::fits_free_now(const Entry& e) const {
  const Gang g = gang_of(e);
  const TaskRequest& t = g.task;
  if (t.mig()) return true;
  // Asked before anything is placed: the answer depends on the shape alone (one scan per shape).
  const std::string key = shape_key(g);
  if (auto it = fits_free_memo_.find(key); it != fits_free_memo_.end()) return it->second;
  return fits_free_memo_[key] = fits_free_scan(g);
}

bool Cycle::fits_free_scan(const Gang& g) const {
  const TaskRequest& t = g.task;
  int64_t tasks = 0;
  for (const Node& n : work_.nodes()) {
    // GPUs of jobs checkpointing on their way out count as free: they are the room a reclaim or a
    // preemption freed, and a job waiting for them is owed them (else a borrower retakes them).
    const int64_t leaving = n.id.value < leaving_milli_.size() ? leaving_milli_[n.id.value] : 0;
    if (check_fit(n, t) != Misfit::kFits) {
      if (leaving == 0 || !t.whole_gpus() || !n.schedulable) continue;
      tasks += (n.free_gpu_milli + leaving) / (int64_t(t.gpu_count) * 1000);
    } else {
      tasks += t.whole_gpus() ? std::max<int64_t>(1, (n.free_gpu_milli + leaving) / (int64_t(t.gpu_count) * 1000)) : 1;
    }
    if (tasks >= g.required_tasks()) return true;
  }
  return false;
}

int64_t Cycle::owed_to_others(const FairShare& fs, const Entry& e, const std::string& c) const {
  // Owed to other leaves (the only leaf on the path is the job's own): kept per class for the
  // cycle's fair share, summed afresh for a trial copy.
  const Queue& own = tree_.queue(e.job->queue);
  int64_t owed = 0;
  if (&fs == &*fs_) {
    auto it = owed_sum_.find(c);
    if (it == owed_sum_.end()) {
      int64_t sum = 0;
      for (const Queue& q : tree_.queues()) sum += leaf_owed(fs, q, c);
      it = owed_sum_.emplace(c, sum).first;
    }
    owed = it->second - leaf_owed(fs, own, c);
  } else {
    for (const Queue& q : tree_.queues())
      if (q.id != own.id) owed += leaf_owed(fs, q, c);
  }
  return owed;
}

bool Cycle::would_borrow(const FairShare& fs, QueueId leaf, const std::string& c, int64_t x) const {
  for (QueueId p : tree_.path_to_root(leaf))
    if (fs.allocated(p, c) + x > get_or(tree_.queue(p).guaranteed, c)) return true;
  return false;
}

bool Cycle::borrows_after(const Entry& e) const {
  for (const auto& [c, x] : amounts(e))
    if (x > 0 && would_borrow(*fs_, e.job->queue, c, x)) return true;
  return false;
}

bool Cycle::defers_to_owed(const Entry& e) const {
  if (!cfg_.reclaim || e.milli <= 0 || !borrows_after(e)) return false;
  for (const auto& [c, x] : amounts(e))
    if (x > 0 && owed_to_others(*fs_, e, c) > 0) return true;
  return false;
}

// A job whose start makes its queue (or an ancestor) borrow in a class may use only the free GPUs of
// that class that no other leaf queue is owed: a queue below its guarantee with jobs waiting there
// would reclaim them at once, and when the borrower's priority tier comes first it would retake them
// in the next cycle, a reclaim loop. Empty when allowed, else the reason.
std::string Cycle::takes_owed(const FairShare& fs, const Entry& e, const ClassAmounts& got) const {
  if (!cfg_.reclaim) return "";  // nobody reclaims: nothing is owed
  const Queue& own = tree_.queue(e.job->queue);
  for (const auto& [c, x] : got) {
    if (x <= 0 || !would_borrow(fs, own.id, c, x)) continue;
    const int64_t owed = owed_to_others(fs, e, c);
    if (owed <= 0) continue;
    int64_t used = 0;
    for (QueueId t : tree_.top_level()) used += fs.allocated(t, c);
    if (get_or(capacity_, c) - used - owed < x) {
      std::string owner;
      for (const Queue& q : tree_.queues())
        if (q.id != own.id && leaf_owed(fs, q, c) > 0) {
          owner = q.name;
          break;
        }
      return "guarantee: would borrow " + gpus_text(x) + " of class " + c + " that queue " + owner +
             " is owed (below its guarantee, with jobs waiting)";
    }
  }
  return "";
}

}  // namespace tessera::sched
