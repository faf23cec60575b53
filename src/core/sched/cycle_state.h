// CycleState: everything one scheduling cycle knows, as data: its inputs (config, snapshot, time),
// its working copy of the cluster and placement engines, its books (entries, what was preempted,
// moved, held and claimed so far, the reservation), its caches (shapes that found no room or no
// victims) and its output (Decisions). It has no behaviour: the phases are free functions over it
// (cycle.h), each in its own file, and they exchange what they found as values (VictimSearch,
// PlaceNow, MovePlan, Reservation), not as flags left here.
//
// Ownership: it refers to the config, the scoring policy and the snapshot (all outlive the cycle) and
// owns the rest. Thread-safety: none (one cycle, one thread). Invariants: `work` is the snapshot's
// cluster plus this cycle's starts and holds (trial edits are undone by ScratchEdits and
// ReservedBlocked before a phase returns); `entries` are the valid jobs by id and `entries[i]` stays
// at its index for the whole cycle (indices are kept in `order`, MovePlan and Reservation).
#pragma once

#include "core/sched/scheduler.h"

#include "core/placement/fit.h"
#include "core/sched/guarantee_ledger.h"
#include "core/sched/job_order.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace tessera::sched {

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

// Per-job facts for one cycle. The fields every pending job's turn reads come first, in one cache
// line (the order visits entries in no memory order); what running jobs and reasons use follows.
struct alignas(64) Entry {
  // Pending: accounted classes it could be placed in (request_classes; CycleState::classes_of).
  const std::vector<std::string>* classes = nullptr;
  const PriorityClass* pc = nullptr;
  const ClassAmounts* asked = nullptr;  // pending: per class what it asks (CycleState::asked)
  int64_t milli = 0;     // GPU amount (running: held; pending: requested)
  int64_t prio = 0;      // order and preemption rank: class value (x16), plus the LAS level bonus
  int16_t las = 0;       // attained-service level: 0 below the first threshold, then 1, 2, ...
  bool mig = false;      // its tasks ask for MIG instances (job->gang.task.mig())
  // Pending: its reason is its shape's no-room reason (CycleState::no_room, set once per shape and
  // kept for the cycle) followed by `reason`; explain_waits joins them, so a memo answer copies no text.
  bool reason_from_shape = false;
  uint32_t user = 0;     // dense user index (OrderJob::user)
  uint32_t shape = 0;    // pending: its gang's shape (CycleState::shape_ids)
  QueueId queue;         // job->queue
  bool running = false;
  bool victim = false;   // chosen as a victim this cycle
  bool started = false;  // started this cycle
  bool claimed = false;  // checkpointing on its way out, and counted as room by a preemptor this cycle
  bool no_room = false;  // pending: the engine found no room now and no preemption helps
  bool short_of_room = false;  // pending for lack of room (now or on any node), not for a rule or order
  bool awaits_move = false;  // moved: waits for its new GPUs, still held by jobs leaving (start_moved)
  WaitCategory wait = WaitCategory::kOther;  // the reason's category
  // What explain_waits reads beside the reason comes next to it.
  const Job* job = nullptr;
  int start_index = -1;  // index in Decisions::start when started this cycle
  JobId id;              // job->id
  std::string reason;    // why it waits (pending)
  Time estimated_start = -1;  // pending: when known (reservation, MIG layout ready)
  std::string cls;       // quota class of the request ("any" or a model class)
  ClassAmounts held;     // running: per class, from the models of the GPUs it holds (and "any")
  Time end = 0;          // running or started: when it is expected to free its resources
  std::vector<TaskPlacement> holding;  // running: its placement as it stands (instances exist)
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

// "in 16m 40s", or "now" when `at` is not after `now`.
inline std::string in_text(Time at, Time now) { return at > now ? "in " + duration_text(at - now) : "now"; }

inline ClassAmounts amounts_of(const std::string& cls, int64_t milli) {
  ClassAmounts a;
  if (milli <= 0) return a;
  a[kAnyClass] = milli;
  if (cls != kAnyClass) a[cls] = milli;
  return a;
}


// What a victim search found (try_preempt, find_victims): returned, not left in flags on the cycle state.
struct VictimSearch {
  enum class Outcome {
    kNone,         // nothing to preempt makes the job fit (or no search was allowed)
    kPreempting,   // victims chosen (or moves planned, or a GPU reclaimed for MIG): it waits for them
    kOnlyLeaving,  // jobs already leaving make room: no new victim; it waits for their exits
  };
  Outcome outcome = Outcome::kNone;
  bool searched = false;  // the engine was tried, not only cheap bounds
  bool partial = false;   // fewer victims preempted now than the fit needs (the rest in later cycles)
  std::vector<TaskPlacement> fit;  // kPreempting or kOnlyLeaving: where the job fits once they are gone
  bool preempting() const { return outcome == Outcome::kPreempting; }
  bool only_leaving() const { return outcome == Outcome::kOnlyLeaving; }
};

// Placing a job now (place_now): the engine's result, and whether room exists only on the
// nodes a backfill reservation holds (the job may not start there; it waits for the reservation).
struct PlaceNow {
  PlacementResult result;
  bool only_on_reserved = false;
  bool off_reserved = false;  // placed again off the reserved nodes (the engine's first choice was on them)
};

// A running entry's facts that stay fixed for the cycle, as victim scans test them first.
struct RunningFacts {
  enum : uint8_t {
    kRunningPlaced = 1,  // kRunning with a placement (a possible victim)
    kCheckpointing = 2,  // already asked to checkpoint and leave
    kPreemptible = 4,    // its priority class may be preempted
    kProtected = 8,      // within its class's min_runtime or preemption_protection now
    kVictim = 16,        // chosen as a victim this cycle (set with Entry::victim)
    kHoldsGpu = 32,      // holds some GPU amount (Entry::held has a positive class)
    kAnyOnly = 64,       // every class it holds an amount in is "any" (no model class accounted)
    kOneNode = 128,      // its placement's tasks are all on `node`, holding `held_milli` there
  };
  uint32_t entry = 0;   // index in CycleState::entries
  uint32_t queue = 0;
  int64_t prio = 0;     // Entry::prio
  int64_t cost = 0;     // lost_work_cost now (fixed for the cycle)
  int class_value = 0;  // its priority class's value
  int las = 0;          // Entry::las
  uint32_t node = 0;    // kOneNode: the node
  int64_t held_milli = 0;  // kOneNode: GPU milli its placement holds
  // What the victim order compares beside the above (victims.cc), so that sorting candidates
  // reads no job.
  Time started = -1;        // Job::started
  int64_t attained_gpu_s = 0;  // Job::attained_gpu_s
  JobId id;
  uint8_t flags = 0;
};

// The engine's last answer for one shape (place_now), with what it was asked and the working copy's
// ClusterState::generation() then: while neither changed, the engine (whose policy is cacheable,
// i.e. deterministic) would answer the same, so jobs of one shape that find room but do not start
// (limits, owed guarantees, reservations) ask it once per change instead of once each.
struct PlaceMemo {
  uint64_t generation = std::numeric_limits<uint64_t>::max();  // none yet
  Gang ask;  // id and name cleared
  PlacementResult result;
};

// Defragmenting moves (SchedulerConfig::defragment) for an owed gang that reclaiming every borrower
// cannot place (find_moves): which jobs go and where the movers restart (indices into entries).
struct MovePlan {
  std::vector<size_t> reclaimed;  // borrowers whose GPUs the gang's fit uses
  std::vector<size_t> moved;      // jobs within their guarantee moved out of its way
  std::vector<size_t> leaving;    // jobs already on their way out whose GPUs it uses
  std::vector<std::vector<TaskPlacement>> dest;  // per moved job: where it restarts
  std::vector<TaskPlacement> fit;                // where the gang fits once they are gone
};

// Backfill (EASY): the first job that finds no room gets a reservation (find_reservation); later
// jobs may start now only if they end before it starts or keep off its nodes.
struct Reservation {
  bool active = false;
  size_t entry = 0;          // the holder's index in entries
  Time start = 0;
  std::set<uint32_t> nodes;  // node ids the reserved placement uses
  bool owed = false;         // the holder would start within its queue's guarantee
};

// A gang shape that found no room this cycle: the engine's reason, reused instead of searching again
// (nothing is freed within a cycle, so it still does not fit).
struct NoRoom {
  std::string reason;
  WaitCategory wait = WaitCategory::kCapacity;
};

struct OwedFit {
  bool never = false;  // it did not fit even without the start being checked: not this cycle
  std::vector<TaskPlacement> tasks;  // its last fit, probed read-only once a node of it changed
  std::vector<uint64_t> generations;  // per task, its node's Node::generation when last known to fit
};

inline EngineOptions engine_options(const SchedulerConfig& cfg, bool explain_failures, bool reference_run) {
  EngineOptions o;
  o.best_index = !reference_run;  // the reference scores every node
  o.seed = cfg.seed;
  o.max_scored_nodes = cfg.max_scored_nodes;
  o.explain_failures = explain_failures;
  return o;
}

struct CycleState {
  CycleState(const SchedulerConfig& c, const ScoringPolicy& p, const Snapshot& s, Time t, bool reference_run = false)
      : cfg(c), policy(p), snap(s), tree(*s.queues), now(t), reference(reference_run), work(*s.cluster),
        engine(p, engine_options(c, true, reference_run)), trial(p, engine_options(c, false, reference_run)) {
    if (cfg.elastic_capacity || cfg.topology_wait > 0 || cfg.gather_spread)
      for (const Node& n : work.nodes()) max_node_gpus = std::max<int64_t>(max_node_gpus, int64_t(n.gpus.size()));
  }

  // ---- Inputs ----
  const SchedulerConfig& cfg;
  const ScoringPolicy& policy;
  const Snapshot& snap;
  const QueueTree& tree;
  Time now;
  // The reference run (Scheduler::cycle_reference): the shortcuts that must not change decisions
  // are off (every scan walks every entry), so that tests can compare the two.
  bool reference = false;
  int64_t max_node_gpus = 0;  // GPUs of the largest node (elastic_capacity, topology_wait, gather_spread)

  // ---- Working copy and engines ----
  ClusterState work;
  PlacementEngine engine;
  PlacementEngine trial;  // for preemption trials: no failure explanations (they cost full scans)

  // ---- Books ----
  // The cycle's guarantee books and questions, with its fair share (made in compute_books).
  std::optional<GuaranteeLedger> ledger;
  std::set<std::string> quota_classes;  // classes some queue guarantees or limits (plus "any")
  std::set<std::string> present_classes;  // of those (not "any"), the classes of some node's GPUs
  std::vector<Entry> entries;           // valid jobs, by id
  size_t users = 0;                     // distinct users among them (Entry::user is below this)
  std::vector<Entry> invalid;           // pending jobs that cannot be scheduled, by id
  // Indices of the running entries (kRunning or kCheckpointing in the snapshot), ascending: what
  // victim scans walk instead of every entry (the reference run: every index; scans still test
  // Entry::running).
  std::vector<size_t> running;
  // Per `running` index, in the same order: what a victim scan tests first, packed so that a scan
  // skips the jobs that cannot be victims without reading their Entry and Job (not in the reference
  // run, where every scan tests every entry in full).
  std::vector<RunningFacts> running_facts;
  // Per queue: FairShare::borrowing(queue, "any") of the ledger's fair share at a generation
  // (FairShare::generation), asked by victim scans for each candidate that holds only class "any".
  std::vector<std::pair<uint64_t, bool>> borrows_any;
  // Entries marked victim or claimed this cycle, in the order marked (may repeat): what the scans
  // for jobs leaving walk instead of every running entry (not in the reference run).
  std::vector<size_t> marked_leaving;
  std::vector<int64_t> user_milli;  // running GPU usage per user (Entry::user; and this cycle's starts)
  std::vector<int64_t> leaving_milli;   // per node: whole GPUs (milli) of jobs checkpointing toward exit
  std::vector<size_t> checkpointing;    // entries checkpointing toward exit as the cycle began (with reclaim)
  std::vector<size_t> order;            // entries indices in the cycle's order
  const Entry* blocked_by = nullptr;    // strict order: the first job that did not start
  Reservation res;                      // this cycle's backfill reservation
  int reserved_blocks = 0;              // ReservedBlocked guards alive (the reserved nodes blocked while > 0)
  int preemptions = 0;                  // preemption decisions this cycle
  int moves = 0;                        // defragmenting moves this cycle
  int failed_searches = 0;              // victim searches that found nothing this cycle
  // Placements of the jobs that wait for victims (chosen this cycle or still checkpointing): a later
  // preemptor searches with those victims gone and these placed, so it uses what their exits leave
  // over before preempting anyone else. Whole-GPU placements only (claims_ok false otherwise).
  std::vector<std::vector<TaskPlacement>> claims;
  bool claims_ok = true;
  // GPUs held this cycle for waiting preemptors (hold_free_part), and for the reasons of jobs that
  // found no room meanwhile (built as holds are added: a reason per waiting job must not rescan).
  std::vector<std::pair<JobId, std::vector<TaskPlacement>>> held_for;
  int64_t held_milli = 0;
  std::string held_first, held_text;  // name of the first job GPUs are held for; the reason text
  // MIG: (queue, profile) that reclaimed a GPU this cycle; GPUs preempted for slices this cycle
  // (node, compute milli not yet spoken for); idle whole GPUs claimed for slice requests (held on the
  // working copy, released for the planner), the instances they still offer per profile, and the
  // highest class that claimed.
  std::set<std::string> mig_reclaimed;
  std::vector<std::pair<NodeId, int64_t>> mig_freed;
  std::vector<TaskPlacement> mig_claims;
  std::map<std::string, int> mig_claim_spare;
  int mig_claim_class = std::numeric_limits<int>::min();

  // ---- Caches ----
  mutable std::deque<std::pair<const GpuModel*, std::string>> class_cache;  // accounted_class()
  // Pending entries' shapes (shape_key of gang_of), numbered as collect_entries meets them
  // (Entry::shape), and per shape what it found when it found no room this cycle.
  std::unordered_map<std::string, uint32_t> shape_ids;
  std::vector<std::optional<NoRoom>> no_room;
  // request_classes by the models a request names (the same for every job naming the same list).
  std::map<std::vector<std::string>, std::vector<std::string>> classes_of;
  std::map<std::pair<std::string, int64_t>, ClassAmounts> asked;  // amounts_of(class, milli), shared by entries
  // A start of a pending entry's own shape that the engine placed off the reserved nodes and an
  // owed guarantee refused (GuaranteeLedger::takes_owed), by (shape, queue): while neither the
  // working copy nor the fair share has changed (generations) and no reservation was made since,
  // the engine places the same (whether the job must keep off reserved nodes or not) and the
  // guarantee refuses the same. Not used in the reference run.
  struct OwedRefusal {
    uint64_t work_generation = 0;
    uint64_t fair_share_generation = 0;
    bool reservation_active = false;
    std::string reason;
  };
  std::map<std::pair<uint32_t, uint32_t>, OwedRefusal> owed_refusals;
  std::unordered_set<std::string> no_victims;         // (shape, class, queue) preemption found nothing for
  std::unordered_set<std::string> no_room_off_reservation;  // shapes that found no room off the reserved nodes
  // fits_free_scan as the cycle began, by shape_key: whether it fits, and its room (room_out).
  struct FreeFit {
    bool fits = false;
    int64_t room = -1;
  };
  mutable std::unordered_map<std::string, FreeFit> fits_free_memo;
  // usable_classes by Entry::shape: the classes whose free GPUs held one of its tasks as the cycle began.
  std::unordered_map<uint32_t, std::vector<std::string>> usable_classes_memo;
  // Pending jobs of leaves short of their guarantee, within their limits, that did not fit the free
  // GPUs as the cycle began (not usable demand), by shape: a victim search asks whether the room it
  // frees makes them fit (takes_owed_once_freed). `room`: fits_free_scan's room_out as the cycle
  // began (-1: not counted, for a gang bound to one domain).
  struct OwedUnfit {
    int64_t room = -1;
    std::vector<size_t> entries;
  };
  std::vector<OwedUnfit> owed_unfit;
  std::unordered_map<std::string, PlaceMemo> place_memo;  // by shape_key; not in the reference run
  // Pending jobs owed their guarantee that fit the free GPUs, by class value then id (filled on first
  // use by owed_below_that_fit; starts only make fewer of them owed).
  std::optional<std::vector<size_t>> owed_pending;
  // Per owed_pending entry that fits: the nodes of the last placement the engine found for it; while
  // none of them changed (Node::generation) it still fits, without asking the engine again.
  std::map<size_t, OwedFit> owed_fit;

  // ---- Output ----
  Decisions out;
};

}  // namespace tessera::sched
