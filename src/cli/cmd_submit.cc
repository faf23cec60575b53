// `tessera submit`: a job from a spec file (YAML/JSON or stdin), a command, or a Slurm batch script
// with #SBATCH lines (sbatch.h), with flags over it (including Slurm's --array, --dependency, --hold,
// --begin, --time, --output, --error), the queue defaulting to the CLI config file's (cli_config.h).
// The spec is checked by the config layer before it is sent. Usage errors exit 2, failures 1.
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <tuple>

#include <sys/stat.h>

#include <yaml-cpp/yaml.h>

#include "cli/client_util.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "cli/sbatch.h"
#include "cli/slurm_time.h"
#include "cli/submit_args.h"
#include "config/job_spec.h"
#include "config/yaml_fields.h"
#include "core/gpu_catalog.h"

namespace tessera::cli {
namespace {

using nlohmann::json;


bool is_spec_file(const std::string& a) {
  auto ends = [&](const char* suf) {
    const size_t n = std::strlen(suf);
    if (a.size() < n) return false;
    for (size_t i = 0; i < n; ++i)
      if (std::tolower(static_cast<unsigned char>(a[a.size() - n + i])) != suf[i]) return false;
    return true;
  };
  return a == "-" || ends(".yaml") || ends(".yml") || ends(".json");
}

// A quantity flag: digits alone become a JSON integer, anything else is sent as the string.
json quantity(const std::string& s) {
  int64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc() && p == s.data() + s.size()) return v;
  return s;
}

// argv[0]'s basename made into a valid job name ([A-Za-z0-9._-], at most 128 characters).
std::string default_name(const std::string& argv0) {
  std::string base = std::filesystem::path(argv0).filename().string();
  for (char& c : base)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '-';
  if (base.size() > 128) base.resize(128);
  return base.empty() ? "job" : base;
}

// The server's limit on a request body (docs/api.md).
constexpr size_t kMaxBody = 1 << 20;


// "#!/bin/bash", "#!/bin/sh", "#!/usr/bin/env bash", ... as the first line.
bool shell_shebang(const std::string& text) {
  if (text.rfind("#!", 0) != 0) return false;
  std::istringstream first(text.substr(2, text.find('\n') == std::string::npos ? std::string::npos : text.find('\n') - 2));
  std::string interp, arg;
  first >> interp >> arg;
  std::string name = std::filesystem::path(interp).filename().string();
  if (name == "env") name = arg;
  return name == "bash" || name == "sh" || name == "dash";
}

// A command word naming a readable regular file that is a batch script (#SBATCH lines, or a shell
// script): its text. Such a script runs as /bin/bash -c TEXT, so the node needs no copy of it.
bool read_batch_script(const std::string& path, std::string& text, bool& sbatch) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  std::ifstream f(path);
  if (!f) return false;
  text.assign(std::istreambuf_iterator<char>(f), {});
  sbatch = has_sbatch_lines(text);
  return sbatch || shell_shebang(text);
}

// --array, --dependency, --kill-on-invalid-dep, --hold, --begin, --time, --output, --error over the spec.
void apply_workflow_flags(const std::string& verb, const SubmitArgs& a, json& j) {
  if (a.given("--array")) j["array"] = a.array;
  if (a.given("--dependency")) j["dependency"] = a.dependency;
  if (a.given("--kill-on-invalid-dep")) j["kill_on_invalid_dep"] = a.kill_on_invalid_dep;
  if (a.given("--hold")) j["hold"] = a.hold;
  if (a.given("--begin")) {
    auto b = parse_begin_time(a.begin, now_s(), "--begin");
    if (!b.ok()) fail(verb, b.error().message, 2);
    j["begin"] = *b;
  }
  if (a.given("--time")) {
    if (a.given("--max-runtime")) fail(verb, "--time and --max-runtime both set the time limit; give one", 2);
    auto t = parse_time_limit(a.time, "--time");
    if (!t.ok()) fail(verb, t.error().message, 2);
    if (*t > 0) j["max_runtime"] = *t;
    else j.erase("max_runtime");
  }
  std::error_code ec;
  const std::string cwd = std::filesystem::current_path(ec).string();
  for (const auto& [flag, key, value] : {std::tuple<const char*, const char*, const std::string*>{"--output", "output", &a.output},
                                         {"--error", "error", &a.error}}) {
    if (!a.given(flag)) continue;
    std::string path = *value;
    // Relative to the job's working directory, else the submit directory, as sbatch does.
    if (!path.empty() && path[0] != '/') {
      const std::string base = a.given("--workdir") ? a.workdir : j.value("working_dir", cwd);
      if (!base.empty()) path = base + (base.back() == '/' ? "" : "/") + path;
    }
    j[key] = path;
  }
}

// No queue anywhere: the message lists the leaf queues the token's user may submit to.
std::string no_queue_message(const std::string& verb, ApiClient& api) {
  std::string msg = "no queue: give --queue QUEUE, queue: in the spec, or a default `queue: NAME` in " +
                    (cli_config(verb).path.empty() ? std::string("~/.config/tessera/config.yaml") : cli_config(verb).path);
  auto me = api.get("/api/v1/whoami");
  auto qs = api.get("/api/v1/queues");
  if (!qs.ok() || !qs->body.contains("queues") || !qs->body["queues"].is_array())
    return msg + " (the queues could not be listed: " + (qs.ok() ? std::string("no \"queues\" in the answer") : qs.error().message) + ")";
  const json& queues = qs->body["queues"];
  const std::string scope = me.ok() ? json_text(me->body, "queue", "") : "";
  std::map<std::string, std::string> parent;
  std::set<std::string> parents;
  for (const auto& q : queues) {
    parent[json_text(q, "name", "")] = json_text(q, "parent", "");
    parents.insert(json_text(q, "parent", ""));
  }
  std::vector<std::string> leaves;
  for (const auto& [name, p] : parent) {
    if (name.empty() || parents.count(name)) continue;
    bool in_scope = scope.empty();
    for (std::string at = name; !in_scope && !at.empty(); at = parent.count(at) ? parent[at] : "") in_scope = at == scope;
    if (in_scope) leaves.push_back(name);
  }
  if (leaves.empty()) return msg + " (no queue is open to this token)";
  return msg + "; your queues: " + join(leaves, ", ");
}

}  // namespace

json build_submit_spec(const std::string& verb, SubmitArgs& a, ApiClient& api) {
  std::string file = a.spec_file;
  std::vector<std::string> command = a.command;
  const bool any_flag = std::any_of(a.opt.begin(), a.opt.end(), [](const auto& kv) { return kv.second->count() > 0; });
  if (file.empty() && command.empty())
    fail(verb, "nothing to run: give a job spec file (job.yaml, job.json, or - for stdin) or a command after `--`, "
               "e.g. tessera submit --gpus 8 --queue team-a -- python train.py", 2);

  // The file's text (stdin for "-").
  std::string text, where = file == "-" ? "<stdin>" : file;
  if (!file.empty()) {  // a spec file
    if (file == "-") {
      text.assign(std::istreambuf_iterator<char>(std::cin), {});
    } else {
      std::ifstream f(file);
      if (!f) fail(verb, file + ": cannot read it (" + std::strerror(errno) + "); check the path", 2);
      text.assign(std::istreambuf_iterator<char>(f), {});
    }
  }
  // A batch script (a local file with #SBATCH lines, or a shell script) in place of a command: its
  // #SBATCH options as the spec, its text as the command.
  json j = json::object();
  bool script = false;
  if (file.empty() && !command.empty()) {
    std::string stext;
    bool sbatch = false;
    if (read_batch_script(command[0], stext, sbatch)) {
      if (stext.size() > kMaxBody)
        fail(verb, command[0] + ": " + std::to_string(stext.size()) + " bytes; a batch script may be at most 1 MiB", 2);
      SbatchContext ctx;
      ctx.script_name = command[0];
      ctx.args.assign(command.begin() + 1, command.end());
      ctx.gpu_models = GpuCatalog::builtin().names();
      std::error_code ec;
      ctx.cwd = std::filesystem::current_path(ec).string();
      ctx.now = now_s();
      auto t = translate_sbatch(stext, ctx);
      if (!t.ok()) fail(verb, t.error().message, 2);
      for (const SbatchNote& n : t->ignored)
        std::cerr << "tessera " << verb << ": " << command[0] << " line " << n.line << ": ignored " << n.text << ": " << n.why << "\n";
      if (!a.given("--workdir") && sbatch)
        for (const std::string& n : t->notes) std::cerr << "tessera " << verb << ": note: " << n << "\n";
      j = std::move(t->spec);
      if (!j.contains("name")) j["name"] = default_name(command[0]);
      where = command[0];
      file = command[0];  // the spec came from it: error messages name it
      command.clear();
      script = true;
    }
  }
  const bool is_json = [&] {
    if (file.size() >= 5 && file.substr(file.size() - 5) == ".json") return true;
    const size_t p = text.find_first_not_of(" \t\r\n");
    return file == "-" && p != std::string::npos && text[p] == '{';
  }();

  // The file as JSON. A syntax error is reported with the config parsers' own message (line and
  // column, or byte), so it reads the same as the server's.
  if (!file.empty() && !script) {
    if (text.size() > kMaxBody)
      fail(verb, where + ": " + std::to_string(text.size()) + " bytes; a job spec may be at most 1 MiB", 2);
    bool readable = true;
    if (is_json) {
      j = json::parse(text, nullptr, /*allow_exceptions=*/false);
      readable = !j.is_discarded() && j.is_object();
    } else {
      try {
        readable = config::yaml_to_json(YAML::Load(text), j, "").ok() && j.is_object();
      } catch (const YAML::Exception&) {
        readable = false;
      }
    }
    if (!readable) {
      auto s = is_json ? config::parse_job_spec_json(text) : config::parse_job_spec_yaml(text);
      fail(verb, where + ": " + (s.ok() ? std::string("not a job spec (a mapping of fields)") : s.error().message), 2);
    }
  }
  // Flags (and a command) over the file's fields; then the config layer's checks on the result.
  {
    if (j.contains("resources") && !j["resources"].is_null() && !j["resources"].is_object())
      fail(verb, where + ": resources: must be a mapping of per-task resources (gpus, cpu, memory, ...)", 2);
    json& res = j["resources"];
    if (!res.is_object()) res = json::object();
    if (a.given("--name")) j["name"] = a.name;
    if (a.given("--queue")) j["queue"] = a.queue;
    if (a.given("--class")) j["priority_class"] = a.klass;
    if (a.given("--project")) j["project"] = a.project;
    if (a.given("--tasks")) j["tasks"] = a.tasks;
    if (a.given("--gpus")) {
      res["gpus"] = a.gpus;
      res.erase("mig");
    }
    if (a.given("--gpu-milli")) {
      res["gpu_milli"] = a.gpu_milli;
      res.erase("mig");
    }
    if (a.given("--gpu-memory")) {
      res["gpu_memory"] = quantity(a.gpu_memory);
      res.erase("mig");
    }
    if (a.given("--mig")) {
      if (a.given("--gpus") || a.given("--gpu-milli") || a.given("--gpu-memory"))
        fail(verb, "--mig asks for one MIG instance; it cannot be combined with --gpus, --gpu-milli or --gpu-memory", 2);
      res["mig"] = a.mig;
      res.erase("gpus");
      res.erase("gpu_milli");
      res.erase("gpu_memory");
    }
    if (a.given("--cpu")) res["cpu"] = quantity(a.cpu);
    if (a.given("--memory")) res["memory"] = quantity(a.memory);
    if (a.given("--models")) res["gpu_models"] = split_commas(a.models);
    if (res.empty()) j.erase("resources");
    if (a.given("--max-runtime")) {
      auto d = parse_duration_flag(a.max_runtime, "--max-runtime");
      if (!d.ok()) fail(verb, d.error().message, 2);
      j["max_runtime"] = *d;
    }
    if (a.given("--expected-runtime")) {
      auto d = parse_duration_flag(a.expected_runtime, "--expected-runtime");
      if (!d.ok()) fail(verb, d.error().message, 2);
      j["expected_runtime"] = *d;
    }
    if (a.given("--workdir")) j["working_dir"] = a.workdir;
    for (const std::string& kv : a.env) {
      const size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0)
        fail(verb, "--env '" + kv + "': expected NAME=VALUE (e.g. --env EPOCHS=3)", 2);
      if (!j["env"].is_object()) j["env"] = json::object();
      j["env"][kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    if (a.given("--image") || a.given("--container-user") || a.given("--network")) {
      if (j.contains("container") && !j["container"].is_null() && !j["container"].is_object())
        fail(verb, where + ": container: must be a mapping {image, user, network}", 2);
      json& c = j["container"];
      if (!c.is_object()) c = json::object();
      if (a.given("--image")) c["image"] = a.image;
      if (a.given("--container-user")) c["user"] = a.container_user;
      if (a.given("--network")) c["network"] = a.network;
    }
    for (const std::string& m : a.mounts) {
      auto mount = parse_mount_flag(m);
      if (!mount.ok()) fail(verb, mount.error().message, 2);
      if (j.contains("mounts") && !j["mounts"].is_null() && !j["mounts"].is_array())
        fail(verb, where + ": mounts: must be a list of mounts", 2);
      if (!j["mounts"].is_array()) j["mounts"] = json::array();
      j["mounts"].push_back(std::move(*mount));
    }
    apply_workflow_flags(verb, a, j);
    if (!command.empty()) j["command"] = command;
    if ((!j.contains("name") || j["name"] == "") && j.contains("command") && j["command"].is_array() &&
        !j["command"].empty() && j["command"][0].is_string())
      j["name"] = default_name(j["command"][0].get<std::string>());
  }
  if (!j.contains("queue") || (j["queue"].is_string() && j["queue"].get<std::string>().empty())) {
    const CliConfig& cfg = cli_config(verb);
    if (!cfg.queue.empty()) j["queue"] = cfg.queue;
    else fail(verb, no_queue_message(verb, api), 2);
  }
  auto spec = config::job_spec_from_json(j);
  if (!spec.ok()) {
    const std::string& msg = spec.error().message;
    std::string origin = file.empty() ? "the flags" : any_flag || !command.empty() ? where + " with the flags applied" : where;
    // Name the flag when the faulty field came from one.
    static const std::vector<std::pair<std::string, std::string>> kFieldFlags = {
        {"resources.gpus", "--gpus"}, {"resources.gpu_milli", "--gpu-milli"}, {"resources.gpu_memory", "--gpu-memory"},
        {"resources.gpu_models", "--models"}, {"resources.mig", "--mig"}, {"resources.cpu", "--cpu"},
        {"resources.memory", "--memory"}, {"tasks", "--tasks"}, {"queue", "--queue"}, {"name", "--name"},
        {"priority_class", "--class"}, {"project", "--project"}, {"env", "--env"}, {"working_dir", "--workdir"},
        {"max_runtime", "--max-runtime"}, {"expected_runtime", "--expected-runtime"}, {"container.image", "--image"},
        {"container.user", "--container-user"}, {"container.network", "--network"}, {"mounts", "--mount"},
        {"max_runtime", "--time"}, {"array", "--array"}, {"dependency", "--dependency"}, {"begin", "--begin"}, {"output", "--output"},
        {"error", "--error"}};
    for (const auto& [field, flag] : kFieldFlags)
      if (msg.rfind(field, 0) == 0 && msg.size() > field.size() && std::strchr(":[.", msg[field.size()]) &&
          (a.given(flag) || file.empty())) {
        origin = flag;
        break;
      }
    if (msg.rfind("command", 0) == 0 && !command.empty()) origin = "the command after --";
    fail(verb, origin + ": " + msg, 2);
  }

  return config::job_spec_to_json(*spec);
}

void add_submit_flags(CLI::App* cmd, SubmitArgs& a, bool batch_flags) {
  add_conn_options(cmd, a.conn);
  auto& o = a.opt;
  o["--gpus"] = cmd->add_option("--gpus,--gpus-per-task", a.gpus, "GPUs per task (whole GPUs, or the GPUs a share is on)");
  o["--tasks"] = cmd->add_option("--tasks,-n,--ntasks", a.tasks, "tasks in the gang");
  o["--queue"] = cmd->add_option("--queue,-p,--partition", a.queue, "leaf queue (or parent/child path); default: queue: in the CLI config file");
  o["--name"] = cmd->add_option("--name,-J,--job-name", a.name, "job name (default: the command's or script's basename)");
  o["--class"] = cmd->add_option("--class", a.klass, "priority class (e.g. research)");
  o["--mig"] = cmd->add_option("--mig", a.mig, "one MIG instance per task, e.g. 3g.40gb");
  o["--gpu-milli"] = cmd->add_option("--gpu-milli", a.gpu_milli, "share of each GPU in thousandths (1..999)");
  o["--gpu-memory"] = cmd->add_option("--gpu-memory", a.gpu_memory, "GPU memory per GPU for a share: MiB or 20Gi");
  o["--cpu"] = cmd->add_option("--cpu,-c,--cpus-per-task", a.cpu, "CPU per task: cores (16) or milli-cores (500m)");
  o["--memory"] = cmd->add_option("--memory,--mem", a.memory, "memory per task: MiB or 64Gi/512Mi");
  o["--models"] = cmd->add_option("--models", a.models, "allowed GPU models, comma-separated");
  o["--max-runtime"] = cmd->add_option("--max-runtime", a.max_runtime, "hard runtime cap: seconds or 90m/2h/1d");
  o["--time"] = cmd->add_option("--time,-t", a.time,
                                "time limit as sbatch's: minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]], 90m/2h/1d, UNLIMITED");
  o["--expected-runtime"] = cmd->add_option("--expected-runtime", a.expected_runtime, "runtime estimate: seconds or 90m/2h/1d");
  o["--project"] = cmd->add_option("--project,-A,--account", a.project, "project for accounting");
  o["--env"] = cmd->add_option("--env", a.env, "environment variable NAME=VALUE (repeatable)")->allow_extra_args(false);
  o["--workdir"] = cmd->add_option("--workdir,-D,--chdir", a.workdir, "working directory (absolute path)");
  o["--image"] = cmd->add_option("--image", a.image, "run the tasks in a container of this image");
  o["--container-user"] = cmd->add_option("--container-user", a.container_user, "the container's user: UID or UID:GID (never 0)");
  o["--network"] = cmd->add_option("--network", a.network, "the container's network: host (default) or none");
  o["--mount"] = cmd->add_option("--mount", a.mounts, "mount KIND=SOURCE:PATH[:ro|:rw], KIND dataset, volume or host (repeatable)")
                     ->allow_extra_args(false);
  o["--output"] = cmd->add_option("--output,-o", a.output,
                                  "also write stdout to this file on the node: %j job, %A array job, %a index, %t task, %x name, %u user");
  o["--error"] = cmd->add_option("--error,-e", a.error, "also write stderr to this file on the node (patterns as --output)");
  if (!batch_flags) return;
  o["--array"] = cmd->add_option("--array,-a", a.array, "a job array: 0-99, 1,3,5-7, 0-15:4; %N runs at most N at once (0-99%8)");
  o["--dependency"] = cmd->add_option("--dependency,-d", a.dependency,
                                      "start after other jobs: afterok:ID[:ID...], afterany, afternotok, after, singleton; "
                                      "comma = all (IDs as 12 or 12_3)");
  o["--kill-on-invalid-dep"] = cmd->add_flag("--kill-on-invalid-dep", a.kill_on_invalid_dep,
                                             "cancel the job if its dependency can never be satisfied");
  o["--hold"] = cmd->add_flag("--hold,-H", a.hold, "submit held: it stays pending until `tessera release`");
  o["--begin"] = cmd->add_option("--begin,-b", a.begin,
                                 "not before: 2026-12-24T18:00[:SS] (local), HH:MM, now+2h, now+30m, now+1d, tomorrow");
  cmd->add_option("--idempotency-key", a.idempotency_key, "retry-safe submission key (at most 128 characters)");
}

namespace {

void run_submit(SubmitArgs& a) {
  const std::string verb = "submit";
  auto api = connect(verb, a.conn);
  const json spec = build_submit_spec(verb, a, *api);
  if (a.idempotency_key.size() > 128)
    fail(verb, "--idempotency-key: at most 128 characters, got " + std::to_string(a.idempotency_key.size()), 2);
  std::vector<std::pair<std::string, std::string>> headers;
  if (!a.idempotency_key.empty()) headers.emplace_back("Idempotency-Key", a.idempotency_key);
  const ApiResponse r = call_post(verb, *api, "/api/v1/jobs", spec, headers);
  if (a.conn.json) return print_json(r.body);
  const std::string id = json_text(r.body, "id", "?");
  const std::string again = r.status == 200 ? " (already created with this idempotency key)" : "";
  if (const auto parent = json_int(r.body, "array_job_id"); parent && r.body.contains("array_size")) {
    const int64_t size = json_int(r.body, "array_size").value_or(0);
    std::string range;
    if (auto arr = config::parse_array_spec(spec.value("array", std::string())); arr.ok() && !arr->indices.empty())
      range = ": " + std::to_string(*parent) + "_" + std::to_string(arr->indices.front()) + ".." + std::to_string(*parent) + "_" +
              std::to_string(arr->indices.back());
    std::cout << "Submitted array job " << *parent << " (" << size << (size == 1 ? " task" : " tasks") << range << ")" << again << "\n";
    return;
  }
  std::cout << "Submitted job " << id << again << "\n";
}

}  // namespace

void register_submit(CLI::App& app) {
  auto a = std::make_shared<SubmitArgs>();
  CLI::App* cmd = app.add_subcommand(
      "submit",
      "Submit a job: tessera submit job.yaml | job.json | - (stdin) | script.sh (#SBATCH lines), or "
      "tessera submit --gpus 8 --queue Q -- cmd args...");
  // Two positionals: SPEC takes only a spec-file name that comes before any command word, the rest
  // is COMMAND. CLI11 tries SPEC first for each word (validate_positionals), so a command's own
  // "x.json" argument stays in COMMAND; the validator runs again after parsing, hence spec_seen.
  cmd->validate_positionals();
  cmd->add_option("SPEC", a->spec_file, "job spec file: .yaml/.yml/.json, or - for stdin; flags and a command override its fields")
      ->check(CLI::Validator(
          [a](std::string& v) -> std::string {
            if (a->spec_seen.count(v)) return "";
            if (!is_spec_file(v) || (a->command_opt && a->command_opt->count() > 0)) return "not a spec file name";
            a->spec_seen.insert(v);
            return "";
          },
          "", "spec file"));
  a->command_opt = cmd->add_option("COMMAND", a->command,
                                   "the command to run and its arguments (after --), or a batch script (#SBATCH lines, or "
                                   "any #!/bin/bash or #!/bin/sh script: its text is sent) and its arguments")
                       ->allow_extra_args(true);  // keep collecting after options in between
  add_submit_flags(cmd, *a, /*batch_flags=*/true);
  cmd->callback([a] { run_submit(*a); });
}

}  // namespace tessera::cli
