// Chargeback and usage accounting (accounting.h, docs/chargeback.md). Pure: inputs in, report out.
#include "server/accounting.h"
#include "server/event_kind.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <set>
#include <tuple>

#include "core/cluster.h"

namespace tessera::server::accounting {
namespace {

using Json = nlohmann::json;

constexpr int64_t kMsPerGpuHour = 1000 * 3600;  // milli-GPU-seconds in one GPU-hour
const char* const kUnallocated = "(unallocated)";
const char* const kDefaultPool = "default";    // the built-in pool of nodes that name none

struct Piece {
  std::string model, pool;
  size_t node = 0;
  int64_t milli = 0;
};

struct Attempt {
  int64_t job = 0;
  int64_t start = 0, end = 0;
  std::optional<EventKind> end_kind;  // none = still running at the end of the log
  std::optional<int64_t> util_bp;  // utilisation in basis points (0..10000), when measured
  std::vector<Piece> pieces;
  std::vector<std::pair<int64_t, size_t>> notices;  // spot_interrupted events: (time, node index or npos)
  // Ended because of a spot interruption: a notice arrived during it and it ended preempted or lost.
  bool interrupted() const {
    return !notices.empty() && (end_kind == EventKind::kPreempted || end_kind == EventKind::kLost);
  }
};

// Largest-remainder split of `total` in proportion to `weights` (sum > 0): exact, ties to the lower index.
std::vector<int64_t> split(int64_t total, const std::vector<int64_t>& weights) {
  __int128 sum = 0;
  for (int64_t w : weights) sum += w;
  std::vector<int64_t> out(weights.size(), 0);
  if (sum <= 0 || total <= 0) return out;
  std::vector<std::pair<__int128, size_t>> rem;
  int64_t given = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const __int128 num = __int128(total) * weights[i];
    out[i] = int64_t(num / sum);
    given += out[i];
    rem.push_back({num % sum, i});
  }
  std::sort(rem.begin(), rem.end(), [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  for (size_t k = 0; given < total && k < rem.size(); ++k, ++given) ++out[rem[k].second];
  return out;
}

int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {  // H. Hinnant's algorithm
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = unsigned(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + int64_t(doe) - 719468;
}

void civil_from_days(int64_t z, int64_t& y, unsigned& m, unsigned& d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = unsigned(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  y = int64_t(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp < 10 ? mp + 3 : mp - 9;
  y += m <= 2;
}

std::string fixed(int64_t v, int64_t scale, int decimals) {  // v / scale with `decimals` digits, v exact
  const bool neg = v < 0;
  const uint64_t a = neg ? uint64_t(-(v + 1)) + 1 : uint64_t(v);
  std::string frac = std::to_string(a % uint64_t(scale));
  frac.insert(0, size_t(decimals) - frac.size(), '0');
  return (neg ? "-" : "") + std::to_string(a / uint64_t(scale)) + "." + frac;
}

std::string cell_value(const Cell& c, Dim d) {
  switch (d) {
    case Dim::kTeam: return c.team;
    case Dim::kQueue: return c.queue;
    case Dim::kProject: return c.project;
    case Dim::kUser: return c.user;
    case Dim::kModel: return c.model;
    case Dim::kPool: return c.pool;
  }
  return "";
}

bool has_dim(const std::vector<Dim>& by, Dim d) { return std::find(by.begin(), by.end(), d) != by.end(); }

}  // namespace

// ---- small helpers ----

const char* dim_name(Dim d) {
  switch (d) {
    case Dim::kTeam: return "team";
    case Dim::kQueue: return "queue";
    case Dim::kProject: return "project";
    case Dim::kUser: return "user";
    case Dim::kModel: return "model";
    case Dim::kPool: return "pool";
  }
  return "?";
}

Result<std::vector<Dim>> parse_dims(const std::string& text) {
  static const std::vector<Dim> all = {Dim::kTeam, Dim::kQueue, Dim::kProject, Dim::kUser, Dim::kModel, Dim::kPool};
  std::vector<Dim> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string name = text.substr(pos, comma - pos);
    auto it = std::find_if(all.begin(), all.end(), [&](Dim d) { return name == dim_name(d); });
    if (it == all.end())
      return invalid_argument("by: unknown dimension \"" + name +
                              "\"; give a comma-separated list of team, queue, project, user, model, pool");
    if (has_dim(out, *it)) return invalid_argument("by: \"" + name + "\" given twice");
    out.push_back(*it);
    pos = comma + 1;
  }
  return out;
}

std::vector<Dim> default_dims() { return {Dim::kTeam, Dim::kProject, Dim::kModel, Dim::kPool}; }

Result<JobInfo> job_info_from_row(const JobRow& row) {
  JobInfo j{row.queue, row.user, ""};
  const Json r = Json::parse(row.record, nullptr, false);
  if (r.is_discarded() || !r.is_object()) return invalid_argument("job " + std::to_string(row.id) + ": record is not JSON");
  if (r.contains("queue") && r["queue"].is_string()) j.queue = r["queue"];
  if (r.contains("user") && r["user"].is_string()) j.user = r["user"];
  if (r.contains("spec") && r["spec"].is_object() && r["spec"].contains("project") && r["spec"]["project"].is_string())
    j.project = r["spec"]["project"];
  return j;
}

Amounts& Amounts::operator+=(const Amounts& o) {
  allocated += o.allocated;
  measured += o.measured;
  used += o.used;
  preempted += o.preempted;
  lost += o.lost;
  interrupted += o.interrupted;
  interruptions += o.interruptions;
  interrupted_cost += o.interrupted_cost;
  idle_share += o.idle_share;
  allocated_cost += o.allocated_cost;
  idle_share_cost += o.idle_share_cost;
  return *this;
}

int64_t div_round_half_even(__int128 num, int64_t den) {
  const bool neg = num < 0;
  if (neg) num = -num;
  __int128 q = num / den;
  const __int128 r = num % den;
  if (2 * r > den || (2 * r == den && (q & 1))) ++q;
  return int64_t(neg ? -q : q);
}

// GPU-hours with 6 decimals: ms / 3.6e6 = micro-GPU-hours × 1e-6, micro = ms / 3.6 = ms × 10 / 36.
std::string format_gpu_hours(int64_t ms) { return fixed(div_round_half_even(__int128(ms) * 10, 36), 1000000, 6); }
std::string format_micro(int64_t micro) { return fixed(micro, 1000000, 6); }
std::string format_pct(int64_t part, int64_t whole) {
  if (whole <= 0) return "0.00";
  return fixed(div_round_half_even(__int128(part) * 10000, whole), 100, 2);
}

Result<int64_t> parse_utc_time(const std::string& text, const std::string& field) {
  const std::string why = field + ": \"" + text + "\" is not a UTC date; give YYYY-MM-DD (e.g. 2026-11-01) or YYYY-MM-DDTHH:MM:SSZ";
  auto digits = [&](size_t at, size_t n, int64_t& out) {
    if (at + n > text.size()) return false;
    out = 0;
    for (size_t i = at; i < at + n; ++i) {
      if (text[i] < '0' || text[i] > '9') return false;
      out = out * 10 + (text[i] - '0');
    }
    return true;
  };
  int64_t y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  if (!(text.size() == 10 || text.size() == 20)) return invalid_argument(why);
  if (!digits(0, 4, y) || text[4] != '-' || !digits(5, 2, mo) || text[7] != '-' || !digits(8, 2, d)) return invalid_argument(why);
  if (text.size() == 20 && (text[10] != 'T' || !digits(11, 2, h) || text[13] != ':' || !digits(14, 2, mi) ||
                            text[16] != ':' || !digits(17, 2, s) || text[19] != 'Z'))
    return invalid_argument(why);
  static const int kDays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > kDays[mo - 1] || (mo == 2 && d == 29 && !leap) || h > 23 || mi > 59 || s > 59)
    return invalid_argument(why + " (out of range)");
  return days_from_civil(y, unsigned(mo), unsigned(d)) * 86400 + h * 3600 + mi * 60 + s;
}

std::string format_utc(int64_t t) {
  const int64_t days = (t >= 0 ? t : t - 86399) / 86400;
  const int64_t sec = t - days * 86400;
  int64_t y = 0;
  unsigned m = 0, d = 0;
  civil_from_days(days, y, m, d);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04lld-%02u-%02uT%02lld:%02lld:%02lldZ", (long long)y, m, d, (long long)(sec / 3600),
                (long long)(sec / 60 % 60), (long long)(sec % 60));
  return buf;
}

int64_t month_start_utc(int64_t t) {
  const int64_t days = (t >= 0 ? t : t - 86399) / 86400;
  int64_t y = 0;
  unsigned m = 0, d = 0;
  civil_from_days(days, y, m, d);
  return days_from_civil(y, m, 1) * 86400;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// ---- the ledger ----

Result<Ledger> compute_ledger(const std::vector<EventRow>& events, const std::map<int64_t, JobInfo>& jobs,
                              const config::ClusterConfig& config, const Request& request) {
  if (request.to <= request.from) return invalid_argument("to: must be after from");
  const GpuCatalog& catalog = config.catalog ? *config.catalog : GpuCatalog::builtin();
  Ledger L;
  L.from = request.from;
  L.to = request.to;
  L.currency = config.chargeback.currency;
  L.rule = config.chargeback.idle_share;
  L.rates_micro = config.chargeback.rates_micro;
  L.end = request.now > 0 ? std::min(request.to, request.now) : request.to;
  L.start = events.empty() ? L.end : std::max(request.from, events.front().time);
  L.start = std::min(L.start, L.end);
  L.end = std::max(L.end, L.start);

  // Nodes: canonical model, pool, capacity.
  struct NodeInfo {
    std::string model, pool;
    const GpuModel* gm = nullptr;
    int64_t cap = 0;  // milli
  };
  // Pool names by id (ClusterState::add_pool order: "default" is 0) and prices.
  std::vector<std::string> pool_names = {kDefaultPool};
  for (const Pool& p : config.pools) {
    if (p.name != kDefaultPool) pool_names.push_back(p.name);
    if (p.price_micro_per_gpu_hour) L.pool_rates_micro[p.name] = *p.price_micro_per_gpu_hour;
  }
  std::vector<NodeInfo> nodes;
  std::map<std::string, size_t> node_index;
  for (size_t i = 0; i < config.nodes.size(); ++i) {
    const NodeSpec& n = config.nodes[i];
    NodeInfo ni;
    ni.pool = n.pool.valid() && n.pool.value < pool_names.size() ? pool_names[n.pool.value] : kDefaultPool;
    if (n.gpu_count > 0) {
      auto m = catalog.find(n.gpu_model);
      if (!m.ok()) return invalid_argument("nodes[" + std::to_string(i) + "].gpu_model: " + m.error().message);
      ni.gm = *m;
      ni.model = (*m)->name;
      ni.cap = int64_t(n.gpu_count) * 1000;
    }
    node_index[n.name] = i;
    nodes.push_back(ni);
  }
  // Teams: the top-level ancestor of each queue.
  std::map<std::string, std::string> parent;
  for (const QueueSpec& q : config.queues) parent[q.name] = q.parent;
  auto team_of = [&](const std::string& queue) {
    std::string t = queue;
    for (int guard = 0; guard < 1000; ++guard) {
      auto it = parent.find(t);
      if (it == parent.end() || it->second.empty()) break;
      t = it->second;
    }
    return t;
  };

  // Attempts and node state changes from the log.
  std::vector<Attempt> attempts;
  std::map<int64_t, size_t> open;  // job -> attempt index
  struct NodeChange {
    int64_t time;
    int kind;  // 0 up, 1 down, 2 reserve, 3 unreserve
  };
  std::vector<std::vector<NodeChange>> changes(nodes.size());
  std::vector<int> first_updown(nodes.size(), -1);  // -1 none, 0 first was node_ready, 1 other
  auto close = [&](int64_t job, int64_t t, std::optional<EventKind> kind, const Json& detail) {
    auto it = open.find(job);
    if (it == open.end()) return;
    Attempt& a = attempts[it->second];
    a.end = std::max(a.start, t);
    a.end_kind = kind;
    if (detail.is_object() && detail.contains("gpu_util_pct") && detail["gpu_util_pct"].is_number()) {
      const double pct = std::clamp(detail["gpu_util_pct"].get<double>(), 0.0, 100.0);
      a.util_bp = std::llround(pct * 100.0);  // the one float: a measurement, turned into basis points once
    }
    open.erase(it);
  };
  for (const EventRow& e : events) {
    const Json detail = Json::parse(e.detail, nullptr, false);
    const EventKind ek = parse_event_kind(e.kind);
    if (e.job_id == 0) {
      if (!detail.is_object() || !detail.contains("node") || !detail["node"].is_string()) continue;
      auto ni = node_index.find(detail["node"].get<std::string>());
      if (ni == node_index.end()) continue;
      const size_t n = ni->second;
      int kind = -1;
      if (ek == EventKind::kNodeReady || ek == EventKind::kNodeRegistered) kind = 0;
      else if (ek == EventKind::kNodeNotReady) kind = 1;
      else if (ek == EventKind::kNodeCordon || ek == EventKind::kNodeDrain || ek == EventKind::kNodeDrained) kind = 2;
      else if (ek == EventKind::kNodeResume) kind = 3;
      if (kind < 0) continue;
      if (kind <= 1 && first_updown[n] < 0) first_updown[n] = ek == EventKind::kNodeReady ? 0 : 1;
      changes[n].push_back({e.time, kind});
      continue;
    }
    if (ek == EventKind::kStarted) {
      close(e.job_id, e.time, std::nullopt, Json());
      Attempt a;
      a.job = e.job_id;
      a.start = a.end = e.time;
      if (detail.is_object() && detail.contains("placement") && detail["placement"].is_array()) {
        for (const Json& p : detail["placement"]) {
          if (!p.is_object() || !p.contains("node") || !p["node"].is_string()) continue;
          auto ni = node_index.find(p["node"].get<std::string>());
          if (ni == node_index.end() || !nodes[ni->second].gm) continue;
          const NodeInfo& node = nodes[ni->second];
          int64_t milli = 0;
          const Json mig = p.value("mig", Json());
          if (mig.is_object() && mig.contains("profile") && mig["profile"].is_string()) {
            const MigProfile* prof = node.gm->find_profile(mig["profile"].get<std::string>());
            milli = prof ? mig_milli(*node.gm, prof->id) : p.value("gpu_milli", int64_t(0));
          } else {
            const size_t n_gpus = p.contains("gpus") && p["gpus"].is_array() ? p["gpus"].size() : 0;
            milli = p.value("gpu_milli", int64_t(0)) * int64_t(n_gpus);
          }
          if (milli > 0) a.pieces.push_back({node.model, node.pool, ni->second, milli});
        }
      }
      open[e.job_id] = attempts.size();
      attempts.push_back(std::move(a));
    } else if (ek == EventKind::kSpotInterrupted) {
      auto it = open.find(e.job_id);
      if (it == open.end()) continue;
      size_t node = std::string::npos;
      if (detail.is_object() && detail.contains("node") && detail["node"].is_string())
        if (auto ni = node_index.find(detail["node"].get<std::string>()); ni != node_index.end() && nodes[ni->second].gm)
          node = ni->second;
      attempts[it->second].notices.push_back({e.time, node});
    } else if (ends_attempt(ek) || ek == EventKind::kRequeued) {
      // "requeued" alone ends an attempt the controller dropped at restart (its placement no longer
      // fit); after "preempted"/"lost" the attempt is already closed and it changes nothing.
      close(e.job_id, e.time, ek, detail);
    }
  }
  for (const auto& [job, idx] : open) attempts[idx].end = std::max(attempts[idx].start, L.end);

  // Cells: allocation per attempt, clipped to [start, end).
  std::vector<std::vector<std::pair<int64_t, int64_t>>> alloc_delta(nodes.size());  // (time, ±milli)
  for (const Attempt& a : attempts) {
    const int64_t s = std::max(a.start, L.start), e = std::min(a.end, L.end);
    for (const Piece& p : a.pieces) {
      alloc_delta[p.node].push_back({a.start, p.milli});
      alloc_delta[p.node].push_back({a.end, -p.milli});
    }
    auto jt = jobs.find(a.job);
    JobInfo info = jt != jobs.end() ? jt->second : JobInfo{"(unknown)", "(unknown)", ""};
    if (a.interrupted() && !a.pieces.empty()) {
      // Each notice in the period counts once, in the (model, pool) of the reclaimed node.
      for (const auto& [t, node] : a.notices) {
        if (t < L.from || t >= L.to) continue;  // the requested period: a notice at now counts
        const Piece& first = a.pieces.front();
        const std::string& model = node != std::string::npos ? nodes[node].model : first.model;
        const std::string& pool = node != std::string::npos ? nodes[node].pool : first.pool;
        ++L.cells[Cell{team_of(info.queue), info.queue, info.project, info.user, model, pool}].interruptions;
      }
    }
    if (e <= s) continue;
    std::map<std::pair<std::string, std::string>, int64_t> by_model;
    for (const Piece& p : a.pieces) by_model[{p.model, p.pool}] += p.milli;
    for (const auto& [mp, milli] : by_model) {
      Cell c{team_of(info.queue), info.queue, info.project, info.user, mp.first, mp.second};
      Amounts& am = L.cells[c];
      const int64_t ms = milli * (e - s);
      am.allocated += ms;
      if (a.util_bp) {
        am.measured += ms;
        am.used += div_round_half_even(__int128(ms) * *a.util_bp, 10000);
      }
      if (a.end_kind == EventKind::kPreempted) am.preempted += ms;
      if (a.end_kind == EventKind::kLost) am.lost += ms;
      if (a.interrupted()) am.interrupted += ms;
    }
  }

  // Usage: sweep each node's timeline.
  std::map<std::pair<std::string, std::string>, ModelUsage> usage;
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (nodes[n].cap == 0) continue;
    ModelUsage& u = usage[{nodes[n].model, nodes[n].pool}];
    u.model = nodes[n].model;
    u.pool = nodes[n].pool;
    u.gpus += nodes[n].cap / 1000;
    // Changes in time order; at equal times allocation changes before state changes (order is
    // irrelevant to the sums: a zero-length segment adds nothing).
    struct Change {
      int64_t time;
      int type;  // 0 alloc, 1 state
      int64_t value;
    };
    std::vector<Change> ch;
    for (const auto& [t, d] : alloc_delta[n]) ch.push_back({t, 0, d});
    for (const NodeChange& c : changes[n]) ch.push_back({c.time, 1, c.kind});
    std::stable_sort(ch.begin(), ch.end(), [](const Change& a, const Change& b) { return a.time < b.time; });
    bool down = first_updown[n] == 0, reserved = false;
    int64_t alloc = 0;
    int64_t cur = L.start;
    auto account = [&](int64_t until) {
      if (until <= cur) return;
      const int64_t len = until - cur;
      const int64_t held = std::clamp<int64_t>(alloc, 0, nodes[n].cap);
      u.capacity += nodes[n].cap * len;
      u.allocated += held * len;
      const int64_t free_ms = (nodes[n].cap - held) * len;
      (down ? u.down : reserved ? u.reserved : u.idle) += free_ms;
      cur = until;
    };
    for (const Change& c : ch) {
      if (c.time > L.start) account(std::min(c.time, L.end));
      if (c.type == 0) alloc += c.value;
      else if (c.value == 0) down = false;
      else if (c.value == 1) down = true;
      else if (c.value == 2) reserved = true;
      else reserved = false;
    }
    account(L.end);
  }

  // Idle share per (model, pool): the pool of idle + reserved time, shared out by the rule.
  for (auto& [mp, u] : usage) {
    L.usage.push_back(u);
    const int64_t pool = u.idle + u.reserved;
    if (pool <= 0 || L.rule == config::IdleShare::kNone) continue;
    std::vector<Cell> recipients;
    for (const auto& [c, am] : L.cells)
      if (c.model == mp.first && c.pool == mp.second && am.allocated > 0) recipients.push_back(c);
    if (recipients.empty()) {
      L.cells[Cell{kUnallocated, kUnallocated, kUnallocated, kUnallocated, mp.first, mp.second}].idle_share += pool;
      continue;
    }
    if (L.rule == config::IdleShare::kProportional) {
      std::vector<int64_t> w;
      for (const Cell& c : recipients) w.push_back(L.cells[c].allocated);
      const std::vector<int64_t> s = split(pool, w);
      for (size_t i = 0; i < recipients.size(); ++i) L.cells[recipients[i]].idle_share += s[i];
    } else {  // even: equal per team, then in proportion to allocation inside the team
      std::vector<std::string> teams;
      for (const Cell& c : recipients)
        if (std::find(teams.begin(), teams.end(), c.team) == teams.end()) teams.push_back(c.team);
      std::sort(teams.begin(), teams.end());
      const std::vector<int64_t> per_team = split(pool, std::vector<int64_t>(teams.size(), 1));
      for (size_t t = 0; t < teams.size(); ++t) {
        std::vector<Cell> mine;
        std::vector<int64_t> w;
        for (const Cell& c : recipients)
          if (c.team == teams[t]) mine.push_back(c), w.push_back(L.cells[c].allocated);
        const std::vector<int64_t> s = split(per_team[t], w);
        for (size_t i = 0; i < mine.size(); ++i) L.cells[mine[i]].idle_share += s[i];
      }
    }
  }
  // Cost per cell: the pool's price when it has one (spot hours at spot prices), else the model rate.
  for (auto& [c, am] : L.cells) {
    auto r = L.rates_micro.find(c.model);
    int64_t rate = r == L.rates_micro.end() ? 0 : r->second;
    if (auto pr = L.pool_rates_micro.find(c.pool); pr != L.pool_rates_micro.end()) rate = pr->second;
    am.allocated_cost = div_round_half_even(__int128(am.allocated) * rate, kMsPerGpuHour);
    am.idle_share_cost = div_round_half_even(__int128(am.idle_share) * rate, kMsPerGpuHour);
    am.interrupted_cost = div_round_half_even(__int128(am.interrupted) * rate, kMsPerGpuHour);
  }
  // Interruption losses per (model, pool) for the usage report.
  for (ModelUsage& u : L.usage)
    for (const auto& [c, am] : L.cells)
      if (c.model == u.model && c.pool == u.pool) {
        u.interrupted += am.interrupted;
        u.interrupted_cost += am.interrupted_cost;
        u.interruptions += am.interruptions;
      }
  return L;
}

Report aggregate(const Ledger& ledger, const std::vector<Dim>& by, const CellFilter& visible) {
  Report rep;
  rep.by = by;
  std::map<std::vector<std::string>, Amounts> rows;
  for (const auto& [c, am] : ledger.cells) {
    if (visible && !visible(c)) continue;
    std::vector<std::string> key;
    for (Dim d : by) key.push_back(cell_value(c, d));
    rows[key] += am;
    rep.totals += am;
  }
  for (auto& [k, am] : rows) rep.rows.push_back(Row{k, am});  // std::map: key order, a total order
  return rep;
}

}  // namespace tessera::server::accounting
