// The scheduling cycle (v1): validate, derive queue loads, order pending jobs (the JobOrderPolicy of
// config.order, core/sched/job_order.h: by default priority tiers, then inside a tier hierarchical fair
// share), start what fits (gangs whole, on a working copy of the cluster), preempt when a job may and
// the victims would make it fit, and say why every other job waits.
//
// Quota classes: every GPU job counts in class "any" (so quotas on "any" cover every model). A running
// job (or one started this cycle) also counts in the classes of the GPUs it holds
// (config.gpu_class[model], default the model's canonical name); a pending job whose models share one
// class counts in it, and one that names no model, or models of several classes, is demand in (and owed
// by) every accounted class it could use. Limits are checked on the request and again on the GPUs chosen. Capacity: "any" = all healthy GPUs,
// each model class = its healthy GPUs. Amounts are milli-GPU (whole GPU 1000, share its milli, MIG its
// compute fraction).
//
// Preemption rules (no loops): a victim is a running job and either
//  (a) priority: it is outside its class's min_runtime and outside config.preemption_protection since
//      its last preemption, its class is preemptible, has a strictly lower value, the preemptor's class
//      can preempt, and the victim is in the preemptor's queue or its queue is above its guarantee in
//      every class the victim holds (guarantees are never broken by another queue's priority);
//  (b) reclaim: the preemptor's leaf queue stays within its guarantee after starting the job, and the
//      victim's queue (another one) is still borrowing in that class once the victims chosen before
//      are gone; a non-preemptible victim of a higher class (production-inference) is never taken so.
//      Reclaim ignores min_runtime and protection: borrowed capacity is lent on those terms. A job
//      whose start would make its queue borrow in a class may not take the GPUs other queues below
//      their guarantee (with jobs waiting) are owed there (takes_owed), so a higher-tier borrower
//      cannot retake what was just reclaimed.
// Victims: the lowest priority class first, then least lost work; none at all unless the engine confirms the preemptor then fits
// (within its queue's limits). Jobs already on their way out (checkpointing, or chosen this cycle,
// less what their own preemptors take) count first, so no more is preempted than needed.
//
// Moves (config.defragment): an owed gang that reclaiming every borrower cannot place may have jobs
// within their guarantee checkpoint and restart at once elsewhere (their new GPUs named in the
// decision and held for them); a move never takes a queue below its share. What a waiting preemptor
// fits on is held for it for the rest of the cycle, and a start that would borrow where others are
// owed is tried after the tier's other jobs.
//
// Backfill (EASY, docs/scheduling.md): the first job that finds no room (and no victims) reserves the
// earliest expected end at which the engine places it; later jobs start only if they end before that
// or keep off its nodes. Dynamic MIG: unmet slice and whole-GPU demand drives plan_mig_layouts.
//
// Internal to src/core/sched: the cycle's working state (Cycle) and per-job facts (Entry), shared by
// the phase files (cycle.cc, order.cc (around job_order.h's policies), place.cc, backfill.cc, guarantees.cc, preempt.cc,
// defragment.cc, cycle_mig.cc). One Cycle per Scheduler::cycle call; not thread-safe.
#pragma once

#include "core/sched/scheduler.h"

#include "core/placement/fit.h"
#include "core/sched/job_order.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace tessera::sched {


inline constexpr const char* kAnyClass = "any";

inline int64_t get_or(const ClassAmounts& m, const std::string& c, int64_t def = 0) {
  auto it = m.find(c);
  return it == m.end() ? def : it->second;
}

inline int64_t placement_milli(const std::vector<TaskPlacement>& ps) {
  int64_t m = 0;
  for (const TaskPlacement& p : ps)
    for (const GpuGrant& g : p.gpus) m += g.milli_held();
  return m;
}

inline std::string gpus_text(int64_t milli) {
  std::string s = std::to_string(milli / 1000);
  if (milli % 1000) {
    std::string frac = std::to_string(1000 + milli % 1000).substr(1);
    while (frac.back() == '0') frac.pop_back();
    s += "." + frac;
  }
  return s + (milli == 1000 ? " GPU" : " GPUs");
}

// Per-job facts for one cycle.
struct Entry {
  const Job* job = nullptr;
  const PriorityClass* pc = nullptr;
  std::string cls;       // quota class of the request ("any" or a model class)
  std::vector<std::string> classes;  // pending: accounted classes it could be placed in (request_classes)
  int64_t milli = 0;     // GPU amount (running: held; pending: requested)
  ClassAmounts held;     // running: per class, from the models of the GPUs it holds (and "any")
  bool running = false;
  bool victim = false;   // chosen as a victim this cycle
  bool started = false;  // started this cycle
  bool claimed = false;  // checkpointing on its way out, and counted as room by a preemptor this cycle
  bool no_room = false;  // pending: the engine found no room now and no preemption helps
  bool short_of_room = false;  // pending for lack of room (now or on any node), not for a rule or order
  int64_t prio = 0;      // order and preemption rank: class value (x16), plus the LAS level bonus
  int las = 0;           // attained-service level: 0 below the first threshold, then 1, 2, ...
  uint32_t user = 0;     // dense user index (OrderJob::user)
  int start_index = -1;  // index in Decisions::start when started this cycle
  Time end = 0;          // running or started: when it is expected to free its resources
  Time estimated_start = -1;  // pending: when known (reservation, MIG layout ready)
  std::vector<TaskPlacement> holding;  // running: its placement as it stands (instances exist)
  std::string reason;    // why it waits (pending)
  WaitCategory wait = WaitCategory::kOther;  // the reason's category
};

// A placement re-applied after a release: MIG instances it created or destroyed exist as they are now.
inline std::vector<TaskPlacement> settled(std::vector<TaskPlacement> ps) {
  for (TaskPlacement& p : ps)
    for (GpuGrant& g : p.gpus) {
      g.mig_create = false;
      g.mig_destroy = 0;
    }
  return ps;
}

inline std::string duration_text(Duration d) {
  if (d < 60) return std::to_string(d) + "s";
  if (d < 3600) return std::to_string(d / 60) + "m";
  const Duration h = d / 3600, m = d % 3600 / 60;
  return std::to_string(h) + "h" + (m ? std::to_string(m) + "m" : "");
}

inline ClassAmounts amounts_of(const std::string& cls, int64_t milli) {
  ClassAmounts a;
  if (milli <= 0) return a;
  a[kAnyClass] = milli;
  if (cls != kAnyClass) a[cls] = milli;
  return a;
}


// One cycle's working state.
class Cycle {
 public:
  Cycle(const SchedulerConfig& cfg, const ScoringPolicy& policy, const Snapshot& snap, Time now)
      : cfg_(cfg), policy_(policy), snap_(snap), tree_(*snap.queues), now_(now), work_(*snap.cluster),
        engine_(policy, options()), trial_(policy, trial_options()) {
    if (cfg_.elastic_capacity || cfg_.topology_wait > 0 || cfg_.gather_spread)
      for (const Node& n : work_.nodes()) max_node_gpus_ = std::max<int64_t>(max_node_gpus_, int64_t(n.gpus.size()));
  }

  Decisions run();

 private:
  EngineOptions options() const {
    EngineOptions o;
    o.seed = cfg_.seed;
    o.max_scored_nodes = cfg_.max_scored_nodes;
    return o;
  }
  EngineOptions trial_options() const {
    EngineOptions o = options();
    o.explain_failures = false;
    return o;
  }
  const GpuModel* first_model(const TaskRequest& t) const {
    if (t.gpu_models.empty()) return nullptr;
    auto m = work_.catalog().find(t.gpu_models.front());
    return m.ok() ? m.value() : nullptr;
  }
  std::string model_class_of(const std::string& model) const {
    auto m = work_.catalog().find(model);
    return cfg_.model_class(m.ok() ? m.value()->name : model);
  }
  // The one class a request counts in besides "any": its models' class when they all share one,
  // else "any" alone (a request that allows models of several classes may be placed in any of them).
  std::string request_class(const TaskRequest& t) const {
    if (t.gpu_models.empty()) return kAnyClass;
    const std::string c = model_class_of(t.gpu_models.front());
    for (const std::string& m : t.gpu_models)
      if (model_class_of(m) != c) return kAnyClass;
    return c;
  }
  // The accounted classes (not "any") a request could be placed in, sorted: those of its models, or
  // every accounted class for a request that names none. Guarantees owed in any of them are owed to
  // it, and its demand counts in each (fair share per class).
  std::vector<std::string> request_classes(const TaskRequest& t) const {
    std::set<std::string> out;
    if (t.gpu_models.empty()) {
      for (const std::string& c : quota_classes_)
        if (c != kAnyClass) out.insert(c);
    } else {
      for (const std::string& m : t.gpu_models)
        if (std::string c = model_class_of(m); c != kAnyClass && quota_classes_.count(c)) out.insert(c);
    }
    return {out.begin(), out.end()};
  }
  // A pending e could be placed in accounted class c.
  static bool could_use(const Entry& e, const std::string& c) {
    return std::binary_search(e.classes.begin(), e.classes.end(), c);
  }
  int64_t request_milli(const Gang& g) const;
  ClassAmounts amounts(const Entry& e) const { return e.running ? e.held : amounts_of(e.cls, e.milli); }
  // What a placement holds per class: each GPU counts in its model's class, and all in "any".
  ClassAmounts placement_amounts(const ClusterState& c, const std::vector<TaskPlacement>& ps) const {
    ClassAmounts a;
    for (const TaskPlacement& p : ps)
      for (const GpuGrant& g : p.gpus) {
        const int64_t m = g.milli_held();
        a[kAnyClass] += m;
        if (const std::string* cls = accounted_class(c.node(p.node).gpus[g.gpu].model)) a[*cls] += m;
      }
    return a;
  }
  // The quota class a GPU model is accounted in beside "any", or null (cached per model).
  const std::string* accounted_class(const GpuModel* model) const {
    if (!model) return nullptr;
    for (const auto& [m, cls] : class_cache_)
      if (m == model) return cls.empty() ? nullptr : &cls;
    std::string cls = cfg_.model_class(model->name);
    if (cls == kAnyClass || !quota_classes_.count(cls)) cls.clear();
    class_cache_.emplace_back(model, std::move(cls));
    return class_cache_.back().second.empty() ? nullptr : &class_cache_.back().second;
  }
  bool validate(Entry& e);
  // Tries the pending jobs in the order of cfg_.order's JobOrderPolicy (core/sched/job_order.h), with
  // the held reservation, deferral to owed queues and strict order applied around it (order.cc).
  void order_and_place();
  OrderJob order_job(size_t i) const;         // entry i's ordering facts
  OrderInput order_input(size_t users) const;  // all but the jobs; `users`: dense user indices in use
  bool place_in_order(size_t i);  // order_ += i and try it; false once strict order blocks
  // The pending entry holding the previous cycle's reservation (Snapshot::reservation), if any.
  std::optional<size_t> reservation_holder() const;
  // Whether entry i was ahead of the held reservation's holder when it was made (it keeps its place).
  bool was_ahead_of_holder(size_t i) const;
  // The reservation this cycle holds (res_), with the jobs ordered before its holder still pending.
  HeldReservation held_reservation() const;
  void try_job(Entry& e);
  bool try_preempt(Entry& e, const Gang& gang);
  // An owner's MIG request with no room: reclaims one whole GPU from a borrower, which the MIG
  // planner turns into slices once it is idle (docs/scheduling.md).
  // by_priority_too: a lower class's whole GPU may be taken by priority as well (no GPU is in MIG
  // mode for the request: freeing an instance cannot serve it).
  bool reclaim_gpu_for_mig(Entry& e, const Gang& gang, bool by_priority_too = false);
  // Priority preemption may take running v for e (e's class may preempt is checked by the caller):
  // v is preemptible, of a lower class, outside min_runtime and protection, and in e's queue or
  // borrowing in every class it holds.
  bool priority_victim(const Entry& v, const Entry& e) const;
  // Under fs, v's queue and each of its ancestors stay at or above their guarantee in every class v
  // holds once v is gone.
  bool keeps_guarantee(const FairShare& fs, const Entry& v) const;
  std::set<std::string> mig_reclaimed_;  // (queue, profile) that reclaimed a GPU this cycle
  // GPUs preempted for MIG slices this cycle: (node, compute milli not yet spoken for).
  std::vector<std::pair<NodeId, int64_t>> mig_freed_;
  // A MIG request that no GPU in MIG mode serves claims idle whole GPUs that offer its profile: held
  // on the working copy so that later (lower-class) whole-GPU jobs do not take them, and released
  // for the MIG planner, which repartitions them (plan_mig). False when none could be claimed.
  bool claim_gpu_for_mig(Entry& e, const Gang& gang);
  std::vector<TaskPlacement> mig_claims_;          // the held GPUs
  std::map<std::string, int> mig_claim_spare_;     // per profile: instances claimed GPUs still offer
  int mig_claim_class_ = std::numeric_limits<int>::min();  // highest class that claimed (plan_mig)
  bool find_victims(Entry& e, const Gang& gang, int budget);
  bool find_victims_inner(Entry& e, const Gang& gang, int budget);
  // Defragmenting moves (SchedulerConfig::defragment) for an owed gang that reclaiming every
  // borrower cannot place: find_moves plans on the working copy as find_victims_inner left it (the
  // gang's fit in last_fit_, which jobs go and where the movers restart); commit_moves, on the true
  // state, emits the decisions and holds the movers' new GPUs that are free for the rest of the cycle.
  struct MovePlan {
    std::vector<size_t> reclaimed;  // borrowers whose GPUs the gang's fit uses
    std::vector<size_t> moved;      // jobs within their guarantee moved out of its way
    std::vector<size_t> leaving;    // jobs already on their way out whose GPUs it uses
    std::vector<std::vector<TaskPlacement>> dest;  // per moved job: where it restarts
  };
  bool find_moves(Entry& e, const Gang& gang, MovePlan& plan);
  bool commit_moves(Entry& e, MovePlan& plan);
  void hold_idle(const std::vector<TaskPlacement>& pl);
  // A job that may be moved for e: checkpoints, runs whole GPUs on one node, its class is not above
  // e's, and it was not preempted or moved within preemption_protection.
  bool movable(const Entry& v, const Entry& e) const;
  // Where a moved job may go: its own gang, on its current GPU model, kept on one node.
  Gang mover_gang(const Entry& v) const;
  int moves_ = 0;  // defragmenting moves this cycle
  // Gathering spread gangs (SchedulerConfig::gather_spread), after the order and backfill.
  void gather_spread();
  void hold_free_part(const Entry& e);
  // After try_preempt: the job waits only for jobs already leaving (no new victim needed).
  std::string leaving_note() const {
    return only_leaving_ ? "; jobs preempted for it are checkpointing and leaving: it starts when they have" : "";
  }
  // For the reasons of jobs that found no room while GPUs are held (built as holds are added: a
  // reason per waiting job must not rescan the entries).
  int64_t held_milli_ = 0;
  std::string held_first_, held_text_;  // name of the first job GPUs are held for; the reason text
  std::vector<std::pair<JobId, std::vector<TaskPlacement>>> held_for_;  // by hold_free_part
  // Jobs moved out of an owed gang's way restart on their held GPUs first (Job::move_to).
  void start_moved();
  // e starts on `tasks`, already applied to the working copy: the decision and the cycle's books.
  void commit_start(Entry& e, std::vector<TaskPlacement> tasks);
  Gang gang_of(const Entry& e) const;
  std::string pool_note(const Gang& gang) const;
  static std::string shape_key(const Gang& g) {
    const TaskRequest& t = g.task;
    std::string k = std::to_string(g.tasks) + "/" + std::to_string(g.required_tasks()) + "/" + std::to_string(t.cpu.v) +
                    "/" + std::to_string(t.memory.v) + "/" + std::to_string(t.gpu_count) + "/" +
                    std::to_string(t.milli_per_gpu.v) + "/" + std::to_string(t.gpu_memory.v) + "/" + t.mig_profile +
                    "/" + std::to_string(int(g.topology.mode)) + g.topology.level;
    for (const std::string& m : t.gpu_models) k += "/" + m;
    k += "/p" + std::to_string(int(t.pool_kinds)) + (t.prefer_spot ? "s" : "") + (t.mix_models ? "x" : "");
    return k;
  }
  bool below_guarantee_after(const Entry& e, std::vector<std::string>& classes) const;
  // Reclaim is on and starting e keeps its queue within its guarantee: e is owed its room.
  bool owed_start(const Entry& e) const {
    std::vector<std::string> classes;
    return cfg_.reclaim && below_guarantee_after(e, classes);
  }
  // Reclaim by e's queue may take running v: v's class yields to e's and v's queue borrows in one of
  // the classes e is owed (the caller excludes e's own queue).
  bool reclaimable(const Entry& v, const Entry& e, const std::vector<std::string>& classes) const;
  // v's own leaf is within its guarantee in those classes (only an ancestor borrows): taken last.
  bool inside_own_guarantee(const Entry& v, const std::vector<std::string>& classes) const;
  // Work v loses if preempted now (since its last start or checkpoint, plus save and restart), in
  // milli-GPU-seconds: victims are chosen cheapest first.
  int64_t lost_work_cost(const Entry& v) const;
  // Marks v a victim for e and emits the decision: checkpoint first when v checkpoints, with v's
  // grace (a reclaim's capped by reclaim_grace).
  void preempt(Entry& v, const Entry& e, bool by_priority, std::string reason);
  // n could hold task t as far as fixed facts go: schedulable, big enough, a pool and GPU model t allows.
  bool could_host(const Node& n, const TaskRequest& t) const;
  std::string takes_owed(const FairShare& fs, const Entry& e, const ClassAmounts& got) const;
  int64_t owed_to_others(const FairShare& fs, const Entry& e, const std::string& c) const;
  // Adding x of class c to leaf would take it or an ancestor past its guarantee in c under fs.
  bool would_borrow(const FairShare& fs, QueueId leaf, const std::string& c, int64_t x) const;
  // Starting e would make its queue (or an ancestor) borrow in a class it asks for.
  bool borrows_after(const Entry& e) const;
  // v's queue still borrows under fs in one of the classes an owner reclaims.
  bool still_borrows(const FairShare& fs, const Entry& v, const std::vector<std::string>& classes) const {
    for (const std::string& c : classes)
      if (fs.borrowing(v.job->queue, c)) return true;
    return false;
  }
  // e's start would be borrowed while other leaves are owed room in its classes: inside its tier it is
  // tried after the jobs that start within their guarantee, so those are placed (and what their
  // victims free is held for them) before a borrower takes room they need. Without it, a queue one
  // GPU short of its guarantee restarted an 8-GPU job on the node an owner's gang waited for, the
  // owner reclaimed it back, and the two alternated every cycle.
  bool defers_to_owed(const Entry& e) const;
  // Preemption trial: the engine places the gang on the working copy now, on GPUs the job's queue
  // limits and the owed guarantees allow under `fs`; the placement is kept in last_fit_.
  bool fits_under(const FairShare& fs, const Entry& e, const Gang& gang);
  // Backfill (EASY): the first job that finds no room gets a reservation; later jobs may start now
  // only if they end before it starts or keep off its nodes.
  struct Reservation {
    bool active = false;
    size_t entry = 0;
    Time start = 0;
    std::set<uint32_t> nodes;  // node ids the reserved placement uses
    bool owed = false;         // the holder would start within its queue's guarantee
  };
  void no_room(Entry& e, const Gang& gang);
  void reserve(Entry& e, const Gang& gang);
  PlacementResult place_now(Entry& e, const Gang& gang);
  // How long a job started now holds its GPUs: its assumed runtime, plus its restart cost when it
  // resumes after a preemption (the GPUs are held while it restores its checkpoint).
  Duration occupied_runtime(const Job& j) const {
    const Duration restart = j.preemptions > 0 ? std::max<Duration>(0, j.checkpoint.restart_cost) : 0;
    return assumed_runtime(j, snap_.runtimes, cfg_.default_runtime) + restart;
  }
  bool ends_before_reservation(const Entry& e) const { return now_ + occupied_runtime(*e.job) <= res_.start; }
  void block_reserved(bool on) {
    for (uint32_t n : res_.nodes) {
      Status st = work_.set_schedulable(NodeId(n), on ? false : snap_.cluster->node(NodeId(n)).schedulable);
      assert(st.ok());
      (void)st;
    }
  }
  std::string reservation_text() const;
  void plan_mig();
  bool blocked_by_mig_mode(const TaskRequest& t) const;
  // A running job's queue is above its guarantee in every class the job holds.
  bool borrows(const Entry& v) const {
    for (auto& [c, m] : v.held)
      if (m > 0 && !fs_->borrowing(v.job->queue, c)) return false;
    return true;
  }

  const SchedulerConfig& cfg_;
  const ScoringPolicy& policy_;
  const Snapshot& snap_;
  const QueueTree& tree_;
  Time now_;
  ClusterState work_;
  bool off_reservation_ = false;  // a victim search with the reserved nodes blocked
  bool partial_ = false;  // the last victim search preempted only part of what the fit needs
  int64_t max_node_gpus_ = 0;  // GPUs of the largest node (elastic_capacity, topology_wait, gather_spread)
  PlacementEngine engine_;
  PlacementEngine trial_;  // for preemption trials: no failure explanations (they cost full scans)
  std::optional<FairShare> fs_;
  std::set<std::string> quota_classes_;  // classes some queue guarantees or limits (plus "any")
  mutable std::deque<std::pair<const GpuModel*, std::string>> class_cache_;  // accounted_class()
  std::vector<Entry> entries_;           // valid jobs, by id
  std::vector<Entry> invalid_;           // pending jobs that cannot be scheduled, by id
  std::map<std::string, int64_t> user_milli_;  // running GPU usage per user (and this cycle's starts)
  // Gang shapes that found no room this cycle (nothing is freed within a cycle, so they still do not
  // fit): the engine's reason, reused instead of searching again.
  struct NoRoom {
    std::string reason;
    WaitCategory wait = WaitCategory::kCapacity;
  };
  std::map<std::string, NoRoom> no_room_;
  std::set<std::string> no_victims_;  // (shape, class, queue) for which preemption found nothing
  std::set<std::string> no_room_off_reservation_;  // shapes that found no room off the reserved nodes
  Reservation res_;
  std::vector<size_t> order_;            // entries_ indices in the cycle's order
  const Entry* blocked_by_ = nullptr;    // strict order: the first job that did not start
  int preemptions_ = 0;
  bool only_leaving_ = false;  // find_victims: jobs already leaving make room, no new victim needed
  ClassAmounts capacity_;      // healthy milli-GPU per accounted class
  // Placements of the jobs that wait for victims (chosen this cycle or still checkpointing): a later
  // preemptor searches with those victims gone and these placed, so it uses what their exits leave
  // over before preempting anyone else. Whole-GPU placements only (claims_ok_ false otherwise).
  std::vector<std::vector<TaskPlacement>> claims_;
  int failed_searches_ = 0;  // victim searches that found nothing this cycle
  bool searched_ = false;    // the last find_victims tried the engine (not just cheap bounds)
  // Model classes guaranteed (> 0) on a queue's path to the root, sorted; filled per queue on first use.
  std::vector<std::optional<std::vector<std::string>>> path_guaranteed_;
  const std::vector<std::string>& path_guaranteed(QueueId q) {
    if (path_guaranteed_.empty()) path_guaranteed_.resize(tree_.size());
    auto& slot = path_guaranteed_[q.value];
    if (!slot) {
      std::set<std::string> classes;
      for (QueueId p : tree_.path_to_root(q))
        for (auto& [c, g] : tree_.queue(p).guaranteed)
          if (g > 0 && c != kAnyClass) classes.insert(c);
      slot.emplace(classes.begin(), classes.end());
    }
    return *slot;
  }
  // Per class: what leaves below their guarantee (with demand) are owed under fs_ (takes_owed),
  // filled on first use and kept current as jobs start.
  mutable std::map<std::string, int64_t> owed_sum_;
  // Owed to a leaf: what it lacks of its guarantee for its demand, but no more than its waiting jobs
  // could use of the free GPUs as the cycle began (usable_pending_): free GPUs held for a gang that
  // cannot fit in them would stay idle (its backfill reservation holds what it needs).
  int64_t leaf_owed(const FairShare& fs, const Queue& q, const std::string& c) const {
    const int64_t g = get_or(q.guaranteed, c);
    if (!q.leaf() || g <= 0) return 0;
    const int64_t gap = std::min(g, fs.demand(q.id, c)) - fs.allocated(q.id, c);
    const int64_t usable = q.id.value < usable_pending_.size() ? get_or(usable_pending_[q.id.value], c) : 0;
    return std::max<int64_t>(0, std::min(gap, usable));
  }
  std::vector<ClassAmounts> usable_pending_;  // per leaf: pending jobs that fit the free GPUs now
  bool fits_free_now(const Entry& e) const;
  bool fits_free_scan(const Gang& g) const;
  mutable std::map<std::string, bool> fits_free_memo_;  // by shape_key
  std::vector<int64_t> leaving_milli_;  // per node: whole GPUs (milli) of jobs checkpointing toward exit
  bool claims_ok_ = true;
  bool claims_active_ = false;           // find_victims: the working copy is in that state now
  std::vector<TaskPlacement> last_fit_;  // find_victims: where the job fit in the last successful trial
  Decisions out_;
};

}  // namespace tessera::sched
