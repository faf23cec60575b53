// job_spec_to_json and redact_secrets (job_spec.h): a JobSpec's canonical JSON, as the store keeps it
// and the API shows it. Pure functions; thread-safe.
#include "config/job_spec.h"

namespace tessera::config {

using json = nlohmann::json;

json job_spec_to_json(const JobSpec& s) {
  json j;
  j["name"] = s.name;
  j["queue"] = s.queue;
  j["project"] = s.project;
  j["priority_class"] = s.priority_class;
  j["kind"] = job_kind_name(s.kind);
  j["tasks"] = s.tasks;
  if (!s.task_sizes.empty()) {
    j["tasks"] = json::array();
    for (const TaskSize& z : s.task_sizes)
      j["tasks"].push_back({{"gpus", z.gpu_count}, {"cpu", std::to_string(z.cpu.v) + "m"}, {"memory", z.memory.v}});
  }
  j["min_tasks"] = s.min_tasks;
  json r;
  r["gpus"] = s.task.gpu_count;
  r["gpu_models"] = s.task.gpu_models;
  r["mix_models"] = s.task.mix_models;
  r["mig"] = s.task.mig_profile;
  r["gpu_milli"] = s.task.milli_per_gpu.v;
  r["gpu_memory"] = s.task.gpu_memory.v;
  r["cpu"] = std::to_string(s.task.cpu.v) + "m";
  r["memory"] = s.task.memory.v;
  j["resources"] = std::move(r);
  if (s.topology.mode == TopologyMode::kNone) {
    j["topology"] = nullptr;
  } else {
    j["topology"] = {{"mode", s.topology.mode == TopologyMode::kRequired ? "required" : "preferred"},
                     {"level", s.topology.level}};
  }
  j["checkpoint"] = {{"interval", s.checkpoint.interval},
                     {"signal", s.checkpoint.signal},
                     {"grace", s.checkpoint.grace},
                     {"dir", s.checkpoint.dir}};
  j["restart"] = {{"max_restarts", s.restart.max_restarts}, {"backoff", s.restart.backoff}};
  j["expected_runtime"] = s.expected_runtime;
  j["max_runtime"] = s.max_runtime;
  j["spot_tolerant"] = s.spot_tolerant;
  j["spot"] = s.spot ? json(spot_policy_name(*s.spot)) : json(nullptr);
  j["command"] = s.command;
  j["env"] = s.env;
  if (!s.secret_env.empty()) j["secret_env"] = std::vector<std::string>(s.secret_env.begin(), s.secret_env.end());
  j["working_dir"] = s.working_dir;
  j["container"] = container_to_json(s.container);
  j["mounts"] = mounts_to_json(s.mounts);
  workflow_to_json(s.workflow, j);
  return j;
}

void redact_secrets(json& spec) {
  if (!spec.is_object() || !spec.contains("secret_env") || !spec["secret_env"].is_array() || !spec.contains("env") ||
      !spec["env"].is_object())
    return;
  for (const json& name : spec["secret_env"])
    if (name.is_string() && spec["env"].contains(name.get<std::string>())) spec["env"][name.get<std::string>()] = "(secret)";
}

}  // namespace tessera::config
