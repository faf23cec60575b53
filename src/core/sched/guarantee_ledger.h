// GuaranteeLedger: every guarantee question one scheduling cycle asks, over the queue tree, the
// cycle's fair share, the healthy capacity per class and the pending demand that could use the free
// GPUs: what a start is owed, whether it would borrow, whether it would take what other queues are
// owed, which running jobs reclaim may take, and whether a queue keeps its guarantee once a job is
// gone. Independent of the cycle: it reads only what it was given, and jobs come in as GuaranteeJob
// facts, not as the cycle's entries; the same books give the same answers.
//
// Terms (quantities are milli-GPU per class, ClassAmounts; "any" counts every GPU):
//  - a queue borrows in class c when it, or an ancestor, is allocated more than its guarantee in c;
//  - a leaf is owed, in c, what it lacks of min(guarantee, demand), but no more than its usable
//    pending demand (its waiting jobs that fit the free GPUs as the cycle began, add_usable): free
//    GPUs held for a gang that cannot fit in them would stay idle;
//  - a start is owed its room (owed_classes) when its leaf stays within its guarantee after it, in a
//    guaranteed class the job could be placed in. Without reclaim (the constructor's `reclaim`)
//    nothing is ever owed.
//
// Trials: the questions that take a FairShare (`fs`) are asked against the ledger's own
// (fair_share()) or a trial copy of it (allocations as if some victims were gone). Answers under the
// own one use the owed book; under a copy they are summed afresh, so a copy may be changed at will.
//
// Ownership: the ledger refers to the QueueTree (which must outlive it) and owns the fair share, the
// capacity, the usable pending demand and its caches. Thread-safety: none; even const questions fill
// caches (one cycle, one thread). Invariants: the owed book holds, per class asked so far, the sum
// of leaf_owed over every leaf under fair_share() and the leaves owed; add() is the only way the own fair share
// changes, and it keeps the cache current; add_usable() comes before any question. Not copied (a
// trial copies the fair share, not the ledger). What a GuaranteeJob refers to must outlive it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "core/ids.h"
#include "core/sched/queues.h"

namespace tessera::sched {

inline constexpr const char* kAnyClass = "any";

// A milli-GPU amount as reasons write it: "1 GPU", "8 GPUs", "2.5 GPUs".
inline std::string gpus_text(int64_t milli) {
  std::string s = std::to_string(milli / 1000);
  if (milli % 1000) {
    std::string frac = std::to_string(1000 + milli % 1000).substr(1);
    while (frac.back() == '0') frac.pop_back();
    s += "." + frac;
  }
  return s + (milli == 1000 ? " GPU" : " GPUs");
}

// What the ledger reads of one job. `held` and `classes` refer to the caller's data (not copied).
struct GuaranteeJob {
  QueueId queue;                        // its leaf queue
  int64_t milli = 0;                    // GPU amount: held (running) or requested (pending)
  const ClassAmounts* held = nullptr;   // running: per class, "any" included, what it holds
  const ClassAmounts* asked = nullptr;  // pending (no `held`): per class, "any" included, what it asks
  // Pending: the accounted classes it could be placed in, sorted (null: none). A pointer, so that
  // making the view reads nothing of the job but what is asked.
  const std::vector<std::string>* classes = nullptr;
  int class_value = 0;                  // its priority class's value
  bool preemptible = false;             // its priority class may be preempted
  // Per class what it holds (running) or asks (pending).
  const ClassAmounts& amounts() const {
    static const ClassAmounts none;
    return held ? *held : asked ? *asked : none;
  }
};

// What a trial adds, per leaf (by id), to the books' pending demand and usable demand: jobs that
// would wait again, or fit, in the next cycle (GuaranteeLedger::takes_owed_with). Sparse.
struct OwedDelta {
  std::map<uint32_t, ClassAmounts> demand;
  std::map<uint32_t, ClassAmounts> usable;
};

class GuaranteeLedger {
 public:
  // `capacity`: milli-GPU per accounted class (and "any") that can be given out: healthy, less
  // what is free on nodes that take no new work (draining, cordoned); `fs`: the cycle's fair share,
  // computed over `tree`; `reclaim`: owners take their guarantee back from borrowers (else nothing
  // is owed).
  GuaranteeLedger(const QueueTree& tree, ClassAmounts capacity, FairShare fs, bool reclaim);
  GuaranteeLedger(GuaranteeLedger&&) = default;
  GuaranteeLedger(const GuaranteeLedger&) = delete;
  GuaranteeLedger& operator=(const GuaranteeLedger&) = delete;

  const QueueTree& tree() const { return tree_; }
  const FairShare& fair_share() const { return fs_; }
  const ClassAmounts& capacity() const { return capacity_; }
  bool reclaim() const { return reclaim_; }

  // ---- Books ----
  // Leaf is allocated less than min(guarantee, demand) in some class: only such a leaf can be owed.
  bool short_of_guarantee(QueueId leaf) const;
  // A pending job of j.queue could start on the free GPUs now: its amounts, and j.milli in each class
  // guaranteed on its path that it could be placed in beyond them, count as its leaf's usable demand.
  // Called before any question (the owed-sum cache is not updated).
  void add_usable(const GuaranteeJob& j);
  // Records a start (+1) or a release (-1) of `delta` on leaf in the own fair share; keeps the
  // owed-sum cache current.
  void add(QueueId leaf, const ClassAmounts& delta, int sign);

  // ---- Questions about a start ----
  // The guaranteed classes of j's leaf that j could be placed in (held or asked, or any of
  // j.classes) and within which the leaf stays after adding j.milli, in class order; empty when
  // nothing is owed (always, without reclaim). A request allowing models of several classes is owed
  // by each of their guarantees.
  std::vector<std::string> owed_classes(const GuaranteeJob& j) const;
  // Starting j is owed its room: owed_classes(j) is not empty.
  bool owed(const GuaranteeJob& j) const { return !owed_classes(j).empty(); }
  // Adding x of class c to leaf would take it or an ancestor past its guarantee in c under fs.
  bool would_borrow(const FairShare& fs, QueueId leaf, const std::string& c, int64_t x) const;
  // Starting j would make its queue (or an ancestor) borrow in a class of its amounts.
  bool borrows_after(const GuaranteeJob& j) const;
  // What leaves other than `leaf` are owed in class c under fs (with `delta` added, if given).
  int64_t owed_to_others(const FairShare& fs, QueueId leaf, const std::string& c, const OwedDelta* delta = nullptr) const;
  // What leaf is owed in class c under fs (0 for an inner queue or one without a guarantee in c).
  int64_t leaf_owed(const FairShare& fs, QueueId leaf, const std::string& c) const;
  // j's start would be borrowed while other leaves are owed room in one of its classes (reclaim
  // on, j asks for GPUs): inside its tier it is tried after the jobs that start within their
  // guarantee, so those are placed (and what their victims free is held for them) before a borrower
  // takes room they need. Without it, a queue one GPU short of its guarantee restarted an 8-GPU job
  // on the node an owner's gang waited for, the owner reclaimed it back, and the two alternated
  // every cycle.
  bool defers_to_owed(const GuaranteeJob& j) const;
  // A start on leaf whose GPUs come to `got` may, in each class where it would borrow under fs, use
  // only the free GPUs of that class that no other leaf is owed (a queue below its guarantee with
  // jobs waiting would reclaim them at once: a reclaim loop). A class is not judged when the start
  // stays within its leaf's own guarantee in another class of `got` (reclaim could not take that job,
  // so no loop follows; refusing it left two owed queues, one guaranteed "any" and one a model
  // class, each waiting for the other on idle GPUs). Empty when allowed (always, without reclaim),
  // else the reason, naming the first leaf owed there.
  std::string takes_owed(const FairShare& fs, QueueId leaf, const ClassAmounts& got) const;
  // takes_owed() under a trial copy `fs`, with `delta` added to the leaves' demand and usable
  // demand. The books are unchanged.
  std::string takes_owed_with(const FairShare& fs, QueueId leaf, const ClassAmounts& got, const OwedDelta& delta) const;
  // Counts pending j in `delta` as usable demand of its leaf, as add_usable() counts it in the books.
  void add_usable(OwedDelta& delta, const GuaranteeJob& j) const;

  // ---- Questions about a running job ----
  // Reclaim for `claimant` may take running v: v's class is preemptible or not above the claimant's,
  // v's queue borrows in one of `classes` (the claimant's owed classes) that v holds, and it keeps
  // its guarantees once v is gone (reclaim_keeps_guarantee). The caller excludes the claimant's own
  // queue.
  bool reclaimable(const GuaranteeJob& v, const GuaranteeJob& claimant, std::span<const std::string> classes) const;
  // Leaf is allocated within its guarantee in each of `classes` (only an ancestor borrows).
  bool inside_own_guarantee(QueueId leaf, std::span<const std::string> classes) const;
  // v's queue borrows in every class v holds.
  bool borrows(const GuaranteeJob& v) const;
  // Queue q (or an ancestor) borrows under fs in one of `classes`.
  bool still_borrows(const FairShare& fs, QueueId q, std::span<const std::string> classes) const;
  // Under fs, v's queue and each of its ancestors stay at or above their guarantee in every class v
  // holds once v is gone.
  bool keeps_guarantee(const FairShare& fs, const GuaranteeJob& v) const;
  // Reclaim in `classes` never takes a queue below its guarantee in another class: under fs, once v
  // is gone, v's queue and its ancestors below the one it shares with `claimant` (a shared ancestor
  // gets the GPUs back through the claimant) stay at or above their guarantee in every class v holds
  // that is not one of `classes` (in those, rule (b) applies: the queue still borrows before v goes).
  // Guarantees in several classes may overlap (one in "any", another in a model class on the same
  // GPUs, more than the cluster has): each queue then keeps what it holds within its own, instead of
  // two queues reclaiming the same GPUs from each other in turn.
  bool reclaim_keeps_guarantee(const FairShare& fs, const GuaranteeJob& v, QueueId claimant,
                               std::span<const std::string> classes) const;
  // Judged with the victims chosen before gone (`fs`): v's queue still borrows in one of `classes`
  // and keeps its guarantees once v is gone.
  bool may_reclaim_from(const FairShare& fs, const GuaranteeJob& v, QueueId claimant,
                        std::span<const std::string> classes) const {
    return still_borrows(fs, v.queue, classes) && reclaim_keeps_guarantee(fs, v, claimant, classes);
  }

 private:
  // Under fs, once v is gone, v's queue and its ancestors up to (not including) the first queue in
  // `stop` stay at or above their guarantee in every class v holds other than those in `skip`.
  bool keeps_guarantee_below(const FairShare& fs, const GuaranteeJob& v, const std::vector<QueueId>& stop,
                             std::span<const std::string> skip) const;
  int64_t leaf_owed(const FairShare& fs, const Queue& q, const std::string& c, const OwedDelta* delta = nullptr) const;
  std::string takes_owed(const FairShare& fs, QueueId leaf, const ClassAmounts& got, const OwedDelta* delta) const;
  // Adds j's usable amounts to u (add_usable's rule).
  void count_usable(ClassAmounts& u, const GuaranteeJob& j) const;
  // Classes other than "any" guaranteed (> 0) on q's path to the root, sorted (cached per queue).
  const std::vector<std::string>& path_guaranteed(QueueId q) const;

  const QueueTree& tree_;
  FairShare fs_;
  ClassAmounts capacity_;
  bool reclaim_;
  std::vector<ClassAmounts> usable_;  // per queue (leaves only): pending demand that fits the free GPUs
  struct OwedBook {
    int64_t sum = 0;            // sum of leaf_owed under fs_
    std::set<uint32_t> leaves;  // the leaves owed something (leaf_owed > 0), by id
  };
  // The book of class c under fs_, made on first use and kept by add().
  const OwedBook& owed_book(const std::string& c) const;
  mutable std::map<std::string, OwedBook> owed_;  // per class asked
  mutable std::vector<std::optional<std::vector<std::string>>> path_guaranteed_;
};

}  // namespace tessera::sched
