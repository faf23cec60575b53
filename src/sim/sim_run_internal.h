// The time-driven simulator's internals (sim_run.cc, sim_run_cluster.cc): the plain-Kubernetes
// baseline (K8sDefault), per-job and event records, and the Simulation that replays a workload through
// the core's cycle. Internal to src/sim: include sim/sim_run.h instead. One Simulation per
// run_simulation call; single-threaded.
#pragma once

#include "sim/sim_run.h"

#include <cmath>
#include <deque>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <memory>
#include <queue>
#include <set>
#include "core/placement/engine.h"
#include "core/placement/fit.h"
#include "core/placement/policy.h"
#include "core/rng.h"
#include "core/sched/apply.h"
#include "core/sched/job_order.h"
#include "core/sched/runtime_history.h"
#include "sim/sim_provider.h"

namespace tessera::sim::simrun {

inline constexpr const char* kK8s = "k8s-default";
inline constexpr Time kNoHold = Time(1) << 60;  // a "now" past any on-demand fallback hold

// Plain Kubernetes: pods one by one in creation order, least-allocated spreading, no gangs (a gang's
// pods hold their GPUs while the rest wait), no quotas, no preemption, no MIG or sharing (the device
// plugin hands out whole GPUs). Bound pods are reported as starts with the tasks placed this cycle.
// Creation order is the core's FIFO job order (core/sched/job_order.h); the binding is not the
// core's cycle, which places a gang whole or not at all (docs/simulator.md).
class K8sDefault {
 public:
  K8sDefault() : policy_(make_policy("spread").value()), engine_(*policy_, EngineOptions{}) {}
  Decisions cycle(const Snapshot& snap) {
    ClusterState work = *snap.cluster;
    std::vector<const Job*> pend;
    OrderInput in;
    for (const Job& j : snap.jobs)
      if (j.state == JobState::kPending) {
        pend.push_back(&j);
        OrderJob o;  // FIFO reads the submit time and the id only
        o.id = j.id;
        o.submitted = j.submitted;
        in.jobs.push_back(o);
      }
    const std::unique_ptr<JobOrderCursor> order = job_order_policy(JobOrder::kFifo).begin(std::move(in));
    Decisions d;
    std::set<std::string> full;  // pod shapes that found no node this cycle
    while (order->next_tier())
      while (const std::optional<size_t> k = order->next()) bind(*pend[*k], work, full, d);
    return d;
  }

 private:
  // Binds what fits of j's unbound pods on `work`; a pod shape that found no node is not tried again.
  // Pods bind in task order (task i is pod i; with tasks that differ, each pod asks its own size).
  void bind(const Job& j, ClusterState& work, std::set<std::string>& full, Decisions& d) {
    Gang one = j.gang;
    one.tasks = 1;
    one.min_tasks = 0;
    one.topology = {};
    one.sizes.clear();
    StartDecision s{j.id, {}};
    std::string shape;
    for (int k = int(j.placement.size()); k < j.gang.tasks; ++k) {
      if (shape.empty() || j.gang.varied()) {  // a uniform gang's pods all ask the same
        one.task = j.gang.request(k);
        shape = std::to_string(one.task.gpu_count) + "/" + std::to_string(one.task.cpu.v) + "/" +
                std::to_string(one.task.memory.v);
      }
      if (full.count(shape)) break;
      PlacementResult r = engine_.place(work, one);
      if (r.outcome != Outcome::kPlaced || !work.apply_all(r.tasks).ok()) {
        full.insert(shape);
        break;
      }
      s.placement.push_back(r.tasks.front());
    }
    const int bound = int(j.placement.size() + s.placement.size());
    if (!s.placement.empty()) d.start.push_back(std::move(s));
    if (bound < j.gang.tasks)
      d.pending.push_back({j.id, std::to_string(bound) + " of " + std::to_string(j.gang.tasks) + " pods bound", WaitCategory::kCapacity, 0, 0, {}, false});
  }

  std::unique_ptr<ScoringPolicy> policy_;
  PlacementEngine engine_;
};

struct SimJob {
  const WorkloadJob* spec = nullptr;
  Job job;
  bool arrived = false, finished = false;
  Time first_start = -1, finish = -1;
  Time queued_since = -1;   // waiting (first time or after a stop) since then; -1 while running
  double queued_s = 0;      // time spent waiting so far, first wait and waits after stops
  double done = 0;          // work done and safe (seconds of well-placed running)
  Time run_start = -1;      // current run: when it got its GPUs
  Time progress_from = -1;  // current run: when work starts advancing (after the restart cost)
  double rate = 1;          // work per second in the current run (1 / spread slowdown)
  uint64_t run_gen = 0;     // invalidates stale finish events
  Time stop_at = -1;        // preempted: leaves at this time
  bool saving = false;      // preempted with a checkpoint request: saves on the way out
  int64_t gpus_milli = 0;   // GPU milli it holds now
  int64_t useful_milli = 0; // of which useful (effective utilisation)
  bool interrupted = false; // a spot notice hit it: its next stop counts as interruption loss
  bool spread = false;      // current run: over several nodes
  double run_s = 0, spread_run_s = 0;  // time holding GPUs, of which spread (SimJobRecord)
  int reclaimed = 0, by_las = 0, by_priority = 0, moved = 0;  // preemptions by kind
};

enum class Ev : uint8_t { kArrive, kFinish, kStop, kFail, kRepair, kMigReady, kTick };
struct Event {
  Time t;
  Ev kind;
  uint32_t id;      // job, node or GPU index (see kind)
  uint64_t gen;     // kFinish: run generation; kMigReady: GPU ordinal
  bool operator>(const Event& o) const {
    if (t != o.t) return t > o.t;
    if (kind != o.kind) return kind > o.kind;
    if (id != o.id) return id > o.id;
    return gen > o.gen;
  }
};

// GPU milli a pending job asks for (a MIG slice counts as 1/7).
inline int64_t need_milli(const Job& job) {
  if (job.gang.varied()) return job.gang.total_gpu_milli();
  const TaskRequest& tr = job.gang.task;
  const int64_t per = tr.mig() ? 1000 / 7 : (tr.gpu_count > 0 ? int64_t(tr.gpu_count) * tr.milli_per_gpu.v : 0);
  return per * job.gang.tasks;
}

class Simulation {
 public:
  Simulation(const SimCluster& c, const Workload& w, const SimRunOptions& o) : setup_(c), wl_(w), opt_(o), cluster_(c.cluster) {}
  Result<SimReport> run();

 private:
  Status build();
  void provider_event(const ProviderEvent& e, Time t);
  void autoscale(Time t, const Decisions& d);
  void consolidate(Time t);
  std::vector<uint32_t> jobs_on(NodeId n) const;  // active jobs with a task on n (ascending id)
  // A node failed or was reclaimed at t: its jobs stop and keep only their last checkpoint.
  void lose_jobs_on(NodeId n, Time t);
  // Time to a node's next failure: exponential with mean --mtbf.
  Time failure_gap() {
    const double u = (double(rng_.uniform(1u << 30)) + 0.5) / double(1u << 30);
    return Time(-std::log(u) * double(opt_.node_mtbf));
  }
  // A node is in service when the provider has it up and it has not failed.
  void refresh_node(NodeId n) {
    const bool in = provider_->up(n) && !failed_[n.value];
    for (const Gpu& g : cluster_.node(n).gpus) set_gpu_health({n, g.index}, in ? GpuHealth::kHealthy : GpuHealth::kUnhealthy);
    Status s = cluster_.set_schedulable(n, in && !cordoned_[n.value]);
    (void)s;
  }
  void track_kinds(const TaskPlacement& p, int sign, bool inference) {
    const int64_t held = milli_held(p);
    const Node& n = cluster_.node(p.node);
    pool_milli_[n.pool.value] += sign * held;
    if (inference && n.pool_kind == PoolKind::kSpot) inference_spot_milli_ += sign * held;
  }
  void push(Time t, Ev k, uint32_t id, uint64_t gen = 0) { events_.push({t, k, id, gen}); }
  void start_run(SimJob& j, Time t);
  // The job leaves its GPUs at t: finished, preempted (saving if it was asked to checkpoint) or failed.
  void end_run(SimJob& j, Time t, bool finished, bool failed);
  // Accounting once the job has left (what it gave back: v), however it left.
  void account_left(SimJob& j, const Vacated& v, Time t, bool finished, bool failed);
  void handle(const Event& e, Time t, int64_t& finished);  // one of the simulation's own events
  void track_guarantees(Time t);
  // Every job has arrived, none runs (or holds GPUs), and none has started or finished for
  // opt_.stall_limit (SimRunOptions): the run may stop.
  bool stalled(Time t) const;
  void report(Time end);  // the metrics and job records into rep_ (sim_run_report.cc)
  void cycle(Time t);
  void account(Time t);  // integrates metrics from last_t_ to t
  void sample(Time t);
  int64_t task_useful(const SimJob& j, const TaskPlacement& p) const;
  double fragmentation() const;
  // Healthy GPU capacity in milli: all GPUs less those failed or reconfiguring.
  int64_t healthy_milli() const { return (cluster_.total_gpus() - out_of_service_) * 1000; }
  void set_gpu_health(GpuRef g, GpuHealth h) {
    const bool was = cluster_.node(g.node).gpus[g.index].health == GpuHealth::kHealthy;
    if (!cluster_.set_health(g, h).ok()) return;
    out_of_service_ += (was ? 1 : 0) - (h == GpuHealth::kHealthy ? 1 : 0);
  }
  int64_t out_of_service_ = 0;
  void mig_ready(GpuRef g) {
    if (cluster_.node(g.node).gpus[g.index].health == GpuHealth::kReconfiguring) set_gpu_health(g, GpuHealth::kHealthy);
  }

  const SimCluster& setup_;
  const Workload& wl_;
  SimRunOptions opt_;
  ClusterState cluster_;
  QueueTree tree_;
  std::unique_ptr<Scheduler> sched_;
  std::unique_ptr<K8sDefault> k8s_;
  bool k8s_mode_ = false;
  std::vector<SimJob> jobs_;
  std::vector<uint32_t> team_of_;      // job -> team index
  std::vector<std::string> teams_;
  std::vector<int64_t> team_guarantee_;  // milli, class "any" or the sum over classes
  std::vector<int64_t> team_entitlement_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  RuntimeHistory history_;
  std::vector<double> usage_;          // decayed usage per queue (normalised)
  std::map<GpuRef, Time> mig_changed_;
  std::optional<HeldReservation> reservation_;  // the last cycle's, passed back to the next
  JobWaitLog wait_log_{0};             // why each job waited (SimReport::jobs)
  std::vector<GpuRef> mig_pending_;    // GPUs reconfiguring, by event ordinal
  Rng rng_{1};
  std::set<uint32_t> active_;          // arrived, unfinished jobs
  // Metrics state.
  Time last_t_ = 0, first_arrival_ = 0, last_cycle_ = -1;
  Time last_progress_ = 0;  // the last arrival, start or finish
  int64_t arrived_ = 0;     // jobs arrived so far
  bool dirty_ = false;
  Time tick_at_ = -1;  // the next cycle tick (-1: none); an earlier need replaces a later tick
  void want_tick(Time at) {
    if (tick_at_ >= 0 && tick_at_ <= at) return;
    tick_at_ = at;
    push(at, Ev::kTick, 0);
  }
  int64_t alloc_milli_ = 0, useful_milli_ = 0;
  double alloc_int_ = 0, useful_int_ = 0, cap_int_ = 0, jain_int_ = 0, jain_time_ = 0, frag_int_ = 0, frag_time_ = 0;
  std::vector<int64_t> team_alloc_, team_pending_milli_;
  // Per team: since when a condition holds (-1: not now); each stretch, once over, adds to a total
  // and may be the longest.
  struct Stretches {
    std::vector<Time> since;
    void update(size_t i, bool on, Time t, double& total, double& longest) {
      if (on && since[i] < 0) since[i] = t;
      if (!on && since[i] >= 0) close(i, t, total, longest);
    }
    void close(size_t i, Time t, double& total, double& longest) {
      total += double(t - since[i]);
      longest = std::max(longest, double(t - since[i]));
      since[i] = -1;
    }
  };
  Stretches below_;  // below the guarantee with demand pending
  Stretches unmet_;  // a waiting job fits within the team's unused guarantee
  std::vector<int64_t> team_min_pending_milli_;  // per team: the smallest waiting job (0: none)
  SimReport rep_;
  double lost_gpu_s_ = 0, lost_interrupt_gpu_s_ = 0;
  // Capacity pools and the simulated provider.
  std::unique_ptr<SimProvider> provider_;
  bool autoscale_ = false;
  std::vector<bool> failed_, cordoned_, draining_;  // draining: emptied by consolidation
  Time next_consolidation_ = 0;
  std::vector<Time> idle_since_;       // elastic nodes: idle since (-1 = busy or down)
  bool scale_tick_pending_ = false;
  std::vector<int64_t> pool_milli_;    // allocated milli-GPU per pool
  std::vector<double> pool_int_;       // its integral over time
  int64_t inference_spot_milli_ = 0;
  double inference_spot_int_ = 0;
};

}  // namespace tessera::sim::simrun
