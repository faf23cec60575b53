// The environment a task starts with. See task_env.h.
#include "agent/task_env.h"

#include <algorithm>
#include <cstdlib>

namespace tessera::agent {

using Json = nlohmann::json;

namespace {

// Variables a task inherits from the agent (the rest of the agent's environment stays out).
const char* const kInherited[] = {"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR", "PYTHONPATH", "LD_LIBRARY_PATH"};

}  // namespace

std::map<std::string, std::string> task_environment(const TaskEnvInput& in) {
  const Json& a = *in.assignment;
  std::map<std::string, std::string> env;
  if (in.container) {
    env["HOME"] = in.scratch;
    env["TMPDIR"] = in.scratch + "/tmp";
  } else {
    for (const char* name : kInherited)
      if (const char* v = std::getenv(name)) env[name] = v;
    if (!env.count("PATH")) env["PATH"] = "/usr/local/bin:/usr/bin:/bin";
    // Places the task can write: its scratch directory (TMPDIR; HOME too when it runs as another user).
    if (!in.scratch.empty()) env["TMPDIR"] = in.scratch + "/tmp";
  }
  if (in.user && !in.container) {
    env["HOME"] = in.user->home.empty() ? in.scratch : in.user->home;
    env.erase("USER"), env.erase("LOGNAME");
    if (in.user->name.find(':') == std::string::npos) env["USER"] = env["LOGNAME"] = in.user->name;
  }
  const Json job_env = a.value("env", Json::object());
  for (const auto& [k, v] : job_env.items())
    if (v.is_string()) env[k] = v.get<std::string>();
  // Rank layout: task order; nodes numbered in order of first appearance.
  const Json nodes = a.value("task_nodes", Json::array());
  std::vector<std::string> node_order;
  int local_rank = 0, local_world = 0;
  const std::string me = in.node;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::string n = nodes[i].is_string() ? nodes[i].get<std::string>() : "";
    if (std::find(node_order.begin(), node_order.end(), n) == node_order.end()) node_order.push_back(n);
    if (n == me) {
      if (int(i) < in.task) ++local_rank;
      ++local_world;
    }
  }
  const int node_rank = int(std::find(node_order.begin(), node_order.end(), me) - node_order.begin());
  env["WORLD_SIZE"] = std::to_string(a.value("tasks", 1));
  env["RANK"] = std::to_string(in.task);
  env["LOCAL_RANK"] = std::to_string(local_rank);
  env["LOCAL_WORLD_SIZE"] = std::to_string(std::max(1, local_world));
  env["NODE_RANK"] = std::to_string(node_rank);
  env["GROUP_RANK"] = env["NODE_RANK"];
  env["MASTER_ADDR"] = a.value("master_addr", in.address);
  if (in.master_port > 0) env["MASTER_PORT"] = std::to_string(in.master_port);
  // GPUs: UUIDs from NVML (GPU or MIG instance), indices on fake GPUs.
  std::vector<std::string> devices;
  const Json mig = a.value("mig", Json(nullptr));
  const bool fake = in.inventory->source != "nvml";
  if (mig.is_object()) {
    const int gi = mig.value("gpu", 0), start = mig.value("start", 0);
    std::string uuid;
    if (size_t(gi) < in.inventory->gpus.size())
      for (const MigInstanceInfo& m : in.inventory->gpus[size_t(gi)].instances)
        if (m.start == start) uuid = m.uuid;
    devices.push_back(fake || uuid.empty() ? std::to_string(gi) : uuid);
    env["TESSERA_MIG_PROFILE"] = mig.value("profile", "");
  } else {
    for (const Json& g : a.value("gpus", Json::array())) {
      const size_t gi = g.get<size_t>();
      devices.push_back(fake || gi >= in.inventory->gpus.size() ? std::to_string(gi) : in.inventory->gpus[gi].uuid);
    }
  }
  std::string list;
  for (const std::string& d : devices) list += (list.empty() ? "" : ",") + d;
  env["CUDA_VISIBLE_DEVICES"] = list;
  env["NVIDIA_VISIBLE_DEVICES"] = list.empty() ? "void" : list;
  if (a.value("gpu_milli", int64_t(0)) > 0 && a.value("gpu_milli", int64_t(0)) < 1000)
    env["TESSERA_GPU_MILLI"] = std::to_string(a.value("gpu_milli", int64_t(0)));
  env["TESSERA_JOB_ID"] = std::to_string(in.job);
  env["TESSERA_JOB_NAME"] = a.value("name", "");
  env["TESSERA_ATTEMPT"] = std::to_string(in.attempt);
  env["TESSERA_TASK_INDEX"] = std::to_string(in.task);
  env["TESSERA_NODE"] = in.node;
  env["TESSERA_CHECKPOINT_DIR"] = in.ckpt_dir;
  const std::string resume = a.value("resume_from", "");
  if (!resume.empty()) env["TESSERA_RESUME_FROM"] = resume;
  return env;
}

}  // namespace tessera::agent
