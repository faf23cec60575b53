// Job specs: YAML is converted to a JSON tree (typed scalars, bounded depth and size), then one strict
// validator turns the JSON tree into a JobSpec. Errors name the field path and say why (and how to fix
// it where that is clear). Stateless; all functions are thread-safe. No floating point: quantities are
// integers checked against their range before any multiplication, so nothing overflows.
#include "config/job_spec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <set>

#include "config/yaml_fields.h"
#include "core/gpu_catalog.h"

namespace tessera::config {
namespace {

using json = nlohmann::json;

constexpr size_t kMaxSpecBytes = 8 * 1024 * 1024;  // whole text; the HTTP layer has its own limit
constexpr size_t kMaxSpecItems = 50000;            // YAML items: bounds the parser's memory
constexpr int64_t kMaxCpuCores = 1000000;
constexpr int64_t kMaxMemoryMiB = int64_t(1) << 40;  // 1 EiB: far beyond any node, far below overflow
constexpr Duration kMaxDuration = 100LL * 365 * 24 * 3600;  // 100 years
constexpr Duration kMaxGrace = 86400;
constexpr size_t kMaxNameBytes = 128;
constexpr size_t kMaxQueueBytes = 256;
constexpr size_t kMaxPathBytes = 4096;
constexpr size_t kMaxTaskSizes = 1024;  // tasks listed one by one
const std::vector<std::string> kTaskSizeKeys = {"gpus", "cpu", "memory"};

const std::vector<std::string> kTopKeys = {"name", "queue", "project", "priority_class", "kind", "tasks",
                                           "min_tasks", "resources", "topology", "checkpoint", "restart",
                                           "expected_runtime", "max_runtime", "spot_tolerant", "spot", "command",
                                           "env", "secret_env", "working_dir", "container", "mounts",
                                           "array", "dependency", "kill_on_invalid_dep", "begin", "hold", "output", "error"};
const std::vector<std::string> kResourceKeys = {"gpus", "gpu_models", "mix_models", "mig", "gpu_milli", "gpu_memory", "cpu", "memory"};
const std::vector<std::string> kRestartKeys = {"max_restarts", "backoff"};
const std::vector<std::string> kTopologyKeys = {"mode", "level"};
const std::vector<std::string> kCheckpointKeys = {"interval", "signal", "grace", "dir"};
const std::vector<std::string> kSignals = {"SIGUSR1", "SIGUSR2", "SIGTERM", "SIGINT", "SIGHUP"};
const std::vector<std::pair<std::string, JobKind>> kKinds = {{"training", JobKind::kTraining},
                                                             {"inference", JobKind::kInference},
                                                             {"interactive", JobKind::kInteractive},
                                                             {"batch", JobKind::kBatch}};

std::string sub(const std::string& at, const std::string& key) { return at.empty() ? key : at + "." + key; }
std::string idx(const std::string& at, size_t i) { return at + "[" + std::to_string(i) + "]"; }

// Strings quoted in messages are cut short, and control and non-ASCII bytes become '?' (messages
// stay valid UTF-8 whatever the input was).
std::string printable(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < 64; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    out += (c < 0x20 || c >= 0x7f) ? '?' : s[i];
  }
  if (s.size() > 64) out += "...";
  return out;
}
std::string in_quotes(std::string_view s) { return "\"" + printable(s) + "\""; }

const char* kind_of(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "integer";
    case json::value_t::number_float: return "number with a fraction (or out of range)";
    case json::value_t::string: return "string";
    case json::value_t::array: return "list";
    case json::value_t::object: return "object";
    default: return "value";
  }
}

// Well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF), as JSON requires.
bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;  // truncated sequence
    for (size_t k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

Error bad(const std::string& at, const std::string& why) { return invalid_argument(at + ": " + why); }


Status known_fields(const json& obj, const std::string& at, const std::vector<std::string>& keys) {
  for (const auto& [k, v] : obj.items())
    if (std::find(keys.begin(), keys.end(), k) == keys.end())
      return bad(sub(at, printable(k)), "unknown field; expected one of " + join(keys));
  return {};
}

Status need_object(const json& v, const std::string& at) {
  if (!v.is_object()) return bad(at, std::string("must be an object (a map of fields), got ") + kind_of(v));
  return {};
}

// Integer in [lo, hi] (lo <= 0 <= hi or 0 <= lo <= hi).
Status int_in(const json& v, const std::string& at, int64_t lo, int64_t hi, int64_t& out) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > uint64_t(hi) || (lo > 0 && u < uint64_t(lo))) return bad(at, "must be in " + std::to_string(lo) + ".." + std::to_string(hi) + ", got " + std::to_string(u));
    out = int64_t(u);
    return {};
  }
  if (v.is_number_integer()) {
    const int64_t x = v.get<int64_t>();
    if (x < lo || x > hi) return bad(at, "must be in " + std::to_string(lo) + ".." + std::to_string(hi) + ", got " + std::to_string(x));
    out = x;
    return {};
  }
  return bad(at, std::string("must be an integer, got ") + kind_of(v));
}

Status int_in(const json& v, const std::string& at, int64_t lo, int64_t hi, int& out) {
  int64_t x = 0;
  TESSERA_TRY(int_in(v, at, lo, hi, x));
  out = int(x);
  return {};
}

Status string_of(const json& v, const std::string& at, std::string& out, size_t max_bytes = kMaxStringBytes) {
  if (!v.is_string()) {
    const bool scalar = v.is_number() || v.is_boolean();
    return bad(at, std::string("must be a string, got ") + kind_of(v) + (scalar ? " (quote it in YAML)" : ""));
  }
  const std::string& s = v.get_ref<const std::string&>();
  if (s.size() > max_bytes) return bad(at, "too long: " + std::to_string(s.size()) + " bytes; at most " + std::to_string(max_bytes));
  if (s.find('\0') != std::string::npos) return bad(at, "must not contain NUL bytes");
  if (!valid_utf8(s)) return bad(at, "must be valid UTF-8");
  out = s;
  return {};
}

bool all_of_chars(const std::string& s, std::string_view extra) {
  return std::all_of(s.begin(), s.end(), [&](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || extra.find(c) != std::string_view::npos;
  });
}

Status identifier(const json& v, const std::string& at, std::string& out, size_t max_bytes, std::string_view extra) {
  TESSERA_TRY(string_of(v, at, out, max_bytes));
  if (out.empty()) return bad(at, "must not be empty");
  if (!all_of_chars(out, extra))
    return bad(at, in_quotes(out) + " has characters outside [A-Za-z0-9" + std::string(extra) + "]");
  return {};
}

Status absolute_path(const json& v, const std::string& at, std::string& out) {
  TESSERA_TRY(string_of(v, at, out, kMaxPathBytes));
  if (!out.empty() && out[0] != '/') return bad(at, "must be an absolute path (starting with /) or empty, got " + in_quotes(out));
  return {};
}

// Digits only, at most 18 of them (so the value fits an int64 with room to multiply by 1024^2).
bool parse_digits(std::string_view s, int64_t& out) {
  if (s.empty() || s.size() > 18) return false;
  int64_t x = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    x = x * 10 + (c - '0');
  }
  out = x;
  return true;
}

// Memory: integer MiB, or "<digits>Mi|Gi|Ti".
Status memory_of(const json& v, const std::string& at, MiB& out) {
  int64_t mib = 0;
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    static const std::vector<std::pair<std::string, int64_t>> kSuffixes = {{"Mi", 1}, {"Gi", 1024}, {"Ti", 1024 * 1024}};
    bool matched = false;
    for (const auto& [suffix, mult] : kSuffixes) {
      if (s.size() <= suffix.size() || s.compare(s.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
      int64_t n = 0;
      if (!parse_digits(std::string_view(s).substr(0, s.size() - suffix.size()), n)) break;
      if (n > kMaxMemoryMiB / mult) return bad(at, in_quotes(s) + " is too large; at most " + std::to_string(kMaxMemoryMiB) + " MiB");
      mib = n * mult;
      matched = true;
    }
    if (!matched)
      return bad(at, "must be an integer number of MiB or a string like \"512Mi\", \"64Gi\", \"1Ti\"; got " + in_quotes(s));
  } else {
    TESSERA_TRY(int_in(v, at, 0, kMaxMemoryMiB, mib));
  }
  out = MiB(mib);
  return {};
}

// CPU: integer cores, or "<digits>m" milli-cores.
Status cpu_of(const json& v, const std::string& at, MilliCpu& out) {
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    int64_t milli = 0;
    if (s.size() < 2 || s.back() != 'm' || !parse_digits(std::string_view(s).substr(0, s.size() - 1), milli))
      return bad(at, "must be an integer number of cores or a string of milli-cores like \"500m\"; got " + in_quotes(s));
    if (milli > kMaxCpuCores * 1000) return bad(at, in_quotes(s) + " is too large; at most " + std::to_string(kMaxCpuCores) + " cores");
    out = MilliCpu(milli);
    return {};
  }
  int64_t cores = 0;
  TESSERA_TRY(int_in(v, at, 0, kMaxCpuCores, cores));
  out = MilliCpu(cores * 1000);
  return {};
}

// Durations: integer seconds, or "<digits>s|m|h|d".
Status duration_of(const json& v, const std::string& at, Duration max, Duration& out) {
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    int64_t n = 0, mult = 0;
    if (s.size() >= 2) {
      switch (s.back()) {
        case 's': mult = 1; break;
        case 'm': mult = 60; break;
        case 'h': mult = 3600; break;
        case 'd': mult = 86400; break;
        default: break;
      }
    }
    if (mult == 0 || !parse_digits(std::string_view(s).substr(0, s.size() - 1), n))
      return bad(at, "must be integer seconds or a string like \"90s\", \"90m\", \"2h\", \"1d\"; got " + in_quotes(s));
    if (n > max / mult) return bad(at, in_quotes(s) + " is too long; at most " + std::to_string(max) + " seconds");
    out = n * mult;
    return {};
  }
  return int_in(v, at, 0, max, out);
}

// Messages of TaskRequest/Gang::validate name core fields ("task.gpus", "gang.min_tasks"): say them as
// the spec names them.
Error from_core(const Status& s) {
  std::string m = s.message();
  static const std::vector<std::pair<std::string, std::string>> kRenames = {
      {"task.mig_profile", "resources.mig"}, {"task.", "resources."}, {"gang.", ""}};
  for (const auto& [from, to] : kRenames)
    if (m.compare(0, from.size(), from) == 0) {
      m = to + m.substr(from.size());
      break;
    }
  return invalid_argument(m);
}

// The built-in MIG profile names of every model ("1g.10gb", ...), sorted, unique.
const std::vector<std::string>& known_mig_profiles() {
  static const std::vector<std::string> names = [] {
    std::set<std::string> s;
    const GpuCatalog& cat = GpuCatalog::builtin();
    for (const std::string& n : cat.names()) {
      auto m = cat.find(n);
      if (m.ok())
        for (const MigProfile& p : (*m)->mig_profiles) s.insert(p.name);
    }
    return std::vector<std::string>(s.begin(), s.end());
  }();
  return names;
}

bool mig_profile_known(const std::string& name) {
  const GpuCatalog& cat = GpuCatalog::builtin();
  for (const std::string& n : cat.names()) {
    auto m = cat.find(n);
    if (m.ok() && (*m)->find_profile(name)) return true;
  }
  return false;
}

Status parse_resources(const json& r, TaskRequest& t) {
  const std::string at = "resources";
  TESSERA_TRY(need_object(r, at));
  TESSERA_TRY(known_fields(r, at, kResourceKeys));
  bool has_gpus = false, has_share = false;
  if (r.contains("gpus") && !r["gpus"].is_null()) {
    TESSERA_TRY(int_in(r["gpus"], "resources.gpus", 0, 64, t.gpu_count));
    has_gpus = true;
  }
  if (r.contains("gpu_models") && !r["gpu_models"].is_null()) {
    const json& l = r["gpu_models"];
    if (!l.is_array()) return bad("resources.gpu_models", std::string("must be a list of GPU model names, got ") + kind_of(l));
    if (l.size() > 256) return bad("resources.gpu_models", "at most 256 models");
    for (size_t i = 0; i < l.size(); ++i) {
      std::string name;
      TESSERA_TRY(string_of(l[i], idx("resources.gpu_models", i), name, kMaxNameBytes));
      auto m = GpuCatalog::builtin().find(name);
      if (!m.ok()) return bad(idx("resources.gpu_models", i), m.error().message);
      const std::string& canonical = (*m)->name;
      if (std::find(t.gpu_models.begin(), t.gpu_models.end(), canonical) != t.gpu_models.end())
        return bad(idx("resources.gpu_models", i), in_quotes(canonical) + " listed twice");
      t.gpu_models.push_back(canonical);
    }
  }
  if (r.contains("mix_models") && !r["mix_models"].is_null()) {
    if (!r["mix_models"].is_boolean())
      return bad("resources.mix_models", std::string("must be true or false, got ") + kind_of(r["mix_models"]));
    t.mix_models = r["mix_models"].get<bool>();
  }
  if (r.contains("mig") && !r["mig"].is_null()) {
    TESSERA_TRY(string_of(r["mig"], "resources.mig", t.mig_profile, kMaxNameBytes));
    if (!t.mig_profile.empty() && !mig_profile_known(t.mig_profile))
      return bad("resources.mig", "unknown MIG profile " + in_quotes(t.mig_profile) + "; known: " + join(known_mig_profiles()));
  }
  if (r.contains("gpu_milli") && !r["gpu_milli"].is_null()) {
    int64_t m = 0;
    TESSERA_TRY(int_in(r["gpu_milli"], "resources.gpu_milli", 1, 1000, m));
    t.milli_per_gpu = MilliGpu(m);
    has_share = true;
  }
  if (r.contains("gpu_memory") && !r["gpu_memory"].is_null()) {
    TESSERA_TRY(memory_of(r["gpu_memory"], "resources.gpu_memory", t.gpu_memory));
    has_share = true;
  }
  if (r.contains("cpu") && !r["cpu"].is_null()) TESSERA_TRY(cpu_of(r["cpu"], "resources.cpu", t.cpu));
  if (r.contains("memory") && !r["memory"].is_null()) TESSERA_TRY(memory_of(r["memory"], "resources.memory", t.memory));
  if (t.mig() && t.gpu_count > 0)
    return bad(at, "mig and gpus are exclusive (a MIG request takes one instance); drop gpus or mig");
  if (has_share && !has_gpus && !t.mig()) t.gpu_count = 1;  // a share of one GPU
  return {};
}

Status parse_topology(const json& v, TopologyConstraint& out) {
  const std::string at = "topology";
  TESSERA_TRY(need_object(v, at));
  TESSERA_TRY(known_fields(v, at, kTopologyKeys));
  if (!v.contains("mode")) return bad("topology.mode", "required (required or preferred)");
  std::string mode;
  TESSERA_TRY(string_of(v["mode"], "topology.mode", mode, kMaxNameBytes));
  if (mode == "required") out.mode = TopologyMode::kRequired;
  else if (mode == "preferred") out.mode = TopologyMode::kPreferred;
  else return bad("topology.mode", "must be required or preferred, got " + in_quotes(mode));
  if (!v.contains("level")) return bad("topology.level", "required (a network level name, or \"node\")");
  TESSERA_TRY(identifier(v["level"], "topology.level", out.level, kMaxNameBytes, "._-"));
  return {};
}

Status parse_checkpoint(const json& v, CheckpointSpec& c) {
  const std::string at = "checkpoint";
  TESSERA_TRY(need_object(v, at));
  TESSERA_TRY(known_fields(v, at, kCheckpointKeys));
  if (v.contains("interval") && !v["interval"].is_null()) TESSERA_TRY(duration_of(v["interval"], "checkpoint.interval", kMaxDuration, c.interval));
  if (v.contains("signal") && !v["signal"].is_null()) {
    TESSERA_TRY(string_of(v["signal"], "checkpoint.signal", c.signal, kMaxNameBytes));
    if (std::find(kSignals.begin(), kSignals.end(), c.signal) == kSignals.end())
      return bad("checkpoint.signal", "unknown signal " + in_quotes(c.signal) + "; expected one of " + join(kSignals));
  }
  if (v.contains("grace") && !v["grace"].is_null()) TESSERA_TRY(duration_of(v["grace"], "checkpoint.grace", kMaxGrace, c.grace));
  if (v.contains("dir") && !v["dir"].is_null()) TESSERA_TRY(absolute_path(v["dir"], "checkpoint.dir", c.dir));
  return {};
}

Status parse_command(const json& v, std::vector<std::string>& out) {
  if (!v.is_array()) return bad("command", std::string("must be a list of strings (argv), got ") + kind_of(v));
  if (v.empty()) return bad("command", "must not be empty; give the program and its arguments, e.g. [\"python\", \"train.py\"]");
  if (v.size() > kMaxCommandArgs)
    return bad("command", "too many arguments: " + std::to_string(v.size()) + "; at most " + std::to_string(kMaxCommandArgs));
  for (size_t i = 0; i < v.size(); ++i) {
    std::string a;
    TESSERA_TRY(string_of(v[i], idx("command", i), a));
    out.push_back(std::move(a));
  }
  if (out[0].empty()) return bad("command[0]", "the program must not be empty");
  return {};
}

Status parse_env(const json& v, std::map<std::string, std::string>& out) {
  TESSERA_TRY(need_object(v, "env"));
  if (v.size() > kMaxEnvVars)
    return bad("env", "too many variables: " + std::to_string(v.size()) + "; at most " + std::to_string(kMaxEnvVars));
  for (const auto& [k, val] : v.items()) {
    const bool ok_name = !k.empty() && k.size() <= kMaxNameBytes * 2 && !(k[0] >= '0' && k[0] <= '9') && all_of_chars(k, "_");
    if (!ok_name) return bad("env." + printable(k), "bad variable name " + in_quotes(k) + "; names are [A-Za-z_][A-Za-z0-9_]*");
    std::string s;
    TESSERA_TRY(string_of(val, "env." + printable(k), s));
    out[k] = std::move(s);
  }
  return {};
}

// secret_env: {NAME: value} (values merged into env, names marked secret), or, as the store keeps it,
// [NAME, ...] naming variables of env.
Status parse_secret_env(const json& v, JobSpec& s) {
  if (v.is_array()) {
    if (v.size() > kMaxEnvVars) return bad("secret_env", "at most " + std::to_string(kMaxEnvVars) + " names");
    for (size_t i = 0; i < v.size(); ++i) {
      std::string name;
      TESSERA_TRY(string_of(v[i], "secret_env[" + std::to_string(i) + "]", name));
      if (!s.env.count(name)) return bad("secret_env[" + std::to_string(i) + "]", in_quotes(name) + " is not in env");
      s.secret_env.insert(name);
    }
    return {};
  }
  std::map<std::string, std::string> secrets;
  TESSERA_TRY(parse_env(v, secrets));
  for (auto& [k, val] : secrets) {
    if (s.env.count(k)) return bad("secret_env." + k, "also in env; give a variable in one of them");
    s.env[k] = std::move(val);
    s.secret_env.insert(k);
  }
  if (s.env.size() > kMaxEnvVars)
    return bad("secret_env", "env and secret_env hold " + std::to_string(s.env.size()) + " variables; at most " + std::to_string(kMaxEnvVars));
  return {};
}

bool present(const json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

// "tasks": [{gpus, cpu, memory}, ...]: one size per task; a field left out is resources' (s.task).
Status parse_task_sizes(const json& l, JobSpec& s) {
  if (l.empty() || l.size() > kMaxTaskSizes)
    return bad("tasks", "a list of task sizes holds 1.." + std::to_string(kMaxTaskSizes) + " entries, got " + std::to_string(l.size()));
  for (size_t i = 0; i < l.size(); ++i) {
    const std::string at = idx("tasks", i);
    TESSERA_TRY(need_object(l[i], at));
    TESSERA_TRY(known_fields(l[i], at, kTaskSizeKeys));
    TaskSize z{s.task.cpu, s.task.memory, s.task.gpu_count};
    if (present(l[i], "gpus")) TESSERA_TRY(int_in(l[i]["gpus"], at + ".gpus", 0, 16, z.gpu_count));
    if (present(l[i], "cpu")) TESSERA_TRY(cpu_of(l[i]["cpu"], at + ".cpu", z.cpu));
    if (present(l[i], "memory")) TESSERA_TRY(memory_of(l[i]["memory"], at + ".memory", z.memory));
    s.task_sizes.push_back(z);
  }
  s.tasks = int(s.task_sizes.size());
  return {};
}

}  // namespace

Gang JobSpec::gang() const {
  Gang g;
  g.name = name;
  g.tasks = tasks;
  g.min_tasks = min_tasks;
  g.task = task;
  if (!task_sizes.empty()) g.set_sizes(task_sizes);
  g.topology = topology;
  g.kind = kind;
  g.checkpointable = checkpoint.interval > 0;
  g.spot = spot ? spot : spot_tolerant ? std::optional<SpotPolicy>(SpotPolicy::kAllowed) : std::nullopt;
  return g;
}

bool JobSpec::operator==(const JobSpec& o) const {
  return name == o.name && queue == o.queue && project == o.project && priority_class == o.priority_class &&
         kind == o.kind && tasks == o.tasks && min_tasks == o.min_tasks && task == o.task && task_sizes == o.task_sizes &&
         topology.mode == o.topology.mode && topology.level == o.topology.level && checkpoint == o.checkpoint && restart == o.restart &&
         expected_runtime == o.expected_runtime && max_runtime == o.max_runtime && spot_tolerant == o.spot_tolerant &&
         spot == o.spot &&
         command == o.command && env == o.env && secret_env == o.secret_env && working_dir == o.working_dir &&
         container == o.container && mounts == o.mounts && workflow == o.workflow;
}

Result<JobSpec> job_spec_from_json(const json& j) {
  if (!j.is_object())
    return invalid_argument(std::string("spec: must be an object (a map of fields such as name, queue, command), got ") + kind_of(j));
  TESSERA_TRY(known_fields(j, "", kTopKeys));
  JobSpec s;
  if (!present(j, "name")) return bad("name", "required (1..128 characters of [A-Za-z0-9._-])");
  TESSERA_TRY(identifier(j["name"], "name", s.name, kMaxNameBytes, "._-"));
  if (!present(j, "queue")) return bad("queue", "required (a leaf queue name or a path like \"team/sub\")");
  TESSERA_TRY(identifier(j["queue"], "queue", s.queue, kMaxQueueBytes, "._/-"));
  if (present(j, "project")) TESSERA_TRY(string_of(j["project"], "project", s.project, kMaxNameBytes));
  if (present(j, "priority_class")) TESSERA_TRY(identifier(j["priority_class"], "priority_class", s.priority_class, kMaxNameBytes, "._-"));
  if (present(j, "kind")) {
    std::string k;
    TESSERA_TRY(string_of(j["kind"], "kind", k, kMaxNameBytes));
    std::vector<std::string> names;
    bool found = false;
    for (const auto& [n, kind] : kKinds) {
      names.push_back(n);
      if (n == k) {
        s.kind = kind;
        found = true;
      }
    }
    if (!found) return bad("kind", "unknown " + in_quotes(k) + "; expected one of " + join(names));
  }
  const bool listed = present(j, "tasks") && j["tasks"].is_array();  // tasks that differ
  if (present(j, "tasks") && !listed) TESSERA_TRY(int_in(j["tasks"], "tasks", 1, 100000, s.tasks));
  if (present(j, "resources")) TESSERA_TRY(parse_resources(j["resources"], s.task));
  if (listed) TESSERA_TRY(parse_task_sizes(j["tasks"], s));
  if (present(j, "min_tasks")) {
    TESSERA_TRY(int_in(j["min_tasks"], "min_tasks", 0, 100000, s.min_tasks));
    if (s.min_tasks > s.tasks)
      return bad("min_tasks", "must be in 0..tasks (" + std::to_string(s.tasks) + "), got " + std::to_string(s.min_tasks));
  }
  if (present(j, "topology")) TESSERA_TRY(parse_topology(j["topology"], s.topology));
  if (present(j, "checkpoint")) TESSERA_TRY(parse_checkpoint(j["checkpoint"], s.checkpoint));
  if (present(j, "restart")) {
    const json& r = j["restart"];
    if (!r.is_object()) return bad("restart", std::string("must be a map like {max_restarts: 3, backoff: 10}, got ") + kind_of(r));
    TESSERA_TRY(known_fields(r, "restart", kRestartKeys));
    if (present(r, "max_restarts")) TESSERA_TRY(int_in(r["max_restarts"], "restart.max_restarts", 0, 1000, s.restart.max_restarts));
    if (present(r, "backoff")) TESSERA_TRY(duration_of(r["backoff"], "restart.backoff", 3600, s.restart.backoff));
  }
  if (present(j, "expected_runtime")) TESSERA_TRY(duration_of(j["expected_runtime"], "expected_runtime", kMaxDuration, s.expected_runtime));
  if (present(j, "max_runtime")) TESSERA_TRY(duration_of(j["max_runtime"], "max_runtime", kMaxDuration, s.max_runtime));
  if (present(j, "spot_tolerant")) {
    if (!j["spot_tolerant"].is_boolean()) return bad("spot_tolerant", std::string("must be true or false, got ") + kind_of(j["spot_tolerant"]));
    s.spot_tolerant = j["spot_tolerant"].get<bool>();
  }
  if (present(j, "spot")) {
    std::string v;
    TESSERA_TRY(string_of(j["spot"], "spot", v, kMaxNameBytes));
    auto p = parse_spot_policy(v);
    if (!p.ok()) return bad("spot", p.error().message);
    if (*p == SpotPolicy::kNever && s.spot_tolerant) return bad("spot", "never contradicts spot_tolerant: true (drop one)");
    s.spot = *p;
  }
  if (!present(j, "command")) return bad("command", "required: the program and its arguments, e.g. [\"python\", \"train.py\"]");
  TESSERA_TRY(parse_command(j["command"], s.command));
  if (present(j, "env")) TESSERA_TRY(parse_env(j["env"], s.env));
  if (present(j, "secret_env")) TESSERA_TRY(parse_secret_env(j["secret_env"], s));
  if (present(j, "working_dir")) TESSERA_TRY(absolute_path(j["working_dir"], "working_dir", s.working_dir));
  if (present(j, "container")) TESSERA_TRY(parse_container(j["container"], s.container));
  if (present(j, "mounts")) TESSERA_TRY(parse_mounts(j["mounts"], s.container.has_value(), s.checkpoint.dir, s.mounts));
  TESSERA_TRY(parse_workflow(j, s.workflow));
  if (Status st = s.gang().validate(); !st.ok()) return from_core(st);
  return s;
}

Result<JobSpec> parse_job_spec_json(std::string_view text) {
  if (text.size() > kMaxSpecBytes)
    return invalid_argument("spec: " + std::to_string(text.size()) + " bytes; at most " + std::to_string(kMaxSpecBytes));
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    std::string why = e.what();
    if (const size_t col = why.find("column"); col != std::string::npos)
      if (const size_t colon = why.find(": ", col); colon != std::string::npos) why = why.substr(colon + 2);
    return invalid_argument("spec: not valid JSON at byte " + std::to_string(e.byte) + ": " + why);
  } catch (const json::exception& e) {  // e.g. a number too large for any type ("1e309")
    std::string why = e.what();
    if (const size_t bracket = why.find("] "); why.rfind("[json.exception", 0) == 0 && bracket != std::string::npos)
      why = why.substr(bracket + 2);
    return invalid_argument("spec: not valid JSON: " + why);
  }
  return job_spec_from_json(j);
}

Result<JobSpec> parse_job_spec_yaml(std::string_view text) {
  if (text.size() > kMaxSpecBytes)
    return invalid_argument("spec: " + std::to_string(text.size()) + " bytes; at most " + std::to_string(kMaxSpecBytes));
  TESSERA_TRY(yaml_precheck(text, kMaxSpecItems));
  json j;
  try {
    const YAML::Node root = YAML::Load(std::string(text));
    TESSERA_TRY(yaml_to_json(root, j, ""));
  } catch (const YAML::Exception& e) {
    return invalid_argument("spec: not valid YAML at line " + std::to_string(e.mark.line + 1) + ", column " +
                            std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
  return job_spec_from_json(j);
}

}  // namespace tessera::config
