#include "server/job_record.h"

#include <ctime>
#include <set>

#include "server/event_kind.h"

namespace tessera::server {

using Json = nlohmann::json;

namespace {

const char* grant_kind_name(GrantKind k) {
  switch (k) {
    case GrantKind::kWhole: return "whole";
    case GrantKind::kShare: return "share";
    case GrantKind::kMig: return "mig";
  }
  return "?";
}

Json nullable(int64_t v) { return v >= 0 ? Json(v) : Json(nullptr); }

Result<JobState> state_from(const std::string& s) {
  for (JobState js : {JobState::kPending, JobState::kRunning, JobState::kCheckpointing, JobState::kSucceeded,
                      JobState::kFailed, JobState::kCancelled, JobState::kTimeout})
    if (s == job_state_name(js)) return js;
  return invalid_argument("state: unknown \"" + s + "\"");
}

}  // namespace

const char* job_gate_name(JobGate g) {
  switch (g) {
    case JobGate::kHeld: return "held";
    case JobGate::kBeginTime: return "begin_time";
    case JobGate::kDependency: return "dependency";
    case JobGate::kDependencyNeverSatisfied: return "dependency_never_satisfied";
    case JobGate::kArrayTaskLimit: return "array_task_limit";
    case JobGate::kBackoff: return "backoff";
  }
  return "?";
}

const char* stop_cause_name(StopCause c) {
  switch (c) {
    case StopCause::kPreempt: return "preempt";
    case StopCause::kRequeue: return "requeue";
    case StopCause::kPlannedStop: return "planned_stop";
  }
  return "preempt";
}

std::string local_time_text(int64_t t) {
  const time_t tt = time_t(t);
  struct tm tm {};
  if (!localtime_r(&tt, &tm)) return std::to_string(t);
  char buf[64];
  if (std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S %Z", &tm) == 0) return std::to_string(t);
  return buf;
}

std::string local_time_text(int64_t t, int64_t now) {
  if (t == now) return local_time_text(t) + " (now)";
  return local_time_text(t) + (t > now ? " (in " + duration_text(t - now) + ")" : " (" + duration_text(now - t) + " ago)");
}

Json record_to_json(const JobRecord& r, const ClusterState& cluster) {
  std::vector<std::string> nodes;
  nodes.reserve(r.job.placement.size());
  for (const TaskPlacement& p : r.job.placement) nodes.push_back(cluster.node(p.node).name);
  return record_to_json(r, nodes);
}

std::function<std::string()> stored_record_encoder(const JobRecord& r, const ClusterState& cluster) {
  struct Stored {
    JobRecord record;
    std::vector<std::string> nodes;
  };
  auto s = std::make_shared<Stored>(Stored{r, {}});  // all of it: a field added later is stored too
  for (const TaskPlacement& p : r.job.placement) s->nodes.push_back(cluster.node(p.node).name);
  return [s = std::shared_ptr<const Stored>(std::move(s))] {
    return record_to_json(s->record, s->nodes).dump(-1, ' ', false, Json::error_handler_t::replace);
  };
}

Json record_to_json(const JobRecord& r, const std::vector<std::string>& placement_nodes) {
  Json placement = Json::array();
  for (size_t i = 0; i < r.job.placement.size(); ++i) {
    const TaskPlacement& p = r.job.placement[i];
    Json grants = Json::array();
    for (const GpuGrant& g : p.gpus)
      grants.push_back(Json{{"gpu", g.gpu}, {"kind", grant_kind_name(g.kind)}, {"milli", g.milli.v}, {"memory", g.memory.v},
                            {"mig_profile", g.mig_profile}, {"mig_start", g.mig_start}});
    placement.push_back(Json{{"node", placement_nodes.at(i)}, {"cpu", p.cpu.v}, {"memory", p.memory.v},
                             {"task_class", p.task_class}, {"grants", grants}});
  }
  return Json{{"id", r.id},
              {"spec", config::job_spec_to_json(r.spec)},
              {"user", r.job.user},
              {"queue", r.queue_name},
              {"priority_class", r.job.priority_class},
              {"state", job_state_name(r.job.state)},
              {"submitted", r.job.submitted},
              {"started", r.job.started},
              {"finished", r.finished},
              {"last_preempted", r.job.last_preempted},
              {"evict_by", r.job.evict_by},
              {"preemptions", r.job.preemptions},
              {"attained_gpu_s", r.job.attained_gpu_s},
              {"checkpoint_last", r.job.checkpoint.last},
              {"attempt", r.attempt},
              {"exit_code", r.exit_code},
              {"end_reason", r.end_reason},
              {"idempotency_key", r.idempotency_key},
              {"restarts", r.restarts},
              {"not_before", r.not_before},
              {"resume_from", r.resume_from},
              {"master_port", r.master_port},
              {"last_nodes", r.last_nodes},
              {"spot_interruptions", r.job.spot_interruptions},
              {"checkpoint_cost_ms", r.checkpoint_cost_ms},
              {"array_job", r.array_job},
              {"array_index", r.array_index},
              {"held", r.held},
              {"held_by", r.held_by},
              {"admin_hold", r.admin_hold},
              {"stop_cause", stop_cause_name(r.stop_cause)},
              {"stop_by", r.stop_by},
              {"signal_seq", r.signal_seq},
              {"signal_name", r.signal_name},
              {"submitted_ms", r.submitted_ms},
              {"started_ms", r.started_ms},
              {"finished_ms", r.finished_ms},
              {"placement", placement}};
}

Result<JobRecord> record_from_json(const Json& j, const QueueTree& tree, const ClusterState& cluster) {
  if (!j.is_object()) return invalid_argument("record: not a JSON object");
  try {
    JobRecord r;
    r.id = j.at("id");
    auto spec = config::job_spec_from_json(j.at("spec"));
    if (!spec.ok()) return invalid_argument("spec: " + spec.error().message);
    r.spec = std::move(*spec);
    r.queue_name = j.at("queue");
    auto q = tree.find(r.queue_name);
    if (!q.ok()) return invalid_argument("queue " + r.queue_name + " is not in the configuration any more");
    auto st = state_from(j.at("state"));
    if (!st.ok()) return st.error();
    r.job.id = JobId(uint32_t(r.id));
    r.job.name = r.spec.name;
    r.job.user = j.at("user");
    r.job.queue = *q;
    r.job.priority_class = j.at("priority_class");
    r.job.gang = r.spec.gang();
    r.job.gang.id = r.job.id;
    r.job.gang.queue = *q;
    r.job.submitted = j.at("submitted");
    r.job.expected_runtime = r.spec.expected_runtime;
    r.job.max_runtime = r.spec.max_runtime;
    r.job.checkpoint.interval = r.spec.checkpoint.interval;
    r.job.checkpoint.grace = r.spec.checkpoint.grace;
    r.job.checkpoint.last = j.value("checkpoint_last", int64_t(-1));
    r.job.state = *st;
    r.job.started = j.value("started", int64_t(-1));
    r.job.last_preempted = j.value("last_preempted", int64_t(-1));
    r.job.evict_by = j.value("evict_by", int64_t(-1));
    r.job.preemptions = j.value("preemptions", 0);
    r.job.attained_gpu_s = j.value("attained_gpu_s", int64_t(0));
    r.finished = j.value("finished", int64_t(-1));
    r.attempt = j.value("attempt", int64_t(0));
    r.exit_code = j.value("exit_code", 0);
    r.end_reason = j.value("end_reason", "");
    r.idempotency_key = j.value("idempotency_key", "");
    r.restarts = j.value("restarts", 0);
    r.not_before = j.value("not_before", int64_t(-1));
    r.resume_from = j.value("resume_from", "");
    r.master_port = j.value("master_port", 0);
    r.last_nodes = j.value("last_nodes", std::vector<std::string>{});
    r.job.spot_interruptions = j.value("spot_interruptions", 0);
    r.checkpoint_cost_ms = j.value("checkpoint_cost_ms", int64_t(-1));
    r.array_job = j.value("array_job", int64_t(0));
    r.array_index = j.value("array_index", int32_t(-1));
    r.submitted_ms = j.value("submitted_ms", r.job.submitted * 1000);  // older records: the second
    r.started_ms = j.value("started_ms", r.job.started >= 0 ? r.job.started * 1000 : int64_t(-1));
    r.finished_ms = j.value("finished_ms", r.finished >= 0 ? r.finished * 1000 : int64_t(-1));
    r.held = j.value("held", false);
    r.held_by = j.value("held_by", "");
    r.admin_hold = j.value("admin_hold", false);
    const std::string cause = j.value("stop_cause", "preempt");
    for (StopCause c : {StopCause::kPreempt, StopCause::kRequeue, StopCause::kPlannedStop})
      if (cause == stop_cause_name(c)) r.stop_cause = c;
    r.stop_by = j.value("stop_by", "");
    r.signal_seq = j.value("signal_seq", int64_t(0));
    r.signal_name = j.value("signal_name", "");
    for (const Json& p : j.value("placement", Json::array())) {
      TaskPlacement tp;
      auto node = cluster.find_node(p.at("node"));
      if (!node.ok()) return invalid_argument("placement: node " + p.at("node").get<std::string>() + " is not in the configuration any more");
      tp.node = *node;
      tp.cpu = MilliCpu(p.at("cpu").get<int64_t>());
      tp.memory = MiB(p.at("memory").get<int64_t>());
      tp.task_class = p.value("task_class", 0);
      for (const Json& g : p.at("grants")) {
        GpuGrant gg;
        gg.gpu = g.at("gpu");
        const std::string kind = g.at("kind");
        gg.kind = kind == "whole" ? GrantKind::kWhole : kind == "share" ? GrantKind::kShare : GrantKind::kMig;
        gg.milli = MilliGpu(g.at("milli").get<int64_t>());
        gg.memory = MiB(g.at("memory").get<int64_t>());
        gg.mig_profile = g.at("mig_profile");
        gg.mig_start = g.at("mig_start");
        tp.gpus.push_back(gg);
      }
      r.job.placement.push_back(std::move(tp));
    }
    return r;
  } catch (const Json::exception& e) {
    return invalid_argument(std::string("record: ") + e.what());
  }
}

Json placement_json(const JobRecord& r, const ClusterState& cluster) {
  Json out = Json::array();
  for (size_t t = 0; t < r.job.placement.size(); ++t) {
    const TaskPlacement& p = r.job.placement[t];
    const Node& n = cluster.node(p.node);
    Json gpus = Json::array();
    Json mig = nullptr;
    int64_t milli = 0;
    for (const GpuGrant& g : p.gpus) {
      gpus.push_back(g.gpu);
      milli = g.milli_held();
      if (g.kind == GrantKind::kMig) {
        const MigProfile* prof = n.gpus[g.gpu].model->find_profile_id(g.mig_profile);
        mig = Json{{"gpu", g.gpu}, {"profile", prof ? prof->name : "?"}, {"start", g.mig_start}};
      }
    }
    out.push_back(Json{{"task", t}, {"node", n.name}, {"gpus", gpus}, {"gpu_milli", milli}, {"mig", mig},
                       {"cpu_milli", p.cpu.v}, {"memory_mib", p.memory.v}});
  }
  return out;
}

std::string job_ref(const JobRecord& r) {
  return r.array_job > 0 ? std::to_string(r.array_job) + "_" + std::to_string(r.array_index) : std::to_string(r.id);
}

Json record_to_api(const JobRecord& r, const ClusterState& cluster, const PendingInfo* pending, bool detail) {
  std::set<std::string> nodes;
  for (const TaskPlacement& p : r.job.placement) nodes.insert(cluster.node(p.node).name);
  const TaskRequest& t = r.spec.task;
  std::string reason = r.end_reason;
  const bool waiting = r.job.state == JobState::kPending;
  const GateInfo* gate = waiting && r.gate ? &*r.gate : nullptr;
  if (gate) pending = nullptr;  // the scheduler did not see it this cycle
  if (pending) reason = pending->reason;
  if (gate) reason = gate->reason;
  if (r.job.state == JobState::kCheckpointing)
    reason = r.stop_cause == StopCause::kRequeue       ? "checkpointing before it is requeued (asked by " + r.stop_by + ")"
             : r.stop_cause == StopCause::kPlannedStop ? "checkpointing before a planned stop (" + r.stop_by + ")"
                                                       : "checkpointing before it stops";
  const bool ended = !waiting && r.job.state != JobState::kRunning && r.job.state != JobState::kCheckpointing;
  const int64_t elapsed = r.job.started >= 0 ? (ended && r.finished >= r.job.started ? r.finished - r.job.started : -1) : -1;
  Json j{{"id", r.id},
         {"ref", job_ref(r)},
         {"array_job_id", r.array_job > 0 ? Json(r.array_job) : Json(nullptr)},
         {"array_task_id", r.array_job > 0 ? Json(r.array_index) : Json(nullptr)},
         {"name", r.spec.name},
         {"user", r.job.user},
         {"queue", r.queue_name},
         {"project", r.spec.project},
         {"priority_class", r.job.priority_class},
         {"state", job_state_name(r.job.state)},
         {"tasks", r.spec.tasks},
         {"gpus", t.mig() ? int64_t(r.spec.tasks) : r.job.gang.total_gpus()},
         {"submitted", r.job.submitted},
         {"started", nullable(r.job.started)},
         {"finished", nullable(r.finished)},
         {"submitted_ms", r.submitted_ms},
         {"started_ms", r.job.started >= 0 ? nullable(r.started_ms) : Json(nullptr)},
         {"finished_ms", r.finished >= 0 ? nullable(r.finished_ms) : Json(nullptr)},
         {"reason", reason},
         {"queue_position", pending ? Json(pending->queue_position) : Json(nullptr)},
         {"estimated_start", pending && pending->estimated_start ? Json(*pending->estimated_start) : Json(nullptr)},
         {"nodes", std::vector<std::string>(nodes.begin(), nodes.end())},
         {"wait", gate ? Json(job_gate_name(gate->gate)) : Json(nullptr)},
         {"held", r.held},
         {"held_by", r.held ? Json(r.held_by) : Json(nullptr)},
         {"begin", r.spec.workflow.begin > 0 ? Json(r.spec.workflow.begin) : Json(nullptr)},
         {"dependency", r.spec.workflow.dependencies.empty() ? Json(nullptr) : Json(config::dependencies_text(r.spec.workflow.dependencies))},
         {"attempt", r.attempt},
         {"elapsed_s", nullable(elapsed)},
         {"gpu_seconds", r.job.attained_gpu_s},
         {"last_nodes", r.last_nodes},
         {"cpu_milli", t.cpu.v},
         {"memory_mib", t.memory.v}};
  j["exit_code"] = r.job.state == JobState::kSucceeded || r.job.state == JobState::kFailed ? Json(r.exit_code) : Json(nullptr);
  // As Slurm's ExitCode: "code:signal" (a task killed by signal N exits 128 + N by convention).
  if (j["exit_code"].is_number())
    j["exit"] = r.exit_code > 128 && r.exit_code < 128 + 65 ? "0:" + std::to_string(r.exit_code - 128) : std::to_string(r.exit_code) + ":0";
  else
    j["exit"] = nullptr;
  if (!detail) return j;
  j["spec"] = config::job_spec_to_json(r.spec);
  config::redact_secrets(j["spec"]);  // secret env values go to the task only, never back to people
  j["placement"] = placement_json(r, cluster);
  j["attempt"] = r.attempt;
  j["preemptions"] = r.job.preemptions;
  j["restarts"] = r.restarts;
  j["restart_at"] = r.job.state == JobState::kPending && r.not_before >= 0 ? Json(r.not_before) : Json(nullptr);
  j["resume_from"] = r.resume_from.empty() ? Json(nullptr) : Json(r.resume_from);
  j["last_nodes"] = r.last_nodes;
  j["spot_interruptions"] = r.job.spot_interruptions;
  j["checkpoint_cost_ms"] = r.checkpoint_cost_ms >= 0 ? Json(r.checkpoint_cost_ms) : Json(nullptr);
  if (pending)
    j["pending"] = Json{{"reason", pending->reason}, {"category", wait_category_name(pending->category)},
                        {"queue_position", pending->queue_position},
                        {"overall_position", pending->overall_position},
                        {"estimated_start", pending->estimated_start ? Json(*pending->estimated_start) : Json(nullptr)},
                        {"reserved", pending->reserved}};
  else
    j["pending"] = nullptr;
  return j;
}

Json task_assignment_json(const JobRecord& r, int task, const ClusterState& cluster) {
  const Json placement = placement_json(r, cluster);
  const Json& p = placement.at(size_t(task));
  Json ckpt{{"interval", r.spec.checkpoint.interval}, {"signal", r.spec.checkpoint.signal},
            {"grace", r.spec.checkpoint.grace}, {"dir", r.spec.checkpoint.dir}};
  Json env = Json::object();
  for (const auto& [k, v] : r.spec.env) env[k] = v;
  if (r.array_job > 0 && r.spec.workflow.array) {  // as Slurm's, for scripts brought from it
    const config::ArraySpec& a = *r.spec.workflow.array;
    for (const char* pre : {"TESSERA_", "SLURM_"}) {
      env[std::string(pre) + "ARRAY_JOB_ID"] = std::to_string(r.array_job);
      env[std::string(pre) + "ARRAY_TASK_ID"] = std::to_string(r.array_index);
      env[std::string(pre) + "ARRAY_TASK_COUNT"] = std::to_string(a.indices.size());
      env[std::string(pre) + "ARRAY_TASK_MIN"] = std::to_string(a.indices.front());
      env[std::string(pre) + "ARRAY_TASK_MAX"] = std::to_string(a.indices.back());
    }
  }
  Json peers = Json::array();  // every task's node, in task order (for rendezvous)
  for (const Json& q : placement) peers.push_back(q["node"]);
  // Slurm's --output (or --error alone): the task's stdout and stderr, as one stream, go there too.
  const config::WorkflowSpec& w = r.spec.workflow;
  const std::string& pattern = w.output.empty() ? w.error : w.output;
  const std::string output =
      pattern.empty() ? "" : config::expand_output_pattern(pattern, r.id, r.array_job, r.array_index, task, r.spec.name, r.job.user);
  return Json{{"job", r.id},        {"attempt", r.attempt},          {"task", task},  {"output", output},
              {"tasks", placement.size()}, {"name", r.spec.name},    {"user", r.job.user}, {"queue", r.queue_name},
              {"command", r.spec.command}, {"env", env},             {"working_dir", r.spec.working_dir},
              {"gpus", p["gpus"]},  {"gpu_milli", p["gpu_milli"]},   {"mig", p["mig"]},
              {"cpu_milli", p["cpu_milli"]}, {"memory_mib", p["memory_mib"]}, {"checkpoint", ckpt},
              {"task_nodes", peers}};
}

Json attempts_json(const std::vector<EventRow>& events) {
  Json out = Json::array();
  Json* open = nullptr;  // the attempt not ended yet (the last in `out`)
  auto close = [&](const EventRow& e, Json outcome, Json reason) {
    (*open)["end"] = e.time;
    (*open)["end_ms"] = e.time_ms >= 0 ? e.time_ms : e.time * 1000;
    (*open)["outcome"] = std::move(outcome);
    (*open)["reason"] = std::move(reason);
    open = nullptr;
  };
  for (const EventRow& e : events) {
    const EventKind kind = parse_event_kind(e.kind);
    if (kind != EventKind::kStarted && !(open && ends_attempt(kind))) continue;
    const Json d = Json::parse(e.detail, nullptr, false);
    if (kind == EventKind::kStarted) {
      if (open) close(e, nullptr, nullptr);  // (not expected: a start without an end)
      Json nodes = Json::array();
      if (d.is_object() && d.contains("placement") && d["placement"].is_array())
        for (const Json& p : d["placement"])
          if (p.is_object() && p.contains("node") && p["node"].is_string()) nodes.push_back(p["node"]);
      int64_t n = int64_t(out.size()) + 1;
      if (d.is_object() && d.contains("attempt") && d["attempt"].is_number_integer()) n = d["attempt"].get<int64_t>();
      out.push_back(Json{{"attempt", n},
                         {"nodes", std::move(nodes)},
                         {"start", e.time},
                         {"start_ms", e.time_ms >= 0 ? e.time_ms : e.time * 1000},
                         {"end", nullptr},
                         {"end_ms", nullptr},
                         {"outcome", nullptr},
                         {"reason", nullptr}});
      open = &out.back();
    } else {
      close(e, e.kind, d.is_object() && d.contains("reason") && d["reason"].is_string() ? d["reason"] : Json());
    }
  }
  return out;
}

}  // namespace tessera::server
