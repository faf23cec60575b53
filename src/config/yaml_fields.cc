// The shared YAML field readers (yaml_fields.h): scheduler config, priority classes, the cluster
// sections, and the YAML-to-JSON conversion the job spec parser uses. Stateless; thread-safe.
#include "config/yaml_fields.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>

#include "config/gpu_models.h"
#include "core/cost.h"

namespace tessera::config {
namespace {

// Bounds that keep the core's sums and products far from int64 overflow.
constexpr int64_t kMaxAmount = int64_t(1) << 50;    // milli-GPU per class (about 10^12 GPUs)
constexpr int64_t kMaxSeconds = int64_t(1) << 40;   // durations (about 34,000 years)
constexpr int64_t kMaxWeight = 1000000;
constexpr int64_t kMaxNodeCpu = int64_t(1) << 40;   // milli-CPU per node
constexpr int64_t kMaxNodeMemory = int64_t(1) << 40;  // MiB per node

}  // namespace

Status get_amounts(const YAML::Node& n, const char* key, const std::string& at, ClassAmounts& out) {
  const YAML::Node v = n[key];
  if (!v) return {};
  if (!v.IsMap()) return invalid_argument(at + "." + key + ": must be a map of GPU class to milli-GPU");
  for (const auto& kv : v) {
    try {
      const std::string cls = kv.first.as<std::string>();
      const int64_t v = kv.second.as<int64_t>();
      if (v > kMaxAmount)
        return invalid_argument(at + "." + key + "." + cls + ": at most " + std::to_string(kMaxAmount) + " milli-GPU");
      out[cls] = v;
    } catch (const YAML::Exception&) {
      return invalid_argument(at + "." + key + ": values must be integers (milli-GPU)");
    }
  }
  return {};
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

Status known_keys(const YAML::Node& n, const std::string& at, const std::vector<std::string>& keys) {
  if (!n.IsMap()) return invalid_argument(at + ": must be a map");
  for (const auto& kv : n) {
    if (!kv.first.IsScalar()) return invalid_argument(at + ": keys must be plain names");
    const std::string k = kv.first.Scalar();
    if (std::find(keys.begin(), keys.end(), k) == keys.end())
      return invalid_argument(at + "." + k + ": unknown field; expected one of " + join(keys));
  }
  return {};
}

Status non_negative(const YAML::Node& n, const char* key, const std::string& at, int64_t& out) {
  if (!n[key]) return {};
  TESSERA_TRY(get(n, key, at, out));
  if (out < 0) return invalid_argument(at + "." + key + ": must be >= 0, got " + std::to_string(out));
  if (out > kMaxSeconds) return invalid_argument(at + "." + key + ": at most " + std::to_string(kMaxSeconds));
  return {};
}

const std::vector<std::pair<std::string, JobOrder>>& order_names() {
  static const std::vector<std::pair<std::string, JobOrder>> v = {{"fair-share", JobOrder::kFairShare},
                                                                  {"fifo", JobOrder::kFifo},
                                                                  {"multifactor", JobOrder::kMultifactor},
                                                                  {"least-attained", JobOrder::kLeastAttained},
                                                                  {"drf", JobOrder::kDrf}};
  return v;
}

Status parse_config(const YAML::Node& c, SchedulerConfig& cfg) {
  const std::string at = "config";
  TESSERA_TRY(known_keys(c, at, {"preset", "order", "strict_order", "preemption", "reclaim", "backfill", "default_runtime",
                                 "dynamic_mig", "mig", "usage_half_life", "reclaim_grace", "preemption_protection",
                                 "max_preemptions_per_cycle", "topology_wait", "in_queue_las", "defragment",
                                 "max_moves_per_cycle", "reservation_hold", "reservation_slip", "gather_spread",
                                 "victims_least_attained", "max_victim_searches_per_cycle", "max_scored_nodes"}));
  if (c["preset"]) {
    std::string name;
    TESSERA_TRY(get(c, "preset", at, name));
    auto p = scheduler_preset(name);
    if (!p.ok())
      return invalid_argument(at + ".preset: unknown \"" + name + "\"; expected one of " + join(scheduler_preset_names()));
    cfg = *p;
  }
  if (c["order"]) {
    std::string name;
    TESSERA_TRY(get(c, "order", at, name));
    std::vector<std::string> known;
    bool found = false;
    for (const auto& [n, o] : order_names()) {
      known.push_back(n);
      if (n == name) {
        cfg.order = o;
        found = true;
      }
    }
    if (!found) return invalid_argument(at + ".order: unknown \"" + name + "\"; expected one of " + join(known));
  }
  if (c["reservation_hold"]) {
    std::string name;
    TESSERA_TRY(get(c, "reservation_hold", at, name));
    bool found = false;
    for (ReservationHold h : {ReservationHold::kFromMade, ReservationHold::kAtDue, ReservationHold::kOff})
      if (name == reservation_hold_name(h)) cfg.reservation_hold = h, found = true;
    if (!found) return invalid_argument(at + ".reservation_hold: unknown \"" + name + "\"; expected one of made, due, off");
  }
  TESSERA_TRY(non_negative(c, "reservation_slip", at, cfg.reservation_slip));
  TESSERA_TRY(get(c, "strict_order", at, cfg.strict_order));
  TESSERA_TRY(get(c, "preemption", at, cfg.preemption));
  TESSERA_TRY(get(c, "reclaim", at, cfg.reclaim));
  TESSERA_TRY(get(c, "backfill", at, cfg.backfill));
  TESSERA_TRY(get(c, "dynamic_mig", at, cfg.dynamic_mig));
  TESSERA_TRY(non_negative(c, "default_runtime", at, cfg.default_runtime));
  TESSERA_TRY(non_negative(c, "reclaim_grace", at, cfg.reclaim_grace));
  TESSERA_TRY(non_negative(c, "preemption_protection", at, cfg.preemption_protection));
  TESSERA_TRY(non_negative(c, "topology_wait", at, cfg.topology_wait));
  TESSERA_TRY(get(c, "in_queue_las", at, cfg.in_queue_las));
  TESSERA_TRY(get(c, "defragment", at, cfg.defragment));
  TESSERA_TRY(get(c, "gather_spread", at, cfg.gather_spread));
  TESSERA_TRY(get(c, "victims_least_attained", at, cfg.victims_least_attained));
  if (c["max_moves_per_cycle"]) {
    TESSERA_TRY(get(c, "max_moves_per_cycle", at, cfg.max_moves_per_cycle));
    if (cfg.max_moves_per_cycle < 0) return invalid_argument(at + ".max_moves_per_cycle: must be >= 0");
  }
  if (c["usage_half_life"]) {
    TESSERA_TRY(get(c, "usage_half_life", at, cfg.usage_half_life));
    if (cfg.usage_half_life <= 0) return invalid_argument(at + ".usage_half_life: must be > 0 seconds");
    if (cfg.usage_half_life > kMaxSeconds) return invalid_argument(at + ".usage_half_life: at most " + std::to_string(kMaxSeconds));
  }
  if (c["max_preemptions_per_cycle"]) {
    TESSERA_TRY(get(c, "max_preemptions_per_cycle", at, cfg.max_preemptions_per_cycle));
    if (cfg.max_preemptions_per_cycle < 0) return invalid_argument(at + ".max_preemptions_per_cycle: must be >= 0");
  }
  if (c["max_victim_searches_per_cycle"]) {
    TESSERA_TRY(get(c, "max_victim_searches_per_cycle", at, cfg.max_victim_searches_per_cycle));
    if (cfg.max_victim_searches_per_cycle < 0) return invalid_argument(at + ".max_victim_searches_per_cycle: must be >= 0");
  }
  if (c["max_scored_nodes"]) {  // 0: every node that fits is scored
    TESSERA_TRY(get(c, "max_scored_nodes", at, cfg.max_scored_nodes));
    if (cfg.max_scored_nodes < 0) return invalid_argument(at + ".max_scored_nodes: must be >= 0 (0: every node)");
  }
  if (const YAML::Node m = c["mig"]) {
    const std::string mat = at + ".mig";
    TESSERA_TRY(known_keys(m, mat, {"reconfigure_cost", "min_layout_age", "max_gpus_per_cycle"}));
    TESSERA_TRY(non_negative(m, "reconfigure_cost", mat, cfg.mig.reconfigure_cost));
    TESSERA_TRY(non_negative(m, "min_layout_age", mat, cfg.mig.min_layout_age));
    if (m["max_gpus_per_cycle"]) {
      TESSERA_TRY(get(m, "max_gpus_per_cycle", mat, cfg.mig.max_gpus_per_cycle));
      if (cfg.mig.max_gpus_per_cycle < 0) return invalid_argument(mat + ".max_gpus_per_cycle: must be >= 0");
    }
  }
  return {};
}

Status parse_priority_classes(const YAML::Node& list, std::vector<PriorityClass>& out,
                              std::map<std::string, std::vector<std::string>>& roles) {
  if (!list.IsSequence() || list.size() == 0)
    return invalid_argument("priority_classes: must be a non-empty list of {name, value, preemptible, can_preempt, min_runtime, roles}");
  out.clear();
  roles.clear();
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node n = list[i];
    const std::string at = "priority_classes[" + std::to_string(i) + "]";
    TESSERA_TRY(known_keys(n, at, {"name", "value", "preemptible", "can_preempt", "min_runtime", "roles"}));
    PriorityClass pc;
    TESSERA_TRY(get(n, "name", at, pc.name, true));
    if (pc.name.empty()) return invalid_argument(at + ".name: must not be empty");
    for (const PriorityClass& o : out)
      if (o.name == pc.name) return invalid_argument(at + ".name: \"" + pc.name + "\" used twice");
    TESSERA_TRY(get(n, "value", at, pc.value, true));
    TESSERA_TRY(get(n, "preemptible", at, pc.preemptible));
    TESSERA_TRY(get(n, "can_preempt", at, pc.can_preempt));
    TESSERA_TRY(non_negative(n, "min_runtime", at, pc.min_runtime));
    if (n["roles"]) {  // who besides admins may use the class (docs/server.md, "Priority classes")
      std::vector<std::string> rs;
      TESSERA_TRY(get(n, "roles", at, rs));
      for (size_t k = 0; k < rs.size(); ++k)
        if (rs[k] != "team-lead" && rs[k] != "member" && rs[k] != "admin")
          return invalid_argument(at + ".roles[" + std::to_string(k) + "]: unknown role \"" + rs[k] +
                                  "\"; expected team-lead or member (admins may use every class)");
      roles[pc.name] = std::move(rs);
    }
    out.push_back(std::move(pc));
  }
  return {};
}

namespace {

constexpr int kMaxYamlDepth = 64;
constexpr size_t kMaxYamlNodes = 200000;  // aliases can repeat subtrees: bound the expansion
constexpr int64_t kMaxGroupCount = 100000;
constexpr size_t kMaxNodes = 1000000;

using json = nlohmann::json;

std::string sub(const std::string& at, const std::string& key) { return at.empty() ? key : at + "." + key; }

// A plain YAML scalar typed as the YAML 1.2 core schema says; quoted scalars stay strings.
json yaml_scalar(const YAML::Node& n) {
  const std::string& s = n.Scalar();
  if (n.Tag() != "?") return s;  // "!" (quoted) or an explicit tag such as !!str
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  const bool digits = i < s.size() && std::all_of(s.begin() + long(i), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (digits) {
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (errno == 0 && end == s.c_str() + s.size()) return int64_t(v);
    if (s[0] != '-') {
      errno = 0;
      const unsigned long long u = std::strtoull(s.c_str(), &end, 10);
      if (errno == 0 && end == s.c_str() + s.size()) return uint64_t(u);
    }
    return json(json::value_t::number_float);  // beyond every integer type: a number integer fields reject
  }
  // A number with a fraction or exponent ("1.5", "1e9"): a non-integer number, rejected by type.
  bool has_digit = false, other = false;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c >= '0' && c <= '9') has_digit = true;
    else if (c != '.' && c != 'e' && c != 'E' && c != '-' && c != '+') other = true;
  }
  if (has_digit && !other) return json(json::value_t::number_float);
  return s;
}

}  // namespace

Status yaml_precheck(std::string_view text, size_t max_items) {
  int flow = 0, max_flow = 0, dashes = 0;
  size_t items = 0;
  bool line_start = true;    // only "- " and spaces so far on this line
  bool scalar_start = true;  // the last non-blank character may be followed by a scalar
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const char next = i + 1 < text.size() ? text[i + 1] : '\n';
    if (c == '\n') {
      line_start = scalar_start = true, dashes = 0;
      continue;
    }
    if (c == '#' && (i == 0 || text[i - 1] == ' ' || text[i - 1] == '\t' || text[i - 1] == '\n')) {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
      continue;
    }
    if ((c == '"' || c == '\'') && scalar_start) {  // a quoted scalar: skip to its end ('' and \" escape the quote)
      for (++i; i < text.size(); ++i) {
        if (c == '"' && text[i] == '\\') ++i;
        else if (text[i] == c && !(c == '\'' && i + 1 < text.size() && text[i + 1] == '\'' && ++i)) break;
      }
      line_start = scalar_start = false;
      continue;
    }
    if (c == '[' || c == '{') max_flow = std::max(max_flow, ++flow), ++items;
    else if (c == ']' || c == '}') flow = std::max(0, flow - 1);
    else if (c == ',') ++items;
    else if (c == ':' && (next == ' ' || next == '\n')) ++items;
    else if (c == '-' && (next == ' ' || next == '\n') && line_start) ++items, ++dashes;
    if (c != ' ' && c != '-' && c != '\t') line_start = false;
    // A quote opens a quoted scalar only where a scalar may start (elsewhere it is a plain character).
    if (c != ' ' && c != '\t') scalar_start = c == ':' || c == '-' || c == '[' || c == '{' || c == ',' || c == '?';
    if (max_flow > kMaxYamlDepth || dashes > kMaxYamlDepth)
      return invalid_argument("spec: nested too deeply (at most " + std::to_string(kMaxYamlDepth) + " levels)");
    if (items > max_items)
      return invalid_argument("spec: too many YAML items (at most " + std::to_string(max_items) + ")");
  }
  return {};
}

namespace {

Status to_json(const YAML::Node& n, json& out, int depth, size_t& budget, const std::string& at) {
  const std::string where = at.empty() ? "spec" : at;
  if (depth > kMaxYamlDepth)
    return invalid_argument(where + ": nested too deeply (at most " + std::to_string(kMaxYamlDepth) + " levels)");
  if (++budget > kMaxYamlNodes)
    return invalid_argument(where + ": too many YAML nodes (aliases expanded); at most " + std::to_string(kMaxYamlNodes));
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined: out = nullptr; return {};
    case YAML::NodeType::Scalar: out = yaml_scalar(n); return {};
    case YAML::NodeType::Sequence: {
      out = json::array();
      size_t i = 0;
      for (const YAML::Node& e : n) {
        json v;
        TESSERA_TRY(to_json(e, v, depth + 1, budget, at + "[" + std::to_string(i++) + "]"));
        out.push_back(std::move(v));
      }
      return {};
    }
    case YAML::NodeType::Map: {
      out = json::object();
      for (const auto& kv : n) {
        if (!kv.first.IsScalar()) return invalid_argument(where + ": map keys must be plain names");
        const std::string key = kv.first.Scalar();
        if (out.contains(key)) return invalid_argument(sub(at, key) + ": given twice");
        json v;
        TESSERA_TRY(to_json(kv.second, v, depth + 1, budget, sub(at, key)));
        out[key] = std::move(v);
      }
      return {};
    }
  }
  out = nullptr;
  return {};
}

}  // namespace

Status yaml_to_json(const YAML::Node& n, json& out, const std::string& at) {
  size_t budget = 0;
  return to_json(n, out, 0, budget, at);
}

// `owned_cost: {server_capex, gpus_per_server, amortisation_months, provisioned_kw, average_draw_kw,
// pue, electricity_per_kwh, colocation_per_kw_month, support_per_server_month,
// maintenance_pct_per_year}` -> the owned pool's price per GPU-hour (core/cost.h owned_cost, at full
// use: idle hours are the chargeback's idle share, not a higher rate). Money as price strings.
Result<int64_t> parse_owned_cost(const YAML::Node& n, const std::string& at) {
  if (!n.IsMap()) return invalid_argument(at + ": must be a map such as {server_capex: \"375000\", gpus_per_server: 8, ...}");
  TESSERA_TRY(known_keys(n, at, {"server_capex", "gpus_per_server", "amortisation_months", "provisioned_kw",
                                 "average_draw_kw", "pue", "electricity_per_kwh", "colocation_per_kw_month",
                                 "support_per_server_month", "maintenance_pct_per_year"}));
  cost::OwnedCostInputs in;
  auto money = [&](const char* key, int64_t& out, bool required) -> Status {
    const YAML::Node v = n[key];
    if (!v) return required ? invalid_argument(at + "." + key + ": required") : Status();
    auto m = v.IsScalar() ? parse_price_micro(v.Scalar()) : Result<int64_t>(invalid_argument("must be an amount"));
    if (!m.ok()) return invalid_argument(at + "." + key + ": an amount such as \"375000\" or \"0.08\": " + m.error().message);
    out = *m;
    return {};
  };
  TESSERA_TRY(money("server_capex", in.server_capex, true));
  TESSERA_TRY(money("electricity_per_kwh", in.electricity_per_kwh, false));
  TESSERA_TRY(money("colocation_per_kw_month", in.colocation_per_kw_month, false));
  TESSERA_TRY(money("support_per_server_month", in.support_per_server_month, false));
  int64_t gpus = in.gpus_per_server, months = in.amortisation_months;
  TESSERA_TRY(non_negative(n, "gpus_per_server", at, gpus));
  TESSERA_TRY(non_negative(n, "amortisation_months", at, months));
  in.gpus_per_server = int(std::min<int64_t>(gpus, 1 << 20));
  in.amortisation_months = int(std::min<int64_t>(months, 1 << 20));
  TESSERA_TRY(get(n, "provisioned_kw", at, in.provisioned_kw));
  TESSERA_TRY(get(n, "average_draw_kw", at, in.average_draw_kw));
  TESSERA_TRY(get(n, "pue", at, in.pue));
  TESSERA_TRY(get(n, "maintenance_pct_per_year", at, in.maintenance_pct_per_year));
  in.utilisation = 1.0;
  auto c = cost::owned_cost(in);
  if (!c.ok()) return invalid_argument(at + ": " + c.error().message);
  return c->total_per_gpu_hour;
}

Result<Pool> parse_pool(const YAML::Node& n, const std::string& at) {
  TESSERA_TRY(known_keys(n, at, {"name", "kind", "price", "min_nodes", "max_nodes", "provisioning_delay",
                                 "interruption_rate", "notice", "correlated", "interruption_trace", "owned_cost"}));
  Pool p;
  TESSERA_TRY(get(n, "name", at, p.name, true));
  if (p.name.empty()) return invalid_argument(at + ".name: must not be empty");
  std::string kind;
  TESSERA_TRY(get(n, "kind", at, kind, true));
  auto k = parse_pool_kind(kind);
  if (!k.ok()) return invalid_argument(at + ".kind: " + k.error().message);
  p.kind = *k;
  if (const YAML::Node price = n["price"]) {
    if (!price.IsScalar()) return invalid_argument(at + ".price: must be a price per GPU-hour such as \"2.49\"");
    auto v = parse_price_micro(price.Scalar());
    if (!v.ok()) return invalid_argument(at + ".price: " + v.error().message);
    p.price_micro_per_gpu_hour = *v;
  }
  if (const YAML::Node oc = n["owned_cost"]) {
    if (p.kind != PoolKind::kOwned) return invalid_argument(at + ".owned_cost: only owned pools are priced from their hardware");
    if (n["price"]) return invalid_argument(at + ".owned_cost: give either price or owned_cost, not both");
    auto v = parse_owned_cost(oc, at + ".owned_cost");
    if (!v.ok()) return v.error();
    p.price_micro_per_gpu_hour = *v;
  }
  int64_t min_nodes = 0, max_nodes = 0;
  TESSERA_TRY(non_negative(n, "min_nodes", at, min_nodes));
  TESSERA_TRY(non_negative(n, "max_nodes", at, max_nodes));
  if (min_nodes > int64_t(kMaxNodes) || max_nodes > int64_t(kMaxNodes))
    return invalid_argument(at + ".max_nodes: at most " + std::to_string(kMaxNodes));
  if (max_nodes > 0 && min_nodes > max_nodes)
    return invalid_argument(at + ".min_nodes: must be <= max_nodes (" + std::to_string(max_nodes) + "; 0 = no bound)");
  p.min_nodes = int(min_nodes);
  p.max_nodes = int(max_nodes);
  TESSERA_TRY(non_negative(n, "provisioning_delay", at, p.provisioning_delay_s));
  const bool spot = p.kind == PoolKind::kSpot;
  for (const char* key : {"interruption_rate", "notice", "correlated", "interruption_trace"})
    if (!spot && n[key]) return invalid_argument(at + "." + key + ": only spot pools are interrupted");
  if (spot) {
    p.notice_s = 120;  // AWS; GCP and Azure give 30 s
    TESSERA_TRY(non_negative(n, "notice", at, p.notice_s));
    if (const YAML::Node r = n["interruption_rate"]) {
      if (!r.IsScalar()) return invalid_argument(at + ".interruption_rate: must be interruptions per node-hour such as \"0.05\"");
      auto v = parse_price_micro(r.Scalar());
      if (!v.ok()) return invalid_argument(at + ".interruption_rate: must be interruptions per node-hour >= 0 with at most 6 decimals, such as \"0.05\", got \"" + r.Scalar() + "\"");
      p.interruptions_per_million_hours = *v;
    }
    int64_t correlated = 0;
    TESSERA_TRY(non_negative(n, "correlated", at, correlated));
    if (correlated > 100) return invalid_argument(at + ".correlated: percent of the pool's nodes reclaimed together, 0..100");
    p.correlated_pct = int(correlated);
    TESSERA_TRY(get(n, "interruption_trace", at, p.interruption_trace));
  }
  return p;
}

Status parse_cluster_sections(const YAML::Node& root, const std::string& top, ClusterConfig& out,
                              std::vector<size_t>* node_origin) {
  const std::string at_top = top.empty() ? "cluster" : top;
  TESSERA_TRY(get(root, "name", at_top, out.name));
  TESSERA_TRY(get(root, "levels", at_top, out.levels));
  if (const YAML::Node c = root["config"]) TESSERA_TRY(parse_config(c, out.scheduler));
  if (const YAML::Node pcs = root["priority_classes"])
    TESSERA_TRY(parse_priority_classes(pcs, out.scheduler.priority_classes, out.class_roles));
  TESSERA_TRY(get(root, "policy", at_top, out.scheduler.policy));  // the placement policy (after config.preset)
  // gpu_models: the built-ins plus those declared (before nodes, which name them).
  out.catalog = std::shared_ptr<const GpuCatalog>(std::shared_ptr<const GpuCatalog>{}, &GpuCatalog::builtin());
  if (const YAML::Node gm = root["gpu_models"]; gm && !gm.IsNull()) {
    json list;
    TESSERA_TRY(yaml_to_json(gm, list, "gpu_models"));
    auto models = gpu_models_from_json(list);
    if (!models.ok()) return models.error();
    auto cat = GpuCatalog::with_extra(std::move(*models));
    if (!cat.ok()) return invalid_argument("gpu_models: " + cat.error().message);
    out.catalog = std::make_shared<const GpuCatalog>(std::move(*cat));
  }
  // pools: before nodes, which name them. Ids follow ClusterState::add_pool: "default" is 0.
  std::map<std::string, PoolId> pool_ids{{"default", PoolId(0)}};
  if (const YAML::Node pools = root["pools"]; pools && !pools.IsNull()) {
    if (!pools.IsSequence()) return invalid_argument(sub(top, "pools") + ": must be a list");
    for (size_t i = 0; i < pools.size(); ++i) {
      auto p = parse_pool(pools[i], "pools[" + std::to_string(i) + "]");
      if (!p.ok()) return p.error();
      const bool declared = std::any_of(out.pools.begin(), out.pools.end(), [&](const Pool& q) { return q.name == p->name; });
      if (declared)  // "default" may be declared once: it redefines the built-in pool
        return invalid_argument("pools[" + std::to_string(i) + "].name: \"" + p->name + "\" defined twice");
      const PoolId id = p->name == "default" ? PoolId(0) : PoolId(uint32_t(pool_ids.size()));
      pool_ids[p->name] = id;
      out.pools.push_back(std::move(*p));
    }
  }
  if (const YAML::Node r = root["pool_rules"]) {
    const std::string at = sub(top, "pool_rules");
    TESSERA_TRY(known_keys(r, at, {"inference_kinds", "spot_max_interruptions", "on_demand_fallback_after"}));
    if (r["on_demand_fallback_after"]) {
      int64_t after = 0;
      TESSERA_TRY(non_negative(r, "on_demand_fallback_after", at, after));
      out.scheduler.pool_rules.on_demand_fallback_after_s = after;
    }
    int64_t max_int = out.scheduler.pool_rules.spot_max_interruptions;
    TESSERA_TRY(non_negative(r, "spot_max_interruptions", at, max_int));
    out.scheduler.pool_rules.spot_max_interruptions = int(std::min<int64_t>(max_int, 1000000));
    if (const YAML::Node k = r["inference_kinds"]) {
      if (!k.IsSequence() || k.size() == 0)
        return invalid_argument(at + ".inference_kinds: must be a non-empty list of pool kinds (owned, reserved, on-demand, spot)");
      PoolKindMask m = 0;
      for (size_t i = 0; i < k.size(); ++i) {
        auto kind = parse_pool_kind(k[i].IsScalar() ? k[i].Scalar() : "");
        if (!kind.ok()) return invalid_argument(at + ".inference_kinds[" + std::to_string(i) + "]: " + kind.error().message);
        m |= pool_kind_bit(*kind);
      }
      out.scheduler.pool_rules.inference_kinds = m;
    }
  }
  if (const YAML::Node a = root["autoscaling"]; a && !a.IsNull()) {
    const std::string at = sub(top, "autoscaling");
    if (!a.IsMap()) return invalid_argument(at + ": must be a map {enabled, scale_down_idle, budget}");
    TESSERA_TRY(known_keys(a, at, {"enabled", "scale_down_idle", "budget", "consolidate_below", "consolidate_min_runtime"}));
    out.autoscaling.enabled = true;
    TESSERA_TRY(get(a, "enabled", at, out.autoscaling.enabled));
    TESSERA_TRY(non_negative(a, "scale_down_idle", at, out.autoscaling.scale_down_idle_s));
    int64_t below = out.autoscaling.consolidate_below_pct;
    TESSERA_TRY(non_negative(a, "consolidate_below", at, below));
    if (below > 100) return invalid_argument(at + ".consolidate_below: percent of a node's GPUs in use, 0..100 (0 = no consolidation)");
    out.autoscaling.consolidate_below_pct = int(below);
    TESSERA_TRY(non_negative(a, "consolidate_min_runtime", at, out.autoscaling.consolidate_min_runtime_s));
    if (const YAML::Node b = a["budget"]) {
      auto v = b.IsScalar() ? parse_price_micro(b.Scalar()) : Result<int64_t>(invalid_argument("must be a price"));
      if (!v.ok()) return invalid_argument(at + ".budget: the most the elastic pools may cost per hour, such as \"250.00\": " + v.error().message);
      out.autoscaling.budget_micro_per_hour = *v;
    }
  }
  const YAML::Node nodes = root["nodes"];
  if (!nodes || !nodes.IsSequence()) return invalid_argument(sub(top, "nodes") + ": required list");
  for (size_t i = 0; i < nodes.size(); ++i) {
    const YAML::Node n = nodes[i];
    const std::string at = "nodes[" + std::to_string(i) + "]";
    TESSERA_TRY(known_keys(n, at, {"name", "count", "gpus", "cpu", "memory", "gpu_model", "path", "mig_gpus", "pool"}));
    NodeSpec spec;
    int64_t count = 1, gpus = 0, cpu = 0, mem = 0;
    TESSERA_TRY(get(n, "name", at, spec.name, true));
    TESSERA_TRY(get(n, "count", at, count));
    TESSERA_TRY(get(n, "gpus", at, gpus));
    TESSERA_TRY(get(n, "cpu", at, cpu));
    TESSERA_TRY(get(n, "memory", at, mem));
    TESSERA_TRY(get(n, "gpu_model", at, spec.gpu_model));
    TESSERA_TRY(get(n, "path", at, spec.path));
    TESSERA_TRY(get(n, "mig_gpus", at, spec.mig_gpus));
    if (n["pool"]) {
      std::string pool;
      TESSERA_TRY(get(n, "pool", at, pool));
      auto it = pool_ids.find(pool);
      if (it == pool_ids.end()) {
        std::vector<std::string> known;
        for (auto& [name, id] : pool_ids) known.push_back(name);
        return invalid_argument(at + ".pool: node \"" + spec.name + "\" names unknown pool \"" + pool +
                                "\"; declared pools: " + join(known));
      }
      spec.pool = it->second;
    }
    if (count < 1) return invalid_argument(at + ".count: must be >= 1");
    if (count > kMaxGroupCount) return invalid_argument(at + ".count: at most " + std::to_string(kMaxGroupCount));
    if (out.nodes.size() + size_t(count) > kMaxNodes)
      return invalid_argument(at + ".count: more than " + std::to_string(kMaxNodes) + " nodes in all");
    if (gpus < 0 || gpus > 16) return invalid_argument(at + ".gpus: must be in 0..16, got " + std::to_string(gpus));
    if (cpu < 0 || cpu > kMaxNodeCpu)
      return invalid_argument(at + ".cpu: must be in 0.." + std::to_string(kMaxNodeCpu) + " milli-CPU, got " + std::to_string(cpu));
    if (mem < 0 || mem > kMaxNodeMemory)
      return invalid_argument(at + ".memory: must be in 0.." + std::to_string(kMaxNodeMemory) + " MiB, got " + std::to_string(mem));
    spec.gpu_count = int(gpus);
    spec.cpu = MilliCpu(cpu);
    spec.memory = MiB(mem);
    for (int64_t c = 0; c < count; ++c) {
      NodeSpec copy = spec;
      if (count > 1) copy.name += "-" + std::to_string(c);
      out.nodes.push_back(std::move(copy));
      if (node_origin) node_origin->push_back(i);
    }
  }
  if (const YAML::Node queues = root["queues"]) {
    if (!queues.IsSequence()) return invalid_argument(sub(top, "queues") + ": must be a list");
    for (size_t i = 0; i < queues.size(); ++i) {
      const YAML::Node q = queues[i];
      const std::string at = "queues[" + std::to_string(i) + "]";
      TESSERA_TRY(known_keys(q, at, {"name", "parent", "weight", "guaranteed", "limit", "priority_classes"}));
      QueueSpec spec;
      TESSERA_TRY(get(q, "name", at, spec.name, true));
      TESSERA_TRY(get(q, "parent", at, spec.parent));
      TESSERA_TRY(get(q, "weight", at, spec.weight));
      if (spec.weight > kMaxWeight) return invalid_argument(at + ".weight: at most " + std::to_string(kMaxWeight));
      TESSERA_TRY(get_amounts(q, "guaranteed", at, spec.guaranteed));
      TESSERA_TRY(get_amounts(q, "limit", at, spec.limit));
      if (q["priority_classes"]) {
        std::vector<std::string> classes;
        TESSERA_TRY(get(q, "priority_classes", at, classes));
        if (!classes.empty()) out.queue_classes[spec.name] = std::move(classes);
      }
      out.queues.push_back(std::move(spec));
    }
  } else {
    out.queues.push_back(QueueSpec{"default", "", {}, {}, 1});
  }
  return {};
}

}  // namespace tessera::config
