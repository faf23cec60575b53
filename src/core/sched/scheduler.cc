// The scheduling cycle (v1): validate, derive queue loads, order pending jobs by priority tier and,
// inside a tier, hierarchical fair share, start what fits (gangs whole, on a working copy of the cluster), preempt when a job may and
// the victims would make it fit, and say why every other job waits.
//
// Quota classes: every GPU job counts in class "any" (so quotas on "any" cover every model). A running
// job (or one started this cycle) also counts in the classes of the GPUs it holds
// (config.gpu_class[model], default the model's canonical name); a pending job that names models counts
// in the class of its first one. Limits are checked on the request and again on the GPUs chosen. Capacity: "any" = all healthy GPUs,
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
// Victims: least lost work first; none at all unless the engine confirms the preemptor then fits
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
#include "core/sched/scheduler.h"

#include "core/placement/fit.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <cassert>
#include <cctype>
#include <cmath>
#include <set>
#include <tuple>

namespace tessera {

namespace {

constexpr const char* kAnyClass = "any";

int64_t get_or(const ClassAmounts& m, const std::string& c, int64_t def = 0) {
  auto it = m.find(c);
  return it == m.end() ? def : it->second;
}

int64_t placement_milli(const std::vector<TaskPlacement>& ps) {
  int64_t m = 0;
  for (const TaskPlacement& p : ps)
    for (const GpuGrant& g : p.gpus) m += g.milli_held();
  return m;
}

std::string gpus_text(int64_t milli) {
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
  uint32_t user = 0;     // dense user index
  int start_index = -1;  // index in Decisions::start when started this cycle
  Time end = 0;          // running or started: when it is expected to free its resources
  Time estimated_start = -1;  // pending: when known (reservation, MIG layout ready)
  std::vector<TaskPlacement> holding;  // running: its placement as it stands (instances exist)
  std::string reason;    // why it waits (pending)
  WaitCategory wait = WaitCategory::kOther;  // the reason's category
};

// A placement re-applied after a release: MIG instances it created or destroyed exist as they are now.
std::vector<TaskPlacement> settled(std::vector<TaskPlacement> ps) {
  for (TaskPlacement& p : ps)
    for (GpuGrant& g : p.gpus) {
      g.mig_create = false;
      g.mig_destroy = 0;
    }
  return ps;
}

std::string duration_text(Duration d) {
  if (d < 60) return std::to_string(d) + "s";
  if (d < 3600) return std::to_string(d / 60) + "m";
  const Duration h = d / 3600, m = d % 3600 / 60;
  return std::to_string(h) + "h" + (m ? std::to_string(m) + "m" : "");
}

ClassAmounts amounts_of(const std::string& cls, int64_t milli) {
  ClassAmounts a;
  if (milli <= 0) return a;
  a[kAnyClass] = milli;
  if (cls != kAnyClass) a[cls] = milli;
  return a;
}

}  // namespace

const char* wait_category_name(WaitCategory c) {
  switch (c) {
    case WaitCategory::kOther: return "other";
    case WaitCategory::kInvalid: return "invalid";
    case WaitCategory::kOrder: return "order";
    case WaitCategory::kReservation: return "reservation";
    case WaitCategory::kQuota: return "quota";
    case WaitCategory::kPreempting: return "preempting";
    case WaitCategory::kMigReconfiguring: return "mig_reconfiguring";
    case WaitCategory::kTopology: return "topology";
    case WaitCategory::kCapacity: return "capacity";
  }
  return "other";
}

const char* job_order_name(JobOrder o) {
  switch (o) {
    case JobOrder::kFairShare: return "fair-share";
    case JobOrder::kFifo: return "FIFO";
    case JobOrder::kMultifactor: return "multifactor";
    case JobOrder::kLeastAttained: return "least-attained-service";
    case JobOrder::kDrf: return "DRF";
  }
  return "?";
}

std::vector<std::string> scheduler_preset_names() { return {"tessera", "fifo-gang", "slurm", "tiresias", "drf"}; }

Result<SchedulerConfig> scheduler_preset(const std::string& name) {
  SchedulerConfig c;
  if (name == "tessera") return c;
  c.dynamic_mig = false;  // the baselines keep MIG layouts as they are
  c.reclaim = false;
  c.backfill = false;
  c.preemption = false;
  c.defragment = false;
  if (name == "fifo-gang") {
    c.order = JobOrder::kFifo;
    c.strict_order = true;
    c.policy = "first-fit";
  } else if (name == "slurm") {
    c.order = JobOrder::kMultifactor;
    c.backfill = true;
    c.policy = "best-fit";
  } else if (name == "tiresias") {
    c.order = JobOrder::kLeastAttained;
    c.preemption = true;
    c.policy = "gpu-packing";
    for (PriorityClass& pc : c.priority_classes) {  // LAS preempts by attained service alone
      pc.min_runtime = 0;
      pc.preemptible = pc.can_preempt = true;
    }
    c.preemption_protection = 0;
  } else if (name == "drf") {
    c.order = JobOrder::kDrf;
    c.policy = "dotprod";
  } else {
    std::string known;
    for (const std::string& n : scheduler_preset_names()) known += (known.empty() ? "" : ", ") + n;
    return invalid_argument("scheduler: unknown policy '" + name + "' (known: " + known + ")");
  }
  return c;
}

Result<std::unique_ptr<Scheduler>> Scheduler::create(SchedulerConfig config) {
  auto policy = make_policy(config.policy);
  if (!policy.ok()) return invalid_argument("policy: " + policy.error().message);
  std::map<std::string, int> seen;
  for (const PriorityClass& pc : config.priority_classes) {
    if (pc.name.empty()) return invalid_argument("priority_classes: a class has an empty name");
    if (seen.count(pc.name)) return invalid_argument("priority_classes: duplicate class " + pc.name);
    if (pc.min_runtime < 0) return invalid_argument("priority_classes: " + pc.name + ": min_runtime < 0");
    seen[pc.name] = 1;
  }
  if (config.max_preemptions_per_cycle < 0) return invalid_argument("max_preemptions_per_cycle must be >= 0");
  if (config.preemption_protection < 0) return invalid_argument("preemption_protection must be >= 0");
  if (config.max_moves_per_cycle < 0) return invalid_argument("max_moves_per_cycle must be >= 0");
  std::unique_ptr<Scheduler> s(new Scheduler(std::move(config)));
  s->policy_ = std::move(policy.value());
  return s;
}

namespace {

// One cycle's working state.
class Cycle {
 public:
  Cycle(const SchedulerConfig& cfg, const ScoringPolicy& policy, const Snapshot& snap, Time now)
      : cfg_(cfg), policy_(policy), snap_(snap), tree_(*snap.queues), now_(now), work_(*snap.cluster),
        engine_(policy, options()), trial_(policy, trial_options()) {
    if (cfg_.elastic_capacity || cfg_.topology_wait > 0)
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
  std::string request_class(const TaskRequest& t) const {
    if (t.gpu_models.empty()) return kAnyClass;
    const GpuModel* m = first_model(t);
    return cfg_.model_class(m ? m->name : t.gpu_models.front());
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
  void order_and_place();
  void order_flat();           // every JobOrder but kFairShare
  bool place_in_order(size_t i);  // order_ += i and try it; false once strict order blocks
  void try_job(Entry& e);
  bool try_preempt(Entry& e, const Gang& gang);
  // An owner's MIG request with no room: reclaims one whole GPU from a borrower, which the MIG
  // planner turns into slices once it is idle (docs/scheduling.md).
  bool reclaim_gpu_for_mig(Entry& e, const Gang& gang);
  std::set<std::string> mig_reclaimed_;  // (queue, profile) that reclaimed a GPU this cycle
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
    k += "/p" + std::to_string(int(t.pool_kinds)) + (t.prefer_spot ? "s" : "");
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
  // Puts placements released for a trial back on the working copy.
  void reapply(const std::vector<const std::vector<TaskPlacement>*>& placements);
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
  bool ends_before_reservation(const Entry& e) const {
    return now_ + assumed_runtime(*e.job, snap_.runtimes, cfg_.default_runtime) <= res_.start;
  }
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
  int64_t max_node_gpus_ = 0;  // GPUs of the largest node (elastic_capacity, topology_wait)
  PlacementEngine engine_;
  PlacementEngine trial_;  // for preemption trials: no failure explanations (they cost full scans)
  std::optional<FairShare> fs_;
  std::set<std::string> quota_classes_;  // classes some queue guarantees or limits (plus "any")
  mutable std::deque<std::pair<const GpuModel*, std::string>> class_cache_;  // accounted_class()
  std::vector<Entry> entries_;           // valid jobs, by id
  std::vector<Entry> invalid_;           // pending jobs that cannot be scheduled, by id
  std::map<std::string, int64_t> user_milli_;  // running GPU usage per user
  std::vector<int64_t> user_usage_;            // the same by Entry::user (dense), for ordering
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

int64_t Cycle::request_milli(const Gang& g) const {
  const TaskRequest& t = g.task;
  int64_t per_task = t.gpu_demand_milli();
  if (t.mig()) {
    per_task = 0;
    const GpuModel* m = first_model(t);
    const MigProfile* p = m ? m->find_profile(t.mig_profile) : nullptr;
    if (p) {
      per_task = mig_milli(*m, p->id);
    } else {  // no model named: "Ng" of the usual 7 compute slices
      int n = 0;
      for (char ch : t.mig_profile) {
        if (!std::isdigit(static_cast<unsigned char>(ch))) break;
        n = n * 10 + (ch - '0');
      }
      per_task = int64_t(std::min(n, 7)) * 1000 / 7;
    }
  }
  return per_task * std::max(g.tasks, 0);
}

Gang Cycle::gang_of(const Entry& e) const {
  Gang g = e.job->gang;
  g.id = e.job->id;
  g.queue = e.job->queue;
  g.priority = e.pc->value;
  apply_job_pool_rules(g, *e.job, cfg_.pool_rules, now_);
  if (g.topology.mode == TopologyMode::kPreferred && g.topology.level == "node" &&
      int64_t(g.tasks) * g.task.gpu_count <= max_node_gpus_) {
    // Waiting since its submission or its last stop (a preempted job waits afresh).
    const Time since = std::max(e.job->submitted, e.job->last_preempted);
    if (cfg_.elastic_capacity || now_ - since < cfg_.topology_wait) g.topology.mode = TopologyMode::kRequired;
  }
  return g;
}

// Fills class facts; false (with a reason) when the job names an unknown queue or class.
bool Cycle::validate(Entry& e) {
  const Job& j = *e.job;
  if (!j.queue.valid() || j.queue.value >= tree_.size()) {
    e.wait = WaitCategory::kInvalid;
    e.reason = "queue: job " + j.name + " names no known queue";
    return false;
  }
  if (!tree_.queue(j.queue).leaf()) {
    e.wait = WaitCategory::kInvalid;
    e.reason = "queue: " + tree_.queue(j.queue).name + " is not a leaf queue; submit to one of its children";
    return false;
  }
  for (const PriorityClass& pc : cfg_.priority_classes)
    if (pc.name == j.priority_class) e.pc = &pc;
  if (!e.pc) {
    std::string known;
    for (const PriorityClass& pc : cfg_.priority_classes) known += (known.empty() ? "" : ", ") + pc.name;
    e.wait = WaitCategory::kInvalid;
    e.reason = "priority_class: unknown class '" + j.priority_class + "' (known: " + known + ")";
    return false;
  }
  e.prio = int64_t(e.pc->value) * 16;
  while (e.las < int(cfg_.las_thresholds_gpu_s.size()) && j.attained_gpu_s >= cfg_.las_thresholds_gpu_s[size_t(e.las)])
    ++e.las;
  if (cfg_.order == JobOrder::kLeastAttained) e.prio += 15 - std::min(e.las, 15);  // fewer GPU-seconds first
  e.cls = request_class(j.gang.task);
  e.milli = e.running && !j.placement.empty() ? placement_milli(j.placement) : request_milli(j.gang);
  if (e.running) {
    e.held = placement_amounts(*snap_.cluster, j.placement);
    e.holding = settled(j.placement);
    if (j.state == JobState::kCheckpointing) {  // asked to stop: leaves within its save time or grace
      e.end = now_ + std::min(j.checkpoint.save_cost, j.checkpoint.grace);
      if (j.evict_by >= 0) e.end = std::min(e.end, std::max(now_, j.evict_by));
    } else {
      const Time start = j.started >= 0 ? j.started : now_;
      e.end = start + assumed_runtime(j, snap_.runtimes, cfg_.default_runtime);
    }
    // A job past its estimate is assumed to end at any moment (the reservation is recomputed each cycle).
    e.end = std::max(e.end, now_);
  }
  return true;
}

Decisions Cycle::run() {
  std::vector<const Job*> jobs;
  for (const Job& j : snap_.jobs)
    if (j.state == JobState::kPending || j.state == JobState::kRunning || j.state == JobState::kCheckpointing)
      jobs.push_back(&j);
  std::sort(jobs.begin(), jobs.end(), [](const Job* a, const Job* b) { return a->id < b->id; });
  // Only classes a queue sets a guarantee or limit on are accounted; the rest is all "any".
  quota_classes_.insert(kAnyClass);
  for (const Queue& q : tree_.queues()) {
    for (auto& [c, v] : q.guaranteed) quota_classes_.insert(c);
    for (auto& [c, v] : q.limit) quota_classes_.insert(c);
  }
  for (const Job* j : jobs) {
    Entry e;
    e.job = j;
    e.running = j->state != JobState::kPending;
    if (validate(e)) {
      entries_.push_back(std::move(e));
    } else if (!e.running) {
      invalid_.push_back(std::move(e));
    }
  }

  // GPUs held for jobs being moved (defragment) while they checkpoint: nobody else takes them. If they
  // are no longer free (a failure), the job restarts wherever it fits.
  for (const Entry& e : entries_)
    if (e.running && e.job->state == JobState::kCheckpointing && !e.job->move_to.empty()) hold_idle(e.job->move_to);

  // Loads and capacity per class.
  std::vector<QueueLoad> load(tree_.size());
  for (size_t q = 0; q < load.size() && q < snap_.history.size(); ++q) load[q].decayed_usage = snap_.history[q].decayed_usage;
  for (const Entry& e : entries_) {
    QueueLoad& l = load[e.job->queue.value];
    for (auto& [c, v] : amounts(e)) {
      l.demand[c] += v;
      if (e.running) l.allocated[c] += v;
    }
    // A pending request without model constraints may use any class guaranteed on its queue's path
    // (as reclaim assumes, below_guarantee_after): it is demand there too, so a queue that reclaims
    // for it is also ordered below its guarantee and gets the room it freed (else another queue
    // takes that room and the owner reclaims again, with no end when the victims restart).
    if (!e.running && e.cls == kAnyClass && e.milli > 0)
      for (const std::string& c : path_guaranteed(e.job->queue)) l.demand[c] += e.milli;
    if (e.running) user_milli_[e.job->user] += e.milli;
  }
  for (const Node& n : work_.nodes())
    for (const Gpu& g : n.gpus) {
      if (g.health != GpuHealth::kHealthy || !g.model) continue;
      capacity_[kAnyClass] += 1000;
      if (const std::string* c = accounted_class(g.model)) capacity_[*c] += 1000;
    }
  fs_.emplace(FairShare::compute(tree_, capacity_, load));
  if (cfg_.reclaim) {
    usable_pending_.assign(tree_.size(), {});
    leaving_milli_.assign(work_.nodes().size(), 0);
    for (const Entry& e : entries_)
      if (e.running && e.job->state == JobState::kCheckpointing)
        for (const TaskPlacement& p : e.holding)
          for (const GpuGrant& g : p.gpus)
            if (g.kind == GrantKind::kWhole && p.node.value < leaving_milli_.size()) leaving_milli_[p.node.value] += 1000;
    for (const Entry& e : entries_) {
      if (e.running || e.milli <= 0) continue;
      // Only a leaf short of its guarantee can be owed anything: skip the fit check elsewhere.
      const Queue& q = tree_.queue(e.job->queue);
      bool short_of_guarantee = false;
      for (auto& [c, g] : q.guaranteed)
        short_of_guarantee = short_of_guarantee || fs_->allocated(q.id, c) < std::min(g, fs_->demand(q.id, c));
      if (!short_of_guarantee || !fits_free_now(e)) continue;
      ClassAmounts& u = usable_pending_[e.job->queue.value];
      for (auto& [c, v] : amounts(e)) u[c] += v;
      if (e.cls == kAnyClass)
        for (const std::string& c : path_guaranteed(e.job->queue)) u[c] += e.milli;
    }
  }

  // Phase two of preemption: jobs asked to checkpoint whose grace has expired are evicted now.
  for (const Entry& e : entries_) {
    const Job& j = *e.job;
    if (j.state != JobState::kCheckpointing || j.evict_by < 0 || now_ < j.evict_by) continue;
    PreemptDecision d;
    d.victim = j.id;
    d.phase = PreemptPhase::kEvict;
    d.evict_by = now_;
    d.reason = "checkpoint grace expired at t=" + std::to_string(j.evict_by) + " without the job leaving";
    out_.preempt.push_back(std::move(d));
  }
  order_and_place();
  if (cfg_.dynamic_mig) plan_mig();

  // Why every job waits, with positions among the jobs still pending after this cycle.
  std::vector<int> per_queue(tree_.size(), 0);
  int overall = 0;
  for (size_t i : order_) {
    const Entry& e = entries_[i];
    if (e.started) continue;
    PendingInfo p;
    p.job = e.job->id;
    p.reason = e.reason;
    p.category = e.wait;
    p.short_of_room = e.short_of_room;
    p.queue_position = ++per_queue[e.job->queue.value];
    p.overall_position = ++overall;
    if (res_.active && &entries_[res_.entry] == &e) {
      p.reserved = true;
      p.estimated_start = res_.start;
    } else if (e.estimated_start >= 0) {
      p.estimated_start = e.estimated_start;
    }
    out_.pending.push_back(std::move(p));
  }
  for (const Entry& e : invalid_) {  // not in any queue order: positions 0
    PendingInfo p;
    p.job = e.job->id;
    p.reason = e.reason;
    p.category = e.wait;
    out_.pending.push_back(std::move(p));
  }
  return std::move(out_);
}

// Repeatedly: the best leaf queue (walking down by FairShare::before), its best job, try it.
void Cycle::order_and_place() {
  // Priority tiers first (urgent work is served at once, whatever its queue's share), then inside a
  // tier the queue tree by fair share, then the queue's best job.
  std::map<std::string, uint32_t> users;
  for (Entry& e : entries_) e.user = users.emplace(e.job->user, uint32_t(users.size())).first->second;
  user_usage_.assign(users.size(), 0);
  for (const Entry& e : entries_) user_usage_[e.user] = get_or(user_milli_, e.job->user);
  start_moved();
  if (cfg_.order != JobOrder::kFairShare) return order_flat();
  std::vector<int64_t> tiers;
  for (const Entry& e : entries_)
    if (!e.running && !e.started) tiers.push_back(e.prio);
  std::sort(tiers.begin(), tiers.end(), std::greater<>());
  tiers.erase(std::unique(tiers.begin(), tiers.end()), tiers.end());
  auto job_before = [&](size_t a, size_t b) {
    const Entry& x = entries_[a];
    const Entry& y = entries_[b];
    if (x.prio != y.prio) return x.prio > y.prio;
    if (cfg_.in_queue_las && x.las != y.las) return x.las < y.las;
    const int64_t ux = user_usage_[x.user], uy = user_usage_[y.user];
    if (ux != uy) return ux < uy;
    if (x.job->submitted != y.job->submitted) return x.job->submitted < y.job->submitted;
    return x.job->id < y.job->id;
  };
  for (int64_t tier : tiers) {
    std::vector<std::vector<size_t>> cand(tree_.size());
    std::vector<int> remaining(tree_.size(), 0);
    size_t total = 0;
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i].running || entries_[i].started || entries_[i].prio != tier) continue;
      cand[entries_[i].job->queue.value].push_back(i);
      for (QueueId q : tree_.path_to_root(entries_[i].job->queue)) ++remaining[q.value];
      ++total;
    }
    std::vector<size_t> deferred;  // defers_to_owed, in the order they came
    for (; total > 0; --total) {
      const std::vector<QueueId>* level = &tree_.top_level();
      QueueId pick;
      for (;;) {
        QueueId best;
        for (QueueId q : *level)
          if (remaining[q.value] > 0 && (!best.valid() || fs_->before(q, best))) best = q;
        pick = best;
        if (tree_.queue(best).leaf()) break;
        level = &tree_.queue(best).children;
      }
      auto& c = cand[pick.value];
      auto it = std::min_element(c.begin(), c.end(), job_before);
      const size_t i = *it;
      c.erase(it);
      for (QueueId q : tree_.path_to_root(pick)) --remaining[q.value];
      if (defers_to_owed(entries_[i])) deferred.push_back(i);
      else place_in_order(i);
    }
    for (size_t i : deferred) place_in_order(i);
  }
}

bool Cycle::place_in_order(size_t i) {
  Entry& e = entries_[i];
  order_.push_back(i);
  if (blocked_by_) {
    e.wait = WaitCategory::kOrder;
    e.reason = "waiting behind job " + blocked_by_->job->name + " (strict " + job_order_name(cfg_.order) + " order)";
    return false;
  }
  try_job(e);
  if (cfg_.strict_order && !e.started) blocked_by_ = &e;
  return !blocked_by_;
}

// Baseline orders: one global order (FIFO, multifactor, least attained service), or DRF's dynamic
// pick of the leaf queue with the lowest dominant share.
void Cycle::order_flat() {
  std::vector<size_t> pend;
  for (size_t i = 0; i < entries_.size(); ++i)
    if (!entries_[i].running && !entries_[i].started) pend.push_back(i);
  const double cap_any = std::max<double>(1, double(work_.total_gpus()) * 1000);
  if (cfg_.order == JobOrder::kDrf) {
    // Dominant share per leaf queue over GPU, CPU and memory of what runs (and starts this cycle).
    int64_t cap_cpu = 1, cap_mem = 1;
    for (const Node& n : work_.nodes()) cap_cpu += n.cpu_capacity.v, cap_mem += n.memory_capacity.v;
    std::vector<int64_t> gpu(tree_.size()), cpu(tree_.size()), mem(tree_.size());
    auto add = [&](const Entry& e, const std::vector<TaskPlacement>& pl) {
      const size_t q = e.job->queue.value;
      gpu[q] += e.milli;
      for (const TaskPlacement& p : pl) cpu[q] += p.cpu.v, mem[q] += p.memory.v;
    };
    for (const Entry& e : entries_)
      if (e.running) add(e, e.holding);
      else if (e.started) add(e, out_.start[size_t(e.start_index)].placement);
    auto share = [&](size_t q) {
      return std::max({double(gpu[q]) / cap_any, double(cpu[q]) / double(cap_cpu), double(mem[q]) / double(cap_mem)});
    };
    std::vector<std::vector<size_t>> by_queue(tree_.size());
    std::sort(pend.begin(), pend.end(), [&](size_t a, size_t b) {
      const Job& x = *entries_[a].job;
      const Job& y = *entries_[b].job;
      return x.submitted != y.submitted ? x.submitted > y.submitted : x.id > y.id;  // oldest last
    });
    for (size_t i : pend) by_queue[entries_[i].job->queue.value].push_back(i);
    for (size_t left = pend.size(); left > 0; --left) {
      size_t best = tree_.size();
      for (size_t q = 0; q < tree_.size(); ++q)
        if (!by_queue[q].empty() && (best == tree_.size() || share(q) < share(best))) best = q;
      const size_t i = by_queue[best].back();
      by_queue[best].pop_back();
      if (!place_in_order(i)) continue;
      if (entries_[i].started) add(entries_[i], out_.start[size_t(entries_[i].start_index)].placement);
    }
    return;
  }
  std::vector<int64_t> key(entries_.size(), 0);  // higher first
  if (cfg_.order == JobOrder::kMultifactor) {
    // Slurm: age/max_age, 2^(-usage/shares) of the job's queue, GPUs asked / cluster GPUs, class / top class.
    int top = 1;
    for (const PriorityClass& pc : cfg_.priority_classes) top = std::max(top, pc.value);
    std::vector<double> fs_factor(tree_.size(), 1);
    for (const Queue& q : tree_.queues()) {
      if (!q.leaf()) continue;
      double shares = 1;
      for (QueueId a : tree_.path_to_root(q.id)) {
        int64_t sum = 0;
        for (QueueId sib : tree_.queue(a).parent.valid() ? tree_.queue(tree_.queue(a).parent).children : tree_.top_level())
          sum += tree_.queue(sib).weight;
        shares *= double(tree_.queue(a).weight) / double(std::max<int64_t>(1, sum));
      }
      const double hist = q.id.value < snap_.history.size() ? snap_.history[q.id.value].decayed_usage : 0;
      const double usage = double(fs_->allocated(q.id, kAnyClass)) / cap_any + hist;
      fs_factor[q.id.value] = std::exp2(-usage / shares);
    }
    const MultifactorWeights& w = cfg_.multifactor;
    for (size_t i : pend) {
      const Entry& e = entries_[i];
      const double age = double(std::clamp<Duration>(now_ - e.job->submitted, 0, w.max_age)) / double(std::max<Duration>(1, w.max_age));
      const double p = double(w.age) * age + double(w.fairshare) * fs_factor[e.job->queue.value] +
                       double(w.job_size) * std::min(1.0, double(e.milli) / cap_any) +
                       double(w.qos) * double(std::max(0, e.pc->value)) / double(top);
      key[i] = int64_t(std::llround(p * 1000));
    }
  } else if (cfg_.order == JobOrder::kLeastAttained) {
    for (size_t i : pend) key[i] = entries_[i].prio;
  }
  std::sort(pend.begin(), pend.end(), [&](size_t a, size_t b) {
    if (key[a] != key[b]) return key[a] > key[b];
    const Job& x = *entries_[a].job;
    const Job& y = *entries_[b].job;
    return x.submitted != y.submitted ? x.submitted < y.submitted : x.id < y.id;
  });
  for (size_t i : pend) place_in_order(i);
}

void Cycle::try_job(Entry& e) {
  const ClassAmounts need = amounts(e);
  if (Status lim = fs_->within_limits(e.job->queue, need); !lim.ok()) {
    e.wait = WaitCategory::kQuota;
    e.reason = lim.message();
    return;
  }
  Gang gang = gang_of(e);
  const std::string shape = shape_key(gang);
  if (auto it = no_room_.find(shape); it != no_room_.end()) {
    if (!try_preempt(e, gang)) {
      e.wait = it->second.wait;
      e.reason = it->second.reason + leaving_note();
      e.short_of_room = true;
      no_room(e, gang);
    }
    return;
  }
  PlacementResult r = place_now(e, gang);
  if (r.outcome == Outcome::kPlaced) {
    // The classes of the GPUs actually chosen must be within the queue's limits too. If not, and the
    // job allows any model, try once more on the models whose class still has room.
    if (Status lim = fs_->within_limits(e.job->queue, placement_amounts(work_, r.tasks)); !lim.ok()) {
      std::vector<std::string> room;
      if (gang.task.gpu_models.empty())
        for (const std::string& m : work_.catalog().names()) {
          ClassAmounts one;
          one[cfg_.model_class(m)] = e.milli;
          if (fs_->within_limits(e.job->queue, one).ok()) room.push_back(m);
        }
      e.wait = WaitCategory::kQuota;
      if (room.empty()) {
        e.reason = lim.message();
        return;
      }
      gang.task.gpu_models = room;
      r = place_now(e, gang);
      if (r.outcome != Outcome::kPlaced) {
        e.reason = lim.message() + "; no room on other models: " + r.reason;
        return;
      }
    }
    if (std::string owed = takes_owed(*fs_, e, placement_amounts(work_, r.tasks)); !owed.empty()) {
      e.wait = WaitCategory::kQuota;
      e.reason = owed;
      return;
    }
    if (Status s = work_.apply_all(r.tasks); !s.ok()) {
      e.wait = WaitCategory::kOther;
      e.reason = "internal: placement could not be applied: " + s.message();
      return;
    }
    commit_start(e, std::move(r.tasks));
    return;
  }
  if (r.outcome == Outcome::kRetryLater && r.nodes_scored < 0) {  // room, but only on reserved nodes
    // A queue owed its guarantee takes it back from borrowers elsewhere rather than wait for the
    // reservation (victims are sought off the reserved nodes, as the engine keeps off them).
    if (owed_start(e)) {
      block_reserved(true);
      off_reservation_ = true;
      const bool found = try_preempt(e, gang);
      off_reservation_ = false;
      block_reserved(false);
      if (found) return;
    }
    e.wait = WaitCategory::kReservation;
    e.reason = r.reason;
    return;
  }
  if (r.outcome == Outcome::kNeverFits && cfg_.dynamic_mig && blocked_by_mig_mode(gang.task)) {
    // MIG mode is not permanent: the planner can change idle GPUs for it.
    r.reason = gang.task.mig() ? "needs a " + gang.task.mig_profile + " MIG instance; no GPU that offers one is in MIG mode now"
                               : "needs whole GPUs; the GPUs that could hold it are in MIG mode now";
    no_room_[shape] = {r.reason, WaitCategory::kMigReconfiguring};
    if (gang.task.mig() && reclaim_gpu_for_mig(e, gang)) return;
    e.wait = WaitCategory::kMigReconfiguring;
    e.reason = r.reason;
    e.no_room = true;  // demand for the MIG planner; no reservation (ends of running jobs do not help)
    e.short_of_room = true;
    return;
  }
  if (std::string note = pool_note(gang); !note.empty()) r.reason = note + "; " + r.reason;
  if (!held_for_.empty()) r.reason += "; " + held_text_;
  if (!cfg_.elastic_capacity && gang.topology.mode == TopologyMode::kRequired &&
      e.job->gang.topology.mode == TopologyMode::kPreferred)
    r.reason = "holds out for one node (config.topology_wait " + duration_text(cfg_.topology_wait) +
               ", then it may be spread); " + r.reason;
  // Room that exists only outside the one domain a spread gang requires is a topology wait.
  const WaitCategory wait = gang.topology.mode == TopologyMode::kRequired && gang.tasks > 1 ? WaitCategory::kTopology
                                                                                           : WaitCategory::kCapacity;
  no_room_[shape] = {r.reason, wait};
  if (r.outcome == Outcome::kRetryLater && try_preempt(e, gang)) return;
  e.wait = wait;
  e.reason = r.reason + (r.outcome == Outcome::kRetryLater ? leaving_note() : "");
  e.short_of_room = true;
  if (r.outcome == Outcome::kRetryLater) no_room(e, gang);
}

void Cycle::commit_start(Entry& e, std::vector<TaskPlacement> tasks) {
  e.started = true;
  e.end = now_ + assumed_runtime(*e.job, snap_.runtimes, cfg_.default_runtime);
  e.start_index = int(out_.start.size());
  const ClassAmounts got = placement_amounts(work_, tasks);
  const Queue& leaf = tree_.queue(e.job->queue);
  ClassAmounts before;
  for (auto& [c, v] : got)
    if (owed_sum_.count(c)) before[c] = leaf_owed(*fs_, leaf, c);
  fs_->add(e.job->queue, got, +1);
  for (auto& [c, b] : before) owed_sum_[c] += leaf_owed(*fs_, leaf, c) - b;
  user_milli_[e.job->user] += get_or(got, kAnyClass);
  user_usage_[e.user] += get_or(got, kAnyClass);
  out_.start.push_back({e.job->id, std::move(tasks)});
}

// A job moved out of an owed gang's way restarts on the GPUs held for it while it checkpointed, ahead
// of the cycle's order (its queue keeps its share: the move is one step). Taken or gone since (a
// failure): it is placed in order like any job.
void Cycle::start_moved() {
  for (size_t i = 0; i < entries_.size(); ++i) {
    Entry& e = entries_[i];
    if (e.running || e.job->move_to.empty()) continue;
    if (!fs_->within_limits(e.job->queue, amounts(e)).ok()) continue;
    std::vector<TaskPlacement> tasks = settled(e.job->move_to);
    if (int(tasks.size()) != e.job->gang.tasks) continue;
    bool usable = true;
    for (const TaskPlacement& p : tasks)
      usable = usable && p.node.value < work_.nodes().size() && work_.node(p.node).schedulable &&
               (e.job->gang.task.pool_kinds & pool_kind_bit(work_.node(p.node).pool_kind));
    if (!usable || !work_.apply_all(tasks).ok()) continue;
    order_.push_back(i);
    commit_start(e, std::move(tasks));
  }
}

// Which pool rule keeps the gang off nodes where it would fit now (or, if none would, off any
// node); "" when no rule excludes anything.
std::string Cycle::pool_note(const Gang& gang) const {
  if (std::all_of(work_.pools().begin(), work_.pools().end(),
                  [&](const Pool& p) { return (gang.task.pool_kinds & pool_kind_bit(p.kind)) != 0; }))
    return "";  // no pool is excluded (the common case: no pools declared)
  TaskRequest any = gang.task;
  any.pool_kinds = kAnyPoolKind;
  std::set<uint32_t> free_pools, excluded_pools;  // by pool id
  for (const Node& n : work_.nodes()) {
    if (gang.task.pool_kinds & pool_kind_bit(n.pool_kind)) continue;
    excluded_pools.insert(n.pool.value);
    if (check_fit(n, any) == Misfit::kFits) free_pools.insert(n.pool.value);
  }
  const std::set<uint32_t>& named = free_pools.empty() ? excluded_pools : free_pools;
  if (named.empty()) return "";
  const Pool& first = work_.pool(PoolId(*named.begin()));
  std::string s = pool_rule_reason(gang, cfg_.pool_rules, first.kind);
  s += free_pools.empty() ? "; excluded pools:" : "; the free GPUs are on";
  bool sep = false;
  for (uint32_t id : named) {
    const Pool& p = work_.pool(PoolId(id));
    s += std::string(sep ? ", " : " ") + pool_kind_name(p.kind) + " pool " + p.name;
    sep = true;
  }
  return s;
}

// Would `t` fit some node if its GPUs' MIG modes were changed (MIG slices on a MIG-capable model,
// or whole GPUs on a node whose GPUs are in MIG mode)?
bool Cycle::blocked_by_mig_mode(const TaskRequest& t) const {
  for (const Node& n : work_.nodes()) {
    if (!could_host(n, t)) continue;
    if (t.mig()) {
      if (n.gpu_model()->find_profile(t.mig_profile)) return true;
    } else if (t.whole_gpus() && int(n.gpus.size()) >= t.gpu_count &&
               std::any_of(n.gpus.begin(), n.gpus.end(), [](const Gpu& g) { return g.mig_enabled; })) {
      return true;
    }
  }
  return false;
}

// Places e now. With a reservation active, a job that would still run when the reservation starts
// must keep off the reserved nodes; if it can only fit on them it waits (nodes_scored = -1 marks that).
PlacementResult Cycle::place_now(Entry& e, const Gang& gang) {
  PlacementResult r = engine_.place(work_, gang);
  if (r.outcome != Outcome::kPlaced || !res_.active || ends_before_reservation(e)) return r;
  // A queue's guarantee comes before a borrower's reservation: the owner's job may start on the
  // reserved nodes (the holder would only be lent those GPUs; the owner would take them back).
  if (!res_.owed && owed_start(e)) return r;
  bool touches = false;
  for (const TaskPlacement& p : r.tasks) touches = touches || res_.nodes.count(p.node.value);
  if (!touches) return r;
  const std::string shape = shape_key(gang);
  PlacementResult off;
  if (!no_room_off_reservation_.count(shape)) {
    block_reserved(true);
    off = trial_.place(work_, gang);
    block_reserved(false);
    if (off.outcome == Outcome::kPlaced) return off;
    no_room_off_reservation_.insert(shape);
  }
  off.outcome = Outcome::kRetryLater;
  off.tasks.clear();
  off.nodes_scored = -1;
  const Duration run = assumed_runtime(*e.job, snap_.runtimes, cfg_.default_runtime);
  off.reason = "backfill: would delay " + reservation_text() + " (this job is expected to run " + duration_text(run) +
               ", past the reservation's start); it fits only on the reserved nodes";
  return off;
}

std::string Cycle::reservation_text() const {
  const Job& j = *entries_[res_.entry].job;
  return "job " + j.name + "'s reservation at t=" + std::to_string(res_.start) + " (in " +
         duration_text(res_.start - now_) + ")";
}

void Cycle::no_room(Entry& e, const Gang& gang) {
  e.no_room = true;
  if (cfg_.backfill && !res_.active) reserve(e, gang);
}

// The earliest time e fits, from the expected ends of running jobs (and of jobs started this cycle):
// release them in end order on the working copy until the engine places e, then put them back.
// Releases are searched by galloping then bisection (placement only gets easier as more is freed).
void Cycle::reserve(Entry& e, const Gang& gang) {
  struct Ending {
    Time end;
    JobId id;
    const std::vector<TaskPlacement>* placement;
    int64_t milli;
  };
  std::vector<Ending> ends;
  for (const Entry& x : entries_) {
    if (x.running && !x.holding.empty()) ends.push_back({x.victim ? now_ : x.end, x.job->id, &x.holding, x.milli});
    if (x.started) ends.push_back({x.end, x.job->id, &out_.start[size_t(x.start_index)].placement, x.milli});
  }
  for (const auto& [id, pl] : held_for_)  // what is held for e is e's at once
    if (id == e.job->id) ends.push_back({now_, id, &pl, placement_milli(pl)});
  std::sort(ends.begin(), ends.end(), [](const Ending& a, const Ending& b) {
    return a.end != b.end ? a.end < b.end : a.id < b.id;
  });
  size_t released = 0;
  auto move_to = [&](size_t k) {
    for (; released < k; ++released)
      for (const TaskPlacement& p : *ends[released].placement) {
        Status st = work_.release(p);
        assert(st.ok() && "releasing a running job for a reservation failed");
        (void)st;
      }
    for (; released > k; --released) {
      Status st = work_.apply_all(settled(*ends[released - 1].placement));
      assert(st.ok() && "restoring a running job after a reservation search failed");
      (void)st;
    }
  };
  auto fits = [&](size_t k) {
    move_to(k);
    return trial_.place(work_, gang).outcome == Outcome::kPlaced;
  };
  // Cheap bound: nothing fits before enough GPU milli are free; with none released it did not fit.
  int64_t free = work_.total_gpus() * 1000 - work_.allocated_gpu_milli();
  size_t lo = 0;  // known not to fit with `lo` released
  while (lo < ends.size() && free + ends[lo].milli < e.milli) free += ends[lo++].milli;
  size_t hi = 0;  // known to fit (0 = not found)
  for (size_t step = 1; lo < ends.size(); step *= 2) {
    const size_t k = std::min(ends.size(), lo + step);
    if (fits(k)) {
      hi = k;
      break;
    }
    lo = k;
  }
  if (hi == 0) {  // does not fit even when everything running is gone
    move_to(0);
    return;
  }
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    if (fits(mid)) hi = mid;
    else lo = mid;
  }
  move_to(hi);
  PlacementResult r = trial_.place(work_, gang);
  move_to(0);
  assert(r.outcome == Outcome::kPlaced);
  // Quotas apply to the reserved job as to any other: a limit on a model class is only seen on the
  // GPUs chosen (the request names no model), so a job those GPUs would put over a limit gets none.
  if (Status lim = fs_->within_limits(e.job->queue, placement_amounts(work_, r.tasks)); !lim.ok()) {
    e.reason += "; no reservation: " + lim.message();
    return;
  }
  res_.active = true;
  res_.entry = size_t(&e - entries_.data());
  res_.owed = owed_start(e);
  res_.start = ends[hi - 1].end;
  for (const TaskPlacement& p : r.tasks) res_.nodes.insert(p.node.value);
  e.reason += "; reserved to start at t=" + std::to_string(res_.start) + " (in " + duration_text(res_.start - now_) + ")";
}

// Would e's leaf queue stay within its guarantee after starting e? `classes`: the guaranteed classes.
// A request without model constraints may use any guaranteed class of its queue.
bool Cycle::below_guarantee_after(const Entry& e, std::vector<std::string>& classes) const {
  const Queue& q = tree_.queue(e.job->queue);
  const ClassAmounts need = amounts(e);
  for (auto& [c, g] : q.guaranteed) {
    if (g <= 0) continue;
    const bool usable = need.count(c) || (c != kAnyClass && e.cls == kAnyClass);
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

int64_t Cycle::lost_work_cost(const Entry& v) const {
  const Job& j = *v.job;
  const Time since = std::max(j.started, j.checkpoint.last);
  return v.milli * (std::max<int64_t>(0, now_ - since) + j.checkpoint.save_cost + j.checkpoint.restart_cost);
}

void Cycle::preempt(Entry& v, const Entry& e, bool by_priority, std::string reason) {
  v.victim = true;
  PreemptDecision d;
  d.victim = v.job->id;
  d.for_job = e.job->id;
  d.phase = v.job->checkpoint.interval > 0 ? PreemptPhase::kRequestCheckpoint : PreemptPhase::kEvict;
  const Duration grace = by_priority ? v.job->checkpoint.grace : std::min(v.job->checkpoint.grace, cfg_.reclaim_grace);
  d.evict_by = d.phase == PreemptPhase::kEvict ? now_ : now_ + std::max<Duration>(0, grace);
  d.reason = std::move(reason);
  out_.preempt.push_back(std::move(d));
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

bool Cycle::try_preempt(Entry& e, const Gang& gang) {
  only_leaving_ = false;
  const int budget = cfg_.max_preemptions_per_cycle - preemptions_;
  if (budget <= 0 || e.milli <= 0) return false;
  if (gang.task.mig() && cfg_.dynamic_mig && reclaim_gpu_for_mig(e, gang)) return true;
  // Victims only become fewer within a cycle: a failed search stays failed for the same ask.
  const std::string memo = shape_key(gang) + "|" + std::to_string(e.prio) + "|" + std::to_string(e.job->queue.value) +
                           "|" + std::to_string(cfg_.in_queue_las ? e.las : 0) + (off_reservation_ ? "|off" : "");
  // An owner's MIG request that no instance frees in time takes a whole GPU for the planner.
  auto or_mig = [&] { return gang.task.mig() && reclaim_gpu_for_mig(e, gang); };
  if (no_victims_.count(memo)) return or_mig();
  // Bounded work per cycle: after this many fruitless searches, later jobs wait for the next cycle
  // (the most deserving jobs, first in order, were searched).
  if (failed_searches_ >= cfg_.max_victim_searches_per_cycle) return or_mig();
  only_leaving_ = false;
  searched_ = false;
  partial_ = false;
  const bool found = find_victims(e, gang, budget);
  if (!found && !only_leaving_) {
    no_victims_.insert(memo);
    if (searched_) ++failed_searches_;
    return or_mig();
  }
  return found;
}

bool Cycle::reclaim_gpu_for_mig(Entry& e, const Gang& gang) {
  if (!cfg_.reclaim || !cfg_.dynamic_mig || preemptions_ >= cfg_.max_preemptions_per_cycle) return false;
  std::vector<std::string> classes;
  if (!below_guarantee_after(e, classes)) return false;
  const TaskRequest& t = gang.task;
  const std::string memo = std::to_string(e.job->queue.value) + "|" + t.mig_profile;
  if (mig_reclaimed_.count(memo)) return false;  // one GPU per queue and profile per cycle
  // GPUs that could offer the profile (model, pool, node size), by node.
  auto capable = [&](const Node& n) { return could_host(n, t) && n.gpu_model()->find_profile(t.mig_profile); };
  // An idle whole GPU is the planner's to convert, and one on its way out will be: nothing to take.
  for (const Node& n : work_.nodes())
    if (capable(n))
      for (const Gpu& g : n.gpus)
        if (g.health == GpuHealth::kHealthy && !g.mig_enabled && g.idle()) return false;
  for (const Entry& v : entries_)
    if (v.running && v.job->state == JobState::kCheckpointing)
      for (const TaskPlacement& p : v.holding)
        if (capable(work_.node(p.node)))
          for (const GpuGrant& g : p.gpus)
            if (g.kind == GrantKind::kWhole) return false;
  // The borrower's job holding a whole capable GPU that loses the least work.
  const Entry* best = nullptr;
  int64_t best_cost = 0;
  bool best_inside = false;
  for (const Entry& v : entries_) {
    const Job& vj = *v.job;
    if (!v.running || v.victim || v.claimed || vj.state != JobState::kRunning || vj.queue == e.job->queue) continue;
    if (!reclaimable(v, e, classes)) continue;
    bool whole_capable = false;
    for (const TaskPlacement& p : v.holding)
      if (capable(work_.node(p.node)))
        for (const GpuGrant& g : p.gpus) whole_capable = whole_capable || g.kind == GrantKind::kWhole;
    if (!whole_capable) continue;
    const bool inside = inside_own_guarantee(v, classes);
    const int64_t cost = lost_work_cost(v);
    if (!best || std::tie(inside, cost, vj.id) < std::tie(best_inside, best_cost, best->job->id))
      best = &v, best_cost = cost, best_inside = inside;
  }
  if (!best) return false;
  mig_reclaimed_.insert(memo);
  preempt(entries_[size_t(best - entries_.data())], e, false,
          "reclaim: queue " + tree_.queue(e.job->queue).name + " takes back its guarantee (a GPU for " +
              t.mig_profile + " MIG slices)");
  ++preemptions_;
  e.wait = WaitCategory::kPreempting;
  e.reason = "waiting for 1 preempted job to checkpoint and exit; its GPU then becomes " + t.mig_profile + " MIG slices";
  e.no_room = true;  // still demand for the MIG planner
  e.short_of_room = true;
  return true;
}

bool Cycle::fits_under(const FairShare& fs, const Entry& e, const Gang& gang) {
  PlacementResult r = trial_.place(work_, gang);
  if (r.outcome != Outcome::kPlaced) return false;
  const ClassAmounts got = placement_amounts(work_, r.tasks);
  if (!fs.within_limits(e.job->queue, got).ok() || !takes_owed(fs, e, got).empty()) return false;
  last_fit_ = std::move(r.tasks);
  return true;
}

void Cycle::reapply(const std::vector<const std::vector<TaskPlacement>*>& placements) {
  for (const auto* pl : placements) {
    Status st = work_.apply_all(*pl);
    assert(st.ok() && "restoring a released placement failed");
    (void)st;
  }
}

bool Cycle::find_victims(Entry& e, const Gang& gang, int budget) {
  std::vector<const std::vector<TaskPlacement>*> gone;
  claims_active_ = claims_ok_ && !claims_.empty();
  if (claims_active_) {
    for (const Entry& v : entries_)
      if (v.running && (v.victim || v.claimed) && !v.holding.empty()) {
        for (const TaskPlacement& p : v.holding) {
          Status st = work_.release(p);
          assert(st.ok() && "releasing a victim for a later preemptor failed");
          (void)st;
        }
        gone.push_back(&v.holding);
      }
    size_t applied = 0;
    for (; applied < claims_.size(); ++applied)
      if (!work_.apply_all(claims_[applied]).ok()) break;
    if (applied < claims_.size()) {  // a job started since took part of a claim: give the idea up
      while (applied-- > 0)
        for (const TaskPlacement& p : claims_[applied]) (void)work_.release(p);
      reapply(gone);
      gone.clear();
      claims_active_ = false;
      claims_ok_ = false;
      claims_.clear();
    }
  }
  last_fit_.clear();
  bool found = find_victims_inner(e, gang, budget);
  MovePlan moves;
  const bool plan = !found && !only_leaving_ && cfg_.defragment && cfg_.reclaim && find_moves(e, gang, moves);
  if (claims_active_) {
    for (auto it = claims_.rbegin(); it != claims_.rend(); ++it)
      for (const TaskPlacement& p : *it) {
        Status st = work_.release(p);
        assert(st.ok() && "removing a waiting preemptor failed");
        (void)st;
      }
    reapply(gone);
    claims_active_ = false;
  }
  if (plan) {
    found = commit_moves(e, moves);
    if (!found) last_fit_.clear();
  }
  if (partial_) {  // the fit assumed victims not preempted yet: no claim on it this cycle
    claims_ok_ = false;
    claims_.clear();
  } else if ((found || only_leaving_) && !last_fit_.empty()) {
    bool whole = true;
    for (const TaskPlacement& p : last_fit_)
      for (const GpuGrant& g : p.gpus) whole = whole && g.kind == GrantKind::kWhole;
    if (whole) {
      hold_free_part(e);
      if (!last_fit_.empty()) claims_.push_back(std::move(last_fit_));
    } else {
      claims_ok_ = false;
      claims_.clear();
    }
  }
  return found;
}

// The GPUs of a waiting preemptor's fit that are free now are held for it for the rest of the cycle,
// so a job later in the order does not take them and leave its victims' exits to nobody; what the
// jobs leaving hold stays in last_fit_ as its claim, which later victim searches count.
void Cycle::hold_free_part(const Entry& e) {
  std::vector<TaskPlacement> hold, claim;
  for (const TaskPlacement& p : last_fit_) {
    TaskPlacement h{p.node, MilliCpu{0}, MiB{0}, p.task_class, {}};
    TaskPlacement c = p;
    c.gpus.clear();
    for (const GpuGrant& g : p.gpus) (work_.node(p.node).gpus[g.gpu].idle() ? h : c).gpus.push_back(g);
    if (c.gpus.empty()) std::swap(h.cpu, c.cpu), std::swap(h.memory, c.memory);  // all free now
    if (!h.gpus.empty()) hold.push_back(std::move(h));
    if (!c.gpus.empty()) claim.push_back(std::move(c));
  }
  if (hold.empty() || !work_.apply_all(hold).ok()) return;
  if (held_for_.empty()) held_first_ = e.job->name;
  held_milli_ += placement_milli(hold);
  held_for_.push_back({e.job->id, std::move(hold)});
  last_fit_ = std::move(claim);
  held_text_ = gpus_text(held_milli_) + " held this cycle for " +
               (held_for_.size() == 1 ? "job " + held_first_
                                      : std::to_string(held_for_.size()) + " jobs (the first job " + held_first_ + ")") +
               ", waiting for preempted jobs to leave";
}

bool Cycle::find_victims_inner(Entry& e, const Gang& gang, int budget) {
  std::vector<std::string> reclaim_classes;
  const bool may_reclaim = cfg_.reclaim && below_guarantee_after(e, reclaim_classes);

  struct Cand {
    size_t idx;
    int64_t cost;
    bool by_priority;
    bool leaving = false;  // already asked to checkpoint and exit (a victim of an earlier cycle)
    // Reclaim only: its own leaf queue is within its guarantee (an ancestor borrows): taken last, as
    // the borrowing is its sibling queues' doing.
    bool inside_own = false;
  };
  std::vector<Cand> cands;
  // Jobs already checkpointing on their way out free their GPUs within their save time: count them
  // first (no new decision, no lost work), so a preemptor waiting for its victims to leave does not
  // preempt more jobs in the cycles in between.
  if ((cfg_.preemption && e.pc->can_preempt) || may_reclaim)
    for (size_t i = 0; i < entries_.size(); ++i) {
      const Entry& v = entries_[i];
      if (v.running && !v.claimed && v.job->state == JobState::kCheckpointing && !v.holding.empty())
        cands.push_back({i, -1, true, true});
    }
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& v = entries_[i];
    const Job& vj = *v.job;
    if (!v.running || v.victim || vj.state != JobState::kRunning || vj.placement.empty()) continue;
    // min_runtime and the protection window shield a job from priority preemption; a guarantee's
    // owner reclaims regardless (borrowed capacity is lent on those terms).
    const bool protected_now = (vj.started >= 0 && now_ - vj.started < v.pc->min_runtime) ||
                               (vj.last_preempted >= 0 && now_ - vj.last_preempted < cfg_.preemption_protection);
    const bool same_queue = vj.queue == e.job->queue;
    // In-queue least attained service: a job of the queue that has attained a higher level gives way
    // to one of the same class that has attained less (Tiresias inside one team's share), but only
    // when the queue has no guarantee left to reclaim from borrowers instead.
    const bool by_las = cfg_.in_queue_las && !may_reclaim && same_queue && v.prio == e.prio && v.las > e.las;
    const bool by_priority = cfg_.preemption && !protected_now && e.pc->can_preempt && v.pc->preemptible &&
                             ((v.prio < e.prio && (same_queue || borrows(v) || cfg_.order == JobOrder::kLeastAttained)) ||
                              by_las);
    const bool by_reclaim = may_reclaim && !same_queue && reclaimable(v, e, reclaim_classes);
    if (!by_priority && !by_reclaim) continue;
    cands.push_back({i, lost_work_cost(v), by_priority, false, !by_priority && inside_own_guarantee(v, reclaim_classes)});
  }
  // With this cycle's victims gone and their preemptors placed, the job may fit already: it waits
  // for those exits like its own victims (no new decision).
  if (claims_active_ && ((cfg_.preemption && e.pc->can_preempt) || may_reclaim)) {
    if (fits_under(*fs_, e, gang)) {
      only_leaving_ = true;
      return false;
    }
  }
  // Cheap bound before copying the cluster: all candidates plus what is free must cover the job.
  int64_t room = work_.total_gpus() * 1000 - work_.allocated_gpu_milli();
  for (const Cand& c : cands) room += entries_[c.idx].milli;
  if (cands.empty() || room < e.milli) return false;
  searched_ = true;
  std::sort(cands.begin(), cands.end(), [&](const Cand& a, const Cand& b) {
    if (a.inside_own != b.inside_own) return b.inside_own;
    if (a.cost != b.cost) return a.cost < b.cost;
    const Job& x = *entries_[a.idx].job;
    const Job& y = *entries_[b.idx].job;
    if (x.started != y.started) return x.started > y.started;  // newest first
    return x.id < y.id;
  });
  // Tasks of several whole GPUs (or a gang that must share one node) need them on one node: victims
  // are taken node by node, the node
  // whose candidates lose the least work first, with every candidate on it (a gang's tasks on other
  // nodes go too); nodes where even all candidates leave too little room for one task come last.
  // Other shapes take the cheapest victims wherever they are.
  const bool one_node = gang.topology.mode == TopologyMode::kRequired && gang.topology.level == "node";
  if (gang.task.whole_gpus() && (gang.task.gpu_count > 1 || (one_node && gang.tasks > 1))) {
    // (node, candidate position) pairs, and per node the room and cost of its candidates (flat by
    // node id: maps here cost a tenth of a cycle at 10,000 nodes).
    const size_t nn = work_.nodes().size();
    std::vector<int64_t> cost_on(nn, 0), room_on(nn, 0), inside_on(nn, 0);
    std::vector<std::pair<uint32_t, size_t>> at;
    std::vector<uint32_t> touched;
    for (size_t k = 0; k < cands.size(); ++k) {
      if (cands[k].leaving) continue;
      touched.clear();
      for (const TaskPlacement& p : entries_[cands[k].idx].holding) {
        touched.push_back(p.node.value);
        for (const GpuGrant& g : p.gpus) room_on[p.node.value] += g.milli_held();
      }
      std::sort(touched.begin(), touched.end());
      touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
      for (uint32_t n : touched) at.emplace_back(n, k), cost_on[n] += cands[k].cost, inside_on[n] += cands[k].inside_own;
    }
    std::sort(at.begin(), at.end());  // by node, then candidate position (cheapest first)
    const int64_t need = int64_t(gang.task.gpu_count) * (one_node ? gang.tasks : 1) * 1000;
    // (too small, candidates inside their own guarantee, cost, node, first pair of the node in `at`)
    std::vector<std::tuple<bool, int64_t, int64_t, uint32_t, size_t>> nodes;
    for (size_t a = 0; a < at.size(); ++a)
      if (a == 0 || at[a].first != at[a - 1].first) {
        const uint32_t n = at[a].first;
        nodes.emplace_back(work_.node(NodeId(n)).free_gpu_milli + room_on[n] < need, inside_on[n], cost_on[n], n, a);
      }
    std::sort(nodes.begin(), nodes.end());
    std::vector<Cand> grouped;
    std::vector<bool> taken(cands.size(), false);
    for (size_t k = 0; k < cands.size(); ++k)
      if (cands[k].leaving) grouped.push_back(cands[k]), taken[k] = true;
    for (const auto& [small, inside, cost, n, first] : nodes)
      for (size_t a = first; a < at.size() && at[a].first == n; ++a)
        if (!taken[at[a].second]) grouped.push_back(cands[at[a].second]), taken[at[a].second] = true;
    for (size_t k = 0; k < cands.size(); ++k)
      if (!taken[k]) grouped.push_back(cands[k]);
    cands = std::move(grouped);
  }

  // Add victims one by one on a scratch copy until the engine places the job. A fresh engine: its
  // score cache must not mix the scratch copy's node generations with the working copy's.
  // Release victims one by one on the working copy itself (their placements are put back below:
  // victims keep their resources this cycle) until the engine places the job. The engine's cache is
  // keyed by node generation, which every release/apply advances, so it stays valid.
  // Allocations as if the victims chosen so far were gone. Fits are checked against its limits and
  // owed guarantees (try_job checks the GPUs chosen too: a preemption for a placement they then
  // refuse would free room for nobody, again and again).
  FairShare after = *fs_;
  std::vector<Cand> chosen;
  bool fits = false, room_opened = false;
  std::vector<const std::vector<TaskPlacement>*> released;
  // A guarantee's owner may need more victims than one cycle's budget (a gang of whole nodes among
  // small borrowers): the search may take every candidate, and the victims beyond the budget are
  // preempted in later cycles (those already leaving then count first).
  const int cap = may_reclaim ? std::max(budget, int(cands.size())) : budget;
  for (const Cand& c : cands) {
    if (int(chosen.size()) >= cap) break;
    const Entry& v = entries_[c.idx];
    if (!c.by_priority) {  // reclaim only while the victim's queue still borrows
      if (!still_borrows(after, v, reclaim_classes)) continue;
    }
    after.add(v.job->queue, amounts(v), -1);
    const auto& pl = v.holding;
    size_t done = 0;
    for (; done < pl.size(); ++done)
      if (!work_.release(pl[done]).ok()) break;
    if (done < pl.size()) {  // inconsistent snapshot: put everything back and preempt nothing
      for (size_t k = 0; k < done; ++k) (void)work_.apply(pl[k]);
      reapply(released);
      return false;
    }
    released.push_back(&pl);
    chosen.push_back(c);
    // The job did not fit before any release, so a fit needs a task's room on a released node:
    // try the engine only once some released node can hold one task.
    if (!room_opened)
      for (const TaskPlacement& tp : pl)
        if (check_fit(work_.node(tp.node), gang.task) == Misfit::kFits) room_opened = true;
    if (room_opened && fits_under(after, e, gang)) {
      fits = true;
      break;
    }
  }
  if (!fits) {
    reapply(released);
    return false;
  }
  // Drop victims that turned out unnecessary (most expensive first, the last one is needed).
  for (size_t k = chosen.size() - 1; k-- > 0;) {
    const Entry& v = entries_[chosen[k].idx];
    const auto& pl = v.holding;
    if (!work_.apply_all(pl).ok()) continue;
    after.add(v.job->queue, amounts(v), +1);
    if (fits_under(after, e, gang)) {
      chosen.erase(chosen.begin() + long(k));
      released.erase(released.begin() + long(k));
    } else {
      for (const TaskPlacement& p : pl) (void)work_.release(p);
      after.add(v.job->queue, amounts(v), -1);
    }
  }
  reapply(released);

  const std::string need = gpus_text(e.milli);
  int fresh = 0, later = 0;
  for (const Cand& c : chosen) fresh += c.leaving ? 0 : 1;
  if (fresh > budget) {  // the first `budget` now (cheapest nodes first), the rest in later cycles
    later = fresh - budget;
    int kept = 0;
    std::vector<Cand> now;
    for (const Cand& c : chosen)
      if (c.leaving || kept++ < budget) now.push_back(c);
    chosen = std::move(now);
    fresh = budget;
    partial_ = true;
  }
  if (fresh == 0) {
    // The jobs already leaving are enough: nothing new is preempted; the job waits for them like any
    // job without room (its reservation is their exit). They are not counted by a later preemptor.
    for (const Cand& c : chosen) entries_[c.idx].claimed = true;
    only_leaving_ = true;
    return false;
  }
  for (const Cand& c : chosen) {
    Entry& v = entries_[c.idx];
    if (c.leaving) {  // not counted again by a later preemptor; no new decision
      v.claimed = true;
      continue;
    }
    const bool las_turn = c.by_priority && v.job->queue == e.job->queue && v.prio == e.prio;
    preempt(v, e, c.by_priority,
            las_turn ? "least attained service: job " + e.job->name + " of the same queue has run less and needs " + need
            : c.by_priority ? "priority: " + e.pc->name + " job " + e.job->name + " needs " + need
                            : "reclaim: queue " + tree_.queue(e.job->queue).name + " takes back its guarantee");
  }
  preemptions_ += fresh;
  // Victims keep their resources in the working copy this cycle, so nobody else takes the room.
  e.wait = WaitCategory::kPreempting;
  e.reason = "waiting for " + std::to_string(chosen.size()) +
             (chosen.size() == 1 ? " preempted job" : " preempted jobs") + " to checkpoint and exit";
  if (later > 0) e.reason += "; " + std::to_string(later) + " more to be preempted in later cycles (max_preemptions_per_cycle)";
  return true;
}

bool Cycle::movable(const Entry& v, const Entry& e) const {
  const Job& vj = *v.job;
  if (!v.running || v.victim || v.claimed || vj.state != JobState::kRunning || v.holding.empty()) return false;
  if (vj.checkpoint.interval <= 0 || v.pc->value > e.pc->value) return false;
  if (vj.last_preempted >= 0 && now_ - vj.last_preempted < cfg_.preemption_protection) return false;
  if (int(v.holding.size()) != vj.gang.tasks) return false;
  for (const TaskPlacement& p : v.holding) {
    if (p.node != v.holding.front().node) return false;
    for (const GpuGrant& g : p.gpus)
      if (g.kind != GrantKind::kWhole) return false;
  }
  return true;
}

Gang Cycle::mover_gang(const Entry& v) const {
  Gang g = gang_of(v);
  if (const GpuModel* m = work_.node(v.holding.front().node).gpu_model()) g.task.gpu_models = {m->name};
  if (g.tasks > 1) {
    g.topology.mode = TopologyMode::kRequired;
    g.topology.level = "node";
  }
  return g;
}

// Plans on the working copy as find_victims left it (this cycle's victims gone, earlier preemptors'
// claims placed). Jobs already leaving are released, and the borrowers the owner may reclaim (those
// inside their own guarantee last, then cheapest first, while their queue still borrows); then, node by node (the
// node that needs the fewest GPUs moved for one more task's room first), movable jobs are released
// until the engine places the gang. The jobs whose GPUs that fit uses move: each is placed with the
// fit applied, on its GPU model and one node, off a reservation's nodes, on free GPUs or GPUs of
// borrowers, which are then reclaimed too. Everything else is put back, and so is the working copy.
bool Cycle::find_moves(Entry& e, const Gang& gang, MovePlan& plan) {
  std::vector<std::string> classes;
  if (!below_guarantee_after(e, classes) || moves_ >= cfg_.max_moves_per_cycle) return false;
  const TaskRequest& t = gang.task;
  const bool one_node = gang.topology.mode == TopologyMode::kRequired && gang.topology.level == "node";
  // Moving frees GPUs in one place by taking as many elsewhere: it helps only tasks of several whole
  // GPUs, or a gang that must share one node.
  if (!t.whole_gpus() || t.gpu_count <= 0 || (t.gpu_count == 1 && !(one_node && gang.tasks > 1))) return false;
  FairShare after = *fs_;
  std::vector<size_t> released;  // entries whose holding is released here, in order
  std::vector<bool> is_borrower(entries_.size(), false);
  std::vector<bool> out(entries_.size(), false);
  auto release = [&](size_t i) {
    for (const TaskPlacement& p : entries_[i].holding) {
      Status st = work_.release(p);
      assert(st.ok() && "releasing a job for a move plan failed");
      (void)st;
    }
    released.push_back(i);
    out[i] = true;
  };
  std::vector<std::vector<TaskPlacement>> applied;  // the fit and the movers' places, while planning
  auto unwind = [&] {
    for (auto it = applied.rbegin(); it != applied.rend(); ++it)
      for (const TaskPlacement& p : *it) (void)work_.release(p);
    applied.clear();
    for (auto it = released.rbegin(); it != released.rend(); ++it)
      if (out[*it]) reapply({&entries_[*it].holding});
    released.clear();
  };
  std::vector<std::tuple<bool, int64_t, JobId, size_t>> borrowers;  // (inside own guarantee, cost, id)
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& v = entries_[i];
    if (!v.running || v.victim || v.claimed || v.holding.empty()) continue;
    if (v.job->state == JobState::kCheckpointing) {
      release(i);
    } else if (v.job->state == JobState::kRunning && v.job->queue != e.job->queue && reclaimable(v, e, classes)) {
      borrowers.emplace_back(inside_own_guarantee(v, classes), lost_work_cost(v), v.job->id, i);
    }
  }
  std::sort(borrowers.begin(), borrowers.end());
  for (const auto& [inside, cost, id, i] : borrowers) {
    if (!still_borrows(after, entries_[i], classes)) continue;
    release(i);
    is_borrower[i] = true;
    after.add(entries_[i].job->queue, amounts(entries_[i]), -1);
  }
  if (work_.total_gpus() * 1000 - work_.allocated_gpu_milli() < e.milli) {
    unwind();
    return false;
  }
  // Movable jobs per node that could hold a task, cheapest first.
  std::map<uint32_t, std::vector<size_t>> on_node;
  for (size_t i = 0; i < entries_.size(); ++i)
    if (!out[i] && movable(entries_[i], e) && could_host(work_.node(entries_[i].holding.front().node), t))
      on_node[entries_[i].holding.front().node.value].push_back(i);
  for (auto& [n, ks] : on_node)
    std::sort(ks.begin(), ks.end(), [&](size_t a, size_t b) {
      const int64_t ca = lost_work_cost(entries_[a]), cb = lost_work_cost(entries_[b]);
      return ca != cb ? ca < cb : entries_[a].job->id < entries_[b].job->id;
    });
  const int64_t per_task = t.gpu_count, tasks = gang.required_tasks();
  auto slots = [&](const Node& n) -> int64_t {
    if (!could_host(n, t)) return 0;
    return one_node ? (n.idle_gpus >= per_task * tasks ? tasks : 0) : n.idle_gpus / per_task;
  };
  const int room = cfg_.max_moves_per_cycle - moves_;
  int moving = 0;
  bool fits = false;
  while (!fits) {
    // The cheapest next step, (GPUs moved, lost work, node): one more task's room on a node (for a
    // one-node gang, the whole gang's).
    std::tuple<int64_t, int64_t, uint32_t> best{INT64_MAX, INT64_MAX, 0};
    for (const auto& [n, ks] : on_node) {
      const Node& node = work_.node(NodeId(n));
      const int64_t want = one_node ? per_task * tasks : per_task * (node.idle_gpus / per_task + 1);
      int64_t idle = node.idle_gpus, gpus = 0, cost = 0;
      for (size_t k = 0; k < ks.size() && idle < want; ++k) {
        if (out[ks[k]]) continue;
        const int64_t g = entries_[ks[k]].milli / 1000;
        idle += g, gpus += g, cost += lost_work_cost(entries_[ks[k]]);
      }
      if (idle >= want && gpus > 0 && std::make_tuple(gpus, cost, n) < best) best = {gpus, cost, n};
    }
    if (std::get<0>(best) == INT64_MAX) break;
    const Node& node = work_.node(NodeId(std::get<2>(best)));
    const int64_t want = one_node ? per_task * tasks : per_task * (node.idle_gpus / per_task + 1);
    for (size_t k : on_node[std::get<2>(best)]) {
      if (node.idle_gpus >= want) break;
      if (out[k]) continue;
      release(k);
      ++moving;
    }
    if (moving > room) break;
    int64_t have = 0;
    for (const Node& n : work_.nodes()) have = one_node ? std::max(have, slots(n)) : have + slots(n);
    if (have >= tasks) fits = fits_under(after, e, gang);
  }
  if (!fits || moving > room) {
    unwind();
    return false;
  }
  const std::vector<TaskPlacement> fit = last_fit_;
  auto gpus_of = [](const std::vector<TaskPlacement>& pl) {
    std::set<std::pair<uint32_t, uint16_t>> s;
    for (const TaskPlacement& p : pl)
      for (const GpuGrant& g : p.gpus) s.insert({p.node.value, g.gpu});
    return s;
  };
  auto overlaps = [&](size_t i, const std::set<std::pair<uint32_t, uint16_t>>& used) {
    for (const TaskPlacement& p : entries_[i].holding)
      for (const GpuGrant& g : p.gpus)
        if (used.count({p.node.value, g.gpu})) return true;
    return false;
  };
  // Movers the fit does not need stay; the others are placed with the fit applied.
  std::set<std::pair<uint32_t, uint16_t>> used = gpus_of(fit);
  for (size_t i : released)
    if (out[i] && !is_borrower[i] && entries_[i].job->state == JobState::kRunning) {
      if (overlaps(i, used)) plan.moved.push_back(i);
      else if (work_.apply_all(entries_[i].holding).ok()) out[i] = false;
      else plan.moved.push_back(i);
    }
  bool ok = !plan.moved.empty() && work_.apply_all(fit).ok();
  if (ok) applied.push_back(fit);
  std::sort(plan.moved.begin(), plan.moved.end(), [&](size_t a, size_t b) {
    return entries_[a].milli != entries_[b].milli ? entries_[a].milli > entries_[b].milli : entries_[a].job->id < entries_[b].job->id;
  });
  if (ok && res_.active && !off_reservation_) block_reserved(true);
  for (size_t k = 0; ok && k < plan.moved.size(); ++k) {
    PlacementResult r = trial_.place(work_, mover_gang(entries_[plan.moved[k]]));
    ok = r.outcome == Outcome::kPlaced && work_.apply_all(r.tasks).ok();
    if (ok) {
      for (const TaskPlacement& p : r.tasks)
        for (const GpuGrant& g : p.gpus) used.insert({p.node.value, g.gpu});
      applied.push_back(r.tasks);
      plan.dest.push_back(std::move(r.tasks));
    }
  }
  if (res_.active && !off_reservation_) block_reserved(false);
  // Borrowers whose GPUs the fit or a mover uses are reclaimed (while their queue still borrows,
  // cheapest first); the others are put back.
  FairShare confirm = *fs_;
  for (const auto& [inside, cost, id, i] : borrowers) {
    if (!ok || !is_borrower[i]) continue;
    if (!overlaps(i, used) && work_.apply_all(entries_[i].holding).ok()) {
      out[i] = false;
      continue;
    }
    ok = still_borrows(confirm, entries_[i], classes);
    confirm.add(entries_[i].job->queue, amounts(entries_[i]), -1);
    plan.reclaimed.push_back(i);
  }
  for (size_t i : released)
    if (ok && out[i] && entries_[i].job->state == JobState::kCheckpointing && overlaps(i, used)) plan.leaving.push_back(i);
  if (ok) {
    const ClassAmounts got = placement_amounts(work_, fit);
    ok = confirm.within_limits(e.job->queue, got).ok() && takes_owed(confirm, e, got).empty();
  }
  unwind();
  if (!ok) {
    plan = {};
    last_fit_.clear();
    return false;
  }
  last_fit_ = fit;
  return true;
}

// Emits the plan's decisions. The movers' new GPUs that are free now are held for the rest of the
// cycle (the rest belong to borrowers reclaimed for them, which keep them until they leave).
bool Cycle::commit_moves(Entry& e, MovePlan& plan) {
  const std::string owner = tree_.queue(e.job->queue).name;
  for (size_t i : plan.reclaimed) preempt(entries_[i], e, false, "reclaim: queue " + owner + " takes back its guarantee");
  for (size_t k = 0; k < plan.moved.size(); ++k) {
    Entry& v = entries_[plan.moved[k]];
    preempt(v, e, false,
            "move: checkpoints and restarts at once on node " + work_.node(plan.dest[k].front().node).name +
                " so that job " + e.job->name + " of queue " + owner + ", owed its guarantee, fits whole");
    hold_idle(plan.dest[k]);
    out_.preempt.back().move_to = std::move(plan.dest[k]);
  }
  for (size_t i : plan.leaving) entries_[i].claimed = true;  // not counted again by a later preemptor
  const int fresh = int(plan.reclaimed.size() + plan.moved.size());
  preemptions_ += fresh;
  moves_ += int(plan.moved.size());
  e.wait = WaitCategory::kPreempting;
  e.reason = "waiting for " + std::to_string(fresh) + (fresh == 1 ? " preempted job" : " preempted jobs") +
             " to checkpoint and exit (" + std::to_string(plan.moved.size()) + " moved to other GPUs to make room)";
  return true;
}

// Holds, GPU by GPU, the whole GPUs of `pl` that are idle on the working copy now.
void Cycle::hold_idle(const std::vector<TaskPlacement>& pl) {
  for (const TaskPlacement& p : pl)
    for (const GpuGrant& g : p.gpus)
      if (g.kind == GrantKind::kWhole && work_.node(p.node).gpus[g.gpu].idle())
        (void)work_.apply(TaskPlacement{p.node, MilliCpu{0}, MiB{0}, p.task_class, {g}});
}

// Dynamic MIG: what could not be placed (MIG slices, whole GPUs for gangs) drives layout changes
// of idle GPUs; the planner applies NVIDIA's placement rules, the reconfigure cost and hysteresis.
void Cycle::plan_mig() {
  MigPlanInput in;
  in.cluster = &work_;
  in.now = now_;
  in.last_changed = snap_.mig_last_changed;
  // (profile, model, allowed pool kinds after the pool rules) -> instances
  std::map<std::tuple<std::string, std::string, PoolKindMask>, int> wants;
  // Whole-GPU demand comes first for idle GPUs, except that a MIG request its queue is owed (within
  // its guarantee) comes before whole-GPU demand that would be borrowed.
  bool owed_mig = false;
  for (const Entry& e : entries_)
    if (!e.running && !e.started && e.no_room && e.job->gang.task.mig() && owed_start(e)) owed_mig = true;
  for (const Entry& e : entries_) {
    if (e.running || e.started || !e.no_room) continue;
    const TaskRequest& t = e.job->gang.task;
    if (t.mig())
      wants[{t.mig_profile, t.gpu_models.empty() ? "" : t.gpu_models.front(), gang_of(e).task.pool_kinds}] += e.job->gang.tasks;
    else if (t.whole_gpus() && (!owed_mig || owed_start(e))) in.whole_gpu_demand += t.gpu_count * e.job->gang.tasks;
  }
  if (wants.empty() && in.whole_gpu_demand == 0) return;
  for (const auto& [k, n] : wants) in.mig_demand.push_back({std::get<0>(k), n, std::get<1>(k), std::get<2>(k)});
  std::vector<GpuLayoutChange> changes = plan_mig_layouts(in, cfg_.mig);
  if (changes.empty()) return;
  int to_mig = 0, to_whole = 0;
  Time ready = changes.front().ready_at;
  for (GpuLayoutChange& c : changes) {
    (c.enable_mig ? to_mig : to_whole) += 1;
    ready = std::min(ready, c.ready_at);
    out_.reconfigure_mig.push_back({c.gpu, c.enable_mig, std::move(c.layout), std::move(c.reason), c.ready_at});
  }
  for (Entry& e : entries_) {
    if (e.running || e.started || !e.no_room) continue;
    const bool mig = e.job->gang.task.mig();
    const int n = mig ? to_mig : to_whole;
    if (n == 0) continue;
    e.wait = WaitCategory::kMigReconfiguring;
    e.reason += "; " + std::string(mig ? "MIG layout change planned on " : "turning MIG GPUs back to whole on ") +
                std::to_string(n) + (n == 1 ? " GPU" : " GPUs") + ", ready at t=" + std::to_string(ready);
    if (e.estimated_start < 0 || ready < e.estimated_start) e.estimated_start = ready;
  }
}

}  // namespace

Decisions Scheduler::cycle(const Snapshot& snapshot, Time now) const {
  if (!snapshot.cluster || !snapshot.queues) {
    Decisions d;
    for (const Job& j : snapshot.jobs)
      if (j.state == JobState::kPending) d.pending.push_back({j.id, "snapshot: no cluster or queue tree given", WaitCategory::kOther, 0, 0, {}, false});
    return d;
  }
  // Nothing waits and no eviction is due: nothing to decide (and no working copy to build).
  const bool idle = std::none_of(snapshot.jobs.begin(), snapshot.jobs.end(), [&](const Job& j) {
    return j.state == JobState::kPending || (j.state == JobState::kCheckpointing && j.evict_by >= 0 && j.evict_by <= now);
  });
  if (idle) return {};
  return Cycle(config_, *policy_, snapshot, now).run();
}

}  // namespace tessera
