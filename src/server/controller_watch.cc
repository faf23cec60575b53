// Agents' watches (Controller::State, "agents' watches" in controller_state.h): a long poll each agent
// holds open, answered the moment something its node must hear becomes durable, so that a start,
// stop, checkpoint or signal reaches the agent in milliseconds instead of on its next heartbeat.
// Heartbeats stay the level-triggered truth: a watch answer says only "ask now". State thread only.
#include <chrono>

#include "server/controller_state.h"

namespace tessera::server {

int64_t Controller::State::seq_of(NodeId id) {
  if (node_seq.size() < cluster.nodes().size()) {
    const int64_t base =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    node_seq.resize(cluster.nodes().size(), base);
  }
  return node_seq[id.value];
}

std::vector<NodeId> Controller::State::nodes_told(const WriteBatch& b) const {
  std::set<uint32_t> nodes;
  for (const JobRow& row : b.jobs)
    if (const JobRecord* r = jobs.find(row.id))
      for (const TaskPlacement& p : r->job.placement) nodes.insert(p.node.value);
  // Tasks of ended or requeued attempts whose processes may still run must be stopped.
  if (!b.jobs.empty() && !stopping_tasks.empty()) {
    std::set<int64_t> ids;
    for (const JobRow& row : b.jobs) ids.insert(row.id);
    for (const StoppingTask& st : stopping_tasks)
      if (ids.count(st.job)) nodes.insert(st.placement.node.value);
  }
  // A MIG layout to apply ("mig/NODE/GPU").
  for (const auto& [key, value] : b.meta) {
    if (key.rfind("mig/", 0) != 0) continue;
    const size_t slash = key.rfind('/');
    if (slash <= 4) continue;
    if (auto id = cluster.find_node(key.substr(4, slash - 4)); id.ok()) nodes.insert(id->value);
  }
  std::vector<NodeId> out;
  for (uint32_t n : nodes) out.push_back(NodeId{n});
  return out;
}

void Controller::State::persist(WriteBatch b, std::function<void(Status)> done, std::optional<NodeId> answered) {
  std::vector<NodeId> told = nodes_told(b);
  if (answered) std::erase(told, *answered);
  if (told.empty()) return store->write(std::move(b), std::move(done));
  store->write(std::move(b), [this, told = std::move(told), done = std::move(done)](Status st) {
    if (done) done(st);
    if (st.ok()) loop.post([told](State& s) { s.notify_nodes(told); });
  });
}

void Controller::State::notify_nodes(const std::vector<NodeId>& nodes) {
  for (NodeId id : nodes) {
    if (size_t(id.value) >= cluster.nodes().size()) continue;
    const int64_t seq = seq_of(id) + 1;
    node_seq[id.value] = seq;
    auto it = watches.find(id.value);
    if (it == watches.end()) continue;
    for (NodeWatch& w : it->second) w.done(Json{{"seq", seq}});
    watches.erase(it);
  }
}

void Controller::State::watch(NodeId id, NodeWatch w) {
  const int64_t seq = seq_of(id);
  if (w.seen != seq) return w.done(Json{{"seq", seq}});
  std::vector<NodeWatch>& open = watches[id.value];
  if (open.size() >= kMaxWatchesPerNode) {  // a watch left behind (a client that gave up): answered now
    open.front().done(Json{{"seq", seq}});
    open.erase(open.begin());
  }
  next_watch_expiry = std::min(next_watch_expiry, w.until);
  open.push_back(std::move(w));
}

void Controller::State::expire_watches(Clock::time_point now) {
  if (now < next_watch_expiry) return;
  next_watch_expiry = Clock::time_point::max();
  for (auto it = watches.begin(); it != watches.end();) {
    const int64_t seq = seq_of(NodeId{it->first});
    std::erase_if(it->second, [&](NodeWatch& w) {
      if (w.until > now) return next_watch_expiry = std::min(next_watch_expiry, w.until), false;
      w.done(Json{{"seq", seq}});
      return true;
    });
    it = it->second.empty() ? watches.erase(it) : std::next(it);
  }
}

void Controller::agent_watch(const Principal& who, const Json& body, std::function<void(Result<Json>)> done) {
  auto parsed = parse_watch(body);
  if (!parsed.ok()) return done(parsed.error());
  const WatchRequest req = std::move(*parsed);
  state_->loop.post([who, req, done = std::move(done)](State& s) {
    if (Status st = s.may_speak_for(who, req.node, "watch"); !st.ok()) return done(st.error());
    auto nid = s.cluster.find_node(req.node);
    if (!nid.ok()) return done(not_found(unknown_node_text(s.cluster, req.node)));
    s.watch(*nid, State::NodeWatch{req.seen, Clock::now() + std::chrono::milliseconds(req.wait_ms), done});
  });
}

}  // namespace tessera::server
