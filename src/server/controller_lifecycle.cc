// Controller::State: a job's lifecycle: resources given back, ends, requeues, losses, checkpoint
// requests, and what follows a release (drains finishing).
#include "server/controller_state.h"

namespace tessera::server {

std::vector<bool> Controller::State::tasks_kept(const JobRecord& r) const {
  std::vector<bool> keep(r.job.placement.size(), false);
  for (size_t t = 0; t < r.job.placement.size(); ++t) {
    const TaskRun* tr = t < r.tasks.size() ? &r.tasks[t] : nullptr;
    const bool may_run = tr && (tr->state == ReportedState::kRunning || tr->recovered || (!tr->state && tr->offered_beat >= 0));
    keep[t] = opt.agents_required && may_run && node_admin[r.job.placement[t].node.value].agent_ready;
  }
  return keep;
}

void Controller::State::gave_back(JobRecord& r, const Vacated& v) {
  assert(v.released.ok());
  for (const KeptTask& k : v.kept) stopping_tasks.push_back(StoppingTask{r.id, r.attempt, int(k.task), k.placement});
  r.tasks.clear();
}

void Controller::State::release_stopped(NodeId node, const std::set<std::tuple<int64_t, int64_t, int>>* still_running, WriteBatch& b) {
  bool freed = false;
  for (auto it = stopping_tasks.begin(); it != stopping_tasks.end();) {
    if (it->placement.node == node && (!still_running || !still_running->count({it->job, it->attempt, it->task}))) {
      Status st = cluster.release(it->placement);
      assert(st.ok());
      (void)st;
      it = stopping_tasks.erase(it);
      freed = true;
    } else {
      ++it;
    }
  }
  if (freed) {
    dirty = true;
    after_release(b);
  }
}

void Controller::State::finish(JobRecord& r, JobState final_state, const std::string& reason, WriteBatch& b, const std::string& actor,
            EventKind kind, Json detail) {
  const int64_t t_ms = stamp_ms();  // one reading: finished, finished_ms and the event's time
  const Time t = t_ms / 1000;
  if (placed(r.job.state)) {
    if (final_state == JobState::kSucceeded && r.job.started >= 0)
      runtimes.record(r.job.user, r.job.name, t - r.job.started);
    const Vacated v = end_job(r.job, cluster, final_state, tasks_kept(r));
    if (r.job.started >= 0) r.job.attained_gpu_s += v.milli * std::max<Time>(0, t - r.job.started) / 1000;
    gave_back(r, v);
  }
  r.job.state = final_state;
  r.finished = t;
  r.finished_ms = t_ms;
  r.end_reason = reason;
  m.finished->inc({job_state_name(final_state), r.queue_name});
  active_ids.erase(r.id);
  unmark_placed(r.id);
  r.pending.reset();
  detail["reason"] = reason;
  add_utilisation(r, detail);
  b.events.push_back(event(r.id, kind, actor, detail, t_ms));
  b.jobs.push_back(row(r));
  dirty = true;
  after_release(b);
}

void Controller::State::add_utilisation(JobRecord& r, Json& detail) {
  if (r.util_sampled > 0) detail["gpu_util_pct"] = double(r.util_weighted) / double(r.util_sampled);
  r.util_weighted = r.util_sampled = 0;
}

void Controller::State::requeue(JobRecord& r, EventKind kind, const std::string& reason, WriteBatch& b, bool checkpointed,
             Json extra) {
  const Time t = now();
  VacateOptions how;
  how.checkpointed = checkpointed;
  how.keep = tasks_kept(r);
  const int preemptions = r.job.preemptions;
  const Time last_preempted = r.job.last_preempted;
  const Vacated v = vacate(r.job, cluster, t, how);
  if (kind == EventKind::kInterrupted) {  // its user's or the operator's stop: not a preemption
    r.job.preemptions = preemptions;
    r.job.last_preempted = last_preempted;
  }
  requeued(r, v, t, kind, reason, b, checkpointed, std::move(extra));
}

void Controller::State::requeued(JobRecord& r, const Vacated& v, Time t, EventKind kind, const std::string& reason,
                                 WriteBatch& b, bool checkpointed, Json extra) {
  if (kind == EventKind::kPreempted) {
    m.preemptions->inc();
    m.preempted_gpu_hours->inc({}, attempt_gpu_hours(v.milli, r.job.started, t));
  } else if (kind == EventKind::kLost) {
    m.losses->inc();
    m.lost_gpu_hours->inc({}, attempt_gpu_hours(v.milli, r.job.started, t));
  }
  if (r.job.started >= 0) r.job.attained_gpu_s += v.milli * std::max<Time>(0, t - r.job.started) / 1000;
  gave_back(r, v);
  unmark_placed(r.id);
  r.master_port = 0;
  r.stop_cause = StopCause::kPreempt;
  r.stop_by.clear();
  Json detail{{"reason", reason}, {"checkpointed", checkpointed}};
  detail.update(extra);
  add_utilisation(r, detail);
  b.events.push_back(event(r.id, kind, "scheduler", detail));
  b.events.push_back(event(r.id, EventKind::kRequeued, "scheduler"));
  b.jobs.push_back(row(r));
  dirty = true;
  after_release(b);
}

void Controller::State::lose(JobRecord& r, const std::string& reason, WriteBatch& b, Time hold_until) {
  if (!placed(r.job.state)) return;
  const config::RestartPolicy& rp = r.spec.restart;
  if (r.restarts >= rp.max_restarts) {
    m.losses->inc();
    m.lost_gpu_hours->inc({}, attempt_gpu_hours(r, now()));
    finish(r, JobState::kFailed,
           reason + "; no restarts left (restart.max_restarts is " + std::to_string(rp.max_restarts) + ")", b,
           "scheduler", EventKind::kFailed, Json{{"restarts", r.restarts}});
    return;
  }
  ++r.restarts;
  int64_t backoff = std::min<int64_t>(3600, rp.backoff << std::min(r.restarts - 1, 12));
  const bool held = hold_until > now() + backoff;
  if (held) backoff = hold_until - now();
  r.not_before = now() + backoff;
  r.end_reason = reason;
  r.pending.reset();
  // Lost: it restarts wherever it fits, not on GPUs held for a move.
  VacateOptions how;
  how.drop_move = true;
  how.keep = tasks_kept(r);
  const Time t = now();
  const Vacated v = vacate(r.job, cluster, t, how);
  requeued(r, v, t, EventKind::kLost,
           reason + " (restart " + std::to_string(r.restarts) + " of " + std::to_string(rp.max_restarts) + " in " +
               std::to_string(backoff) + " s" + (held ? ", once the old attempt's task lease has run out" : "") +
               (r.resume_from.empty() ? "" : ", from checkpoint " + r.resume_from) + ")",
           b, false);
}

void Controller::State::request_checkpoint(JobRecord& r, Time evict_by, const std::string& reason, WriteBatch& b) {
  const std::optional<Refusal> refused = tessera::request_checkpoint(r.job, evict_by);
  if (refused == Refusal::kCannotCheckpoint)
    requeue(r, EventKind::kPreempted, reason + " (the job does not checkpoint: stopped now)", b, false);
  else if (!refused)
    checkpoint_requested(r, evict_by, reason, b);
}

void Controller::State::checkpoint_requested(JobRecord& r, Time evict_by, const std::string& reason, WriteBatch& b) {
  b.events.push_back(event(r.id, EventKind::kCheckpointRequested, "scheduler", Json{{"reason", reason}, {"evict_by", evict_by}}));
  b.jobs.push_back(row(r));
}

void Controller::State::after_release(WriteBatch& b) {
  for (size_t i = 0; i < node_admin.size(); ++i) {
    NodeAdmin& na = node_admin[i];
    if (na.state != NodeAdminState::kDraining) continue;
    const Node& n = cluster.node(NodeId(uint32_t(i)));
    bool busy = n.cpu_used.v > 0 || n.memory_used.v > 0;
    for (const Gpu& g : n.gpus) busy = busy || g.whole_held || g.share_count > 0;
    if (!busy) {
      na.state = NodeAdminState::kDrained;
      b.events.push_back(event(0, EventKind::kNodeDrained, "scheduler", Json{{"node", n.name}, {"reason", na.reason}}));
      b.meta.push_back(node_meta(NodeId(uint32_t(i))));
    }
  }
}

}  // namespace tessera::server
