// The flags of `tessera submit`, shared with `tessera run` (the same resource and workflow flags), and
// building the job spec from a spec file or an #SBATCH batch script, the flags over it, and the
// default queue (cmd_submit.cc). Single-threaded.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/api_client.h"
#include "cli/client_args.h"

namespace tessera::cli {

struct SubmitArgs {
  ConnArgs conn;
  std::string spec_file;              // job.yaml, job.json or "-"
  std::vector<std::string> command;   // what to run (after --), or a batch script and its arguments
  std::set<std::string> spec_seen;    // spec_file values accepted while parsing (see register_submit)
  CLI::Option* command_opt = nullptr;
  int gpus = 0, tasks = 0, gpu_milli = 0;
  std::string queue, name, klass, mig, gpu_memory, cpu, memory, models, max_runtime, expected_runtime,
      project, workdir, idempotency_key, image, container_user, network;
  std::string array, dependency, begin, time, output, error;
  bool kill_on_invalid_dep = false, hold = false;
  std::vector<std::string> env, mounts;
  std::map<std::string, CLI::Option*> opt;  // flag name -> option, to know which were given
  bool given(const std::string& flag) const {
    auto it = opt.find(flag);
    return it != opt.end() && it->second->count() > 0;
  }
};

// The spec and resource flags (--gpus, --tasks, --queue, ..., --array, --dependency, --time, ...)
// and the connection options. `batch_flags` adds the ones that make sense only for a batch job
// (--array, --dependency, --kill-on-invalid-dep, --hold, --begin, --idempotency-key).
void add_submit_flags(CLI::App* cmd, SubmitArgs& a, bool batch_flags);

// The job spec (canonical JSON, checked by the config layer) from the spec file or batch script, the
// flags and the command; the queue defaults to the CLI config file's, and a spec with no queue at all
// fails listing the user's leaf queues. Usage errors fail the command with exit 2.
nlohmann::json build_submit_spec(const std::string& verb, SubmitArgs& a, ApiClient& api);

}  // namespace tessera::cli
