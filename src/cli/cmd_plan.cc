// tessera plan buy-vs-rent: owned cost per GPU-hour and months to break even against each cloud price
// tier (on-demand, 1- and 3-year reserved, spot after interruption losses), with every assumption and
// its source printed. The math is core/cost.h; the defaults are the cost reference's figures
// (../shared/reference/cost.md, sections cited per value) and docs/cost.md explains them.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/format.h"
#include "core/cost.h"
#include "core/gpu_catalog.h"
#include "server/accounting.h"

namespace tessera::cli {
namespace {

using cost::Micros;

[[noreturn]] void fail(const std::string& msg, int code = 2) {
  std::cerr << "tessera plan buy-vs-rent: " << msg << "\n";
  throw CLI::RuntimeError(code);
}

Micros to_micros(double dollars) { return static_cast<Micros>(std::llround(dollars * 1e6)); }
double to_dollars(Micros m) { return static_cast<double>(m) / 1e6; }

// "1,234,567.8": a non-negative number with thousands separators.
std::string grouped(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  std::string s = buf;
  const size_t dot = s.find('.');
  std::string whole = s.substr(0, dot), rest = dot == std::string::npos ? "" : s.substr(dot);
  std::string out;
  for (size_t i = 0; i < whole.size(); ++i) {
    if (i > 0 && (whole.size() - i) % 3 == 0) out += ',';
    out += whole[i];
  }
  return out + rest;
}

// "$1,234,567" (whole dollars) or "$2.66" (cents) with thousands separators.
std::string money(Micros m, int decimals) {
  return std::string(m < 0 ? "-$" : "$") + grouped(std::fabs(to_dollars(m)), decimals);
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// One cloud price tier per GPU-hour, with where the number comes from.
struct Tier {
  std::string name;  // on-demand, reserved-1y, reserved-3y, spot
  double per_gpu_hour = 0;
  std::string source;
};

// Owned-hardware defaults for one server of the model (reference §4.1/§4.2), when the reference has them.
struct OwnedDefaults {
  double server_capex = 0;
  int gpus_per_server = 8;
  double provisioned_kw = 0, average_draw_kw = 0;
  std::string source;
};

struct ModelDefaults {
  double on_demand = 0, spot = 0;  // 0: the reference has no figure
  std::string on_demand_source, spot_source;
  std::optional<OwnedDefaults> owned;
};

// The built-in price table: the cost reference's US figures per GPU-hour. Reserved tiers are derived
// from on-demand with the discounts of §1.3 (flags --reserved-1y-discount/--reserved-3y-discount).
const std::map<std::string, ModelDefaults>& builtin_models() {
  static const std::map<std::string, ModelDefaults> m = {
      {"H100-80GB-SXM",
       {6.88, 3.125, "AWS p5.48xlarge us-east-1 after the June 2025 cut, $55.04/h / 8 (reference §1.1 [B])",
        "AWS p5 spot ~$25/h midpoint / 8, before overhead (reference §3.1, §4.3; pre-cut snapshot [A])",
        OwnedDefaults{375'000, 8, 10.2, 8.0,
                      "8x H100 node all-in $375k incl. network share (reference §4.2; quotes $317k-$413k, §4.1)"}}},
      {"A100-80GB",
       {3.43, 0.855, "AWS p4de.24xlarge after the June 2025 cut, $27.45/h / 8 (reference §1.1 [B])",
        "AWS p4de spot $0.73-0.98 midpoint (reference §1.1 [A], pre-cut snapshot)", std::nullopt}},
      {"A100-40GB",
       {2.74, 1.03, "AWS p4d.24xlarge after the June 2025 cut, $21.96/h / 8 (reference §1.1 [B])",
        "AWS p4d spot $0.64-1.42 midpoint (reference §1.1 [A], pre-cut snapshot)", std::nullopt}},
  };
  return m;
}

struct PlanOptions {
  int64_t gpus = 0;
  std::string model = "H100-80GB-SXM";
  double utilisation = 0.8;
  std::optional<double> capex_per_gpu;
  int gpus_per_server = 8;
  int amortisation_months = 36;
  std::optional<double> power_kw, provisioned_kw;
  double pue = 1.3;
  double electricity = 0.08;
  double colocation = 196;
  double support = 2'500;
  double maintenance_pct = 0;
  int horizon_months = 60;
  double reserved_1y_discount = 0.35, reserved_3y_discount = 0.60;
  double spot_mtbi_hours = 1.5, checkpoint_cost_s = 30, restart_s = 300;
  std::string prices_file, history_file;
  std::string usage_file, policy;  // --from-usage FILE [--policy NAME]
  bool gpus_given = false, utilisation_given = false;
  bool json = false;
};

// A prices file (YAML or JSON) maps a model name (or alias) to tiers in USD per GPU-hour:
//   H100-80GB-SXM: {on-demand: 6.88, reserved-1y: 4.47, reserved-3y: 2.75, spot: 3.125, source: "..."}
// Tiers given replace the built-in ones; the others stay.
void apply_prices_file(const std::string& path, const std::string& model, std::vector<Tier>& tiers) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    fail("--prices " + path + ": cannot read the file", 1);
  } catch (const YAML::Exception& e) {
    fail("--prices " + path + ": not valid YAML/JSON: " + e.what());
  }
  if (!root.IsMap()) fail("--prices " + path + ": expected a map of model name to {on-demand, reserved-1y, reserved-3y, spot}");
  bool found = false;
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>();
    auto m = GpuCatalog::builtin().find(key);
    if (!(m.ok() ? (*m)->name == model : key == model)) continue;
    found = true;
    const YAML::Node& entry = kv.second;
    if (!entry.IsMap()) fail("--prices " + path + ": " + key + ": expected a map of tier to USD per GPU-hour");
    std::string source = "prices file " + path;
    if (entry["source"]) source += ": " + entry["source"].as<std::string>();
    for (const auto& t : entry) {
      const std::string tier = t.first.as<std::string>();
      if (tier == "source") continue;
      auto it = std::find_if(tiers.begin(), tiers.end(), [&](const Tier& x) { return x.name == tier; });
      if (it == tiers.end())
        fail("--prices " + path + ": " + key + "." + tier + ": unknown tier (use on-demand, reserved-1y, reserved-3y, spot)");
      double v = 0;
      try {
        v = t.second.as<double>();
      } catch (const YAML::Exception&) {
        fail("--prices " + path + ": " + key + "." + tier + ": expected a number (USD per GPU-hour)");
      }
      if (!(v > 0) || !std::isfinite(v)) fail("--prices " + path + ": " + key + "." + tier + ": must be > 0 USD per GPU-hour");
      it->per_gpu_hour = v;
      it->source = source;
    }
  }
  if (!found) fail("--prices " + path + ": no entry for " + model + " (keys are GPU model names, e.g. " + model + ")");
}

// A usage history: lines "month,gpu_hours" (a header line is skipped). Utilisation = mean GPU-hours
// per month / (gpus x 730).
double utilisation_from_history(const std::string& path, int64_t gpus) {
  std::ifstream f(path);
  if (!f) fail("--history " + path + ": cannot read the file", 1);
  std::string line;
  double total = 0;
  int months = 0, line_no = 0;
  while (std::getline(f, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const size_t comma = line.find(',');
    if (comma == std::string::npos) fail("--history " + path + ":" + std::to_string(line_no) + ": expected month,gpu_hours");
    const std::string value = line.substr(comma + 1);
    char* end = nullptr;
    const double hours = std::strtod(value.c_str(), &end);
    if (end == value.c_str() || *end != '\0') {
      if (months == 0 && line_no == 1) continue;  // header
      fail("--history " + path + ":" + std::to_string(line_no) + ": gpu_hours is not a number: " + value);
    }
    if (hours < 0 || !std::isfinite(hours)) fail("--history " + path + ":" + std::to_string(line_no) + ": gpu_hours must be >= 0");
    total += hours;
    ++months;
  }
  if (months == 0) fail("--history " + path + ": no months in the file");
  const double u = total / months / (static_cast<double>(gpus) * cost::kHoursPerMonth);
  if (u <= 0) fail("--history " + path + ": no GPU-hours used, utilisation would be 0");
  if (u > 1) fail("--history " + path + ": mean use " + fixed(total / months, 0) + " GPU-hours/month exceeds " +
                  std::to_string(gpus) + " GPUs x 730 h; pass the fleet size the history was measured on with --gpus");
  return u;
}

// What a recorded history says the cluster did: GPU-hours allocated over a period on a number of GPUs.
struct UsageHistory {
  std::string what;        // "sim run, policy tessera" or "usage report 2026-11-01 - 2026-12-01"
  double gpu_hours = 0;    // allocated over the period
  double period_hours = 0;
  int64_t capacity_gpus = 0;  // the cluster's GPUs (0: the file does not say)
};

// A number under `key` of object `j`, or an error naming the file and the key.
double number_at(const nlohmann::json& j, const std::string& key, const std::string& where) {
  if (!j.contains(key)) fail("--from-usage " + where + ": missing key \"" + key + "\"");
  if (!j[key].is_number()) fail("--from-usage " + where + ": \"" + key + "\" must be a number, got " + j[key].dump());
  const double v = j[key].get<double>();
  if (!std::isfinite(v) || v < 0) fail("--from-usage " + where + ": \"" + key + "\" must be >= 0, got " + j[key].dump());
  return v;
}

// (a) `tessera sim run --json`: an array of per-policy metrics. The allocation is the run's
// time-average (allocated / healthy capacity), so GPU-hours = allocation_pct x capacity x makespan.
UsageHistory history_from_sim(const std::string& path, const nlohmann::json& arr, const std::string& policy, int64_t gpus) {
  if (arr.empty()) fail("--from-usage " + path + ": an empty array; expected the metrics of `tessera sim run --json`, one object per policy");
  std::vector<std::string> names;
  for (size_t i = 0; i < arr.size(); ++i) {
    if (!arr[i].is_object() || !arr[i].contains("policy") || !arr[i]["policy"].is_string())
      fail("--from-usage " + path + ": element " + std::to_string(i) + " has no \"policy\" string; expected the metrics of `tessera sim run --json`");
    names.push_back(arr[i]["policy"].get<std::string>());
  }
  std::string list;
  for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
  size_t pick = 0;
  if (!policy.empty()) {
    auto it = std::find(names.begin(), names.end(), policy);
    if (it == names.end()) fail("--policy " + policy + ": not in " + path + " (it has: " + list + ")");
    pick = size_t(it - names.begin());
  } else if (names.size() > 1) {
    fail("--from-usage " + path + " holds " + std::to_string(names.size()) + " policies (" + list + "); pick one with --policy NAME");
  }
  const nlohmann::json& m = arr[pick];
  const std::string where = path + " (policy " + names[pick] + ")";
  const double alloc_pct = number_at(m, "allocation_pct", where);
  if (alloc_pct > 100) fail("--from-usage " + where + ": \"allocation_pct\" must be in [0, 100], got " + m["allocation_pct"].dump());
  const double makespan_s = number_at(m, "makespan_s", where);
  if (makespan_s <= 0) fail("--from-usage " + where + ": \"makespan_s\" must be > 0 (no job finished: no period to measure)");
  UsageHistory h;
  h.what = "sim run, policy " + names[pick];
  h.period_hours = makespan_s / 3600;
  // capacity_gpus: written by `sim run`; absent in older files, 0 when not known.
  const double cap = m.contains("capacity_gpus") ? number_at(m, "capacity_gpus", where) : 0;
  if (cap != std::floor(cap)) fail("--from-usage " + where + ": \"capacity_gpus\" must be a whole number, got " + m["capacity_gpus"].dump());
  h.capacity_gpus = static_cast<int64_t>(cap);
  if (h.capacity_gpus == 0 && gpus <= 0)
    fail("--from-usage " + where + ": missing key \"capacity_gpus\" (older `tessera sim run` output, or 0); pass the simulated cluster's GPU count with --gpus");
  h.gpu_hours = alloc_pct / 100 * static_cast<double>(h.capacity_gpus > 0 ? h.capacity_gpus : gpus) * h.period_hours;
  return h;
}

// (b) The controller's usage report (GET /api/v1/reports/usage, `tessera report usage --format json`):
// cluster.gpus and cluster.allocated_milli_gpu_seconds over [charge_period_start, charge_period_end).
UsageHistory history_from_report(const std::string& path, const nlohmann::json& j) {
  const nlohmann::json& c = j["cluster"];
  if (!c.is_object()) fail("--from-usage " + path + ": \"cluster\" must be an object (the usage report's cluster totals)");
  const std::string where = path + " (cluster)";
  const double gpus = number_at(c, "gpus", where);
  if (gpus < 1 || gpus != std::floor(gpus)) fail("--from-usage " + where + ": \"gpus\" must be a whole number > 0, got " + c["gpus"].dump());
  const double allocated = number_at(c, "allocated_milli_gpu_seconds", where);
  int64_t bounds[2] = {0, 0};
  const char* keys[2] = {"charge_period_start", "charge_period_end"};
  for (int i = 0; i < 2; ++i) {
    if (!j.contains(keys[i]) || !j[keys[i]].is_string())
      fail("--from-usage " + path + ": missing key \"" + std::string(keys[i]) + "\" (a UTC time, e.g. 2026-11-01T00:00:00Z)");
    auto t = server::accounting::parse_utc_time(j[keys[i]].get<std::string>(), keys[i]);
    if (!t.ok()) fail("--from-usage " + path + ": " + t.error().message);
    bounds[i] = *t;
  }
  if (bounds[1] <= bounds[0])
    fail("--from-usage " + path + ": the charge period is empty (charge_period_end " + j["charge_period_end"].get<std::string>() +
         " is not after charge_period_start " + j["charge_period_start"].get<std::string>() + ")");
  UsageHistory h;
  h.what = "usage report " + j["charge_period_start"].get<std::string>() + " - " + j["charge_period_end"].get<std::string>();
  h.gpu_hours = allocated / 1000 / 3600;
  h.period_hours = static_cast<double>(bounds[1] - bounds[0]) / 3600;
  h.capacity_gpus = static_cast<int64_t>(gpus);
  return h;
}

// Reads FILE and tells the two shapes apart.
UsageHistory read_usage_history(const std::string& path, const std::string& policy, int64_t gpus) {
  std::ifstream f(path);
  if (!f) fail("--from-usage " + path + ": cannot read the file", 1);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    fail("--from-usage " + path + ": not valid JSON: " + e.what());
  }
  if (j.is_array()) return history_from_sim(path, j, policy, gpus);
  if (j.is_object() && j.contains("cluster") && j.contains("charge_period_start")) {
    if (!policy.empty()) fail("--policy applies to the JSON of `tessera sim run`; " + path + " is a usage report");
    return history_from_report(path, j);
  }
  fail("--from-usage " + path + ": neither the JSON of `tessera sim run --json` (an array of per-policy metrics) nor "
       "the usage report of `tessera report usage --format json` (an object with cluster, charge_period_start, charge_period_end)");
}

void check_flags(const PlanOptions& o) {
  if (o.gpus <= 0)
    fail(o.gpus_given ? "--gpus must be > 0 (the GPUs to buy or rent)"
                      : "--gpus N is required (the GPUs to buy or rent), or --from-usage FILE to take the cluster's GPUs from a usage history");
  if (!(o.utilisation > 0 && o.utilisation <= 1))
    fail("--utilisation must be in (0, 1], the share of hours the GPUs are busy (e.g. 0.8 for 80%), got " +
         fixed(o.utilisation, 3));
  if (o.capex_per_gpu && !(*o.capex_per_gpu > 0)) fail("--capex-per-gpu must be > 0 USD");
  if (o.gpus_per_server <= 0) fail("--server-gpus must be > 0");
  if (o.amortisation_months <= 0) fail("--amortisation-months must be > 0");
  if (o.power_kw && !(*o.power_kw >= 0)) fail("--power-kw must be >= 0 (average draw of one server, kW)");
  if (o.provisioned_kw && !(*o.provisioned_kw >= 0)) fail("--provisioned-kw must be >= 0 (colocation basis, kW)");
  if (!(o.pue >= 1)) fail("--pue must be >= 1 (facility power / IT power, e.g. 1.3)");
  if (!(o.electricity >= 0)) fail("--electricity must be >= 0 USD per kWh");
  if (!(o.colocation >= 0)) fail("--colocation must be >= 0 USD per kW-month");
  if (!(o.support >= 0)) fail("--support must be >= 0 USD per server-month");
  if (!(o.maintenance_pct >= 0)) fail("--maintenance-pct must be >= 0 (% of capex per year)");
  if (o.horizon_months <= 0) fail("--horizon-months must be > 0");
  if (!(o.reserved_1y_discount >= 0 && o.reserved_1y_discount < 1)) fail("--reserved-1y-discount must be in [0, 1)");
  if (!(o.reserved_3y_discount >= 0 && o.reserved_3y_discount < 1)) fail("--reserved-3y-discount must be in [0, 1)");
  if (!(o.spot_mtbi_hours > 0)) fail("--spot-mtbi-hours must be > 0");
  if (!(o.checkpoint_cost_s > 0)) fail("--checkpoint-cost-s must be > 0");
  if (!(o.restart_s >= 0)) fail("--restart-s must be >= 0");
}

template <class T>
T must(Result<T> r, const std::string& what) {
  if (!r.ok()) fail(what + ": " + r.error().message);
  return std::move(r).value();
}

void run_plan(PlanOptions o) {
  // A usage history sets the GPUs (unless --gpus is given) and the utilisation.
  std::optional<UsageHistory> usage;
  if (!o.policy.empty() && o.usage_file.empty()) fail("--policy NAME picks a policy of --from-usage FILE; pass --from-usage too");
  if (!o.usage_file.empty()) {
    if (o.utilisation_given) fail("--utilisation and --from-usage both set the utilisation; pass one of them");
    if (!o.history_file.empty()) fail("--history and --from-usage both set the utilisation; pass one of them");
    if (o.gpus_given && o.gpus <= 0) fail("--gpus must be > 0 (the GPUs to buy or rent)");
    usage = read_usage_history(o.usage_file, o.policy, o.gpus_given ? o.gpus : 0);
    if (!o.gpus_given) o.gpus = usage->capacity_gpus;
    const double u = usage->gpu_hours / (static_cast<double>(o.gpus) * usage->period_hours);
    if (!(u > 0)) fail("--from-usage " + o.usage_file + ": no GPU-hours used over the period, utilisation would be 0");
    if (u > 1 + 1e-9)
      fail("--from-usage " + o.usage_file + ": " + fixed(usage->gpu_hours, 0) + " GPU-h over " + fixed(usage->period_hours, 1) +
           " h exceeds " + std::to_string(o.gpus) + " GPUs; --gpus must be at least the GPUs the history ran on");
    o.utilisation = std::min(u, 1.0);
  }
  check_flags(o);
  // The spelling "H100-80GB" is not a catalog alias (SXM or PCIe?); the prices are SXM's (p5).
  std::string model_note;
  if (o.model == "H100-80GB" || o.model == "h100-80gb") {
    o.model = "H100-80GB-SXM";
    model_note = " (H100-80GB read as the SXM part)";
  }
  auto found = GpuCatalog::builtin().find(o.model);
  if (!found.ok()) fail("--model: " + found.error().message);
  const std::string model = (*found)->name;

  std::string utilisation_source = "--utilisation";
  std::string gpus_source = "--gpus";
  if (!o.history_file.empty()) {
    o.utilisation = utilisation_from_history(o.history_file, o.gpus);
    utilisation_source = "mean of --history " + o.history_file;
  }
  if (usage) {
    const int64_t measured_on = usage->capacity_gpus > 0 ? usage->capacity_gpus : o.gpus;
    utilisation_source = "from usage history " + o.usage_file + " (" + usage->what + "): " +
                         grouped(usage->gpu_hours, usage->gpu_hours < 100 ? 2 : 0) + " GPU-h over " +
                         (usage->period_hours >= 24 ? fixed(usage->period_hours / 24, 1) + " days"
                                                    : fixed(usage->period_hours, 2) + " hours") +
                         " on " + std::to_string(measured_on) + " GPUs";
    if (o.gpus != measured_on) utilisation_source += ", divided by " + std::to_string(o.gpus) + " GPUs (--gpus)";
    gpus_source = o.gpus_given ? "--gpus (overrides the " + std::to_string(measured_on) + " GPUs of " + o.usage_file + ")"
                               : "the cluster's GPUs in usage history " + o.usage_file;
  }

  const auto defaults_it = builtin_models().find(model);
  const ModelDefaults* defaults = defaults_it == builtin_models().end() ? nullptr : &defaults_it->second;
  const std::optional<OwnedDefaults> owned_defaults = defaults ? defaults->owned : std::nullopt;

  // Cloud tiers: built-in, then the prices file.
  std::vector<Tier> tiers = {{"on-demand", 0, ""}, {"reserved-1y", 0, ""}, {"reserved-3y", 0, ""}, {"spot", 0, ""}};
  if (defaults) {
    tiers[0] = {"on-demand", defaults->on_demand, defaults->on_demand_source};
    tiers[1] = {"reserved-1y", defaults->on_demand * (1 - o.reserved_1y_discount),
                "on-demand - " + fixed(100 * o.reserved_1y_discount, 0) + "% (reference §1.3: 1-yr 30-40% off)"};
    tiers[2] = {"reserved-3y", defaults->on_demand * (1 - o.reserved_3y_discount),
                "on-demand - " + fixed(100 * o.reserved_3y_discount, 0) + "% (reference §1.3: 3-yr 55-65% off)"};
    tiers[3] = {"spot", defaults->spot, defaults->spot_source};
  }
  if (!o.prices_file.empty()) apply_prices_file(o.prices_file, model, tiers);
  std::erase_if(tiers, [](const Tier& t) { return t.per_gpu_hour <= 0; });
  if (tiers.empty())
    fail("no cloud prices for " + model + " in the built-in table (it has H100-80GB-SXM, A100-80GB, A100-40GB); "
         "pass --prices FILE with {" + model + ": {on-demand: USD, reserved-1y: USD, reserved-3y: USD, spot: USD}}");

  // Owned hardware: the flags, else the reference's defaults for the model.
  if (!o.capex_per_gpu && !owned_defaults)
    fail("--capex-per-gpu is required for " + model + ": the reference has an owned-hardware price only for "
         "H100-80GB-SXM (pass the per-GPU share of a server quote, network included, in USD)");
  if (!o.power_kw && !owned_defaults)
    fail("--power-kw is required for " + model + ": the reference has server power only for H100-80GB-SXM "
         "(pass the average draw of one " + std::to_string(o.gpus_per_server) + "-GPU server under load, kW)");
  cost::OwnedCostInputs in;
  in.gpus_per_server = o.gpus_per_server;
  const double server_capex = o.capex_per_gpu ? *o.capex_per_gpu * o.gpus_per_server
                                              : owned_defaults->server_capex * o.gpus_per_server / owned_defaults->gpus_per_server;
  in.server_capex = to_micros(server_capex);
  in.amortisation_months = o.amortisation_months;
  in.average_draw_kw = o.power_kw ? *o.power_kw : owned_defaults->average_draw_kw;
  in.provisioned_kw = o.provisioned_kw ? *o.provisioned_kw
                      : owned_defaults && !o.power_kw ? owned_defaults->provisioned_kw
                                                      : in.average_draw_kw;
  in.pue = o.pue;
  in.electricity_per_kwh = to_micros(o.electricity);
  in.colocation_per_kw_month = to_micros(o.colocation);
  in.support_per_server_month = to_micros(o.support);
  in.maintenance_pct_per_year = o.maintenance_pct;
  in.utilisation = o.utilisation;
  const cost::OwnedCost owned = must(cost::owned_cost(in), "owned cost");
  const int64_t servers = (o.gpus + o.gpus_per_server - 1) / o.gpus_per_server;
  const Micros fleet_capex = in.server_capex * servers;
  const Micros fleet_opex = owned.opex_per_month() * servers;

  // Spot: the price per useful hour after checkpoints, rework and restarts at Young's interval.
  const double mtbi_s = o.spot_mtbi_hours * 3600;
  const int64_t interval_s = must(cost::checkpoint_interval_young(o.checkpoint_cost_s, mtbi_s), "spot checkpoint interval");
  const int64_t daly_s = must(cost::checkpoint_interval_daly(o.checkpoint_cost_s, mtbi_s), "spot checkpoint interval");
  const cost::LostTime lost =
      must(cost::lost_time_fraction(static_cast<double>(interval_s), o.checkpoint_cost_s, mtbi_s, o.restart_s), "spot lost time");

  // Assumptions: name, value, source.
  std::vector<std::array<std::string, 3>> assumptions;
  auto assume = [&](std::string name, std::string value, std::string source) {
    assumptions.push_back({std::move(name), std::move(value), std::move(source)});
  };
  const bool def_capex = !o.capex_per_gpu, def_power = !o.power_kw;
  assume("GPUs", std::to_string(o.gpus) + " x " + model + " (" + std::to_string(servers) + (servers == 1 ? " server of " : " servers of ") +
                     std::to_string(o.gpus_per_server) + ")", gpus_source + ", --model" + model_note + ", --server-gpus");
  assume("utilisation", fixed(100 * o.utilisation, 1) + "%", utilisation_source);
  assume("capex per server", money(in.server_capex, 0),
         def_capex ? "default: " + owned_defaults->source : "--capex-per-gpu x --server-gpus");
  assume("amortisation", std::to_string(o.amortisation_months) + " months",
         o.amortisation_months == 36 ? "default 36 (reference §4.1: accounting lives 5-6 yrs, economic 2-3)" : "--amortisation-months");
  assume("power (average draw)", fixed(in.average_draw_kw, 2) + " kW/server",
         def_power ? "default: ~7-8 kW per 8x H100 node under training (reference §4.1)" : "--power-kw");
  assume("colocation basis", fixed(in.provisioned_kw, 2) + " kW/server",
         o.provisioned_kw ? "--provisioned-kw" : def_power ? "default: DGX H100 10.2 kW max (reference §4.1)" : "= --power-kw");
  assume("PUE", fixed(o.pue, 2), o.pue == 1.3 ? "default (reference §4.2)" : "--pue");
  assume("electricity", "$" + fixed(o.electricity, 3) + "/kWh", o.electricity == 0.08 ? "default (reference §4.2)" : "--electricity");
  assume("colocation", "$" + fixed(o.colocation, 0) + "/kW-month",
         o.colocation == 196 ? "default: NA primary markets H2 2025 (reference §4.1)" : "--colocation");
  assume("support and ops", money(in.support_per_server_month, 0) + "/server-month",
         o.support == 2500 ? "default (reference §4.2)" : "--support");
  assume("maintenance", fixed(o.maintenance_pct, 1) + "% of capex/year", o.maintenance_pct == 0 ? "default 0 (in support)" : "--maintenance-pct");
  assume("spot interruptions", "every " + fixed(o.spot_mtbi_hours, 2) + " h, save " + fixed(o.checkpoint_cost_s, 0) +
                                   " s, restart " + fixed(o.restart_s, 0) + " s",
         "defaults: spot mean lifetime 1.5 h, async save 30 s, restart 5 min (reference §2.2, §3.1)");
  assume("horizon", std::to_string(o.horizon_months) + " months", "--horizon-months (capex once: no refresh or resale value)");
  for (const Tier& t : tiers) assume(t.name + " price", "$" + fixed(t.per_gpu_hour, 3) + "/GPU-h", t.source);

  struct Row {
    Tier tier;
    double effective = 0;
    double billed = 0;
    Micros cloud_month = 0;
    cost::BreakEven be;
    Micros cloud_total = 0, owned_total = 0;
  };
  std::vector<Row> rows;
  for (const Tier& t : tiers) {
    Row r;
    r.tier = t;
    Micros price = to_micros(t.per_gpu_hour);
    if (t.name == "spot") price = must(cost::effective_spot_price(price, lost.total()), "spot effective price");
    r.effective = to_dollars(price);
    // Commitments are billed whether used or not (reference §4.3); on-demand and spot only when used.
    r.billed = t.name.rfind("reserved", 0) == 0 ? 1.0 : o.utilisation;
    r.cloud_month = must(cost::cloud_cost_per_month(price, o.gpus, r.billed), t.name);
    r.be = must(cost::break_even(fleet_capex, fleet_opex, r.cloud_month), t.name + " break-even");
    r.cloud_total = r.cloud_month * o.horizon_months;
    r.owned_total = fleet_capex + fleet_opex * o.horizon_months;
    rows.push_back(r);
  }

  if (o.json) {
    nlohmann::json j;
    j["model"] = model;
    j["gpus"] = o.gpus;
    j["servers"] = servers;
    j["utilisation"] = o.utilisation;
    j["horizon_months"] = o.horizon_months;
    if (usage)
      j["usage_history"] = {{"file", o.usage_file}, {"source", usage->what}, {"gpu_hours", usage->gpu_hours},
                            {"period_hours", usage->period_hours}, {"capacity_gpus", usage->capacity_gpus}};
    for (const auto& a : assumptions) j["assumptions"].push_back({{"name", a[0]}, {"value", a[1]}, {"source", a[2]}});
    j["owned"] = {{"capex_per_server_usd", to_dollars(in.server_capex)},
                  {"fleet_capex_usd", to_dollars(fleet_capex)},
                  {"fleet_opex_per_month_usd", to_dollars(fleet_opex)},
                  {"per_gpu_hour_usd",
                   {{"capex", to_dollars(owned.capex_per_gpu_hour)},
                    {"power", to_dollars(owned.power_per_gpu_hour)},
                    {"colocation", to_dollars(owned.colocation_per_gpu_hour)},
                    {"support", to_dollars(owned.support_per_gpu_hour)},
                    {"maintenance", to_dollars(owned.maintenance_per_gpu_hour)},
                    {"total", to_dollars(owned.total_per_gpu_hour)}}}};
    j["spot_model"] = {{"young_interval_s", interval_s}, {"daly_interval_s", daly_s},
                       {"lost_fraction", lost.total()}, {"checkpoint", lost.checkpoint},
                       {"rework", lost.rework}, {"restart", lost.restart}};
    for (const Row& r : rows) {
      nlohmann::json t = {{"tier", r.tier.name},
                          {"list_usd_per_gpu_hour", r.tier.per_gpu_hour},
                          {"effective_usd_per_gpu_hour", r.effective},
                          {"billed_fraction", r.billed},
                          {"cloud_per_month_usd", to_dollars(r.cloud_month)},
                          {"break_even_months", r.be.never ? nlohmann::json("never") : nlohmann::json(r.be.months)},
                          {"cloud_total_usd", to_dollars(r.cloud_total)},
                          {"owned_total_usd", to_dollars(r.owned_total)},
                          {"source", r.tier.source}};
      j["tiers"].push_back(t);
    }
    std::cout << j.dump(2) << "\n";
    return;
  }

  std::cout << "Buy vs rent: " << o.gpus << " x " << model << " at " << fixed(100 * o.utilisation, 1)
            << "% utilisation, " << o.horizon_months << "-month horizon\n\nAssumptions\n";
  Table a{{"", "value", "source"}, {}, {}};
  for (const auto& x : assumptions) a.rows.push_back({x[0], x[1], x[2]});
  for (const std::string& line : render_table_lines(a)) std::cout << "  " << line << "\n";

  std::cout << "\nOwned cost per useful GPU-hour (per server-month in brackets)\n";
  Table b{{"", "$/GPU-h", "$/server-month"}, {}, {false, true, true}};
  b.rows.push_back({"capex", money(owned.capex_per_gpu_hour, 3), money(owned.capex_per_month, 0)});
  b.rows.push_back({"power", money(owned.power_per_gpu_hour, 3), money(owned.power_per_month, 0)});
  b.rows.push_back({"colocation", money(owned.colocation_per_gpu_hour, 3), money(owned.colocation_per_month, 0)});
  b.rows.push_back({"support", money(owned.support_per_gpu_hour, 3), money(owned.support_per_month, 0)});
  b.rows.push_back({"maintenance", money(owned.maintenance_per_gpu_hour, 3), money(owned.maintenance_per_month, 0)});
  b.rows.push_back({"total", money(owned.total_per_gpu_hour, 3), money(owned.total_per_month(), 0)});
  for (const std::string& line : render_table_lines(b)) std::cout << "  " << line << "\n";
  std::cout << "  fleet: capex " << money(fleet_capex, 0) << ", opex " << money(fleet_opex, 0) << "/month\n";

  std::cout << "\nSpot losses: checkpoint every " << interval_s << " s (Young; Daly " << daly_s << " s), " << fixed(100 * lost.total(), 1) << "% of time lost ("
            << fixed(100 * lost.checkpoint, 1) << "% saving, " << fixed(100 * lost.rework, 1) << "% rework, "
            << fixed(100 * lost.restart, 1) << "% restarts)\n";

  std::cout << "\nCloud tiers against owning\n";
  Table c{{"tier", "$/GPU-h", "billed", "cloud/month", "break-even", "cloud " + std::to_string(o.horizon_months) + " mo",
           "owned " + std::to_string(o.horizon_months) + " mo", "cheaper"},
          {},
          {false, true, true, true, true, true, true, false}};
  for (const Row& r : rows) {
    std::string be = r.be.never ? "never" : fixed(r.be.months, 1) + " mo";
    if (!r.be.never && r.be.months > o.horizon_months) be += " (past horizon)";
    std::string price = "$" + fixed(r.effective, 2);
    if (r.tier.name == "spot") price += " (list $" + fixed(r.tier.per_gpu_hour, 3) + ")";
    const Micros diff = r.cloud_total - r.owned_total;
    c.rows.push_back({r.tier.name, price, fixed(100 * r.billed, 0) + "%", money(r.cloud_month, 0), be,
                      money(r.cloud_total, 0), money(r.owned_total, 0),
                      diff > 0 ? "own by " + money(diff, 0) : "rent by " + money(-diff, 0)});
  }
  for (const std::string& line : render_table_lines(c)) std::cout << "  " << line << "\n";
  std::cout << "\nBreak-even = fleet capex / (cloud per month - owned opex per month); reserved tiers are billed "
               "for every hour (used or not), on-demand and spot for the used share. Formulas: docs/cost.md.\n";
}

}  // namespace

void register_plan(CLI::App& app) {
  auto* plan = app.add_subcommand("plan", "Capacity planning");
  plan->require_subcommand(1);
  auto* bvr = plan->add_subcommand(
      "buy-vs-rent",
      "Owned cost per GPU-hour and months to break even against on-demand, 1-/3-year reserved and spot.\n"
      "Defaults are the cost reference's figures (docs/cost.md cites each): an 8x H100 node at $375k, 8 kW\n"
      "average draw, 10.2 kW colocation basis at $196/kW-month, PUE 1.3, $0.08/kWh, $2.5k support a month;\n"
      "built-in cloud prices for H100-80GB-SXM, A100-80GB and A100-40GB (other models: --prices FILE,\n"
      "--capex-per-gpu and --power-kw). Every assumption used is printed with its source.");
  auto o = std::make_shared<PlanOptions>();
  auto capex = std::make_shared<double>(0), power = std::make_shared<double>(0), provisioned = std::make_shared<double>(0);
  auto* gpus_opt = bvr->add_option("--gpus", o->gpus, "GPUs to buy or rent (with --from-usage: overrides the cluster's)");
  bvr->add_option("--model", o->model, "GPU model (catalog name or alias)")->capture_default_str();
  auto* util_opt = bvr->add_option("--utilisation", o->utilisation, "Share of hours the GPUs are busy, in (0, 1]")->capture_default_str();
  auto* capex_opt = bvr->add_option("--capex-per-gpu", *capex, "USD per GPU, all-in (default: H100 $375k per 8-GPU node)");
  bvr->add_option("--server-gpus", o->gpus_per_server, "GPUs per server")->capture_default_str();
  bvr->add_option("--amortisation-months", o->amortisation_months, "Months over which capex is spread")->capture_default_str();
  auto* power_opt = bvr->add_option("--power-kw", *power, "Average draw of one server under load, kW (default H100: 8)");
  auto* prov_opt = bvr->add_option("--provisioned-kw", *provisioned,
                                   "Power colocation bills per server, kW (default H100: 10.2; else = --power-kw)");
  bvr->add_option("--pue", o->pue, "Power usage effectiveness")->capture_default_str();
  bvr->add_option("--electricity", o->electricity, "USD per kWh")->capture_default_str();
  bvr->add_option("--colocation", o->colocation, "USD per kW-month")->capture_default_str();
  bvr->add_option("--support", o->support, "Support and operations, USD per server-month")->capture_default_str();
  bvr->add_option("--maintenance-pct", o->maintenance_pct, "Maintenance, % of capex per year")->capture_default_str();
  bvr->add_option("--horizon-months", o->horizon_months, "Months over which totals are compared")->capture_default_str();
  bvr->add_option("--reserved-1y-discount", o->reserved_1y_discount, "1-year commitment discount off on-demand")->capture_default_str();
  bvr->add_option("--reserved-3y-discount", o->reserved_3y_discount, "3-year commitment discount off on-demand")->capture_default_str();
  bvr->add_option("--spot-mtbi-hours", o->spot_mtbi_hours, "Mean time between spot interruptions, hours")->capture_default_str();
  bvr->add_option("--checkpoint-cost-s", o->checkpoint_cost_s, "Checkpoint stall, seconds")->capture_default_str();
  bvr->add_option("--restart-s", o->restart_s, "Restart after an interruption, seconds")->capture_default_str();
  bvr->add_option("--prices", o->prices_file, "YAML/JSON: {MODEL: {on-demand: USD, reserved-1y: USD, reserved-3y: USD, spot: USD, source: TEXT}}");
  bvr->add_option("--history", o->history_file, "CSV of month,gpu_hours; utilisation = mean / (gpus x 730)");
  bvr->add_option("--from-usage", o->usage_file,
                  "JSON of `tessera sim run --json` or of `tessera report usage --format json`: GPUs and utilisation "
                  "= GPU-hours used / (GPUs x hours) from what the cluster did");
  bvr->add_option("--policy", o->policy, "With --from-usage on a sim run's JSON of several policies: the one to use");
  bvr->add_flag("--json", o->json, "Write the plan as JSON");
  bvr->callback([o, capex, power, provisioned, capex_opt, power_opt, prov_opt, gpus_opt, util_opt] {
    PlanOptions opts = *o;
    opts.gpus_given = gpus_opt->count() > 0;
    opts.utilisation_given = util_opt->count() > 0;
    if (capex_opt->count()) opts.capex_per_gpu = *capex;
    if (power_opt->count()) opts.power_kw = *power;
    if (prov_opt->count()) opts.provisioned_kw = *provisioned;
    run_plan(opts);
  });
}

}  // namespace tessera::cli
