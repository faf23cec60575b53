#include "sim/sim_provider.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

namespace tessera::sim {

Result<std::vector<TraceReclaim>> load_interruption_trace(const std::string& path) {
  std::ifstream in(path);
  if (!in) return not_found("interruption_trace " + path + ": cannot be read; give a CSV file \"time_s,nodes\"");
  std::vector<TraceReclaim> out;
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    if (lineno == 1 && line.rfind("time_s", 0) == 0) continue;
    std::istringstream s(line);
    TraceReclaim r;
    char comma = 0;
    if (!(s >> r.t >> comma >> r.nodes) || comma != ',' || r.t < 0 || r.nodes <= 0)
      return invalid_argument("interruption_trace " + path + ":" + std::to_string(lineno) +
                              ": expected \"time_s,nodes\" with time_s >= 0 and nodes > 0, got \"" + line + "\"");
    out.push_back(r);
  }
  std::stable_sort(out.begin(), out.end(), [](const TraceReclaim& a, const TraceReclaim& b) { return a.t < b.t; });
  return out;
}

namespace {
bool elastic_kind(PoolKind k) { return k == PoolKind::kOnDemand || k == PoolKind::kSpot; }
}  // namespace

Result<std::unique_ptr<SimProvider>> SimProvider::create(const ClusterState& cluster, bool elastic, uint64_t seed,
                                                         int64_t start) {
  std::unique_ptr<SimProvider> p(new SimProvider(cluster, seed ^ 0x5bd1e995ULL));
  p->start_ = start;
  for (const Pool& def : cluster.pools()) {
    PoolState ps;
    ps.def = def;
    ps.per_node_rate_s = def.kind == PoolKind::kSpot ? double(def.interruptions_per_million_hours) / 1e6 / 3600.0 : 0;
    if (def.kind == PoolKind::kSpot && !def.interruption_trace.empty()) {
      auto t = load_interruption_trace(def.interruption_trace);
      if (!t.ok()) return invalid_argument("pools." + def.name + ": " + t.error().message);
      ps.trace = std::move(*t);
      if (ps.trace.empty()) return invalid_argument("pools." + def.name + ".interruption_trace: " + def.interruption_trace + " has no reclaims");
    }
    p->pools_.push_back(std::move(ps));
  }
  std::vector<int> up_per_pool(p->pools_.size(), 0);
  for (const Node& n : cluster.nodes()) {
    Slot s;
    s.node = n.id;
    s.pool = n.pool;
    s.gpus = int(n.gpus.size());
    s.elastic = elastic && elastic_kind(n.pool_kind);
    const bool starts_up = !s.elastic || up_per_pool[n.pool.value] < p->pools_[n.pool.value].def.min_nodes;
    p->slots_.push_back(s);
    ++p->pools_[n.pool.value].in_state[int(State::kDown)];
    if (starts_up) {
      ++up_per_pool[n.pool.value];
      p->set_state(p->slots_.back(), State::kUp, start);
    }
  }
  for (size_t i = 0; i < p->pools_.size(); ++i) p->resample(PoolId(uint32_t(i)), start);
  return p;
}

void SimProvider::set_state(Slot& s, State st, int64_t now) {
  const bool billed = st != State::kDown;
  if (billed && s.billed_since < 0) s.billed_since = now;
  if (!billed && s.billed_since >= 0) {
    pools_[s.pool.value].billed_done += (now - s.billed_since) * s.gpus;
    s.billed_since = -1;
  }
  --pools_[s.pool.value].in_state[int(s.state)];
  ++pools_[s.pool.value].in_state[int(st)];
  s.state = st;
}

int64_t SimProvider::billed_gpu_seconds(PoolId p, int64_t now) const {
  int64_t b = pools_[p.value].billed_done;
  for (const Slot& s : slots_)
    if (s.pool == p && s.billed_since >= 0) b += (std::max(now, s.billed_since) - s.billed_since) * s.gpus;
  return b;
}

void SimProvider::resample(PoolId p, int64_t now) {
  PoolState& ps = pools_[p.value];
  if (!ps.trace.empty() || ps.per_node_rate_s <= 0) return;
  const int up = count(p, State::kUp);
  if (up == 0) {
    ps.next_reclaim.reset();
    return;
  }
  // Each event takes a batch; events come batch-times less often, so each node's rate is unchanged.
  const int batch = std::max(1, int(std::ceil(double(ps.def.correlated_pct) * up / 100.0)));
  const double rate = ps.per_node_rate_s * up / batch;
  ps.next_reclaim = now + 1 + int64_t(-std::log(unit()) / rate);
}

void SimProvider::interrupt(PoolId p, int count, int64_t now) {
  PoolState& ps = pools_[p.value];
  std::vector<size_t> up;
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].pool == p && slots_[i].state == State::kUp) up.push_back(i);
  for (int k = 0; k < count && !up.empty(); ++k) {
    const size_t pick = size_t(rng_.uniform(up.size()));
    Slot& s = slots_[up[pick]];
    up.erase(up.begin() + long(pick));
    set_state(s, State::kNotice, now);
    const int64_t at = now + ps.def.notice_s;
    ProviderEvent ev{ProviderEventKind::kInterruptionNotice, now, s.node, p, at, "spot reclaim"};
    queued_.emplace(std::make_pair(now, s.node.value), ev);
    ProviderEvent gone{ProviderEventKind::kNodeReclaimed, at, s.node, p, at, "spot reclaim"};
    queued_.emplace(std::make_pair(at, s.node.value), gone);
    ++reclaims_;
  }
}

Status SimProvider::request_nodes(PoolId pool, int count, int64_t now) {
  if (pool.value >= pools_.size()) return invalid_argument("request_nodes: unknown pool " + std::to_string(pool.value));
  const PoolState& ps = pools_[pool.value];
  if (!elastic_kind(ps.def.kind)) return invalid_argument("request_nodes: pool " + ps.def.name + " is not elastic");
  for (Slot& s : slots_) {
    if (count <= 0) break;
    if (s.pool != pool || s.state != State::kDown || !s.elastic) continue;
    set_state(s, State::kProvisioning, now);
    const int64_t at = now + std::max<int64_t>(1, ps.def.provisioning_delay_s);
    queued_.emplace(std::make_pair(at, s.node.value), ProviderEvent{ProviderEventKind::kNodeReady, at, s.node, pool, 0, ""});
    --count;
  }
  if (count > 0)
    queued_.emplace(std::make_pair(now, uint32_t(-1)),
                    ProviderEvent{ProviderEventKind::kRequestFailed, now, NodeId(), pool, 0,
                                  "pool " + ps.def.name + " has no more node slots (" + std::to_string(count) + " short)"});
  return {};
}

Status SimProvider::release_node(NodeId node, int64_t now) {
  if (node.value >= slots_.size()) return invalid_argument("release_node: unknown node");
  Slot& s = slots_[node.value];
  if (!s.elastic || s.state != State::kUp) return failed_precondition("release_node: node is not an up elastic node");
  set_state(s, State::kDown, now);
  resample(s.pool, now);
  return {};
}

std::vector<ProviderEvent> SimProvider::poll(int64_t now) {
  std::vector<ProviderEvent> out;
  for (;;) {
    const std::optional<int64_t> t = next_event_time();  // queued events, rate-process and trace reclaims
    if (!t || *t > now) break;
    bool did = false;
    for (size_t i = 0; i < pools_.size() && !did; ++i) {
      PoolState& ps = pools_[i];
      if (ps.next_reclaim && *ps.next_reclaim == *t) {
        const int up = count(PoolId(uint32_t(i)), State::kUp);
        const int batch = std::max(1, int(std::ceil(double(ps.def.correlated_pct) * up / 100.0)));
        interrupt(PoolId(uint32_t(i)), batch, *t);
        resample(PoolId(uint32_t(i)), *t);
        did = true;
      } else if (ps.trace_next < ps.trace.size() && start_ + ps.trace[ps.trace_next].t == *t) {
        interrupt(PoolId(uint32_t(i)), ps.trace[ps.trace_next].nodes, *t);
        ++ps.trace_next;
        did = true;
      }
    }
    if (did) continue;
    auto it = queued_.begin();
    ProviderEvent ev = it->second;
    queued_.erase(it);
    if (ev.kind == ProviderEventKind::kNodeReady) {
      Slot& s = slots_[ev.node.value];
      if (s.state != State::kProvisioning) continue;
      set_state(s, State::kUp, ev.t);
      resample(s.pool, ev.t);
    } else if (ev.kind == ProviderEventKind::kNodeReclaimed) {
      Slot& s = slots_[ev.node.value];
      if (s.state != State::kNotice) continue;
      set_state(s, State::kDown, ev.t);
      resample(s.pool, ev.t);
      // Not elastic (no autoscaler): the provider replaces the node after the provisioning delay.
      if (!s.elastic) {
        set_state(s, State::kProvisioning, ev.t);
        const int64_t at = ev.t + std::max<int64_t>(1, pools_[s.pool.value].def.provisioning_delay_s);
        queued_.emplace(std::make_pair(at, s.node.value), ProviderEvent{ProviderEventKind::kNodeReady, at, s.node, s.pool, 0, ""});
      }
    }
    out.push_back(std::move(ev));
  }
  return out;
}

std::optional<int64_t> SimProvider::next_event_time() const {
  std::optional<int64_t> t;
  if (!queued_.empty()) t = queued_.begin()->first.first;
  for (const PoolState& ps : pools_) {
    if (ps.next_reclaim) t = t ? std::min(*t, *ps.next_reclaim) : *ps.next_reclaim;
    if (ps.trace_next < ps.trace.size()) {
      const int64_t tt = start_ + ps.trace[ps.trace_next].t;
      t = t ? std::min(*t, tt) : tt;
    }
  }
  return t;
}

}  // namespace tessera::sim
