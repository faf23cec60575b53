// Applying decisions and a job's transitions (apply.h).
#include "core/sched/apply.h"

#include <algorithm>
#include <utility>

namespace tessera {

const char* refusal_name(Refusal r) {
  switch (r) {
    case Refusal::kUnknownJob: return "unknown_job";
    case Refusal::kNotPending: return "not_pending";
    case Refusal::kNodeTakesNoWork: return "node_takes_no_work";
    case Refusal::kPlacementConflict: return "placement_conflict";
    case Refusal::kNotRunning: return "not_running";
    case Refusal::kCannotCheckpoint: return "cannot_checkpoint";
    case Refusal::kNotPlaced: return "not_placed";
    case Refusal::kGpuNotHealthy: return "gpu_not_healthy";
    case Refusal::kMigLayoutRejected: return "mig_layout_rejected";
  }
  return "unknown";
}

namespace {

// Releases the job's placement (except the tasks kept) and hands it back as a value.
Vacated give_back(Job& job, ClusterState& cluster, const std::vector<bool>& keep) {
  Vacated v;
  v.job = job.id;
  v.was = job.state;
  v.placement = std::move(job.placement);
  job.placement.clear();
  v.milli = milli_held(v.placement);
  for (size_t t = 0; t < v.placement.size(); ++t) {
    if (t < keep.size() && keep[t]) {
      v.kept.push_back({t, v.placement[t]});
      continue;
    }
    if (Status s = cluster.release(v.placement[t]); !s.ok() && v.released.ok()) v.released = s;
  }
  return v;
}

// A refusal of decision `index` of kind `kind`, for `job` (none for MIG changes).
Refused refusal(DecisionKind kind, size_t index, JobId job = {}) {
  Refused no;
  no.decision = kind;
  no.index = index;
  no.job = job;
  return no;
}

bool placed(JobState s) { return s == JobState::kRunning || s == JobState::kCheckpointing; }

// The placement as it is held once applied: the MIG instances it created now exist.
std::vector<TaskPlacement> settled(std::vector<TaskPlacement> ps) {
  for (TaskPlacement& p : ps)
    for (GpuGrant& g : p.gpus) g.mig_create = false, g.mig_destroy = 0;
  return ps;
}

void preempt_one(const PreemptDecision& p, size_t index, ClusterState& cluster, const JobLookup& jobs, Time now,
                 const ApplyOptions& o, ApplyResult& out) {
  Job* j = jobs(p.victim);
  Refused no = refusal(DecisionKind::kPreempt, index, p.victim);
  if (!j) {
    no.reason = Refusal::kUnknownJob;
    out.refused.push_back(std::move(no));
    return;
  }
  PreemptedJob e;
  e.decision = index;
  e.job = p.victim;
  e.for_job = p.for_job;
  e.phase = p.phase;
  e.was = j->state;
  e.evict_by = p.evict_by;
  e.reason = p.reason;
  if (p.phase == PreemptPhase::kRequestCheckpoint) {
    const std::optional<Refusal> r = request_checkpoint(*j, p.evict_by, p.move_to);
    if (r == Refusal::kNotRunning) {
      no.reason = *r;
      out.refused.push_back(std::move(no));
      return;
    }
    if (!r) {  // checkpointing now; it leaves when it has saved, or at evict_by
      e.effect = PreemptEffect::kCheckpointRequested;
      e.move = !j->move_to.empty();
      out.preempted.push_back(std::move(e));
      return;
    }
    // kCannotCheckpoint: it leaves now, like an eviction.
  } else if (!placed(j->state)) {
    no.reason = Refusal::kNotPlaced;
    out.refused.push_back(std::move(no));
    return;
  }
  if (o.leave == LeaveMode::kAtOnce) {
    VacateOptions v;
    if (o.keep_held) v.keep = o.keep_held(*j);
    e.effect = PreemptEffect::kLeft;
    e.vacated = vacate(*j, cluster, now, v);
  } else {
    e.effect = PreemptEffect::kToLeave;
  }
  out.preempted.push_back(std::move(e));
}

void reconfigure_one(const MigReconfigDecision& m, size_t index, ClusterState& cluster, Time now, ApplyResult& out) {
  Refused no = refusal(DecisionKind::kMigReconfigure, index);
  no.gpu = m.gpu;
  const bool exists = m.gpu.node.value < cluster.node_count() && m.gpu.index < cluster.node(m.gpu.node).gpus.size();
  if (!exists || cluster.node(m.gpu.node).gpus[m.gpu.index].health != GpuHealth::kHealthy) {
    no.reason = Refusal::kGpuNotHealthy;
    no.detail = exists ? "the GPU is not healthy" : "no such GPU";
    out.refused.push_back(std::move(no));
    return;
  }
  if (Status s = cluster.set_mig_layout(m.gpu, m.enable_mig, m.layout); !s.ok()) {
    no.reason = Refusal::kMigLayoutRejected;
    no.detail = s.message();
    out.refused.push_back(std::move(no));
    return;
  }
  (void)cluster.set_health(m.gpu, GpuHealth::kReconfiguring);  // the GPU exists: cannot fail
  out.reconfigured.push_back({index, m.gpu, m.enable_mig, std::max(m.ready_at, now)});
}

void start_one(const StartDecision& s, size_t index, ClusterState& cluster, const JobLookup& jobs, Time now,
               const ApplyOptions& o, ApplyResult& out) {
  Job* j = jobs(s.job);
  Refused no = refusal(DecisionKind::kStart, index, s.job);
  if (!j || j->state != JobState::kPending) {
    no.reason = j ? Refusal::kNotPending : Refusal::kUnknownJob;
    out.refused.push_back(std::move(no));
    return;
  }
  for (const TaskPlacement& p : s.placement) {
    const bool exists = p.node.value < cluster.node_count();
    if (exists && (o.takes_work ? o.takes_work(p.node) : cluster.node(p.node).schedulable)) continue;
    no.reason = exists ? Refusal::kNodeTakesNoWork : Refusal::kPlacementConflict;
    no.node = p.node;
    if (!exists) no.detail = "placement names a node that does not exist";
    out.refused.push_back(std::move(no));
    return;
  }
  if (Status st = cluster.apply_all(s.placement); !st.ok()) {
    no.reason = Refusal::kPlacementConflict;
    no.detail = st.message();
    out.refused.push_back(std::move(no));
    return;
  }
  StartedJob e;
  e.decision = index;
  e.job = s.job;
  e.off_move = !j->move_to.empty() && j->move_to != s.placement;
  e.placement = settled(s.placement);
  j->move_to.clear();
  j->placement.insert(j->placement.end(), e.placement.begin(), e.placement.end());
  e.running = int(j->placement.size()) >= j->gang.required_tasks();
  if (e.running) {
    j->state = JobState::kRunning;
    const bool restarted = j->preemptions > 0;
    j->started = now + (o.started == StartClock::kAfterRestartCost && restarted
                            ? std::max<Duration>(0, j->checkpoint.restart_cost)
                            : 0);
    if (o.checkpoint_on_start == CheckpointOnStart::kFromStart && j->checkpoint.interval > 0)
      j->checkpoint.last = j->started;
  }
  out.started.push_back(std::move(e));
}

}  // namespace

std::optional<Refusal> request_checkpoint(Job& job, Time evict_by, std::vector<TaskPlacement> move_to) {
  if (job.state != JobState::kRunning) return Refusal::kNotRunning;
  if (job.checkpoint.interval <= 0) return Refusal::kCannotCheckpoint;
  job.state = JobState::kCheckpointing;
  job.evict_by = evict_by;
  job.move_to = std::move(move_to);
  return std::nullopt;
}

Vacated vacate(Job& job, ClusterState& cluster, Time now, const VacateOptions& options) {
  Vacated v = give_back(job, cluster, options.keep);
  job.state = JobState::kPending;
  job.last_preempted = now;
  job.evict_by = -1;
  ++job.preemptions;
  if (options.checkpointed) job.checkpoint.last = now;
  if (options.drop_move) job.move_to.clear();
  return v;
}

Vacated end_job(Job& job, ClusterState& cluster, JobState final_state, const std::vector<bool>& keep) {
  Vacated v = give_back(job, cluster, keep);
  job.state = final_state;
  return v;
}

bool cancel_move(Job& job) {
  if (job.move_to.empty()) return false;
  job.move_to.clear();
  return true;
}

ApplyResult apply_decisions(const Decisions& d, ClusterState& cluster, const JobLookup& jobs, Time now,
                            const ApplyOptions& options) {
  ApplyResult out;
  for (size_t i = 0; i < d.preempt.size(); ++i) preempt_one(d.preempt[i], i, cluster, jobs, now, options, out);
  for (size_t i = 0; i < d.reconfigure_mig.size(); ++i) reconfigure_one(d.reconfigure_mig[i], i, cluster, now, out);
  for (size_t i = 0; i < d.start.size(); ++i) start_one(d.start[i], i, cluster, jobs, now, options, out);
  for (const PendingInfo& p : d.pending) {
    Job* j = jobs(p.job);
    if (j && j->state == JobState::kPending && !p.awaits_move && cancel_move(*j)) out.moves_dropped.push_back(p.job);
  }
  return out;
}

}  // namespace tessera
