// `tessera submit script.sh`: a Slurm batch script's #SBATCH lines translated into a Tessera job
// spec (the JSON tree `tessera submit` reads from a spec file, so command-line flags still override
// it), with every line or option that was not used and why. The script itself becomes the command:
// ["/bin/bash", "-c", SCRIPT TEXT, SCRIPT NAME, ARGS...], so its text travels in the spec and the
// node needs no copy of the file. Pure function of its inputs; thread-safe; unit-tested in tests/cli.
//
// Resources: Slurm counts GPUs and memory per node (--gres=gpu:N, --gpus-per-node, --mem) or in
// total (--gpus), Tessera per task: they are divided by the tasks per node (--ntasks-per-node, or
// --ntasks spread over --nodes) or by the tasks, and a split that is not exact is an error that asks
// for --gpus-per-task. A GPU model (gpu:a100:4) becomes gpu_models: the known models it names.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace tessera::cli {

struct SbatchNote {
  int line = 0;        // 1-based line of the script
  std::string text;    // the option (or the whole line) as written
  std::string why;     // why it was not used, and what to use instead
};

struct SbatchTranslation {
  nlohmann::json spec = nlohmann::json::object();  // name, queue, tasks, resources, array, ..., command
  std::vector<SbatchNote> ignored;
  std::vector<std::string> notes;  // differences worth knowing that are not about one line
};

struct SbatchContext {
  std::string script_name;                 // as given on the command line ($0 of the script)
  std::vector<std::string> args;           // the script's arguments ($1...)
  std::vector<std::string> gpu_models;     // known GPU model names, to resolve gpu:MODEL:N
  std::string cwd;                         // the submit directory: base of relative --output/--error
  int64_t now = 0;                         // for --begin=now+1h
};

// Does the text hold an #SBATCH line (a line that starts with "#SBATCH")?
bool has_sbatch_lines(std::string_view script);

// The script's #SBATCH options (those before the first command line, as sbatch reads them) as a job
// spec. Errors name the line and the option: "job.sh line 4: --time=1-xx: ...".
Result<SbatchTranslation> translate_sbatch(std::string_view script, const SbatchContext& ctx);

// A memory amount as Slurm writes it ("64G", "500M", "1T", "2048" = MiB) in MiB; nullopt if bad.
std::optional<int64_t> parse_slurm_memory(std::string_view text);

}  // namespace tessera::cli
