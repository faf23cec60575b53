#include "sim/workload.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "core/rng.h"
#include "sim/openb.h"

namespace tessera::sim {
namespace fs = std::filesystem;
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) return out;
    start = p + 1;
  }
}

bool parse_number(const std::string& text, double& out) {
  const char* b = text.data();
  const char* e = b + text.size();
  while (b < e && *b == ' ') ++b;
  while (e > b && (e[-1] == ' ' || e[-1] == '\r')) --e;
  auto [p, ec] = std::from_chars(b, e, out);
  return ec == std::errc() && p == e && std::isfinite(out);
}

// Training jobs of the trace workloads checkpoint every 30 minutes (docs/simulator.md).
CheckpointInfo training_checkpoints() {
  CheckpointInfo c;
  c.interval = 1800;
  c.save_cost = 60;
  c.restart_cost = 120;
  c.grace = 300;
  return c;
}

void finish(Workload& w) {
  std::sort(w.jobs.begin(), w.jobs.end(), [](const WorkloadJob& a, const WorkloadJob& b) {
    return a.arrival != b.arrival ? a.arrival < b.arrival : a.name < b.name;
  });
  std::set<std::string> teams;
  for (const WorkloadJob& j : w.jobs) teams.insert(j.team);
  w.teams.assign(teams.begin(), teams.end());
}

// ---- Philly (Gavel) -------------------------------------------------------------------------------

// Gavel's measured throughputs (steps/s) on V100, alone ("null" entry), per (job type, scale factor),
// consolidated (one node) and unconsolidated (spread over nodes).
struct PhillyThroughputs {
  std::map<std::pair<std::string, int>, double> packed, spread;
};

Result<PhillyThroughputs> load_throughputs(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return not_found(path.string() + ": cannot open the throughput table");
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument(path.string() + ": not valid JSON: " + e.what());
  }
  PhillyThroughputs t;
  for (auto [table, out] : {std::pair{"v100", &t.packed}, std::pair{"v100_unconsolidated", &t.spread}}) {
    if (!j.contains(table) || !j[table].is_object())
      return invalid_argument(path.string() + ": missing the \"" + std::string(table) + "\" table");
    for (auto& [key, v] : j[table].items()) {
      // Keys look like "('ResNet-50 (batch size 64)', 4)".
      const size_t q1 = key.find('\''), q2 = key.rfind('\''), comma = key.rfind(',');
      if (q1 == std::string::npos || q2 <= q1 || comma == std::string::npos || comma < q2) continue;
      double scale = 0;
      std::string s = key.substr(comma + 1);
      s.erase(std::remove(s.begin(), s.end(), ')'), s.end());
      if (!parse_number(s, scale) || scale < 1) continue;
      if (!v.is_object() || !v.contains("null") || !v["null"].is_number()) continue;
      const double tput = v["null"].get<double>();
      if (tput > 0) (*out)[{key.substr(q1 + 1, q2 - q1 - 1), int(scale)}] = tput;
    }
  }
  return t;
}

// Throughput of `type` on `scale` GPUs in `table`: measured, or extrapolated from the largest measured
// scale below it with the per-GPU throughput held constant. 0 when the type is unknown.
double throughput(const std::map<std::pair<std::string, int>, double>& table, const std::string& type, int scale,
                  int* measured_scale = nullptr) {
  for (int m = scale; m >= 1; --m) {
    auto it = table.find({type, m});
    if (it == table.end()) continue;
    if (measured_scale) *measured_scale = m;
    return it->second * double(scale) / double(m);
  }
  return 0;
}

// The tasks of a Philly job on `scale` GPUs: one GPU per task up to a node (8), so that a placement
// may keep them on one node or spread them; beyond a node, tasks of the largest of 8/4/2/1 GPUs that
// divides the scale.
void philly_gang(int scale, Gang& g) {
  if (scale <= 8) {
    g.tasks = scale;
    g.task.gpu_count = 1;
    g.topology = {TopologyMode::kPreferred, "node"};
  } else {
    int per = 8;
    while (scale % per != 0) per /= 2;
    g.tasks = scale / per;
    g.task.gpu_count = per;
  }
  g.task.cpu = MilliCpu(4000LL * g.task.gpu_count);
  g.task.memory = MiB(32768LL * g.task.gpu_count);
}

Result<Workload> load_philly(const std::string& dir_text) {
  fs::path dir(dir_text);
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return not_found("philly:" + dir_text + ": not a directory; point it at the Gavel Philly folder (e.g. "
                     "../shared/data/philly-gavel)");
  auto has_traces = [](const fs::path& d) {
    std::error_code e;
    for (const auto& ent : fs::directory_iterator(d, e))
      if (ent.path().extension() == ".trace") return true;
    return false;
  };
  if (!has_traces(dir) && fs::is_directory(dir / "seed0", ec)) dir /= "seed0";
  if (!has_traces(dir)) return not_found("philly:" + dir_text + ": no *.trace files (one per team) in it or in seed0/");
  fs::path tput_path = dir / "simulation_throughputs.json";
  if (!fs::exists(tput_path, ec)) tput_path = dir.parent_path() / "simulation_throughputs.json";
  auto tput = load_throughputs(tput_path);
  if (!tput.ok()) return tput.error();

  std::vector<fs::path> files;
  for (const auto& ent : fs::directory_iterator(dir, ec))
    if (ent.path().extension() == ".trace") files.push_back(ent.path());
  std::sort(files.begin(), files.end());
  Workload w;
  w.source = "philly:" + dir_text;
  for (const fs::path& f : files) {
    const std::string team = f.stem().string();
    std::ifstream in(f);
    if (!in) return not_found(f.string() + ": cannot open");
    std::string line;
    int line_no = 0;
    while (std::getline(in, line)) {
      ++line_no;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty()) continue;
      const std::string at = f.string() + ":" + std::to_string(line_no);
      const auto col = split(line, '\t');
      if (col.size() < 7)
        return invalid_argument(at + ": expected 7 tab-separated fields (job_type, command, num_steps_arg, "
                                "needs_data_dir, total_steps, arrival_time, scale_factor), got " +
                                std::to_string(col.size()));
      double steps = 0, arrival = 0, scale = 0;
      if (!parse_number(col[4], steps) || steps <= 0) return invalid_argument(at + ": total_steps must be a positive number");
      if (!parse_number(col[5], arrival) || arrival < 0)
        return invalid_argument(at + ": arrival_time must be a number of seconds >= 0");
      if (!parse_number(col[6], scale) || scale < 1 || scale != std::floor(scale) || scale > 4096)
        return invalid_argument(at + ": scale_factor must be a whole number of GPUs (1..4096)");
      const std::string& type = col[0];
      const int s = int(scale);
      int m = 1;
      const double packed = throughput(tput->packed, type, s, &m);
      if (packed <= 0)
        return invalid_argument(at + ": job_type \"" + type + "\" is not in the throughput table " + tput_path.string());
      WorkloadJob j;
      j.name = team + "-" + std::to_string(line_no);
      j.team = team;
      j.user = team;
      j.kind = type;
      j.arrival = Time(arrival);
      philly_gang(s, j.gang);
      j.gang.name = j.name;
      j.work = std::max<Duration>(1, Duration(std::ceil(steps / packed)));
      // Spread penalty: measured packed/spread ratio at the largest measured multi-GPU scale; none
      // below 1 (a spread placement is never modelled as faster).
      for (int k = std::max(m, 2); k >= 2 && s >= 2; --k) {
        auto p = tput->packed.find({type, k});
        auto u = tput->spread.find({type, k});
        if (p == tput->packed.end() || u == tput->spread.end()) continue;
        j.spread_slowdown_milli = std::max<int64_t>(1000, int64_t(std::llround(1000.0 * p->second / u->second)));
        break;
      }
      j.checkpoint = training_checkpoints();
      w.jobs.push_back(std::move(j));
    }
  }
  finish(w);
  return w;
}

// ---- openb ----------------------------------------------------------------------------------------

Result<Workload> load_openb(const std::string& path) {
  std::ifstream in(path);
  if (!in) return not_found("openb:" + path + ": cannot open; point it at an openb pod list with times (e.g. "
                            "../shared/data/openb/openb_pod_list_default.csv)");
  auto pods = parse_openb_pods(in, path);
  if (!pods.ok()) return pods.error();
  Workload w;
  w.source = "openb:" + path;
  for (const OpenbPod& pod : *pods) {
    if (!pod.times)
      return invalid_argument(path + ":1: the pod list has no creation_time/deletion_time/scheduled_time columns; "
                              "time-driven simulation needs openb_pod_list_default.csv (the sampled variants have no times)");
    const OpenbTimes& tm = *pod.times;
    WorkloadJob j;
    j.name = pod.name;
    j.team = "default";
    j.user = "default";
    j.kind = pod.qos.empty() ? "openb" : "openb-" + pod.qos;
    j.arrival = tm.creation;
    j.gang.name = pod.name;
    j.gang.tasks = 1;
    j.gang.task = pod.task;
    // Run time as the trace saw it: from scheduling (creation if it never was) to deletion.
    j.work = std::max<Duration>(1, tm.deletion - std::max(tm.scheduled.value_or(tm.creation), tm.creation));
    w.jobs.push_back(std::move(j));
  }
  finish(w);
  return w;
}

// An inference service's replicas (team "inference", class production-inference, no checkpoints):
// one up for `days` from a random moment in its first 10 minutes, and a second each day from about
// 08:00 to 20:00 (diurnal peak). `shape` sets what each replica runs on.
template <class Shape>
void add_service_replicas(Workload& w, Rng& rng, const std::string& service, const std::string& kind, int64_t days,
                          Shape shape) {
  auto replica = [&](const std::string& name, Time arrival, Duration work) {
    WorkloadJob j;
    j.name = name;
    j.team = "inference";
    j.user = service;
    j.priority_class = "production-inference";
    j.kind = kind;
    j.arrival = arrival;
    j.work = work;
    j.service = true;
    j.gang.kind = JobKind::kInference;
    j.gang.name = name;
    j.gang.tasks = 1;
    shape(j);
    w.jobs.push_back(std::move(j));
  };
  replica(service + "-r0", Time(rng.uniform(600)), days * 86400);
  for (int64_t d = 0; d < days; ++d)
    replica(service + "-d" + std::to_string(d), d * 86400 + 8 * 3600 + Time(rng.uniform(1800)), 12 * 3600);
}

// ---- synthetic --------------------------------------------------------------------------------------

struct SyntheticSpec {
  uint64_t seed = 1;
  int64_t days = 2;
  int64_t gpus = 64;          // size of the cluster the mix is made for
  int64_t services = -1;      // inference services (default gpus / 4)
  int64_t teams = 3;          // training teams: train-a, train-b, ...
  int64_t load_pct = 90;      // offered training load, % of the GPUs left by services at peak
};

Result<SyntheticSpec> parse_synthetic(const std::string& spec) {
  SyntheticSpec s;
  if (spec.empty() || spec == "default") return s;
  for (const std::string& kv : split(spec, ',')) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos)
      return invalid_argument("synthetic:" + spec + ": \"" + kv + "\" is not KEY=VALUE (keys: seed, days, gpus, services, teams, load_pct)");
    const std::string key = kv.substr(0, eq);
    double v = 0;
    if (!parse_number(kv.substr(eq + 1), v) || v < 0 || v != std::floor(v))
      return invalid_argument("synthetic: " + key + " must be a whole number >= 0, got \"" + kv.substr(eq + 1) + "\"");
    const int64_t n = int64_t(v);
    if (key == "seed") s.seed = uint64_t(n);
    else if (key == "days") s.days = n;
    else if (key == "gpus") s.gpus = n;
    else if (key == "services") s.services = n;
    else if (key == "teams") s.teams = n;
    else if (key == "load_pct") s.load_pct = n;
    else return invalid_argument("synthetic: unknown key \"" + key + "\" (keys: seed, days, gpus, services, teams, load_pct)");
  }
  if (s.days < 1 || s.days > 365) return invalid_argument("synthetic: days must be 1..365");
  if (s.gpus < 8) return invalid_argument("synthetic: gpus must be >= 8");
  if (s.teams < 1 || s.teams > 26) return invalid_argument("synthetic: teams must be 1..26");
  if (s.load_pct > 400) return invalid_argument("synthetic: load_pct must be <= 400");
  return s;
}

// Inference models served (docs/simulator.md): weights at 16 bit plus KV cache, and the MIG profile
// on an 80 GB A100/H100 that holds them; a model too big for one GPU takes whole GPUs.
struct ServedModel {
  const char* name;
  const char* mig;        // profile, or "" for whole GPUs
  int whole_gpus;         // when mig is empty
  int compute_sevenths;   // compute it needs at peak load, in sevenths of a GPU
  int percent;            // share of services
};
constexpr ServedModel kServed[] = {
    {"llm-7b", "2g.20gb", 0, 2, 50},
    {"llm-13b", "3g.40gb", 0, 3, 35},
    {"llm-70b", "", 2, 14, 15},
};

Result<Workload> load_synthetic(const std::string& text) {
  auto spec = parse_synthetic(text);
  if (!spec.ok()) return spec.error();
  const SyntheticSpec& s = *spec;
  Rng rng(s.seed);
  auto unit = [&] { return (double(rng.uniform(1u << 30)) + 0.5) / double(1u << 30); };
  Workload w;
  w.source = "synthetic:" + text;
  const Duration horizon = s.days * 86400;
  const int64_t services = s.services >= 0 ? s.services : s.gpus / 4;

  // Services: base replicas all the time, one more replica each day from 08:00 to 20:00 (diurnal load).
  double service_gpus_peak = 0;
  for (int64_t i = 0; i < services; ++i) {
    const int64_t pick = int64_t(rng.uniform(100));
    const ServedModel* m = &kServed[0];
    for (int64_t acc = 0; const ServedModel& c : kServed) {
      acc += c.percent;
      if (pick < acc) {
        m = &c;
        break;
      }
    }
    const std::string base = std::string(m->name) + "-svc" + std::to_string(i);
    add_service_replicas(w, rng, base, m->name, s.days, [&](WorkloadJob& j) {
      if (*m->mig) {
        j.gang.task.mig_profile = m->mig;
        j.useful_milli_per_task = m->compute_sevenths * 1000 / 7;
      } else {
        j.gang.task.gpu_count = m->whole_gpus;
      }
      j.gang.task.cpu = MilliCpu(4000);
      j.gang.task.memory = MiB(32768);
    });
    service_gpus_peak += 2.0 * (*m->mig ? double(m->compute_sevenths) / 7.0 : double(m->whole_gpus));
  }

  // Training: Poisson arrivals per team; sizes and durations shaped like Philly (docs/simulator.md).
  struct Size {
    int gpus, percent;
  };
  constexpr Size kSizes[] = {{1, 55}, {2, 10}, {4, 15}, {8, 15}, {16, 4}, {32, 1}};
  double mean_gpus = 0;
  for (const Size& z : kSizes) mean_gpus += z.gpus * z.percent / 100.0;
  // Durations log-uniform between 10 minutes and 24 hours: mean (b - a) / ln(b / a).
  const double dmin = 600, dmax = 86400, mean_dur = (dmax - dmin) / std::log(dmax / dmin);
  const double train_gpus = std::max(0.0, double(s.gpus) - service_gpus_peak) * double(s.load_pct) / 100.0;
  const double rate = train_gpus / (mean_gpus * mean_dur);  // jobs per second, all teams
  for (int64_t t = 0; t < s.teams; ++t) {
    const std::string team = std::string("train-") + char('a' + t);
    double now = 0;
    for (int64_t n = 0; rate > 0; ++n) {
      now += -std::log(unit()) / (rate / double(s.teams));
      if (now >= double(horizon)) break;
      int gpus = 1;
      for (int64_t pick = int64_t(rng.uniform(100)), acc = 0; const Size& z : kSizes) {
        acc += z.percent;
        if (pick < acc) {
          gpus = z.gpus;
          break;
        }
      }
      gpus = int(std::min<int64_t>(gpus, s.gpus));
      WorkloadJob j;
      j.name = team + "-job" + std::to_string(n);
      j.team = team;
      j.user = team + "-user" + std::to_string(rng.uniform(4));
      j.kind = "train-" + std::to_string(gpus) + "gpu";
      j.arrival = Time(now);
      j.work = Duration(dmin * std::exp(unit() * std::log(dmax / dmin)));
      j.gang.name = j.name;
      j.gang.tasks = gpus <= 8 ? 1 : gpus / 8;
      j.gang.task.gpu_count = std::min(gpus, 8);
      j.gang.task.cpu = MilliCpu(4000LL * j.gang.task.gpu_count);
      j.gang.task.memory = MiB(32768LL * j.gang.task.gpu_count);
      j.checkpoint = training_checkpoints();
      w.jobs.push_back(std::move(j));
    }
  }
  finish(w);
  return w;
}

// ---- inference (steady services on whole GPUs) --------------------------------------------------------

// "services=N,gpus=G,days=D,seed=S": N services of G whole GPUs each, up for D days, each with a
// second replica from 08:00 to 20:00 every day (diurnal peak). Team "inference".
Result<Workload> load_inference(const std::string& text) {
  int64_t services = 16, gpus = 1, days = 7, seed = 1;
  if (!text.empty())
    for (const std::string& kv : split(text, ',')) {
      const size_t eq = kv.find('=');
      const std::string key = kv.substr(0, eq == std::string::npos ? kv.size() : eq);
      double v = 0;
      if (eq == std::string::npos || !parse_number(kv.substr(eq + 1), v) || v < 0 || v != std::floor(v))
        return invalid_argument("inference: \"" + kv + "\" is not KEY=WHOLE_NUMBER (keys: services, gpus, days, seed)");
      if (key == "services") services = int64_t(v);
      else if (key == "gpus") gpus = int64_t(v);
      else if (key == "days") days = int64_t(v);
      else if (key == "seed") seed = int64_t(v);
      else return invalid_argument("inference: unknown key \"" + key + "\" (keys: services, gpus, days, seed)");
    }
  if (services < 1 || services > 10000) return invalid_argument("inference: services must be 1..10000");
  if (gpus < 1 || gpus > 64) return invalid_argument("inference: gpus must be 1..64");
  if (days < 1 || days > 400) return invalid_argument("inference: days must be 1..400");
  Rng rng{uint64_t(seed)};
  Workload w;
  w.source = "inference:" + text;
  for (int64_t i = 0; i < services; ++i) {
    const std::string base = "svc" + std::to_string(i);
    add_service_replicas(w, rng, base, "inference-" + std::to_string(gpus) + "gpu", days, [&](WorkloadJob& j) {
      j.gang.task.gpu_count = int(gpus);
      j.gang.task.cpu = MilliCpu(4000 * gpus);
      j.gang.task.memory = MiB(32768 * gpus);
    });
  }
  finish(w);
  return w;
}

Result<Workload> load_one(const std::string& spec);

}  // namespace

// "A+B": the jobs of both workloads (names prefixed when they clash).
Result<Workload> load_workload(const std::string& spec) {
  if (spec.find('+') == std::string::npos) return load_one(spec);
  Workload all;
  all.source = spec;
  std::set<std::string> names;
  for (const std::string& part : split(spec, '+')) {
    auto w = load_one(part);
    if (!w.ok()) return w.error();
    for (WorkloadJob& j : w->jobs) {
      if (!names.insert(j.name).second)
        return invalid_argument("--workload " + spec + ": job name " + j.name + " occurs in two parts");
      all.jobs.push_back(std::move(j));
    }
  }
  finish(all);
  return all;
}

namespace {
Result<Workload> load_one(const std::string& spec) {
  const size_t colon = spec.find(':');
  const std::string kind = spec.substr(0, colon), rest = colon == std::string::npos ? "" : spec.substr(colon + 1);
  if (kind == "philly") {
    if (rest.empty()) return invalid_argument("--workload philly:DIR: DIR is missing (e.g. philly:../shared/data/philly-gavel)");
    return load_philly(rest);
  }
  if (kind == "openb") {
    if (rest.empty()) return invalid_argument("--workload openb:FILE: FILE is missing (e.g. openb:../shared/data/openb/openb_pod_list_default.csv)");
    return load_openb(rest);
  }
  if (kind == "synthetic") return load_synthetic(rest);
  if (kind == "inference") return load_inference(rest);
  return invalid_argument("--workload \"" + spec + "\": expected philly:DIR, openb:FILE, synthetic:KEY=VALUE,..., inference:KEY=VALUE,... or several joined by +");
}
}  // namespace

}  // namespace tessera::sim
