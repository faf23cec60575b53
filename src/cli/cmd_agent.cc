// `tessera agent` (the node agent, src/agent) and `tessera up` (a one-machine cluster: the controller
// with its embedded store plus a local agent, in one process).
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "agent/agent.h"
#include "agent/gpu_inventory.h"
#include "cli/client_args.h"
#include "cli/commands.h"
#include "config/gpu_models.h"
#include "config/log_format.h"
#include "server/server_main.h"

namespace tessera::cli {

namespace {

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0 || !buf[0]) return "local";
  std::string s;
  for (char c : std::string(buf)) s += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_' ? c : '-';
  return s.substr(0, s.find('.'));
}

std::shared_ptr<const GpuCatalog> catalog_for(const std::string& verb, const std::string& gpu_models) {
  if (gpu_models.empty()) return std::shared_ptr<const GpuCatalog>(&GpuCatalog::builtin(), [](const GpuCatalog*) {});
  auto c = config::load_catalog_with(gpu_models);
  if (!c.ok()) fail(verb, "--gpu-models: " + c.error().message);
  return *c;
}

// --gpus: "fake:..." declares a fake inventory; empty or "nvml" uses NVML.
Result<std::unique_ptr<agent::GpuBackend>> make_backend(const std::string& gpus, const std::string& node,
                                                        const GpuCatalog& catalog) {
  if (gpus.rfind("fake:", 0) == 0) return agent::make_fake_backend(gpus, node, catalog);
  if (!gpus.empty() && gpus != "nvml")
    return invalid_argument("--gpus: \"" + gpus + "\" is neither nvml nor fake:COUNTxMODEL[,nvswitch|pcie-pairs][,mig=...]");
  auto b = agent::make_nvml_backend(catalog);
  if (!b.ok())
    return Error{b.error().code, b.error().message +
                                     "; on a machine without NVIDIA GPUs declare a fake inventory, e.g. --gpus fake:8xH100-80GB-SXM"};
  return b;
}

// Where `tessera up` keeps tasks' directories: DATA-tasks when tasks run as this user; when root,
// /var/tmp/tessera-up-NODE-HASH (HASH of the data directory's path), which task users can reach
// wherever the data directory is (e.g. under /root).
std::string up_task_dir(const std::string& data, const std::string& node) {
  std::string abs = std::filesystem::absolute(data).lexically_normal().string();
  while (abs.size() > 1 && abs.back() == '/') abs.pop_back();
  if (::geteuid() != 0) return abs + "-tasks";
  uint64_t h = 1469598103934665603ULL;  // FNV-1a: stable across builds
  for (unsigned char c : abs) h = (h ^ c) * 1099511628211ULL;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  std::string safe;
  for (char c : node) safe += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_' ? c : '_';
  return "/var/tmp/tessera-up-" + safe + "-" + std::string(hex, 8);
}

}  // namespace

void register_agent(CLI::App& app) {
  auto* cmd = app.add_subcommand("agent", "Run the node agent: GPU discovery, task processes, checkpoints (docs/agent.md)");
  auto o = std::make_shared<agent::AgentOptions>();
  auto gpus = std::make_shared<std::string>();
  auto gpu_models = std::make_shared<std::string>();
  auto token_file = std::make_shared<std::string>();
  auto discover = std::make_shared<bool>(false);
  auto json = std::make_shared<bool>(false);
  auto log_level = std::make_shared<std::string>("info");
  cmd->add_option("--server", o->server,
                  "Controller URL, or several separated by commas (controllers of one cluster: the leader is "
                  "found and followed; env TESSERA_SERVER)")->envname("TESSERA_SERVER")->capture_default_str();
  cmd->add_option("--token", o->token, "Agent token (`tessera token create --role agent --node NAME`; env TESSERA_TOKEN)")->envname("TESSERA_TOKEN");
  cmd->add_option("--token-file", *token_file, "Read the token from this file");
  cmd->add_option("--node", o->node, "This node's name in the cluster config (default: the host name)");
  cmd->add_option("--address", o->address, "Address other nodes reach this node at (MASTER_ADDR)")->capture_default_str();
  cmd->add_option("--listen", o->log_listen, "HOST:PORT of the agent's log server (port 0: any free port)")->capture_default_str();
  cmd->add_option("--state-dir", o->state_dir, "Logs and pid files, private to the agent (0700; default ./tessera-agent-NODE)");
  cmd->add_option("--task-dir", o->task_dir,
                  "Tasks' scratch and default checkpoint directories (0711, each task's own dir owned by its user; "
                  "default STATE_DIR-tasks); must be reachable by the task users");
  cmd->add_option("--task-user", o->task_user,
                  "Run tasks as this user, NAME or UID:GID (a root agent only; default nobody; never root)");
  cmd->add_option("--task-user-map", o->task_user_map,
                  "YAML/JSON file choosing the task user per submitting user or queue: "
                  "{default: NAME, users: {alice: alice}, queues: {team-a: \"2001:2001\"}} (docs/agent.md)");
  cmd->add_option("--gpus", *gpus, "nvml (default) or a declared fake inventory: fake:8xH100-80GB-SXM[,nvswitch|pcie-pairs][,mig=3g.40gb@0+3g.40gb@4]");
  cmd->add_option("--gpu-models", *gpu_models, "JSON file declaring GPU models the built-in catalog lacks");
  cmd->add_option("--topology", o->topology, "Network position, e.g. zone=a,spine=s1,leaf=l3");
  cmd->add_option("--heartbeat-interval-ms", o->heartbeat_interval_ms, "Override the controller's heartbeat interval (0 = as told)");
  cmd->add_option("--stop-grace", o->stop_grace_s, "Seconds between TERM and KILL when stopping a task")->capture_default_str();
  cmd->add_option("--interruption-notice-file", o->interruption_notice_file,
                  "Spot: a file a metadata poller writes when the cloud will reclaim this machine (content: the reclaim time "
                  "in unix seconds, or empty for the pool's notice); reported to the controller at each heartbeat");
  cmd->add_flag("--stop-tasks-on-exit", o->stop_tasks_on_exit,
                "A planned stop when the agent stops: the controller checkpoints and requeues this node's jobs (no restart counted), "
                "then what is left gets TERM, grace, KILL; otherwise its watchdog kills the tasks at once");
  cmd->add_option("--runtime", o->runtime,
                  "Container runtime for jobs that ask for a container: auto (podman when it runs here), podman, none")
      ->capture_default_str()->check(CLI::IsMember({"auto", "podman", "none"}));
  cmd->add_option("--podman", o->podman, "The podman client to run containers with")->capture_default_str();
  cmd->add_option("--pull", o->pull, "When podman pulls a job's image: missing, never, always")
      ->capture_default_str()->check(CLI::IsMember({"missing", "never", "always"}));
  cmd->add_option("--cdi-dir", o->cdi_dir, "Where the CDI spec of fake GPUs is written (podman reads /etc/cdi and /var/run/cdi)")
      ->capture_default_str();
  cmd->add_option("--task-pids-limit", o->pids_limit, "Most processes and threads one task may have (0 = no limit)")
      ->capture_default_str()->check(CLI::Range(int64_t(0), int64_t(4194304)));
  cmd->add_flag("--discover", *discover, "Print the GPU inventory found (read-only) and exit");
  cmd->add_flag("--json", *json, "With --discover: JSON");
  cmd->add_option("--log-level", *log_level, "trace, debug, info, warn, error")->capture_default_str();
  cmd->callback([=] {
    config::use_safe_log_format();
    spdlog::set_level(spdlog::level::from_str(*log_level));
    const std::string verb = "agent";
    if (o->node.empty()) o->node = host_name();
    auto catalog = catalog_for(verb, *gpu_models);
    auto backend = make_backend(*gpus, o->node, *catalog);
    if (!backend.ok()) fail(verb, backend.error().message);
    if (*discover) {
      auto inv = (*backend)->inventory();
      if (!inv.ok()) fail(verb, inv.error().message);
      if (*json)
        std::cout << agent::inventory_to_json(*inv).dump(2) << "\n";
      else
        std::cout << agent::inventory_report(*inv);
      return;
    }
    if (!token_file->empty()) {
      o->token = read_token_file(verb, *token_file);
      struct stat st{};
      if (::stat(token_file->c_str(), &st) == 0 && (st.st_mode & 0077) != 0)
        spdlog::warn("event=token_file_readable path={} mode={:o} (others on this machine, tasks included, may read it: "
                     "chmod 600 it)", *token_file, st.st_mode & 0777);
    } else if (const char* env = std::getenv("TESSERA_TOKEN"); !o->token.empty() && (env == nullptr || o->token != env)) {
      spdlog::warn("event=token_on_command_line (every process on this machine, tasks included, can read it in ps or "
                   "/proc/PID/cmdline: use --token-file or TESSERA_TOKEN)");
    }
    if (o->token.empty()) fail(verb, "--token: required (an agent token: `tessera token create --role agent --user agent --node NAME`)", 2);
    if (o->state_dir.empty()) o->state_dir = "tessera-agent-" + o->node;
    // SIGINT/SIGTERM stop the agent from a waiting thread; task processes reset their mask.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    auto a = agent::Agent::create(*o, std::move(*backend));
    if (!a.ok()) fail(verb, a.error().message);
    std::cout << "tessera agent: node " << o->node << ", logs on port " << (*a)->log_port() << ", reporting to " << o->server
              << std::endl;
    agent::Agent* ap = a->get();
    std::thread waiter([ap, signals] {
      int sig = 0;
      sigwait(&signals, &sig);
      spdlog::info("event=agent_stopping signal={}", sig);
      ap->stop();
    });
    waiter.detach();
    (*a)->run();
    spdlog::info("event=agent_stopped node={}", o->node);
  });
}

void register_up(CLI::App& app) {
  auto* cmd = app.add_subcommand("up", "Start a one-machine cluster: the controller (embedded SQLite) and a local agent");
  auto data = std::make_shared<std::string>("tessera-data");
  auto listen = std::make_shared<std::string>("127.0.0.1:8420");
  auto gpus = std::make_shared<std::string>();
  auto node = std::make_shared<std::string>();
  auto task_user = std::make_shared<std::string>();
  auto log_level = std::make_shared<std::string>("warn");
  cmd->add_option("--data", *data, "Data directory: store, admin token, cluster.yaml, agent state")->capture_default_str();
  cmd->add_option("--listen", *listen, "HOST:PORT of the API")->capture_default_str();
  cmd->add_option("--gpus", *gpus, "nvml, or fake:COUNTxMODEL (default: NVML when present, else fake:8xH100-80GB-SXM)");
  cmd->add_option("--node", *node, "The local node's name (default: the host name)");
  cmd->add_option("--task-user", *task_user, "Run tasks as this user, NAME or UID:GID (when root; default nobody; never root)");
  cmd->add_option("--log-level", *log_level, "trace, debug, info, warn, error")->capture_default_str();
  cmd->callback([=] {
    const std::string verb = "up";
    config::use_safe_log_format();
    spdlog::set_level(spdlog::level::from_str(*log_level));
    const std::string name = node->empty() ? host_name() : *node;
    const GpuCatalog& catalog = GpuCatalog::builtin();
    std::string gpu_spec = *gpus;
    auto backend = make_backend(gpu_spec, name, catalog);
    if (!backend.ok() && gpu_spec.empty()) {
      std::cout << "No NVIDIA GPU found through NVML (" << backend.error().message.substr(0, backend.error().message.find(';'))
                << ").\nUsing a declared FAKE node: 8 × H100-80GB-SXM on NVSwitch (--gpus fake:8xH100-80GB-SXM). "
                   "Tasks run as real processes;\ntheir CUDA_VISIBLE_DEVICES are fake GPU indices.\n\n";
      gpu_spec = "fake:8xH100-80GB-SXM";
      backend = make_backend(gpu_spec, name, catalog);
    }
    if (!backend.ok()) fail(verb, backend.error().message);
    auto inv = (*backend)->inventory();
    if (!inv.ok()) fail(verb, inv.error().message);
    std::error_code ec;
    std::filesystem::create_directories(*data, ec);
    if (ec) fail(verb, "--data: cannot create " + *data + ": " + ec.message());
    // The cluster: DATA/cluster.yaml, written from what was found on the first run (edit it freely).
    const std::string config_path = *data + "/cluster.yaml";
    if (!std::filesystem::exists(config_path)) {
      if (inv->gpus.empty()) fail(verb, "no GPUs found; declare some with --gpus fake:8xH100-80GB-SXM");
      std::string mig;
      for (const agent::GpuInfo& g : inv->gpus) {
        if (g.model != inv->gpus[0].model)
          fail(verb, "GPUs of different models on one node (" + g.model + ", " + inv->gpus[0].model +
                         "); write " + config_path + " by hand (docs/server.md)");
        if (g.mig_enabled) mig += (mig.empty() ? "" : ", ") + std::to_string(g.index);
      }
      struct sysinfo si{};
      sysinfo(&si);
      const int64_t mem_mib = int64_t(si.totalram) * si.mem_unit / (1024 * 1024);
      const int64_t cpu_milli = int64_t(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN))) * 1000;
      std::ofstream out(config_path);
      out << "# Written by `tessera up` from the GPUs it found (" << inv->source << "). Edit and restart to change.\n"
          << "name: local\nlevels: [leaf]\nnodes:\n  - {name: " << name << ", gpu_model: " << inv->gpus[0].model
          << ", gpus: " << inv->gpus.size() << ", cpu: " << cpu_milli << ", memory: " << mem_mib << ", path: [leaf-0]"
          << (mig.empty() ? "" : ", mig_gpus: [" + mig + "]") << "}\n"
          << "queues:\n  - {name: default}\n";
    }
    server::ServerOptions so;
    so.data_dir = *data;
    so.listen = *listen;
    so.config_path = config_path;
    so.log_level = *log_level;
    so.heartbeat_interval_ms = 1000;
    so.agent_timeout_ms = 10000;
    std::unique_ptr<agent::Agent> local;
    std::thread agent_thread;
    auto shared_backend = std::make_shared<std::unique_ptr<agent::GpuBackend>>(std::move(*backend));
    so.on_listening = [&, shared_backend](int port) {
      // The server has just written it (or kept it from an earlier run); no throwing from here.
      std::string token;
      std::getline(std::ifstream(*data + "/admin.token"), token);
      agent::AgentOptions ao;
      ao.server = "http://127.0.0.1:" + std::to_string(port);
      ao.token = token;
      ao.node = name;
      ao.state_dir = *data + "/agent";
      ao.task_user = *task_user;
      // Tasks' directories outside the data directory (0700: they could not reach it there).
      ao.task_dir = up_task_dir(*data, name);
      ao.stop_tasks_on_exit = true;
      ao.stop_grace_s = 10;
      auto a = agent::Agent::create(ao, std::move(*shared_backend));
      if (!a.ok()) {
        std::cerr << "tessera up: agent: " << a.error().message << "\n";
        ::kill(::getpid(), SIGTERM);
        return;
      }
      local = std::move(*a);
      agent_thread = std::thread([&] { local->run(); });
      const std::string url = "http://127.0.0.1:" + std::to_string(port);
      std::cout << "\nTessera is up: " << url << "  (node " << name << ", " << inv->gpus.size() << " × " << inv->gpus[0].model
                << (inv->source == "fake" ? ", FAKE GPUs" : "") << "; data in " << *data << ")\n"
                << "Admin token: " << token << "  (also in " << *data << "/admin.token)\n\n"
                << "Try, in another terminal:\n"
                << "  export TESSERA_SERVER=" << url << " TESSERA_TOKEN=$(cat " << *data << "/admin.token)\n"
                << "  build/bin/tessera submit --queue default --name hello --gpus 1 -- /bin/sh -c 'echo hello from GPU $CUDA_VISIBLE_DEVICES'\n"
                << "  build/bin/tessera jobs --all\n"
                << "  build/bin/tessera logs 1\n\n"
                << "Ctrl-C stops it; running it again resumes the same state.\n"
                << std::endl;
    };
    so.on_stopping = [&] {
      std::cout << "\nStopping (a planned stop): jobs that checkpoint save first, the others stop; none counts as failed\n"
                   "or restarted, and all resume when `tessera up` runs again." << std::endl;
      if (local) local->stop();
      if (agent_thread.joinable()) agent_thread.join();
    };
    const int rc = server::run_server(so);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace tessera::cli
