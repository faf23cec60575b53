// Controller::State and Controller: the Slurm-style workflow around jobs. Which pending jobs the
// scheduler may see (holds, begin times, dependencies, array task limits, restart backoff), and the
// verbs on job references: hold, release, requeue, cancel of one job or a whole array.
#include "server/controller_state.h"

namespace tessera::server {

namespace {

enum class Verdict : uint8_t { kMet, kWait, kNever };
struct DepVerdict {
  Verdict v = Verdict::kMet;
  std::string why;
};

bool ended_badly(JobState st) { return st == JobState::kFailed || st == JobState::kCancelled || st == JobState::kTimeout; }

// Active jobs by (user, name), for singleton: how many are placed, and the smallest pending id.
struct NameIndex {
  std::map<std::pair<std::string, std::string>, std::pair<int, int64_t>> by;
  const std::pair<int, int64_t>* find(const JobRecord& r) const {
    auto it = by.find({r.job.user, r.spec.name});
    return it == by.end() ? nullptr : &it->second;
  }
};

}  // namespace

std::vector<int64_t> Controller::State::resolve(const config::JobRef& ref) const {
  auto arr = arrays.find(ref.id);
  if (ref.index >= 0) {
    if (arr == arrays.end()) return {};
    // Elements are in index order: a binary search.
    auto it = std::lower_bound(arr->second.begin(), arr->second.end(), ref.index,
                               [this](int64_t id, int32_t index) { return jobs.at(id).array_index < index; });
    if (it != arr->second.end() && jobs.at(*it).array_index == ref.index) return {*it};
    return {};
  }
  if (arr != arrays.end()) return arr->second;
  if (jobs.find(ref.id)) return {ref.id};
  return {};
}

namespace {

// Verdicts of (type, job reference) within one look at every pending job: an array's dependents (each
// element afterok on a whole array) would otherwise walk that array once each.
using DepMemo = std::map<std::pair<config::DependencyType, config::JobRef>, DepVerdict>;

DepVerdict one_ref_verdict(const Controller::State& s, config::DependencyType type, const config::JobRef& ref);

DepVerdict dependency_verdict(const Controller::State& s, const JobRecord& r, const NameIndex& names, DepMemo& memo) {
  DepVerdict wait;
  for (const config::Dependency& d : r.spec.workflow.dependencies) {
    if (d.type == config::DependencyType::kSingleton) {
      const auto* n = names.find(r);
      const bool other_running = n && n->first > (placed(r.job.state) ? 1 : 0);
      const bool earlier_pending = n && n->second > 0 && n->second < r.id;
      if ((other_running || earlier_pending) && wait.v == Verdict::kMet)
        wait = {Verdict::kWait, "singleton: another job named " + r.spec.name + " of " + r.job.user + " is still active"};
      continue;
    }
    for (const config::JobRef& ref : d.jobs) {
      auto it = memo.find({d.type, ref});
      if (it == memo.end()) it = memo.emplace(std::make_pair(d.type, ref), one_ref_verdict(s, d.type, ref)).first;
      if (it->second.v == Verdict::kNever) return it->second;
      if (it->second.v == Verdict::kWait && wait.v == Verdict::kMet) wait = it->second;
    }
  }
  return wait;
}

DepVerdict one_ref_verdict(const Controller::State& s, config::DependencyType type, const config::JobRef& ref) {
  const std::vector<int64_t> ids = s.resolve(ref);
  const std::string name = std::string(config::dependency_type_name(type)) + ":" + config::job_ref_text(ref);
  if (ids.empty()) return {Verdict::kNever, name + ": no such job"};
  DepVerdict wait;
  for (int64_t id : ids) {
    const JobRecord& o = s.jobs.at(id);
    const JobState st = o.job.state;
    Verdict v = Verdict::kMet;
    switch (type) {
      case config::DependencyType::kAfter: v = o.attempt > 0 || !active(st) ? Verdict::kMet : Verdict::kWait; break;
      case config::DependencyType::kAfterAny: v = active(st) ? Verdict::kWait : Verdict::kMet; break;
      case config::DependencyType::kAfterOk:
        v = st == JobState::kSucceeded ? Verdict::kMet : active(st) ? Verdict::kWait : Verdict::kNever;
        break;
      case config::DependencyType::kAfterNotOk:
        v = ended_badly(st) ? Verdict::kMet : active(st) ? Verdict::kWait : Verdict::kNever;
        break;
      case config::DependencyType::kSingleton: break;
    }
    if (v == Verdict::kMet) continue;
    const std::string what = name + " (job " + std::to_string(id) + " is " + job_state_name(st) + ")";
    if (v == Verdict::kNever) return {Verdict::kNever, what};
    if (wait.v == Verdict::kMet) wait = {Verdict::kWait, what};
  }
  return wait;
}

}  // namespace

std::set<int64_t> Controller::State::gate_pending(Time t, WriteBatch& b) {
  std::set<int64_t> eligible;
  std::map<int64_t, int> running;  // array job id -> elements placed (and, below, admitted)
  NameIndex names;
  for (int64_t id : active_ids) {
    const JobRecord& r = jobs.at(id);
    if (placed(r.job.state) && r.array_job > 0) ++running[r.array_job];
    auto& n = names.by[{r.job.user, r.spec.name}];
    if (placed(r.job.state)) ++n.first;
    else if (n.second == 0) n.second = id;  // active_ids ascend: the first pending is the smallest
  }
  std::vector<std::pair<int64_t, std::string>> kill;
  DepMemo memo;
  for (int64_t id : active_ids) {
    JobRecord& r = jobs.at(id);
    if (r.job.state != JobState::kPending) continue;
    r.gate.reset();
    const config::WorkflowSpec& w = r.spec.workflow;
    auto gate = [&](JobGate g, std::string why) { r.gate = GateInfo{g, std::move(why)}; };
    if (r.held) {
      gate(JobGate::kHeld, r.admin_hold ? "held by an admin (" + r.held_by + "); only an admin can release it"
                                        : "held by " + r.held_by + "; `tessera release " + std::to_string(r.id) + "` lets it run");
      continue;
    }
    if (w.begin > t) {
      gate(JobGate::kBeginTime, "begin time: not before " + local_time_text(w.begin, t));
      continue;
    }
    if (!w.dependencies.empty()) {
      const DepVerdict v = dependency_verdict(*this, r, names, memo);
      if (v.v == Verdict::kNever) {
        if (w.kill_on_invalid_dep) kill.emplace_back(id, v.why);
        else gate(JobGate::kDependencyNeverSatisfied, "DependencyNeverSatisfied: " + v.why + "; it can never start: cancel it");
        continue;
      }
      if (v.v == Verdict::kWait) {
        gate(JobGate::kDependency, "Dependency: waits for " + v.why);
        continue;
      }
    }
    if (r.not_before > t) {
      gate(JobGate::kBackoff, "restart " + std::to_string(r.restarts) + " of " + std::to_string(r.spec.restart.max_restarts) +
                                  " waits for its backoff (until " + local_time_text(r.not_before, t) + "): " + r.end_reason);
      continue;
    }
    if (r.array_job > 0 && w.array && w.array->max_running > 0) {
      int& n = running[r.array_job];
      if (n >= w.array->max_running) {
        gate(JobGate::kArrayTaskLimit, "JobArrayTaskLimit: " + std::to_string(w.array->max_running) + " elements of array " +
                                           std::to_string(r.array_job) + " may run at once (%" +
                                           std::to_string(w.array->max_running) + ")");
        continue;
      }
      ++n;
    }
    eligible.insert(id);
  }
  for (const auto& [id, why] : kill)
    finish(jobs.at(id), JobState::kCancelled, "dependency never satisfied (" + why + "); cancelled as kill_on_invalid_dep asks", b,
           "scheduler", EventKind::kCancelled);
  return eligible;
}

void Controller::State::interrupt_job(JobRecord& r, StopCause cause, const std::string& by, WriteBatch& b) {
  if (r.job.state == JobState::kCheckpointing) {  // already stopping: it now resumes as this stop says
    r.stop_cause = cause;
    r.stop_by = by;
    b.jobs.push_back(row(r));
    return;
  }
  r.stop_cause = cause;
  r.stop_by = by;
  const std::string reason = cause == StopCause::kRequeue ? "requeued by " + by : "planned stop (" + by + ")";
  const std::optional<Refusal> refused = tessera::request_checkpoint(r.job, now() + r.spec.checkpoint.grace);
  if (!refused) {
    checkpoint_requested(r, r.job.evict_by, reason, b);
    return;
  }
  requeue(r, EventKind::kInterrupted, reason + (r.job.checkpoint.interval > 0 ? "" : " (the job does not checkpoint: stopped now)"),
          b, false);
}

// ---- the verbs ---------------------------------------------------------------------------------

namespace {

// Holds r for `who`: an admin's hold on another user's job is an admin hold. A held job keeps its hold.
void hold_for(JobRecord& r, const Principal& who) {
  if (r.held) return;
  r.held = true;
  r.held_by = who.user;
  r.admin_hold = who.role == Role::kAdmin && r.job.user != who.user;
}

// What one verb does to one job: nullopt = done (its row is in the batch), else why it was skipped.
using JobAction = std::function<std::optional<Error>(Controller::State&, JobRecord&, WriteBatch&)>;

}  // namespace

Result<int64_t> Controller::job_id(const config::JobRef& ref) {
  return call<int64_t>([ref](State& s) -> Result<int64_t> {
    if (ref.index < 0) {
      if (!s.jobs.find(ref.id)) return not_found("job " + std::to_string(ref.id) + ": no such job");
      return ref.id;
    }
    const std::vector<int64_t> ids = s.resolve(ref);
    if (ids.empty()) return not_found("job " + config::job_ref_text(ref) + ": no such array element");
    return ids.front();
  });
}

// Runs `act` on every job `ref` names, in one durable batch. One job: its record or its error; an
// array: what changed and what was skipped (an error only when nothing could be done at all and
// every element was refused for the same kind of reason).
static Result<Json> act_on_ref(Controller::State& s, const Principal& who, const config::JobRef& ref, const std::string& verb,
                               const JobAction& act, WriteBatch& b) {
  const std::vector<int64_t> ids = s.resolve(ref);
  if (ids.empty()) return not_found("job " + config::job_ref_text(ref) + ": no such job");
  const bool whole_array = ref.index < 0 && s.arrays.count(ref.id);
  Json changed = Json::array(), skipped = Json::array();
  std::optional<Error> only_error;
  for (int64_t id : ids) {
    JobRecord& r = s.jobs.at(id);
    std::optional<Error> e;
    if (Status st = s.may_modify(who, r); !st.ok()) {
      s.deny(who, verb + " job " + std::to_string(id), st.message());
      e = st.error();
    } else {
      e = act(s, r, b);
    }
    if (e) {
      if (!whole_array) only_error = *e;
      skipped.push_back(Json{{"ref", job_ref(r)}, {"reason", e->message}});
    } else {
      changed.push_back(record_to_api(r, s.cluster, nullptr, false));
    }
  }
  if (!whole_array) {
    if (only_error) return *only_error;
    return record_to_api(s.jobs.at(ids.front()), s.cluster, nullptr, true);
  }
  if (changed.empty() && !skipped.empty())
    return failed_precondition("array " + std::to_string(ref.id) + ": nothing to " + verb + ": " + skipped[0]["reason"].get<std::string>() +
                               (skipped.size() > 1 ? " (and " + std::to_string(skipped.size() - 1) + " more)" : ""));
  return Json{{"array_job_id", ref.id}, {"jobs", std::move(changed)}, {"skipped", std::move(skipped)}};
}

std::optional<std::string> signal_name(const std::string& in) {
  std::string up;
  for (char c : in) up += char(std::toupper(static_cast<unsigned char>(c)));
  if (up.rfind("SIG", 0) == 0) up = up.substr(3);
  for (const char* n : {"HUP", "INT", "QUIT", "KILL", "USR1", "USR2", "TERM", "CONT", "STOP", "TSTP", "WINCH", "ALRM"})
    if (up == n) return "SIG" + up;
  return std::nullopt;
}

Result<Json> Controller::job_verb(const Principal& who, const config::JobRef& ref, JobVerb verb, bool hold_after,
                                  const std::string& signal) {
  std::string sig;
  if (verb == JobVerb::kSignal) {
    auto n = signal_name(signal);
    if (!n) return invalid_argument("signal: unknown \"" + config::truncate_utf8(signal, 32) +
                                    "\"; one of HUP INT QUIT KILL USR1 USR2 TERM CONT STOP TSTP WINCH ALRM (with or without SIG)");
    sig = *n;
  }
  return answer<Json>([=, this](State& s, const Reply& reply) {
    WriteBatch b;
    JobAction act;
    std::string name;
    const std::string by = who.user;
    switch (verb) {
      case JobVerb::kHold:
        name = "hold";
        act = [by, who](State& st, JobRecord& r, WriteBatch& wb) -> std::optional<Error> {
          if (r.job.state != JobState::kPending)
            return failed_precondition("job " + std::to_string(r.id) + " is " + job_state_name(r.job.state) +
                                       "; only pending jobs can be held (requeue --hold stops and holds a running one)");
          if (r.held) return failed_precondition("job " + std::to_string(r.id) + " is already held");
          hold_for(r, who);
          r.gate = GateInfo{JobGate::kHeld, "held by " + by};
          wb.events.push_back(st.event(r.id, EventKind::kHeld, by, Json{{"admin_hold", r.admin_hold}}));
          wb.jobs.push_back(st.row(r));
          return std::nullopt;
        };
        break;
      case JobVerb::kRelease:
        name = "release";
        act = [by, who](State& st, JobRecord& r, WriteBatch& wb) -> std::optional<Error> {
          if (!r.held) return failed_precondition("job " + std::to_string(r.id) + " is not held");
          if (r.admin_hold && who.role != Role::kAdmin)
            return permission_denied("job " + std::to_string(r.id) + " was held by an admin (" + r.held_by + "); only an admin can release it");
          r.held = false;
          r.admin_hold = false;
          r.held_by.clear();
          r.gate.reset();
          wb.events.push_back(st.event(r.id, EventKind::kReleased, by));
          wb.jobs.push_back(st.row(r));
          return std::nullopt;
        };
        break;
      case JobVerb::kRequeue:
        name = "requeue";
        act = [by, who, hold_after](State& st, JobRecord& r, WriteBatch& wb) -> std::optional<Error> {
          if (r.job.state == JobState::kPending) {
            if (!hold_after) return failed_precondition("job " + std::to_string(r.id) + " is already pending");
            hold_for(r, who);
            wb.jobs.push_back(st.row(r));
            return std::nullopt;
          }
          if (placed(r.job.state)) {
            st.interrupt_job(r, StopCause::kRequeue, by, wb);
          } else {  // ended: back to pending for a new attempt, as Slurm requeues a finished batch job
            r.job.state = JobState::kPending;
            r.finished = -1;
            r.finished_ms = -1;
            r.exit_code = 0;
            r.end_reason = "requeued by " + by;
            r.not_before = -1;
            st.active_ids.insert(r.id);
            wb.events.push_back(st.event(r.id, EventKind::kRequeued, by, Json{{"reason", r.end_reason}}));
          }
          if (hold_after) hold_for(r, who);
          wb.jobs.push_back(st.row(r));
          st.dirty = true;
          return std::nullopt;
        };
        break;
      case JobVerb::kCancel:
        name = "cancel";
        act = [by](State& st, JobRecord& r, WriteBatch& wb) -> std::optional<Error> {
          if (!active(r.job.state))
            return failed_precondition("job " + std::to_string(r.id) + " has already ended (" + job_state_name(r.job.state) +
                                       "); nothing to cancel");
          st.finish(r, JobState::kCancelled, "cancelled by " + by, wb, by, EventKind::kCancelled);
          return std::nullopt;
        };
        break;
      case JobVerb::kSignal:
        name = "signal";
        act = [sig, by](State& st, JobRecord& r, WriteBatch& wb) -> std::optional<Error> {
          if (r.job.state != JobState::kRunning)
            return failed_precondition("job " + std::to_string(r.id) + " is " + job_state_name(r.job.state) + "; only running jobs take signals");
          ++r.signal_seq;
          r.signal_name = sig;
          wb.events.push_back(st.event(r.id, EventKind::kSignalled, by, Json{{"signal", sig}}));
          wb.jobs.push_back(st.row(r));
          return std::nullopt;
        };
        break;
    }
    Result<Json> out = act_on_ref(s, who, ref, name, act, b);
    if (!out.ok()) {
      if (!b.empty()) s.persist(std::move(b));
      reply->set_value(out.error());
      return;
    }
    s.dirty = true;
    s.reply_when_durable(std::move(b), reply, std::move(*out));
  });
}

}  // namespace tessera::server
