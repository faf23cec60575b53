// The Slurm-like client verbs of `tessera` (submit, jobs, show, cancel, priority, queues, nodes,
// cordon, drain, resume, interrupt, token, whoami, admin): thin clients of the REST API (docs/api.md) through
// ApiClient. Tables by default, the server's JSON with --json. Usage errors exit 2, failures 1; every
// message goes to stderr and says what to fix. Single-threaded (one command per process).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <thread>
#include <chrono>

#include <yaml-cpp/yaml.h>

#include "cli/api_client.h"
#include "cli/client_args.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "config/job_spec.h"
#include "config/yaml_fields.h"
#include "server/store.h"

namespace tessera::cli {
namespace {

using nlohmann::json;

// ---- Shared plumbing ----

json call_get(const std::string& verb, ApiClient& api, const std::string& path) {
  auto r = api.get(path);
  if (!r.ok()) fail(verb, r.error().message);
  return r->body;
}

ApiResponse call_post(const std::string& verb, ApiClient& api, const std::string& path, const json& body,
                      const std::vector<std::pair<std::string, std::string>>& headers = {}) {
  auto r = api.post(path, body, headers);
  if (!r.ok()) fail(verb, r.error().message);
  return std::move(*r);
}

void print_json(const json& j) { std::cout << j.dump(2) << "\n"; }

int64_t now_s() { return static_cast<int64_t>(std::time(nullptr)); }

// A job id argument: a positive integer.
int64_t parse_job_id(const std::string& verb, const std::string& s) {
  int64_t id = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), id);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || id <= 0)
    fail(verb, "JOB: '" + s + "' is not a job id; give the number `tessera jobs` shows (e.g. 17)", 2);
  return id;
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string p; std::getline(ss, p, ',');)
    if (!p.empty()) out.push_back(p);
  return out;
}

// ---- submit ----

struct SubmitArgs {
  ConnArgs conn;
  std::string spec_file;              // job.yaml, job.json or "-"
  std::vector<std::string> command;   // what to run (after --)
  std::set<std::string> spec_seen;    // spec_file values accepted while parsing (see register_submit)
  CLI::Option* command_opt = nullptr;
  int gpus = 0, tasks = 0, gpu_milli = 0;
  std::string queue, name, klass, mig, gpu_memory, cpu, memory, models, max_runtime, expected_runtime,
      project, workdir, idempotency_key, image, container_user, network;
  std::vector<std::string> env, mounts;
  std::map<std::string, CLI::Option*> opt;  // flag name -> option, to know which were given
  bool given(const std::string& flag) const {
    auto it = opt.find(flag);
    return it != opt.end() && it->second->count() > 0;
  }
};

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

void run_submit(SubmitArgs& a) {
  const std::string verb = "submit";
  const std::string file = a.spec_file;
  const std::vector<std::string>& command = a.command;
  const bool any_flag = std::any_of(a.opt.begin(), a.opt.end(), [](const auto& kv) { return kv.second->count() > 0; });
  if (file.empty() && command.empty())
    fail(verb, "nothing to run: give a job spec file (job.yaml, job.json, or - for stdin) or a command after `--`, "
               "e.g. tessera submit --gpus 8 --queue team-a -- python train.py", 2);

  // The file's text (stdin for "-").
  std::string text, where = file == "-" ? "<stdin>" : file;
  if (!file.empty()) {
    if (file == "-") {
      text.assign(std::istreambuf_iterator<char>(std::cin), {});
    } else {
      std::ifstream f(file);
      if (!f) fail(verb, file + ": cannot read it (" + std::strerror(errno) + "); check the path", 2);
      text.assign(std::istreambuf_iterator<char>(f), {});
    }
  }
  const bool is_json = [&] {
    if (file.size() >= 5 && file.substr(file.size() - 5) == ".json") return true;
    const size_t p = text.find_first_not_of(" \t\r\n");
    return file == "-" && p != std::string::npos && text[p] == '{';
  }();

  // The file as JSON. A syntax error is reported with the config parsers' own message (line and
  // column, or byte), so it reads the same as the server's.
  json j = json::object();
  if (!file.empty()) {
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
    if (!command.empty()) j["command"] = command;
    if ((!j.contains("name") || j["name"] == "") && j.contains("command") && j["command"].is_array() &&
        !j["command"].empty() && j["command"][0].is_string())
      j["name"] = default_name(j["command"][0].get<std::string>());
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
        {"container.user", "--container-user"}, {"container.network", "--network"}, {"mounts", "--mount"}};
    for (const auto& [field, flag] : kFieldFlags)
      if (msg.rfind(field, 0) == 0 && msg.size() > field.size() && std::strchr(":[.", msg[field.size()]) &&
          (a.given(flag) || file.empty())) {
        origin = flag;
        break;
      }
    if (msg.rfind("command", 0) == 0 && !command.empty()) origin = "the command after --";
    fail(verb, origin + ": " + msg, 2);
  }

  if (a.idempotency_key.size() > 128)
    fail(verb, "--idempotency-key: at most 128 characters, got " + std::to_string(a.idempotency_key.size()), 2);
  std::vector<std::pair<std::string, std::string>> headers;
  if (!a.idempotency_key.empty()) headers.emplace_back("Idempotency-Key", a.idempotency_key);

  auto api = connect(verb, a.conn);
  const ApiResponse r = call_post(verb, *api, "/api/v1/jobs", config::job_spec_to_json(*spec), headers);
  if (a.conn.json) return print_json(r.body);
  const std::string id = json_text(r.body, "id", "?");
  if (r.status == 200) std::cout << "Submitted job " << id << " (already created with this idempotency key)\n";
  else std::cout << "Submitted job " << id << "\n";
}

void register_submit(CLI::App& app) {
  auto a = std::make_shared<SubmitArgs>();
  CLI::App* cmd = app.add_subcommand(
      "submit",
      "Submit a job: tessera submit job.yaml | job.json | - (stdin), or tessera submit --gpus 8 --queue Q -- cmd args...");
  add_conn_options(cmd, a->conn);
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
  a->command_opt = cmd->add_option("COMMAND", a->command, "the command to run and its arguments (after --)")
                    ->allow_extra_args(true);  // keep collecting after options in between
  auto& o = a->opt;
  o["--gpus"] = cmd->add_option("--gpus", a->gpus, "GPUs per task (whole GPUs, or the GPUs a share is on)");
  o["--tasks"] = cmd->add_option("--tasks", a->tasks, "tasks in the gang");
  o["--queue"] = cmd->add_option("--queue", a->queue, "leaf queue (or parent/child path)");
  o["--name"] = cmd->add_option("--name", a->name, "job name (default: the command's basename)");
  o["--class"] = cmd->add_option("--class", a->klass, "priority class (e.g. research)");
  o["--mig"] = cmd->add_option("--mig", a->mig, "one MIG instance per task, e.g. 3g.40gb");
  o["--gpu-milli"] = cmd->add_option("--gpu-milli", a->gpu_milli, "share of each GPU in thousandths (1..999)");
  o["--gpu-memory"] = cmd->add_option("--gpu-memory", a->gpu_memory, "GPU memory per GPU for a share: MiB or 20Gi");
  o["--cpu"] = cmd->add_option("--cpu", a->cpu, "CPU per task: cores (16) or milli-cores (500m)");
  o["--memory"] = cmd->add_option("--memory", a->memory, "memory per task: MiB or 64Gi/512Mi");
  o["--models"] = cmd->add_option("--models", a->models, "allowed GPU models, comma-separated");
  o["--max-runtime"] = cmd->add_option("--max-runtime", a->max_runtime, "hard runtime cap: seconds or 90m/2h/1d");
  o["--expected-runtime"] = cmd->add_option("--expected-runtime", a->expected_runtime, "runtime estimate: seconds or 90m/2h/1d");
  o["--project"] = cmd->add_option("--project", a->project, "project for accounting");
  o["--env"] = cmd->add_option("--env", a->env, "environment variable NAME=VALUE (repeatable)")->allow_extra_args(false);
  o["--workdir"] = cmd->add_option("--workdir", a->workdir, "working directory (absolute path)");
  o["--image"] = cmd->add_option("--image", a->image, "run the tasks in a container of this image");
  o["--container-user"] = cmd->add_option("--container-user", a->container_user, "the container's user: UID or UID:GID (never 0)");
  o["--network"] = cmd->add_option("--network", a->network, "the container's network: host (default) or none");
  o["--mount"] = cmd->add_option("--mount", a->mounts, "mount KIND=SOURCE:PATH[:ro|:rw], KIND dataset, volume or host (repeatable)")
                     ->allow_extra_args(false);
  cmd->add_option("--idempotency-key", a->idempotency_key, "retry-safe submission key (at most 128 characters)");
  cmd->callback([a] { run_submit(*a); });
}

// ---- jobs ----

const std::vector<std::string>& job_states() {
  static const std::vector<std::string> k = {"pending", "running", "checkpointing", "succeeded", "failed", "cancelled", "timeout"};
  return k;
}

struct JobsArgs {
  ConnArgs conn;
  std::string queue, user, state;
  bool all = false;
  int limit = 1000;
};

// WAIT/REASON: how long a pending job has waited and why; "-" otherwise.
std::string wait_reason(const json& j, int64_t now) {
  if (json_text(j, "state") != "pending") return "-";
  std::string out;
  if (const auto sub = json_int(j, "submitted")) out = format_duration_short(now - *sub);
  const std::string reason = json_text(j, "reason", "");
  if (!reason.empty()) out += (out.empty() ? "" : ": ") + truncate(reason, 48);
  return out.empty() ? "-" : out;
}

std::string node_list(const json& j) {
  if (!j.contains("nodes") || !j["nodes"].is_array() || j["nodes"].empty()) return "-";
  std::vector<std::string> names;
  for (const auto& n : j["nodes"])
    if (n.is_string()) names.push_back(n.get<std::string>());
  if (names.size() > 4) {
    const size_t more = names.size() - 3;
    names.resize(3);
    names.push_back("+" + std::to_string(more));
  }
  return join(names, ",");
}

void run_jobs(const JobsArgs& a) {
  const std::string verb = "jobs";
  if (a.limit < 1) fail(verb, "--limit: must be >= 1", 2);
  for (const std::string& s : split_commas(a.state))
    if (std::find(job_states().begin(), job_states().end(), s) == job_states().end())
      fail(verb, "--state: unknown state '" + s + "' (known: " + join(job_states(), ", ") + ")", 2);
  std::string filters;
  if (!a.queue.empty()) filters += "&queue=" + url_encode(a.queue);
  if (!a.user.empty()) filters += "&user=" + url_encode(a.user);
  if (!a.state.empty()) filters += "&state=" + url_encode(join(split_commas(a.state), ","));
  else if (!a.all) filters += "&active=true";

  auto api = connect(verb, a.conn);
  json jobs = json::array();
  std::optional<int64_t> after;
  int64_t total = 0;
  while (static_cast<int>(jobs.size()) < a.limit) {
    const int page = std::min(1000, a.limit - static_cast<int>(jobs.size()));
    std::string path = "/api/v1/jobs?limit=" + std::to_string(page) + filters;
    if (after) path += "&after=" + std::to_string(*after);
    const json body = call_get(verb, *api, path);
    if (!body.is_object() || !body.contains("jobs") || !body["jobs"].is_array())
      fail(verb, "the server's answer has no \"jobs\" array; is " + api->base_url() + " a Tessera server of this version?");
    for (const auto& j : body["jobs"]) {
      if (static_cast<int>(jobs.size()) >= a.limit) break;
      jobs.push_back(j);
    }
    total = json_int(body, "total").value_or(static_cast<int64_t>(jobs.size()));
    after = json_int(body, "next_after");
    if (!after || body["jobs"].empty()) break;
  }
  if (a.conn.json) return print_json(json{{"jobs", jobs}, {"total", total}});

  const int64_t now = now_s();
  Table t;
  t.headers = {"JOBID", "NAME", "USER", "QUEUE", "CLASS", "STATE", "TASKS", "GPUS", "POS", "WAIT/REASON", "ETA", "NODES"};
  t.right_align = {true, false, false, false, false, false, true, true, true, false, false, false};
  for (const auto& j : jobs) {
    const bool pending = json_text(j, "state") == "pending";
    t.rows.push_back({json_text(j, "id"), truncate(json_text(j, "name"), 32), json_text(j, "user"), json_text(j, "queue"),
                      json_text(j, "priority_class"), json_text(j, "state"), json_text(j, "tasks"), json_text(j, "gpus"),
                      json_text(j, "queue_position"), wait_reason(j, now),
                      pending ? format_eta(json_int(j, "estimated_start"), now) : "-", node_list(j)});
  }
  std::cout << render_table(t);
  if (total > static_cast<int64_t>(jobs.size()))
    std::cerr << "(" << jobs.size() << " of " << total << " jobs shown; raise --limit to see more)\n";
}

void register_jobs(CLI::App& app) {
  auto a = std::make_shared<JobsArgs>();
  CLI::App* cmd = app.add_subcommand("jobs", "List jobs (active ones by default), like squeue");
  add_conn_options(cmd, a->conn);
  cmd->add_option("--queue", a->queue, "only this queue and its subtree");
  cmd->add_option("--user", a->user, "only this user's jobs");
  cmd->add_option("--state", a->state, "only these states, comma-separated: " + join(job_states(), ","));
  cmd->add_flag("--all", a->all, "include finished jobs");
  cmd->add_option("--limit", a->limit, "at most this many jobs")->capture_default_str();
  cmd->callback([a] { run_jobs(*a); });
}

// ---- show ----

struct ShowArgs {
  ConnArgs conn;
  std::string job;
};

std::string time_and_relative(const json& obj, const char* key, int64_t now) {
  const auto t = json_int(obj, key);
  if (!t || *t == 0) return "-";
  return format_local_time(*t) + " (" + format_relative(*t, now) + ")";
}

// An event's detail as "key=value ..." (a detail stored as a JSON string is parsed first).
std::string compact_detail(const json& detail) {
  json d = detail;
  if (d.is_string()) {
    json parsed = json::parse(d.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object()) d = std::move(parsed);
    else return d.get<std::string>();
  }
  if (!d.is_object()) return d.is_null() ? "" : d.dump();
  std::string out;
  for (const auto& [k, v] : d.items())
    out += (out.empty() ? "" : " ") + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
  return out;
}

void run_show(const ShowArgs& a) {
  const std::string verb = "show";
  const int64_t id = parse_job_id(verb, a.job);
  auto api = connect(verb, a.conn);
  const json j = call_get(verb, *api, "/api/v1/jobs/" + std::to_string(id));
  if (a.conn.json) return print_json(j);
  const int64_t now = now_s();
  const json spec = j.contains("spec") && j["spec"].is_object() ? j["spec"] : json::object();
  auto line = [](const std::string& label, const std::string& value) {
    std::cout << "  " << label << std::string(label.size() < 13 ? 13 - label.size() : 1, ' ') << value << "\n";
  };
  std::cout << "Job " << json_text(j, "id") << "  " << json_text(j, "name") << "\n";
  line("State:", json_text(j, "state") +
                     (j.contains("exit_code") && !j["exit_code"].is_null()
                          ? " (exit code " + json_text(j, "exit_code") + ", ExitCode " + json_text(j, "exit") + " as code:signal)"
                          : ""));
  line("User:", json_text(j, "user"));
  line("Queue:", json_text(j, "queue") + "   project: " + json_text(j, "project"));
  line("Class:", json_text(j, "priority_class") + "   kind: " + json_text(spec, "kind"));
  const std::string min_tasks = json_text(spec, "min_tasks", "0");
  line("Tasks:", json_text(j, "tasks") + (min_tasks != "0" && min_tasks != json_text(j, "tasks") ? " (at least " + min_tasks + ")" : "") +
                     " x " + describe_resources(spec.value("resources", json::object())) + "   total GPUs: " + json_text(j, "gpus"));
  if (spec.contains("topology") && json_text(spec["topology"], "mode", "none") != "none")
    line("Topology:", json_text(spec["topology"], "mode") + " within one " + json_text(spec["topology"], "level"));
  if (spec.contains("command") && spec["command"].is_array()) {
    std::vector<std::string> argv;
    for (const auto& s : spec["command"]) argv.push_back(s.is_string() ? s.get<std::string>() : s.dump());
    line("Command:", truncate(join(argv, " "), 200));
  }
  if (!json_text(spec, "working_dir", "").empty()) line("Workdir:", json_text(spec, "working_dir"));
  if (spec.contains("env") && spec["env"].is_object() && !spec["env"].empty()) line("Env:", truncate(compact_detail(spec["env"]), 200));
  if (spec.contains("container") && spec["container"].is_object()) {
    const json& c = spec["container"];
    std::string text = json_text(c, "image");
    if (!json_text(c, "user").empty()) text += ", user " + json_text(c, "user");
    if (json_text(c, "network", "host") != "host") text += ", network " + json_text(c, "network");
    line("Container:", truncate(text, 200));
  }
  if (spec.contains("mounts") && spec["mounts"].is_array())
    for (const json& m : spec["mounts"]) {
      if (!m.is_object()) continue;
      std::string kind = "host_path";
      for (const char* k : {"dataset", "volume"})
        if (m.contains(k)) kind = k;
      const bool ro = m.contains("read_only") && m["read_only"].is_boolean() ? m["read_only"].get<bool>() : kind == "dataset";
      line("Mount:", truncate(kind + " " + json_text(m, kind.c_str()) + " at " + json_text(m, "path") + (ro ? " (read-only)" : ""), 200));
    }
  {
    std::string rt;
    if (const auto e = json_int(spec, "expected_runtime"); e && *e > 0) rt += "expected " + format_duration_short(*e);
    if (const auto m = json_int(spec, "max_runtime"); m && *m > 0) rt += (rt.empty() ? "" : ", ") + std::string("max ") + format_duration_short(*m);
    if (!rt.empty()) line("Runtime:", rt);
  }
  if (spec.contains("checkpoint") && json_int(spec["checkpoint"], "interval").value_or(0) > 0) {
    const json& c = spec["checkpoint"];
    line("Checkpoint:", "every " + format_duration_short(json_int(c, "interval").value_or(0)) + ", signal " + json_text(c, "signal") +
                            ", grace " + format_duration_short(json_int(c, "grace").value_or(0)) +
                            (json_text(c, "dir", "").empty() ? "" : ", dir " + json_text(c, "dir")));
  }
  if (spec.value("spot_tolerant", false)) line("Spot:", "tolerant (may run on preemptible capacity)");
  line("Submitted:", time_and_relative(j, "submitted", now));
  line("Started:", time_and_relative(j, "started", now));
  line("Finished:", time_and_relative(j, "finished", now));
  if (const auto p = json_int(j, "preemptions"); p && *p > 0) line("Preemptions:", std::to_string(*p));
  if (const auto r = json_int(j, "restarts"); r && *r > 0)
    line("Restarts:", std::to_string(*r) + " of " + std::to_string(spec.contains("restart") ? json_int(spec["restart"], "max_restarts").value_or(0) : 0));
  if (j.contains("resume_from") && j["resume_from"].is_string()) line("Resumes from:", j["resume_from"].get<std::string>());
  if (const auto si = json_int(j, "spot_interruptions"); si && *si > 0)
    line("Spot:", "interrupted " + std::to_string(*si) + (*si == 1 ? " time" : " times") +
                      (j.contains("spot_avoid") ? " (now prefers other pools)" : ""));
  if (const auto cm = json_int(j, "checkpoint_cost_ms"); cm && *cm >= 0)
    line("Ckpt cost:", std::to_string((*cm + 999) / 1000) + " s (measured, request to .ack)");

  if (j.contains("pending") && j["pending"].is_object()) {
    const json& p = j["pending"];
    std::cout << "Pending:\n";
    line("Reason:", json_text(p, "reason"));
    line("Position:", json_text(p, "queue_position") + " in its queue, " + json_text(p, "overall_position") + " overall");
    const auto eta = json_int(p, "estimated_start");
    line("ETA:", eta ? format_eta(eta, now) + " (" + format_local_time(*eta) + ")" : "-");
    line("Reserved:", json_text(p, "reserved", "no"));
  }
  if (j.contains("placement") && j["placement"].is_array() && !j["placement"].empty()) {
    std::cout << "Placement:\n";
    Table t;
    t.headers = {"TASK", "NODE", "GPUS", "SHARE", "MIG"};
    t.right_align = {true, false, false, true, false};
    for (const auto& p : j["placement"]) {
      std::vector<std::string> gpus;
      if (p.contains("gpus") && p["gpus"].is_array())
        for (const auto& g : p["gpus"]) gpus.push_back(g.dump());
      std::string mig = "-";
      if (p.contains("mig") && p["mig"].is_object())
        mig = json_text(p["mig"], "profile") + " on GPU " + json_text(p["mig"], "gpu") + " (start " + json_text(p["mig"], "start") + ")";
      const auto milli = json_int(p, "gpu_milli");
      t.rows.push_back({json_text(p, "task"), json_text(p, "node"), gpus.empty() ? "-" : join(gpus, ","),
                        milli ? format_gpus(*milli) : "-", mig});
    }
    for (const std::string& l : render_table_lines(t)) std::cout << "  " << l << "\n";
  }
  if (j.contains("events") && j["events"].is_array() && !j["events"].empty()) {
    std::cout << "Events:\n";
    Table t;
    t.headers = {"TIME", "EVENT", "BY", "DETAIL"};
    for (const auto& e : j["events"])
      t.rows.push_back({format_local_time(json_int(e, "time").value_or(0)), json_text(e, "kind"), json_text(e, "actor"),
                        truncate(compact_detail(e.value("detail", json())), 100)});
    for (const std::string& l : render_table_lines(t)) std::cout << "  " << l << "\n";
  }
}

void register_show(CLI::App& app) {
  auto a = std::make_shared<ShowArgs>();
  CLI::App* cmd = app.add_subcommand("show", "Show one job in detail: spec, state, placement, why it waits, events");
  add_conn_options(cmd, a->conn);
  cmd->add_option("JOB", a->job, "job id")->required();
  cmd->callback([a] { run_show(*a); });
}

// ---- cancel, priority ----

struct CancelArgs {
  ConnArgs conn;
  std::vector<std::string> jobs;
};

void run_cancel(const CancelArgs& a) {
  const std::string verb = "cancel";
  std::vector<int64_t> ids;
  for (const std::string& s : a.jobs) ids.push_back(parse_job_id(verb, s));
  auto api = connect(verb, a.conn);
  bool failed = false;
  json answers = json::array();
  for (const int64_t id : ids) {
    auto r = api->post("/api/v1/jobs/" + std::to_string(id) + "/cancel", json::object());
    if (!r.ok()) {
      std::cerr << "tessera cancel: job " << id << ": " << r.error().message << "\n";
      failed = true;
      continue;
    }
    if (a.conn.json) {
      answers.push_back(r->body);
      continue;
    }
    const std::string state = json_text(r->body, "state", "cancelled");
    if (state == "cancelled") std::cout << "Cancelled job " << id << "\n";
    else std::cout << "Cancelling job " << id << " (" << state << "; its agents are stopping it)\n";
  }
  if (a.conn.json) print_json(answers.size() == 1 ? answers[0] : answers);
  if (failed) throw CLI::RuntimeError(1);
}

struct PriorityArgs {
  ConnArgs conn;
  std::string job, klass;
};

void run_priority(const PriorityArgs& a) {
  const std::string verb = "priority";
  const int64_t id = parse_job_id(verb, a.job);
  if (a.klass.empty()) fail(verb, "CLASS: give a priority class name (e.g. production-training)", 2);
  auto api = connect(verb, a.conn);
  const ApiResponse r =
      call_post(verb, *api, "/api/v1/jobs/" + std::to_string(id) + "/priority", json{{"priority_class", a.klass}});
  if (a.conn.json) return print_json(r.body);
  std::cout << "Job " << id << " now has priority class " << json_text(r.body, "priority_class", a.klass) << "\n";
}

void register_cancel_priority(CLI::App& app) {
  auto c = std::make_shared<CancelArgs>();
  CLI::App* cancel = app.add_subcommand("cancel", "Cancel jobs (pending: at once; running: stopped by their agents)");
  add_conn_options(cancel, c->conn);
  cancel->add_option("JOB", c->jobs, "job ids")->required();
  cancel->callback([c] { run_cancel(*c); });

  auto p = std::make_shared<PriorityArgs>();
  CLI::App* prio = app.add_subcommand("priority", "Change a job's priority class");
  add_conn_options(prio, p->conn);
  prio->add_option("JOB", p->job, "job id")->required();
  prio->add_option("CLASS", p->klass, "the new priority class")->required();
  prio->callback([p] { run_priority(*p); });
}

// ---- queues ----

void run_queues(const ConnArgs& c) {
  const std::string verb = "queues";
  auto api = connect(verb, c);
  const json body = call_get(verb, *api, "/api/v1/queues");
  if (c.json) return print_json(body);
  if (!body.contains("queues") || !body["queues"].is_array())
    fail(verb, "the server's answer has no \"queues\" array; is " + api->base_url() + " a Tessera server of this version?");
  const json& queues = body["queues"];
  // Every class name shown, to shorten them consistently.
  std::vector<std::string> classes;
  for (const auto& q : queues)
    for (const char* k : {"guaranteed", "limit", "used", "borrowed", "fair_share"})
      if (q.contains(k) && q[k].is_object())
        for (const auto& [name, v] : q[k].items())
          if (std::find(classes.begin(), classes.end(), name) == classes.end()) classes.push_back(name);
  // Tree order: each queue after its parent, siblings in the server's order.
  std::map<std::string, std::vector<size_t>> children;
  std::vector<size_t> roots;
  std::map<std::string, bool> known;
  for (const auto& q : queues) known[json_text(q, "name", "")] = true;
  for (size_t i = 0; i < queues.size(); ++i) {
    const std::string parent = json_text(queues[i], "parent", "");
    if (parent.empty() || !known.count(parent)) roots.push_back(i);
    else children[parent].push_back(i);
  }
  Table t;
  t.headers = {"NAME", "GUARANTEED", "LIMIT", "USED", "BORROWED", "FAIR-SHARE", "RUNNING", "PENDING"};
  t.right_align = {false, false, false, false, false, false, true, true};
  std::vector<bool> shown(queues.size(), false);
  std::function<void(size_t, int)> add = [&](size_t i, int depth) {
    if (shown[i]) return;  // a cycle in the answer: show each queue once
    shown[i] = true;
    const json& q = queues[i];
    auto amounts = [&](const char* k) { return format_class_amounts(q.value(k, json::object()), classes); };
    t.rows.push_back({std::string(2 * depth, ' ') + json_text(q, "name"), amounts("guaranteed"), amounts("limit"),
                      amounts("used"), amounts("borrowed"), amounts("fair_share"), json_text(q, "running"),
                      json_text(q, "pending")});
    for (const size_t c : children[json_text(q, "name", "")]) add(c, depth + 1);
  };
  for (const size_t r : roots) add(r, 0);
  for (size_t i = 0; i < queues.size(); ++i) add(i, 0);
  std::cout << render_table(t);
}

// ---- nodes, cordon, drain, resume ----

void run_nodes(const ConnArgs& c) {
  const std::string verb = "nodes";
  auto api = connect(verb, c);
  const json body = call_get(verb, *api, "/api/v1/nodes");
  if (c.json) return print_json(body);
  if (!body.contains("nodes") || !body["nodes"].is_array())
    fail(verb, "the server's answer has no \"nodes\" array; is " + api->base_url() + " a Tessera server of this version?");
  Table t;
  t.headers = {"NAME", "STATE", "AGENT", "MODEL", "GPUS", "UTIL", "CPU", "MEM", "REASON"};
  std::vector<std::string> maps;
  for (const auto& n : body["nodes"]) {
    int64_t used_milli = 0, count = 0, util_sum = 0, util_known = 0;
    if (n.contains("gpus") && n["gpus"].is_array())
      for (const auto& g : n["gpus"]) {
        ++count;
        used_milli += std::min<int64_t>(json_int(g, "used_milli").value_or(0), 1000);
        if (const auto u = json_int(g, "utilization_pct"); u && *u >= 0) util_sum += *u, ++util_known;
      }
    // Measured by the agent (NVML, or what runs on fake GPUs): the mean over the node's GPUs.
    const std::string util = util_known ? std::to_string(util_sum / util_known) + "%" : "-";
    auto pair = [&](const char* used, const char* total, auto fmt) {
      const auto u = json_int(n, used), tot = json_int(n, total);
      return (u ? fmt(*u) : std::string("?")) + "/" + (tot ? fmt(*tot) : std::string("?"));
    };
    std::string agent = json_text(n, "agent", "-");
    if (agent.rfind("none", 0) == 0) agent = "none";
    if (json_text(n, "gpu_source", "") == "fake") agent += " (fake)";
    // "ready" only for a node that takes work: one waiting for its agent says so.
    std::string state = json_text(n, "state");
    if (state == "ready" && n.value("takes_work", true) == false)
      state = json_text(n, "agent") == "unknown" ? "no-agent" : "not-ready";
    t.rows.push_back({json_text(n, "name"), state, agent, json_text(n, "gpu_model"),
                      format_gpus(used_milli) + "/" + std::to_string(count), util, pair("cpu_milli_used", "cpu_milli", format_cores),
                      pair("memory_mib_used", "memory_mib", format_mib), json_text(n, "reason", "")});
    maps.push_back(render_gpu_map(n.value("gpus", json::array())));
  }
  const auto lines = render_table_lines(t);
  std::cout << lines[0] << "\n";
  for (size_t i = 1; i < lines.size(); ++i) std::cout << lines[i] << "\n    " << maps[i - 1] << "\n";
}

struct NodeOpArgs {
  ConnArgs conn;
  std::string node, reason;
};

void run_node_op(const std::string& op, const NodeOpArgs& a) {
  if (a.node.empty()) fail(op, "NODE: give a node name (see `tessera nodes`)", 2);
  if (op != "resume" && a.reason.empty())
    fail(op, "--reason is required: say why, e.g. --reason 'replacing a DIMM' (it is shown in `tessera nodes`)", 2);
  auto api = connect(op, a.conn);
  json body = json::object();
  if (!a.reason.empty()) body["reason"] = a.reason;
  const ApiResponse r = call_post(op, *api, "/api/v1/nodes/" + url_encode(a.node) + "/" + op, body);
  if (a.conn.json) return print_json(r.body);
  const std::string reason = json_text(r.body, "reason", "");
  std::cout << "Node " << a.node << ": " << json_text(r.body, "state", op == "resume" ? "ready" : op + "ed")
            << (reason.empty() ? "" : " (" + reason + ")") << "\n";
}

struct InterruptArgs {
  ConnArgs conn;
  std::string node;
  int64_t notice = -1, reclaim_at = -1;
};

void run_interrupt(const InterruptArgs& a) {
  const std::string verb = "interrupt";
  if (a.notice >= 0 && a.reclaim_at >= 0) fail(verb, "give --notice or --reclaim-at, not both", 2);
  auto api = connect(verb, a.conn);
  json body = json::object();
  if (a.notice >= 0) body["notice_s"] = a.notice;
  if (a.reclaim_at >= 0) body["reclaim_at"] = a.reclaim_at;
  const ApiResponse r = call_post(verb, *api, "/api/v1/nodes/" + url_encode(a.node) + "/interruption", body);
  if (a.conn.json) return print_json(r.body);
  std::cout << "Node " << a.node << ": reclaimed in " << json_text(r.body, "notice_s") << " s (at "
            << json_text(r.body, "reclaim_at") << ")\n";
  if (r.body.contains("note")) std::cout << "  " << json_text(r.body, "note") << "\n";
  for (const auto& j : r.body.value("jobs", json::array()))
    std::cout << "  job " << json_text(j, "job") << ": " << json_text(j, "path") << " - " << json_text(j, "reason") << "\n";
}

void register_infra(CLI::App& app) {
  auto qc = std::make_shared<ConnArgs>();
  CLI::App* queues = app.add_subcommand("queues", "Show the queue tree: guarantees, limits, use, borrowing, fair share");
  add_conn_options(queues, *qc);
  queues->callback([qc] { run_queues(*qc); });

  auto nc = std::make_shared<ConnArgs>();
  CLI::App* nodes = app.add_subcommand("nodes", "Show nodes, their state, use and a GPU/MIG map ('#' used, '+' shared, '.' free, 'x' unhealthy)");
  add_conn_options(nodes, *nc);
  nodes->callback([nc] { run_nodes(*nc); });

  for (const std::string op : {"cordon", "drain", "resume"}) {
    auto a = std::make_shared<NodeOpArgs>();
    const char* help = op == "cordon" ? "Stop placing new work on a node (admin)"
                       : op == "drain" ? "Checkpoint and requeue a node's jobs, then mark it drained (admin)"
                                       : "Return a cordoned or drained node to service (admin)";
    CLI::App* cmd = app.add_subcommand(op, help);
    add_conn_options(cmd, a->conn);
    cmd->add_option("NODE", a->node, "node name")->required();
    cmd->add_option("--reason", a->reason, op == "resume" ? "why (optional)" : "why (required), shown in `tessera nodes`");
    cmd->callback([op, a] { run_node_op(op, *a); });
  }

  auto ia = std::make_shared<InterruptArgs>();
  CLI::App* intr = app.add_subcommand(
      "interrupt", "Report a spot interruption notice for a node: cordon it, checkpoint or requeue its jobs (admin)");
  add_conn_options(intr, ia->conn);
  intr->add_option("NODE", ia->node, "node name (a node of a spot pool)")->required();
  intr->add_option("--notice", ia->notice, "seconds until the reclaim (default: the pool's notice)")->check(CLI::Range(0, 86400));
  intr->add_option("--reclaim-at", ia->reclaim_at, "the reclaim time, unix seconds")->check(CLI::NonNegativeNumber);
  intr->callback([ia] { run_interrupt(*ia); });
}

// ---- token, whoami ----

struct TokenCreateArgs {
  ConnArgs conn;
  std::string user, role, queue, node;
};

void run_token_create(const TokenCreateArgs& a) {
  const std::string verb = "token create";
  static const std::vector<std::string> roles = {"admin", "team-lead", "member", "viewer", "agent"};
  if (a.user.empty()) fail(verb, "--user is required: the user the token acts as", 2);
  if (std::find(roles.begin(), roles.end(), a.role) == roles.end())
    fail(verb, "--role: '" + a.role + "' is not a role (known: " + join(roles, ", ") + ")", 2);
  const bool scoped = a.role == "team-lead" || a.role == "member";
  if (scoped && a.queue.empty()) fail(verb, "--queue is required for role " + a.role + ": the queue subtree they act in", 2);
  if (!scoped && !a.queue.empty()) fail(verb, "--queue must be empty for role " + a.role + " (only team-lead and member have one)", 2);
  if (a.role == "agent" && a.node.empty())
    fail(verb, "--node is required for role agent: the node it speaks for, or a pattern such as 'gpu-*' ('*' for every node)", 2);
  if (a.role != "agent" && !a.node.empty()) fail(verb, "--node is for agent tokens only", 2);
  auto api = connect(verb, a.conn);
  json body = {{"user", a.user}, {"role", a.role}};
  if (!a.queue.empty()) body["queue"] = a.queue;
  if (!a.node.empty()) body["node"] = a.node;
  const ApiResponse r = call_post(verb, *api, "/api/v1/tokens", body);
  if (a.conn.json) return print_json(r.body);
  const std::string token = json_text(r.body, "token", "");
  if (token.empty()) fail(verb, "the server's answer has no \"token\"; the token may have been created: check `tessera token list`");
  std::cout << token << "\n";
  std::cerr << "(token for " << a.user << ", role " << a.role << (a.queue.empty() ? "" : ", queue " + a.queue)
            << "; it is shown only this once)\n";
}

void run_token_list(const ConnArgs& c) {
  const std::string verb = "token list";
  auto api = connect(verb, c);
  const json body = call_get(verb, *api, "/api/v1/tokens");
  if (c.json) return print_json(body);
  const json list = body.is_array() ? body : body.value("tokens", json::array());
  Table t;
  t.headers = {"ID", "USER", "ROLE", "QUEUE", "NODE", "CREATED", "REVOKED"};
  for (const auto& k : list)
    t.rows.push_back({json_text(k, "id"), json_text(k, "user"), json_text(k, "role"), json_text(k, "queue", "-").empty() ? "-" : json_text(k, "queue"),
                      json_text(k, "node", "-").empty() ? "-" : json_text(k, "node", "-"),
                      format_local_time(json_int(k, "created").value_or(0)), json_text(k, "revoked", "no")});
  std::cout << render_table(t);
}

struct TokenRevokeArgs {
  ConnArgs conn;
  std::string id;
};

void run_token_revoke(const TokenRevokeArgs& a) {
  const std::string verb = "token revoke";
  auto api = connect(verb, a.conn);
  const ApiResponse r = call_post(verb, *api, "/api/v1/tokens/" + a.id + "/revoke", json::object());
  if (a.conn.json) return print_json(r.body);
  std::cout << "token " << json_text(r.body, "id") << " (user " << json_text(r.body, "user") << ") revoked\n";
}

void run_whoami(const ConnArgs& c) {
  const std::string verb = "whoami";
  auto api = connect(verb, c);
  const json body = call_get(verb, *api, "/api/v1/whoami");
  if (c.json) return print_json(body);
  const std::string queue = json_text(body, "queue", "");
  std::cout << json_text(body, "user") << " (role " << json_text(body, "role") << (queue.empty() ? "" : ", queue " + queue)
            << ") at " << api->base_url() << "\n";
}

void register_tokens(CLI::App& app) {
  CLI::App* token = app.add_subcommand("token", "API tokens (admin): create, list, revoke");
  token->require_subcommand(1);
  auto ca = std::make_shared<TokenCreateArgs>();
  CLI::App* create = token->add_subcommand("create", "Create a token; prints only the token on stdout");
  add_conn_options(create, ca->conn);
  create->add_option("--user", ca->user, "user name")->required();
  create->add_option("--role", ca->role, "admin, team-lead, member, viewer or agent")->required();
  create->add_option("--queue", ca->queue, "queue subtree (team-lead and member only)");
  create->add_option("--node", ca->node, "agent only (required): the node it may register and report for, or a pattern (gpu-*)");
  create->callback([ca] { run_token_create(*ca); });

  auto lc = std::make_shared<ConnArgs>();
  CLI::App* list = token->add_subcommand("list", "List tokens (id, user, role, queue, created)");
  add_conn_options(list, *lc);
  list->callback([lc] { run_token_list(*lc); });

  auto rc = std::make_shared<TokenRevokeArgs>();
  CLI::App* revoke = token->add_subcommand("revoke", "Revoke a token by its id (from `token list`); in force at once");
  add_conn_options(revoke, rc->conn);
  revoke->add_option("id", rc->id, "the token's id")->required();
  revoke->callback([rc] { run_token_revoke(*rc); });

  auto wc = std::make_shared<ConnArgs>();
  CLI::App* whoami = app.add_subcommand("whoami", "Show who the token acts as");
  add_conn_options(whoami, *wc);
  whoami->callback([wc] { run_whoami(*wc); });
}

// ---- admin ----

struct BackupArgs {
  ConnArgs conn;
  std::string file;
  bool force = false;
};

void run_backup(const BackupArgs& a) {
  const std::string verb = "admin backup";
  std::error_code ec;
  if (std::filesystem::exists(a.file, ec) && !a.force)
    fail(verb, a.file + " exists; pass --force to replace it or choose another name");
  auto api = connect(verb, a.conn, /*read_timeout=*/600);
  // Write next to FILE, then rename: FILE is either the old one or the complete new copy.
  const std::filesystem::path target(a.file);
  std::string tmpl = (target.has_parent_path() ? target.parent_path().string() + "/" : std::string()) + "." +
                     target.filename().string() + ".tmp.XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  const int fd = mkstemp(buf.data());
  if (fd < 0) fail(verb, "cannot create a temporary file next to " + a.file + " (" + std::strerror(errno) + "); check the directory exists and is writable");
  const std::string tmp(buf.data());
  int64_t bytes = 0;
  int write_errno = 0;  // set when writing the temporary file failed
  std::string header;
  const Status s = api->download("/api/v1/admin/backup", [&](const char* data, size_t len) {
    if (header.size() < 16) header.append(data, std::min(len, 16 - header.size()));
    for (size_t off = 0; off < len;) {
      const ssize_t w = ::write(fd, data + off, len - off);
      if (w < 0) {
        if (errno == EINTR) continue;
        write_errno = errno;
        return false;
      }
      off += static_cast<size_t>(w);
    }
    bytes += static_cast<int64_t>(len);
    return true;
  });
  auto abandon = [&](const std::string& msg) {
    ::close(fd);
    ::unlink(tmp.c_str());
    fail(verb, msg);
  };
  if (write_errno != 0)
    abandon("writing " + tmp + " failed (" + std::strerror(write_errno) + "); free some space or choose another place");
  if (!s.ok()) abandon(s.message());
  if (header.compare(0, 15, "SQLite format 3") != 0)
    abandon("the server's answer is not a SQLite file (" + std::to_string(bytes) + " bytes); nothing was written");
  if (::fsync(fd) != 0) abandon("fsync of " + tmp + " failed (" + std::strerror(errno) + ")");
  ::fchmod(fd, 0600);  // the store holds token hashes and job records
  ::close(fd);
  if (std::rename(tmp.c_str(), a.file.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    fail(verb, "cannot rename " + tmp + " to " + a.file + " (" + std::strerror(e) + ")");
  }
  std::cout << "Saved a backup of " << api->base_url() << " to " << a.file << " (" << bytes << " bytes)\n";
}

struct RestoreArgs {
  std::string file, data;
  bool force = false;
};

void run_restore(const RestoreArgs& a) {
  const std::string verb = "admin restore";
  if (a.data.empty()) fail(verb, "--data DIR is required: the server's data directory (the server must be stopped)", 2);
  const Status s = server::restore_sqlite_store(a.file, a.data, a.force);
  if (!s.ok()) fail(verb, s.message());
  std::cout << "Restored " << a.file << " into " << a.data << "; start the server with `tessera server --data " << a.data << "`\n";
}

void run_reload(const ConnArgs& c) {
  const std::string verb = "admin reload";
  auto api = connect(verb, c);
  const ApiResponse r = call_post(verb, *api, "/api/v1/admin/reload", json::object());
  if (c.json) return print_json(r.body);
  std::cout << "Reloaded the configuration of " << api->base_url() << "\n";
}

void register_admin(CLI::App& app) {
  CLI::App* admin = app.add_subcommand("admin", "Administration: backup, restore, reload");
  admin->require_subcommand(1);

  auto b = std::make_shared<BackupArgs>();
  CLI::App* backup = admin->add_subcommand("backup", "Save an online, consistent copy of the server's store to FILE");
  add_conn_options(backup, b->conn);
  backup->add_option("FILE", b->file, "where to write the copy (a SQLite file)")->required();
  backup->add_flag("--force", b->force, "replace FILE if it exists");
  backup->callback([b] { run_backup(*b); });

  auto r = std::make_shared<RestoreArgs>();
  CLI::App* restore = admin->add_subcommand("restore", "Install a backup as DIR's store (offline: the server must be stopped)");
  restore->add_option("FILE", r->file, "a file saved by `tessera admin backup`")->required()->check(CLI::ExistingFile);
  restore->add_option("--data", r->data, "the server's data directory")->required();
  restore->add_flag("--force", r->force, "replace DIR's existing store");
  restore->callback([r] { run_restore(*r); });

  auto rc = std::make_shared<ConnArgs>();
  CLI::App* reload = admin->add_subcommand("reload", "Re-read the server's config file (as SIGHUP does)");
  add_conn_options(reload, *rc);
  reload->callback([rc] { run_reload(*rc); });
}

}  // namespace

// ---- logs ----

struct LogsArgs {
  ConnArgs conn;
  std::string job;
  int task = 0;
  bool follow = false;
};

// Prints the task's log from the node that ran it (the controller fetches it from the agent);
// with -f, keeps printing new output until the job has ended and the log has no more.
void run_logs(const LogsArgs& a) {
  const std::string verb = "logs";
  const int64_t id = parse_job_id(verb, a.job);
  if (a.task < 0) fail(verb, "--task: must be a task index (0, 1, ...)", 2);
  auto api = connect(verb, a.conn);
  int64_t offset = 0;
  int64_t attempt = -1;
  for (;;) {
    // Which attempt runs now: a new attempt (after a requeue) starts a new log.
    auto job = api->get("/api/v1/jobs/" + std::to_string(id));
    if (!job.ok()) fail(verb, job.error().message);
    const int64_t now_attempt = job->body.value("attempt", int64_t(0));
    if (attempt >= 0 && now_attempt != attempt) {
      std::cout << "--- attempt " << now_attempt << " ---\n";
      offset = 0;
    }
    attempt = now_attempt;
    const std::string state = job->body.value("state", "");
    const bool ended = state == "succeeded" || state == "failed" || state == "cancelled" || state == "timeout";
    int64_t got = 0;
    Status st = api->download("/api/v1/jobs/" + std::to_string(id) + "/logs?task=" + std::to_string(a.task) +
                                  "&offset=" + std::to_string(offset),
                              [&](const char* data, size_t n) {
                                std::cout.write(data, std::streamsize(n));
                                got += int64_t(n);
                                return true;
                              });
    std::cout.flush();
    if (!st.ok()) {
      // Not started yet, or the node is away for a moment: -f waits; otherwise say why.
      if (!a.follow || ended) fail(verb, st.message());
    }
    offset += got;
    if (!a.follow || (ended && got == 0 && st.ok())) return;
    if (got == 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

void register_logs(CLI::App& app) {
  auto a = std::make_shared<LogsArgs>();
  CLI::App* cmd = app.add_subcommand("logs", "Print a task's output (stdout and stderr) from the node that ran it");
  add_conn_options(cmd, a->conn);
  cmd->add_option("JOB", a->job, "job id")->required();
  cmd->add_option("--task", a->task, "task index (rank)")->capture_default_str();
  cmd->add_flag("-f,--follow", a->follow, "keep printing new output until the job ends");
  cmd->callback([a] { run_logs(*a); });
}

void register_client(CLI::App& app) {
  register_submit(app);
  register_logs(app);
  register_jobs(app);
  register_show(app);
  register_cancel_priority(app);
  register_infra(app);
  register_tokens(app);
  register_admin(app);
}

}  // namespace tessera::cli
