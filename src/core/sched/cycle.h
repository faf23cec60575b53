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
//      their guarantee (with jobs waiting) are owed there (GuaranteeLedger::takes_owed), so a
//      higher-tier borrower cannot retake what was just reclaimed.
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
// Internal to src/core/sched: the cycle's phases as free functions over its CycleState
// (cycle_state.h), one file per phase: cycle.cc (the sequence, validate, books, why jobs wait),
// order.cc (around job_order.h's policies), place.cc, backfill.cc, guarantees.cc, preempt.cc, victims.cc,
// defragment.cc, cycle_mig.cc. Every guarantee question goes to the cycle's GuaranteeLedger
// (guarantee_ledger.h), which owns its fair share. Phases return what they found as values. Not
// thread-safe (one cycle, one thread).
#pragma once

#include "core/sched/cycle_state.h"

#include <cassert>
#include <charconv>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

namespace tessera::sched {

// One cycle (cycle.cc): collect_entries, compute_books, evict_expired, order_and_place, plan_mig,
// explain_waits; the decisions.
Decisions run_cycle(CycleState& cs);

// ---- Facts about requests, entries and placements (inline; caches in cs) ----
inline std::string model_class_of(const CycleState& cs, const std::string& model) {
  auto m = cs.work.catalog().find(model);
  return cs.cfg.model_class(m.ok() ? m.value()->name : model);
}
// The GPU models t may run on: those it names, or every model of the catalog.
inline std::vector<std::string> allowed_models(const CycleState& cs, const TaskRequest& t) {
  return t.gpu_models.empty() ? cs.work.catalog().names() : t.gpu_models;
}
inline const GpuModel* first_model(const CycleState& cs, const TaskRequest& t) {
  if (t.gpu_models.empty()) return nullptr;
  auto m = cs.work.catalog().find(t.gpu_models.front());
  return m.ok() ? m.value() : nullptr;
}
// The one class a request counts in besides "any": its models' class when they all share one,
// else "any" alone (a request that allows models of several classes may be placed in any of them).
inline std::string request_class(const CycleState& cs, const TaskRequest& t) {
  if (t.gpu_models.empty()) return kAnyClass;
  const std::string c = model_class_of(cs, t.gpu_models.front());
  for (const std::string& m : t.gpu_models)
    if (model_class_of(cs, m) != c) return kAnyClass;
  return c;
}
// The accounted classes (not "any") a request could be placed in, sorted: those of its models, or
// every accounted class for a request that names none, among the classes the cluster has GPUs of. Guarantees owed in any of them are owed to
// it, and its demand counts in each (fair share per class).
inline std::vector<std::string> request_classes(const CycleState& cs, const TaskRequest& t) {
  std::set<std::string> out;  // only classes the cluster has GPUs of: no other could hold it
  if (t.gpu_models.empty()) {
    out = cs.present_classes;
  } else {
    for (const std::string& m : t.gpu_models)
      if (std::string c = model_class_of(cs, m); cs.present_classes.count(c)) out.insert(c);
  }
  return {out.begin(), out.end()};
}
int64_t request_milli(const CycleState& cs, const Gang& g);
inline const ClassAmounts& amounts(const Entry& e) {
  static const ClassAmounts none;
  return e.running ? e.held : e.asked ? *e.asked : none;
}
// What the guarantee ledger reads of e (refers to e's held amounts and classes).
inline GuaranteeJob facts(const Entry& e) {
  return {e.queue, e.milli, e.running ? &e.held : nullptr, e.running ? nullptr : &amounts(e), e.classes, e.pc->value,
          e.pc->preemptible};
}
inline const FairShare& fs(const CycleState& cs) { return cs.ledger->fair_share(); }
// Pending e, asking for GPUs (e.milli > 0), would start within its queue's guarantee; the cheap
// per-queue test first, as this is asked of many jobs (only a leaf short of its guarantee is owed).
inline bool owed_now(const CycleState& cs, const Entry& e) {
  return cs.ledger->short_of_guarantee(e.queue) && cs.ledger->owed(facts(e));
}
// The quota class a GPU model is accounted in beside "any", or null (cached per model).
inline const std::string* accounted_class(const CycleState& cs, const GpuModel* model) {
  if (!model) return nullptr;
  for (const auto& [m, cls] : cs.class_cache)
    if (m == model) return cls.empty() ? nullptr : &cls;
  std::string cls = cs.cfg.model_class(model->name);
  if (cls == kAnyClass || !cs.quota_classes.count(cls)) cls.clear();
  cs.class_cache.emplace_back(model, std::move(cls));
  return cs.class_cache.back().second.empty() ? nullptr : &cs.class_cache.back().second;
}
// What a placement holds per class: each GPU counts in its model's class, and all in "any".
inline ClassAmounts placement_amounts(const CycleState& cs, const ClusterState& c, const std::vector<TaskPlacement>& ps) {
  ClassAmounts a;
  for (const TaskPlacement& p : ps)
    for (const GpuGrant& g : p.gpus) {
      const int64_t m = g.milli_held();
      a[kAnyClass] += m;
      if (const std::string* cls = accounted_class(cs, c.node(p.node).gpus[g.gpu].model)) a[*cls] += m;
    }
  return a;
}
Gang gang_of(const CycleState& cs, const Entry& e);
// gang_of into `g`, reusing its storage (collect_entries: one gang for every pending job).
void gang_into(const CycleState& cs, const Entry& e, Gang& g);
// Appends n in decimal (shape and memo keys are built per job that is tried: no temporaries).
inline void append_int(std::string& k, int64_t n) {
  char buf[24];
  k.append(buf, std::to_chars(buf, buf + sizeof buf, n).ptr);
}
// The key of g's shape, written into `k` (cleared first; its storage is reused).
inline void shape_key_into(const Gang& g, std::string& k) {
  const TaskRequest& t = g.task;
  k.clear();
  for (int64_t n : {int64_t(g.tasks), int64_t(g.required_tasks()), t.cpu.v, t.memory.v, int64_t(t.gpu_count),
                    int64_t(t.milli_per_gpu.v), int64_t(t.gpu_memory.v)}) {
    append_int(k, n);
    k += '/';
  }
  k += t.mig_profile;
  k += '/';
  append_int(k, int(g.topology.mode));
  k += g.topology.level;
  for (const std::string& m : t.gpu_models) (k += '/') += m;
  for (const TaskSize& z : g.sizes) {
    k += "/t";
    append_int(k, z.gpu_count);
    k += ',';
    append_int(k, z.cpu.v);
    k += ',';
    append_int(k, z.memory.v);
  }
  k += "/p";
  append_int(k, int(t.pool_kinds));
  if (t.prefer_spot) k += 's';
  if (t.avoid_spot) k += 'a';
  if (t.mix_models) k += 'x';
  for (PoolId p : t.pools) {
    k += "/d";
    append_int(k, p.value);
  }
}
inline std::string shape_key(const Gang& g) {
  std::string k;
  k.reserve(96);
  shape_key_into(g, k);
  return k;
}
// How long a job started now holds its GPUs: its assumed runtime, plus its restart cost when it
// resumes after a preemption (the GPUs are held while it restores its checkpoint).
inline Duration occupied_runtime(const CycleState& cs, const Job& j) {
  const Duration restart = j.preemptions > 0 ? std::max<Duration>(0, j.checkpoint.restart_cost) : 0;
  return assumed_runtime(j, cs.snap.runtimes, cs.cfg.default_runtime) + restart;
}

// ---- cycle.cc ----
void collect_entries(CycleState& cs);
void compute_books(CycleState& cs);
// The accounted classes a request could be placed in (request_classes), cached by the models it names.
const std::vector<std::string>& classes_for(CycleState& cs, const TaskRequest& t);
// amounts_of(cls, milli), built once per (class, amount) (CycleState::asked).
const ClassAmounts& asked_for(CycleState& cs, const std::string& cls, int64_t milli);
// What waiting job j (its request of class `cls`) adds to its queue's demand (compute_books).
void add_waiting_demand(ClassAmounts& demand, const GuaranteeJob& j, const std::string& cls);
void evict_expired(CycleState& cs);
void explain_waits(CycleState& cs);
bool validate(CycleState& cs, Entry& e);

// ---- guarantees.cc: fixed facts and free room ----
// n could hold task t as far as fixed facts go: schedulable, big enough, a pool and GPU model t allows.
bool could_host(const CycleState& cs, const Node& n, const TaskRequest& t);
// A pending job could start on the free GPUs now: its leaf's usable demand (GuaranteeLedger::add_usable).
// `room`: as fits_free_scan's room_out, as the cycle began (memoized by shape; -1 for MIG).
bool fits_free_now(const CycleState& cs, const Entry& e, int64_t* room = nullptr);
// Of the classes pending e could be placed in (Entry::classes), those whose free GPUs hold one of its
// tasks as the cycle began (memoized by shape): only there is it usable demand of its leaf (a gang
// may span classes). A request that names no model and fits the free H100s could not use the free
// A100s of a node too small for it; counted there, its queue was owed A100s that no start of it
// could take, and other queues' jobs were refused them. MIG requests and gangs whose tasks differ
// keep every class (the planner makes slices on idle GPUs; the smaller tasks may fit elsewhere).
const std::vector<std::string>* usable_classes(CycleState& cs, const Entry& e);
// The scan behind it, on the working copy as it is now. room_out: the room counted (tasks; milli-GPU
// for tasks that differ), complete when the shape does not fit; -1 for a gang bound to one domain
// (counted per domain). only: the nodes looked at (null: every node).
bool fits_free_scan(const CycleState& cs, const Gang& g, int64_t* room_out = nullptr,
                    const std::vector<NodeId>* only = nullptr);

// ---- order.cc ----
// Tries the pending jobs in the order of cfg.order's JobOrderPolicy (core/sched/job_order.h), with
// the held reservation, deferral to owed queues and strict order applied around it.
void order_and_place(CycleState& cs);
OrderJob order_job(const CycleState& cs, size_t i);         // entry i's ordering facts
OrderInput order_input(const CycleState& cs, size_t users);  // all but the jobs; `users`: dense user indices in use
bool place_in_order(CycleState& cs, size_t i);  // order += i and try it; false once strict order blocks
// The pending entry holding the previous cycle's reservation (Snapshot::reservation), if any.
std::optional<size_t> reservation_holder(const CycleState& cs);
// Whether entry i was ahead of the held reservation's holder when it was made (it keeps its place).
bool was_ahead_of_holder(const CycleState& cs, size_t i);
// The reservation this cycle holds (cs.res), with the jobs ordered before its holder still pending.
HeldReservation held_reservation(const CycleState& cs);

// ---- place.cc ----
void try_job(CycleState& cs, Entry& e);
// Jobs moved out of an owed gang's way restart on their held GPUs first (Job::move_to).
void start_moved(CycleState& cs);
// The name of a job leaving (checkpointing) that holds some of `tasks`' GPUs, when every GPU of
// `tasks` is idle or held by such a job; "" otherwise.
std::string destination_leaver(const CycleState& cs, const std::vector<TaskPlacement>& tasks);
// e starts on `tasks`, already applied to the working copy: the decision and the cycle's books.
void commit_start(CycleState& cs, Entry& e, std::vector<TaskPlacement> tasks);
std::string pool_note(const CycleState& cs, const Gang& gang);
// Places e now. With a reservation active, a job that would still run when it starts must keep off
// the reserved nodes; if it can only fit on them it waits (PlaceNow::only_on_reserved).
PlaceNow place_now(CycleState& cs, Entry& e, const Gang& gang);
// A borrower's start may not take the room an owed job of a lower priority class starts on: that
// job would reclaim it straight back (e is preemptible), and the borrower's next job of its higher
// class would take the room again before the owner is tried, without end. The owed pending jobs of
// other queues and lower classes that fit now (the first kOwedBelowChecked of them, lowest class
// first, then by id), which e's start
// must leave room for; empty unless e is preemptible and its start would borrow.
inline constexpr size_t kOwedBelowChecked = 4;
std::vector<size_t> owed_below_that_fit(CycleState& cs, const Entry& e);
// Entry i (pending) fits the working copy now: no node of the last placement the engine found for
// it changed since (Node::generation), or the engine places it anew.
bool owed_fits(CycleState& cs, size_t i);
// Entry i (pending, owed) placed on the working copy as owed_fits asks it, without its cache: off
// the reserved nodes when its own start keeps off them, and with unclaimed leaving jobs gone when
// it does not fit otherwise.
PlacementResult place_owed(CycleState& cs, size_t i);
// With `fit` (e's start after its victims go) applied on the working copy, the next cycle would
// refuse it: it takes the room of an owed job of a lower class (owed_below_that_fit) that fits
// without it. The working copy is as it was on return.
bool takes_owed_room(CycleState& cs, const Entry& e, const std::vector<TaskPlacement>& fit);
// With `tasks` (a start) applied: the first of `owed` (owed_below_that_fit) that fits without it and
// not with it, whose room the start takes, and then `tasks` are undone (`before`: the view's MIG
// layouts that apply_all(tasks) changed, taken before it); nullopt (and `tasks` still applied) when
// the start takes no owed job's room.
std::optional<size_t> owed_room_taken(CycleState& cs, const std::vector<size_t>& owed, const std::vector<TaskPlacement>& tasks,
                                      const ClusterState::MigLayouts& before);
// e may not start on the reserved nodes: a reservation is active, e would still run at its start,
// and e is not a guarantee's owner taking precedence over a borrower's reservation.
bool keeps_off_reservation(const CycleState& cs, const Entry& e);
// try_preempt for e as place_now would start it: off the reserved nodes when e must keep off them
// (else victims there would free room it may not use, and they would restart in it: preempted for
// nobody).
VictimSearch try_preempt_now(CycleState& cs, Entry& e, const Gang& gang);

// ---- backfill.cc ----
inline bool ends_before_reservation(const CycleState& cs, const Entry& e) {
  return cs.now + occupied_runtime(cs, *e.job) <= cs.res.start;
}
inline void block_reserved(CycleState& cs, bool on) {
  for (uint32_t n : cs.res.nodes) {
    Status st = cs.work.set_schedulable(NodeId(n), on ? false : cs.snap.cluster->node(NodeId(n)).schedulable);
    assert(st.ok());
    (void)st;
  }
}
// The reserved nodes unschedulable on the working copy while it lives (when `on` and a reservation
// is active); restored as in the snapshot when it ends.
class ReservedBlocked {
 public:
  // Nested guards block once: the outermost unblocks.
  ReservedBlocked(CycleState& cs, bool on) : cs_(cs), on_(on && cs.res.active) {
    if (on_ && cs_.reserved_blocks++ == 0) block_reserved(cs_, true);
  }
  ~ReservedBlocked() {
    if (on_ && --cs_.reserved_blocks == 0) block_reserved(cs_, false);
  }
  ReservedBlocked(const ReservedBlocked&) = delete;
  ReservedBlocked& operator=(const ReservedBlocked&) = delete;

 private:
  CycleState& cs_;
  bool on_;
};
// e found no room and no victims: it is demand (no_room) and, when backfill is on and nobody holds
// the reservation yet, it reserves the earliest time it fits.
void no_room(CycleState& cs, Entry& e, const Gang& gang);
// When e could start at the earliest (ends of running jobs) and on which nodes; nullopt when it
// fits nowhere even with every running job gone, or the GPUs it would get exceed its queue's limits.
std::optional<Reservation> find_reservation(CycleState& cs, Entry& e, const Gang& gang);
std::string reservation_text(const CycleState& cs);

// ---- preempt.cc ----
// off_reservation: the reserved nodes are blocked on the working copy for this search (an owner
// takes its guarantee back elsewhere rather than wait for a borrower's reservation). It blocks them
// itself, and only once the search looks at the cluster (not for an answer from its memos); the
// caller must not have blocked them (ReservedBlocked does not nest).
VictimSearch try_preempt(CycleState& cs, Entry& e, const Gang& gang, bool off_reservation = false);
VictimSearch find_victims(CycleState& cs, Entry& e, const Gang& gang, int budget, bool off_reservation);
// claims_active: the working copy has this cycle's victims released and the waiting preemptors'
// claims applied (find_victims sets that up and undoes it); `freed`: the nodes of those victims.
VictimSearch find_victims_inner(CycleState& cs, Entry& e, const Gang& gang, int budget, bool claims_active,
                                std::vector<NodeId> freed = {});

// ---- next_cycle.cc ----
// With victims released on the working copy and `after` their fair share: does e's gang still fit
// (its limits and owed guarantees too) once the jobs `first` have been placed again before it?
bool fits_after(CycleState& cs, const FairShare& after, const Entry& e, const Gang& gang, std::span<const size_t> first);
// Running v's facts as they will be once it is preempted and waits again: its request and the
// classes it could be placed in (the cycle's caches hold what they point to).
GuaranteeJob as_pending(CycleState& cs, const Entry& v);
// With `victims` released on the working copy and `after` their fair share: would `fit` take what a
// leaf is owed in the next cycle, once the victims wait again (their requests as demand and usable
// demand: each fits the room it leaves) and the pending jobs that fit in the room they free
// (CycleState::owed_unfit) count as usable demand too? `released`: the nodes whose room grew since
// the cycle began (null: unknown).
bool takes_owed_once_freed(CycleState& cs, const FairShare& after, const Entry& e, const std::vector<TaskPlacement>& fit,
                           std::span<const size_t> victims, const std::vector<NodeId>* released);

// ---- victims.cc ----
// A running job find_victims_inner may take, and why.
struct VictimCandidate {
  size_t idx;
  int64_t cost;  // lost work (lost_work_cost); -1 for a job already leaving
  bool by_priority;
  bool leaving = false;  // already asked to checkpoint and exit (a victim of an earlier cycle)
  // Reclaim only: its own leaf queue is within its guarantee (an ancestor borrows): taken last, as
  // the borrowing is its sibling queues' doing.
  bool inside_own = false;
  bool by_reclaim = false;
  const RunningFacts* fact = nullptr;  // its packed facts (outside the reference run)
};
// Hands `cands` to `take` in the order they are tried for `gang`, until it answers false: victim
// order (a total order, ending in the job id; victims.cc); for a shape whose room must be on one node
// or in one required topology domain, group by group (the cheapest group first, groups that even
// emptied leave too little room last), victim order inside each group. What no search reaches is not
// ordered.
void visit_victims(const CycleState& cs, const Gang& gang, std::vector<VictimCandidate> cands,
                   const std::function<bool(const VictimCandidate&)>& take);
// Preemption trial: where the engine places the gang on the working copy now, on GPUs the job's
// queue limits and the owed guarantees allow under `fs`; nullopt if nowhere.
// `within` (optional): the only nodes that can hold it (PlacementEngine::place_within).
std::optional<std::vector<TaskPlacement>> fits_under(CycleState& cs, const FairShare& fs, const Entry& e, const Gang& gang,
                                                     const std::vector<NodeId>* within = nullptr);
// fits_under, also saying whether the engine found a place at all (`placed`; then `fit` is empty only
// if the limits or owed guarantees refused it).
struct TrialFit {
  std::optional<std::vector<TaskPlacement>> fit;
  bool placed = false;
};
TrialFit trial_fit(CycleState& cs, const FairShare& fs, const Entry& e, const Gang& gang, const std::vector<NodeId>* within);
// Holds the GPUs of a waiting preemptor's fit that are idle now; returns the rest of the fit (the
// GPUs of jobs leaving), its claim.
std::vector<TaskPlacement> hold_free_part(CycleState& cs, const Entry& e, const std::vector<TaskPlacement>& fit);
// After try_preempt: the job waits only for jobs already leaving (no new victim needed).
inline const char* leaving_note(const VictimSearch& s) {
  return s.only_leaving() ? "; jobs preempted for it are checkpointing and leaving: it starts when they have" : "";
}
// Priority preemption may take running v for e (e's class may preempt is checked by the caller):
// v is preemptible, of a lower class, outside min_runtime and protection, and in e's queue or
// borrowing in every class it holds.
bool priority_victim(const CycleState& cs, const Entry& v, const Entry& e);
// Work v loses if preempted now (since its last start or checkpoint, plus save and restart), in
// milli-GPU-seconds: victims are chosen cheapest first.
int64_t lost_work_cost(const CycleState& cs, const Entry& v);
// Marks v a victim for e and emits the decision: checkpoint first when v checkpoints, with v's
// grace (a reclaim's capped by reclaim_grace).
void preempt(CycleState& cs, Entry& v, const Entry& e, bool by_priority, std::string reason);
// An owner's MIG request with no room: reclaims one whole GPU from a borrower, which the MIG
// planner turns into slices once it is idle (docs/scheduling.md).
// by_priority_too: a lower class's whole GPU may be taken by priority as well (no GPU is in MIG
// mode for the request: freeing an instance cannot serve it).
bool reclaim_gpu_for_mig(CycleState& cs, Entry& e, const Gang& gang, bool by_priority_too = false);

// ---- defragment.cc ----
// find_moves plans on the working copy as find_victims_inner left it; commit_moves, on the true
// state, emits the decisions and holds the movers' new GPUs that are free for the rest of the cycle.
std::optional<MovePlan> find_moves(CycleState& cs, Entry& e, const Gang& gang, bool off_reservation);
void commit_moves(CycleState& cs, Entry& e, MovePlan& plan);
// Holds, GPU by GPU, the whole GPUs of `pl` that are idle on the working copy now.
void hold_idle(CycleState& cs, const std::vector<TaskPlacement>& pl);
// A job that may be moved for e: checkpoints, runs whole GPUs on one node, its class is not above
// e's, and it was not preempted or moved within preemption_protection.
bool movable(const CycleState& cs, const Entry& v, const Entry& e);
// Where a moved job may go: its own gang, on its current GPU model, kept on one node.
Gang mover_gang(const CycleState& cs, const Entry& v);
// Gathering spread gangs (SchedulerConfig::gather_spread), after the order and backfill: a running
// gang that prefers one node but runs over several moves onto one node that has room for all of it.
void gather_spread(CycleState& cs);
// j checkpoints, prefers one node (topology preferred at node level) and holds GPUs on several: a
// candidate for gathering (Scheduler::cycle runs a cycle for one even when nothing waits).
bool runs_spread_wanting_one_node(const Job& j);

// ---- cycle_mig.cc ----
// A MIG request that no GPU in MIG mode serves claims idle whole GPUs that offer its profile: held
// on the working copy so that later (lower-class) whole-GPU jobs do not take them, and released
// for the MIG planner, which repartitions them (plan_mig). False when none could be claimed.
bool claim_gpu_for_mig(CycleState& cs, Entry& e, const Gang& gang);
// Pending MIG request e, owed its room, could have an idle whole GPU of a model of a class it is
// owed in repartitioned for its slices now (place.cc).
bool gpu_for_owed_slices(const CycleState& cs, const Entry& e);
void plan_mig(CycleState& cs);
bool blocked_by_mig_mode(const CycleState& cs, const TaskRequest& t);

}  // namespace tessera::sched
