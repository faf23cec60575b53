// #SBATCH translation: see sbatch.h. Pure; thread-safe.
#include "cli/sbatch.h"

#include <cctype>
#include <charconv>
#include <map>
#include <optional>

#include "cli/slurm_time.h"

namespace tessera::cli {
namespace {

using nlohmann::json;

struct OptInfo {
  const char* name;   // long name without "--"
  char short_name;    // 0 = none
  bool takes_value;
};

// sbatch's options (those a batch script may hold); unknown ones are reported as ignored.
const std::vector<OptInfo>& options() {
  static const std::vector<OptInfo> k = {
      {"job-name", 'J', true},     {"partition", 'p', true},   {"account", 'A', true},        {"qos", 'q', true},
      {"nodes", 'N', true},        {"ntasks", 'n', true},      {"ntasks-per-node", 0, true},  {"cpus-per-task", 'c', true},
      {"gres", 0, true},           {"gpus", 'G', true},        {"gpus-per-node", 0, true},    {"gpus-per-task", 0, true},
      {"cpus-per-gpu", 0, true},   {"mem", 0, true},           {"mem-per-cpu", 0, true},      {"mem-per-gpu", 0, true},
      {"time", 't', true},         {"time-min", 0, true},      {"array", 'a', true},          {"dependency", 'd', true},
      {"kill-on-invalid-dep", 0, true}, {"output", 'o', true}, {"error", 'e', true},          {"input", 'i', true},
      {"begin", 'b', true},        {"hold", 'H', false},       {"chdir", 'D', true},          {"export", 0, true},
      {"mail-type", 0, true},      {"mail-user", 0, true},     {"exclusive", 0, false},       {"constraint", 'C', true},
      {"nodelist", 'w', true},     {"exclude", 'x', true},     {"requeue", 0, false},         {"no-requeue", 0, false},
      {"signal", 0, true},         {"open-mode", 0, true},     {"comment", 0, true},          {"reservation", 0, true},
      {"licenses", 'L', true},     {"distribution", 'm', true}, {"ntasks-per-gpu", 0, true},  {"wckey", 0, true},
      {"oversubscribe", 's', false}, {"contiguous", 0, false}, {"parsable", 0, false},        {"wait", 'W', false},
      {"quiet", 'Q', false},       {"verbose", 'v', false},    {"priority", 0, true},         {"nice", 0, true},
      {"switches", 0, true},       {"get-user-env", 0, false}, {"propagate", 0, true},        {"threads-per-core", 0, true},
      {"mincpus", 0, true},        {"sockets-per-node", 0, true}, {"cores-per-socket", 0, true}, {"uid", 0, true},
  };
  return k;
}

const OptInfo* find_long(std::string_view name) {
  for (const auto& o : options())
    if (name == o.name) return &o;
  return nullptr;
}
const OptInfo* find_short(char c) {
  for (const auto& o : options())
    if (o.short_name == c) return &o;
  return nullptr;
}

// Why an option Tessera does not use is ignored (and what to use instead).
std::string why_ignored(const std::string& name) {
  static const std::map<std::string, std::string> k = {
      {"qos", "Tessera has no QOS; use --class for a priority class"},
      {"mail-type", "Tessera sends no e-mail; follow the job with `tessera jobs`, `tessera run` or the portal"},
      {"mail-user", "Tessera sends no e-mail; follow the job with `tessera jobs`, `tessera run` or the portal"},
      {"exclusive", "GPUs are never shared unless the spec asks for a share; whole nodes cannot be reserved"},
      {"constraint", "node features are not modelled; choose GPU models with --models"},
      {"nodelist", "the scheduler chooses nodes; choose GPU models with --models"},
      {"exclude", "the scheduler chooses nodes; an admin can cordon a bad node"},
      {"requeue", "restarts are the spec's restart: {max_restarts, backoff} (docs/checkpointing.md)"},
      {"no-requeue", "restarts are the spec's restart: {max_restarts, backoff} (docs/checkpointing.md)"},
      {"signal", "a signal before the time limit is the spec's checkpoint: {signal, grace} (docs/checkpointing.md)"},
      {"time-min", "no flexible time limit; --time sets max_runtime and the spec's expected_runtime helps backfill"},
      {"input", "tasks read no standard input"},
      {"open-mode", "output files are appended to"},
      {"reservation", "no advance reservations"},
      {"licenses", "no licenses"},
      {"distribution", "task placement is the scheduler's (see topology: in the spec)"},
      {"ntasks-per-gpu", "give --gpus-per-task instead"},
      {"priority", "use --class for a priority class"},
      {"nice", "use --class for a priority class"},
  };
  const auto it = k.find(name);
  return it != k.end() ? it->second : "not supported by Tessera";
}

// The words of "#SBATCH --a=1 -b 'x y' # comment" after #SBATCH, quotes removed.
std::vector<std::string> words(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    if (i >= s.size() || s[i] == '#') break;
    std::string w;
    char quote = 0;
    for (; i < s.size(); ++i) {
      const char c = s[i];
      if (quote) {
        if (c == quote) quote = 0;
        else w += c;
      } else if (c == '\'' || c == '"') {
        quote = c;
      } else if (std::isspace(static_cast<unsigned char>(c))) {
        break;
      } else {
        w += c;
      }
    }
    out.push_back(w);
  }
  return out;
}

std::optional<int64_t> positive(std::string_view s) {
  int64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size() || v <= 0) return std::nullopt;
  return v;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Known models named by a Slurm GPU type: an exact name (any case) or those whose name starts with
// it up to a '-' ("a100" -> A100-40GB, A100-80GB).
std::vector<std::string> models_named(const std::string& type, const std::vector<std::string>& known) {
  std::vector<std::string> out;
  const std::string t = lower(type);
  for (const std::string& m : known)
    if (lower(m) == t) return {m};
  for (const std::string& m : known) {
    const std::string l = lower(m);
    if (l.size() > t.size() && l.compare(0, t.size(), t) == 0 && l[t.size()] == '-') out.push_back(m);
  }
  return out;
}

struct Gathered {
  std::optional<int64_t> nodes, ntasks, per_node, cpus_per_task, cpus_per_gpu;
  std::optional<int64_t> gpus_per_node, gpus_per_task, gpus_total;
  std::optional<int64_t> mem_per_node, mem_per_cpu, mem_per_gpu;
  std::string gpu_type;
  int gpu_line = 0;
};

}  // namespace

bool has_sbatch_lines(std::string_view script) {
  size_t start = 0;
  while (start < script.size()) {
    const size_t end = script.find('\n', start);
    const std::string_view line = script.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (line.rfind("#SBATCH", 0) == 0) return true;
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return false;
}

std::optional<int64_t> parse_slurm_memory(std::string_view text) {
  if (text.empty()) return std::nullopt;
  int64_t mult_kib = 1024;  // MiB by default, as in Slurm
  std::string_view num = text;
  switch (std::toupper(static_cast<unsigned char>(text.back()))) {
    case 'K': mult_kib = 1; num.remove_suffix(1); break;
    case 'M': mult_kib = 1024; num.remove_suffix(1); break;
    case 'G': mult_kib = 1024 * 1024; num.remove_suffix(1); break;
    case 'T': mult_kib = int64_t(1024) * 1024 * 1024; num.remove_suffix(1); break;
    default: break;
  }
  int64_t v = 0;
  const auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
  if (num.empty() || ec != std::errc() || p != num.data() + num.size() || v < 0 || v > (int64_t(1) << 40) / mult_kib) return std::nullopt;
  return (v * mult_kib + 1023) / 1024;
}

Result<SbatchTranslation> translate_sbatch(std::string_view script, const SbatchContext& ctx) {
  SbatchTranslation t;
  json& spec = t.spec;
  Gathered g;
  const std::string where = ctx.script_name.empty() ? "the script" : ctx.script_name;
  std::string chdir;

  // The interpreter: a shell, run as /bin/bash -c TEXT.
  if (script.rfind("#!", 0) == 0) {
    const std::string first(script.substr(0, script.find('\n')));
    const bool shell = first.find("bash") != std::string::npos || first.find("/sh") != std::string::npos ||
                       first.find(" sh") != std::string::npos || first.find("dash") != std::string::npos;
    if (!shell)
      return invalid_argument(where + " line 1: " + first +
                              ": only shell batch scripts are supported (they run as /bin/bash -c SCRIPT); run another "
                              "interpreter as the command: tessera submit --gpus N ... -- python3 script.py");
  }

  int lineno = 0;
  bool in_header = true;  // sbatch stops reading #SBATCH lines at the first command
  size_t start = 0;
  while (start <= script.size()) {
    const size_t end = script.find('\n', start);
    std::string_view line = script.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    start = end == std::string_view::npos ? script.size() + 1 : end + 1;
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string_view::npos) continue;
    if (line.rfind("#SBATCH", 0) != 0) {
      if (line[first] != '#') in_header = false;
      continue;
    }
    if (!in_header) {
      t.ignored.push_back({lineno, std::string(line), "after the first command: sbatch reads #SBATCH lines only before it"});
      continue;
    }
    const std::vector<std::string> w = words(line.substr(7));
    for (size_t i = 0; i < w.size(); ++i) {
      const std::string& tok = w[i];
      const OptInfo* info = nullptr;
      std::string value, shown = tok;
      bool has_value = false;
      if (tok.rfind("--", 0) == 0) {
        const size_t eq = tok.find('=');
        info = find_long(tok.substr(2, eq == std::string::npos ? std::string::npos : eq - 2));
        if (eq != std::string::npos) value = tok.substr(eq + 1), has_value = true;
      } else if (tok.size() >= 2 && tok[0] == '-') {
        info = find_short(tok[1]);
        if (tok.size() > 2) value = tok.substr(tok[2] == '=' ? 3 : 2), has_value = true;
      }
      if (!info) {
        t.ignored.push_back({lineno, tok, tok.rfind("-", 0) == 0 ? "not an sbatch option Tessera knows" : "not an option"});
        continue;
      }
      if (info->takes_value && !has_value) {
        if (i + 1 >= w.size()) return invalid_argument(where + " line " + std::to_string(lineno) + ": " + tok + ": needs a value");
        value = w[++i];
        shown += " " + value;
      }
      const std::string name = info->name;
      auto bad = [&](const std::string& why) {
        return invalid_argument(where + " line " + std::to_string(lineno) + ": " + shown + ": " + why);
      };
      auto count = [&](std::optional<int64_t>& out) -> bool {
        out = positive(value);
        return out.has_value();
      };
      if (name == "job-name") spec["name"] = value;
      else if (name == "partition") {
        if (value.find(',') != std::string::npos) return bad("one partition (queue) only; Tessera runs a job in one queue");
        spec["queue"] = value;
      } else if (name == "account") spec["project"] = value;
      else if (name == "nodes") {
        std::string v = value;
        if (const size_t dash = v.find('-'); dash != std::string::npos) {
          t.ignored.push_back({lineno, shown, "a node range: Tessera starts the gang whole, on the minimum " + v.substr(0, dash)});
          v = v.substr(0, dash);
        }
        value = v;
        if (!count(g.nodes)) return bad("expected a number of nodes");
      } else if (name == "ntasks") {
        if (!count(g.ntasks)) return bad("expected a number of tasks");
      } else if (name == "ntasks-per-node") {
        if (!count(g.per_node)) return bad("expected a number of tasks per node");
      } else if (name == "cpus-per-task") {
        if (!count(g.cpus_per_task)) return bad("expected a number of CPUs");
      } else if (name == "cpus-per-gpu") {
        if (!count(g.cpus_per_gpu)) return bad("expected a number of CPUs");
      } else if (name == "gres" || name == "gpus" || name == "gpus-per-node" || name == "gpus-per-task") {
        // gres: gpu[:TYPE][:N][,other...]; the --gpus* options: [TYPE:]N.
        std::string gpu_part;
        if (name == "gres") {
          size_t pos = 0;
          for (;;) {
            const size_t comma = value.find(',', pos);
            const std::string item = value.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
            if (item == "gpu" || item.rfind("gpu:", 0) == 0) gpu_part = item == "gpu" ? "1" : item.substr(4);
            else if (!item.empty()) t.ignored.push_back({lineno, "--gres=" + item, "only GPUs are scheduled as generic resources"});
            if (comma == std::string::npos) break;
            pos = comma + 1;
          }
          if (gpu_part.empty()) continue;
        } else {
          gpu_part = value;
        }
        std::string type, num = gpu_part;
        if (const size_t c = gpu_part.rfind(':'); c != std::string::npos) {
          type = gpu_part.substr(0, c);
          num = gpu_part.substr(c + 1);
        } else if (!gpu_part.empty() && !std::isdigit(static_cast<unsigned char>(gpu_part[0]))) {
          type = gpu_part, num = "1";
        }
        const auto n = positive(num);
        if (!n) return bad("expected a GPU count, e.g. gpu:4 or gpu:a100:4");
        if (!type.empty()) g.gpu_type = type, g.gpu_line = lineno;
        if (name == "gpus-per-task") g.gpus_per_task = n;
        else if (name == "gpus") g.gpus_total = n;
        else g.gpus_per_node = n;
      } else if (name == "mem" || name == "mem-per-cpu" || name == "mem-per-gpu") {
        const auto m = parse_slurm_memory(value);
        if (!m) return bad("expected an amount such as 64G, 500M or 2048 (MiB)");
        if (*m == 0) {
          t.ignored.push_back({lineno, shown, "--mem=0 (all of a node's memory) has no equivalent; ask an amount"});
          continue;
        }
        (name == "mem" ? g.mem_per_node : name == "mem-per-cpu" ? g.mem_per_cpu : g.mem_per_gpu) = m;
      } else if (name == "time") {
        auto s = parse_time_limit(value, "--time");
        if (!s.ok()) return bad(s.error().message.substr(s.error().message.find(": ") + 2));
        if (*s > 0) spec["max_runtime"] = *s;
      } else if (name == "array") spec["array"] = value;
      else if (name == "dependency") {
        if (value.find('?') != std::string::npos) return bad("'?' (any of) is not supported; ',' (all of) is");
        spec["dependency"] = value;
      } else if (name == "kill-on-invalid-dep") {
        const std::string v = lower(value);
        if (v != "yes" && v != "no") return bad("expected yes or no");
        spec["kill_on_invalid_dep"] = v == "yes";
      } else if (name == "output" || name == "error") {
        std::string path = value;
        if (!path.empty() && path[0] != '/') {
          const std::string base = !chdir.empty() ? chdir : ctx.cwd;
          if (!base.empty()) path = base + (base.back() == '/' ? "" : "/") + path;
        }
        spec[name] = path;
      } else if (name == "begin") {
        auto b = parse_begin_time(value, ctx.now, "--begin");
        if (!b.ok()) return bad(b.error().message.substr(b.error().message.find(": ") + 2));
        spec["begin"] = *b;
      } else if (name == "hold") spec["hold"] = true;
      else if (name == "chdir") {
        if (value.empty() || value[0] != '/') return bad("give an absolute path");
        chdir = value;
        spec["working_dir"] = value;
      } else if (name == "export") {
        size_t pos = 0;
        for (;;) {
          const size_t comma = value.find(',', pos);
          const std::string item = value.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
          const size_t eq = item.find('=');
          if (eq != std::string::npos && eq > 0) {
            if (!spec["env"].is_object()) spec["env"] = json::object();
            spec["env"][item.substr(0, eq)] = item.substr(eq + 1);
          } else if (!item.empty()) {
            t.ignored.push_back({lineno, "--export=" + item,
                                 "the submitting shell's environment is not copied; the job gets the spec's env "
                                 "(--env NAME=VALUE)"});
          }
          if (comma == std::string::npos) break;
          pos = comma + 1;
        }
      } else {
        t.ignored.push_back({lineno, shown, why_ignored(name)});
      }
    }
    if (start > script.size()) break;
  }

  // Tasks and their per-task resources.
  const int64_t tasks = g.ntasks ? *g.ntasks : g.nodes && g.per_node ? *g.nodes * *g.per_node : g.nodes ? *g.nodes : g.per_node ? *g.per_node : 1;
  const int64_t per_node = g.per_node ? *g.per_node : g.nodes ? (tasks + *g.nodes - 1) / *g.nodes : tasks;
  if (g.ntasks && g.nodes && g.per_node && *g.ntasks != *g.nodes * *g.per_node)
    return invalid_argument(where + ": --ntasks=" + std::to_string(*g.ntasks) + " is not --nodes=" + std::to_string(*g.nodes) +
                            " x --ntasks-per-node=" + std::to_string(*g.per_node) + "; Tessera runs equal tasks");
  if (g.nodes && tasks < *g.nodes)
    return invalid_argument(where + ": " + std::to_string(tasks) + " tasks on --nodes=" + std::to_string(*g.nodes) +
                            ": Tessera runs at least one task per node; raise --ntasks");
  if (tasks != 1 || g.ntasks || g.nodes || g.per_node) spec["tasks"] = tasks;
  json res = json::object();
  std::optional<int64_t> gpt;
  if (g.gpus_per_task) {
    gpt = g.gpus_per_task;
  } else if (g.gpus_per_node) {
    if (*g.gpus_per_node % per_node != 0)
      return invalid_argument(where + ": " + std::to_string(*g.gpus_per_node) + " GPUs per node do not divide among " +
                              std::to_string(per_node) + " tasks per node; say #SBATCH --gpus-per-task=N");
    gpt = *g.gpus_per_node / per_node;
  } else if (g.gpus_total) {
    if (*g.gpus_total % tasks != 0)
      return invalid_argument(where + ": --gpus=" + std::to_string(*g.gpus_total) + " do not divide among " +
                              std::to_string(tasks) + " tasks; say #SBATCH --gpus-per-task=N");
    gpt = *g.gpus_total / tasks;
  }
  if (gpt) res["gpus"] = *gpt;
  if (!g.gpu_type.empty()) {
    const auto models = models_named(g.gpu_type, ctx.gpu_models);
    if (models.empty())
      t.ignored.push_back({g.gpu_line, "GPU type " + g.gpu_type,
                           "no known GPU model is named so; choose models with --models (see `tessera nodes`)"});
    else res["gpu_models"] = models;
  }
  const int64_t cpus = g.cpus_per_task ? *g.cpus_per_task : g.cpus_per_gpu && gpt ? *g.cpus_per_gpu * *gpt : 0;
  if (cpus > 0) res["cpu"] = cpus;
  int64_t mem = 0;
  if (g.mem_per_node) mem = *g.mem_per_node / per_node;
  else if (g.mem_per_cpu) mem = *g.mem_per_cpu * (cpus > 0 ? cpus : 1);
  else if (g.mem_per_gpu && gpt) mem = *g.mem_per_gpu * *gpt;
  if (mem > 0) res["memory"] = mem;
  if (!res.empty()) spec["resources"] = res;

  if (!spec.contains("working_dir"))
    t.notes.push_back("sbatch starts a script in the submit directory; Tessera starts it in the task's own directory: add "
                      "#SBATCH --chdir=DIR (or --workdir DIR) if the script uses relative paths");
  json cmd = json::array({"/bin/bash", "-c", std::string(script), ctx.script_name.empty() ? "script" : ctx.script_name});
  for (const std::string& a : ctx.args) cmd.push_back(a);
  spec["command"] = cmd;
  return t;
}

}  // namespace tessera::cli
