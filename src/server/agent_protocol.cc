#include "server/agent_protocol.h"

#include <limits>

#include "config/text.h"

namespace tessera::server {

using Json = nlohmann::json;

namespace {

constexpr size_t kMaxText = 256;     // names, addresses, versions, secrets
constexpr size_t kMaxPath = 4096;    // checkpoint paths
constexpr size_t kMaxItems = 4096;   // tasks, GPUs, MIG instances in one message

// Reads the fields of one JSON object, each checked against its type and range; errors name the
// field by its path (`at` + "." + key).
class Fields {
 public:
  Fields(const Json& obj, std::string at) : obj_(obj), at_(std::move(at)) {}
  std::string path(const char* key) const { return at_.empty() ? key : at_ + "." + key; }
  bool has(const char* key) const { return obj_.contains(key) && !obj_[key].is_null(); }
  const Json& raw(const char* key) const { return obj_[key]; }

  // A required (or, with `fallback`, optional) integer in [lo, hi].
  Result<int64_t> integer(const char* key, int64_t lo, int64_t hi, std::optional<int64_t> fallback = std::nullopt) const {
    if (!has(key)) {
      if (fallback) return *fallback;
      return invalid_argument(path(key) + ": required, an integer " + range(lo, hi));
    }
    const Json& v = obj_[key];
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())))
      return invalid_argument(path(key) + ": must be an integer " + range(lo, hi));
    const int64_t x = v.get<int64_t>();
    if (x < lo || x > hi) return invalid_argument(path(key) + ": must be an integer " + range(lo, hi));
    return x;
  }
  // A required (or optional, "" when absent) printable UTF-8 string of at most `max` bytes.
  Result<std::string> text(const char* key, bool required, size_t max = kMaxText) const {
    if (!has(key)) {
      if (required) return invalid_argument(path(key) + ": required, a string");
      return std::string();
    }
    const Json& v = obj_[key];
    if (!v.is_string()) return invalid_argument(path(key) + ": must be a string");
    const std::string& s = v.get_ref<const std::string&>();
    if (s.size() > max) return invalid_argument(path(key) + ": at most " + std::to_string(max) + " bytes");
    if (!config::printable_utf8(s)) return invalid_argument(path(key) + ": must be printable UTF-8 (no control characters)");
    return s;
  }
  Result<bool> boolean(const char* key, std::optional<bool> fallback) const {
    if (!has(key)) {
      if (fallback) return *fallback;
      return invalid_argument(path(key) + ": required, true or false");
    }
    if (!obj_[key].is_boolean()) return invalid_argument(path(key) + ": must be true or false");
    return obj_[key].get<bool>();
  }
  // An optional list (empty when absent) of at most kMaxItems.
  Result<const Json*> list(const char* key) const {
    static const Json empty = Json::array();
    if (!has(key)) return &empty;
    if (!obj_[key].is_array()) return invalid_argument(path(key) + ": must be a list");
    if (obj_[key].size() > kMaxItems) return invalid_argument(path(key) + ": at most " + std::to_string(kMaxItems) + " entries");
    return &obj_[key];
  }

 private:
  static std::string range(int64_t lo, int64_t hi) {
    if (hi == std::numeric_limits<int64_t>::max()) return ">= " + std::to_string(lo);
    return std::to_string(lo) + ".." + std::to_string(hi);
  }
  const Json& obj_;
  std::string at_;
};

#define TRY_ASSIGN(lhs, expr)            \
  do {                                   \
    auto r_ = (expr);                    \
    if (!r_.ok()) return r_.error();     \
    lhs = std::move(*r_);                \
  } while (0)

constexpr int64_t kMaxI64 = std::numeric_limits<int64_t>::max();
constexpr int64_t kMaxInt = std::numeric_limits<int>::max();

Result<TaskReport> parse_task(const Json& t, const std::string& at) {
  if (!t.is_object()) return invalid_argument(at + ": must be an object {job, attempt, task, state, ...}");
  Fields f(t, at);
  TaskReport r;
  TRY_ASSIGN(r.job, f.integer("job", 1, kMaxI64));
  TRY_ASSIGN(r.attempt, f.integer("attempt", 0, kMaxI64, 0));
  int64_t task = 0;
  TRY_ASSIGN(task, f.integer("task", 0, 1 << 20));
  r.task = int(task);
  std::string state;
  TRY_ASSIGN(state, f.text("state", true));
  if (state == "starting" || state == "running") r.state = ReportedState::kRunning;
  else if (state == "succeeded") r.state = ReportedState::kSucceeded;
  else if (state == "failed") r.state = ReportedState::kFailed;
  else if (state == "checkpointed") r.state = ReportedState::kCheckpointed;
  else if (state == "stopped") r.state = ReportedState::kStopped;
  else
    return invalid_argument(at + ".state: unknown \"" + config::truncate_utf8(state, 64) +
                            "\"; expected starting, running, succeeded, failed, checkpointed, stopped");
  int64_t v = 0;
  TRY_ASSIGN(v, f.integer("exit_code", std::numeric_limits<int>::min(), kMaxInt, 0));
  r.exit_code = int(v);
  TRY_ASSIGN(r.checkpoint, f.text("checkpoint", false, kMaxPath));
  TRY_ASSIGN(r.answered_request, f.boolean("checkpoint_requested", false));
  TRY_ASSIGN(v, f.integer("master_port", 0, 65535, 0));
  r.master_port = int(v);
  TRY_ASSIGN(r.saves, f.integer("checkpoint_saves", 0, kMaxI64, 0));
  TRY_ASSIGN(r.cost_ms, f.integer("checkpoint_cost_ms", 0, kMaxI64, -1));
  TRY_ASSIGN(r.message, f.text("message", false, 1000));
  return r;
}

}  // namespace

const char* reported_state_name(ReportedState s) {
  switch (s) {
    case ReportedState::kRunning: return "running";
    case ReportedState::kSucceeded: return "succeeded";
    case ReportedState::kFailed: return "failed";
    case ReportedState::kCheckpointed: return "checkpointed";
    case ReportedState::kStopped: return "stopped";
  }
  return "running";
}

Result<AgentRegistration> parse_registration(const Json& body) {
  if (!body.is_object()) return invalid_argument("body: must be a JSON object {node, address, log_port, inventory, ...}");
  Fields f(body, "");
  AgentRegistration r;
  TRY_ASSIGN(r.node, f.text("node", true));
  if (r.node.empty()) return invalid_argument("node: required (the registering node's name, as in the cluster config)");
  TRY_ASSIGN(r.address, f.text("address", true));
  if (r.address.empty()) return invalid_argument("address: required (the host name or IP other nodes reach this node at)");
  int64_t port = 0;
  TRY_ASSIGN(port, f.integer("log_port", 0, 65535));
  r.log_port = int(port);
  TRY_ASSIGN(r.log_secret, f.text("log_secret", false));
  TRY_ASSIGN(r.version, f.text("version", false));
  if (!f.has("inventory") || !body["inventory"].is_object())
    return invalid_argument("inventory: required, an object {gpus: [{model, mig_enabled}], source}");
  Fields inv(body["inventory"], "inventory");
  TRY_ASSIGN(r.gpu_source, inv.text("source", false));
  if (!inv.has("gpus")) return invalid_argument("inventory.gpus: required, the list of GPUs the agent found");
  const Json* gpus = nullptr;
  TRY_ASSIGN(gpus, inv.list("gpus"));
  for (size_t i = 0; i < gpus->size(); ++i) {
    const std::string at = "inventory.gpus[" + std::to_string(i) + "]";
    const Json& g = (*gpus)[i];
    if (!g.is_object()) return invalid_argument(at + ": must be an object {model, mig_enabled}");
    Fields gf(g, at);
    InventoryGpu out;
    TRY_ASSIGN(out.model, gf.text("model", true));
    TRY_ASSIGN(out.mig_enabled, gf.boolean("mig_enabled", std::nullopt));
    r.gpus.push_back(std::move(out));
  }
  if (f.has("topology")) {
    if (!body["topology"].is_object()) return invalid_argument("topology: must be an object {level: name}");
    Fields tf(body["topology"], "topology");
    for (auto it = body["topology"].begin(); it != body["topology"].end(); ++it) {
      if (!config::printable_utf8(it.key()) || it.key().size() > kMaxText)
        return invalid_argument("topology: level names must be printable UTF-8 of at most 256 bytes");
      std::string v;
      TRY_ASSIGN(v, tf.text(it.key().c_str(), true));
      r.topology[it.key()] = std::move(v);
    }
  }
  return r;
}

Result<HeartbeatReport> parse_heartbeat(const Json& body) {
  if (!body.is_object()) return invalid_argument("body: must be a JSON object {node, tasks, gpus, mig}");
  Fields f(body, "");
  HeartbeatReport h;
  TRY_ASSIGN(h.node, f.text("node", true));
  if (h.node.empty()) return invalid_argument("node: required (the reporting node's name)");
  const Json* list = nullptr;
  TRY_ASSIGN(list, f.list("tasks"));
  for (size_t i = 0; i < list->size(); ++i) {
    TaskReport t;
    TRY_ASSIGN(t, parse_task((*list)[i], "tasks[" + std::to_string(i) + "]"));
    h.tasks.push_back(std::move(t));
  }
  TRY_ASSIGN(list, f.list("gpus"));
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string at = "gpus[" + std::to_string(i) + "]";
    const Json& g = (*list)[i];
    if (!g.is_object()) return invalid_argument(at + ": must be an object {index, utilization_pct, memory_used_mib}");
    Fields gf(g, at);
    GpuSample s;
    TRY_ASSIGN(s.utilization_pct, gf.integer("utilization_pct", -1, 100, -1));
    TRY_ASSIGN(s.memory_used_mib, gf.integer("memory_used_mib", -1, kMaxI64, -1));
    h.gpus.push_back(s);
  }
  TRY_ASSIGN(list, f.list("mig"));
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string at = "mig[" + std::to_string(i) + "]";
    const Json& m = (*list)[i];
    if (!m.is_object()) return invalid_argument(at + ": must be an object {gpu, instances}");
    Fields mf(m, at);
    MigLayoutReport out;
    int64_t gpu = 0;
    TRY_ASSIGN(gpu, mf.integer("gpu", 0, 1 << 16));
    out.gpu = int(gpu);
    const Json* inst = nullptr;
    TRY_ASSIGN(inst, mf.list("instances"));
    for (size_t k = 0; k < inst->size(); ++k) {
      const std::string ik = at + ".instances[" + std::to_string(k) + "]";
      if (!(*inst)[k].is_object()) return invalid_argument(ik + ": must be an object {profile, start}");
      Fields inf((*inst)[k], ik);
      std::string profile;
      int64_t start = 0;
      TRY_ASSIGN(profile, inf.text("profile", true));
      TRY_ASSIGN(start, inf.integer("start", 0, 64));
      out.instances.emplace_back(std::move(profile), int(start));
    }
    h.mig.push_back(std::move(out));
  }
  TRY_ASSIGN(h.leaving, f.boolean("leaving", false));
  TRY_ASSIGN(h.round_trip_ms, f.integer("round_trip_ms", -1, 3600 * 1000, -1));
  if (f.has("interruption_notice")) {
    const Json& n = body["interruption_notice"];
    if (!n.is_object()) return invalid_argument("interruption_notice: must be an object {noticed_at, reclaim_at}");
    Fields nf(n, "interruption_notice");
    h.notice = true;
    TRY_ASSIGN(h.noticed_at, nf.integer("noticed_at", 0, kMaxI64, 0));
    TRY_ASSIGN(h.reclaim_at, nf.integer("reclaim_at", 0, kMaxI64, -1));
  }
  return h;
}

Result<WatchRequest> parse_watch(const Json& body) {
  if (!body.is_object()) return invalid_argument("body: must be a JSON object {node, seen, wait_ms}");
  Fields f(body, "");
  WatchRequest w;
  TRY_ASSIGN(w.node, f.text("node", true));
  if (w.node.empty()) return invalid_argument("node: required (the watching node's name)");
  TRY_ASSIGN(w.seen, f.integer("seen", 0, kMaxI64, 0));
  TRY_ASSIGN(w.wait_ms, f.integer("wait_ms", 100, 60000, 20000));
  return w;
}

}  // namespace tessera::server
