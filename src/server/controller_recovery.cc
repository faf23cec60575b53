// Controller::State: recovery at start. What the store holds (node states, fair-share usage, MIG
// layouts, jobs) is loaded into a fresh State; placed jobs hold their resources again and wait for
// their agents to confirm them (TaskRun::recovered).
#include "server/controller_state.h"

#include <algorithm>
#include <optional>

namespace tessera::server {

Result<WriteBatch> recover(Controller::State& s, const LoadedState& loaded) {
  WriteBatch fix;
  for (const auto& [key, value] : loaded.meta) {
    Json v = Json::parse(value, nullptr, false);
    if (v.is_discarded()) continue;
    if (key.rfind("node/", 0) == 0) {
      auto id = s.cluster.find_node(key.substr(5));
      if (!id.ok()) continue;
      NodeAdmin& na = s.node_admin[id->value];
      na.state = parse_node_admin_state(v.value("state", "ready"));
      na.reason = v.value("reason", "");
      na.interrupted = v.value("interrupted", false);
      na.reclaimed = v.value("reclaimed", false);
      na.notice_cordon = v.value("notice_cordon", false);
      na.reclaim_at = v.value("reclaim_at", int64_t(-1));
      na.last_notice = v.value("last_notice", int64_t(-1));
    } else if (key.rfind("usage/", 0) == 0) {
      auto q = s.tree->find(key.substr(6));
      if (!q.ok()) continue;
      if (s.usage.size() != s.tree->size()) s.usage.assign(s.tree->size(), 0.0);
      // Decayed over the time the controller was down (nothing ran that it knows of).
      s.usage[q->value] = decay_usage(v.value("usage", 0.0), 0.0, std::max<int64_t>(0, s.now() - v.value("at", s.now())),
                                      s.config.scheduler.usage_half_life);
    } else if (key == "scheduler/reservation" && v.is_object()) {
      // The cycle ignores a holder that is no longer pending; a value we did not write is dropped.
      const Json job = v.value("job", Json()), start = v.value("start", Json());
      auto id = [](const Json& x) -> std::optional<JobId> {
        if (!x.is_number_unsigned() || x.get<uint64_t>() >= UINT32_MAX) return std::nullopt;
        return JobId{uint32_t(x.get<uint64_t>())};
      };
      if (id(job) && start.is_number_integer()) {
        HeldReservation held{*id(job), start.get<Time>(), {}};
        const Json promised = v.value("promised", Json());
        if (promised.is_number_integer()) held.promised = promised.get<Time>();
        const Json ahead = v.value("ahead", Json::array());
        for (const Json& a : ahead.is_array() ? ahead : Json::array())
          if (id(a)) held.ahead.push_back(*id(a));
        std::sort(held.ahead.begin(), held.ahead.end());
        s.reservation = std::move(held);
      }
    } else if (key.rfind("mig/", 0) == 0) {
      const std::string rest = key.substr(4);
      const auto slash = rest.rfind('/');
      auto id = s.cluster.find_node(rest.substr(0, slash));
      if (!id.ok()) continue;
      char* end = nullptr;
      const long index = slash == std::string::npos ? -1 : std::strtol(rest.c_str() + slash + 1, &end, 10);
      if (index < 0 || *end != '\0' || size_t(index) >= s.cluster.node(*id).gpus.size()) continue;  // not a key we write
      const GpuRef g{*id, uint16_t(index)};
      std::vector<MigInstance> layout;
      const GpuModel* model = s.cluster.node(*id).gpus[g.index].model;
      for (const Json& m : v.value("layout", Json::array())) {
        const MigProfile* p = model->find_profile_id(m.value("profile", -1));
        if (p) layout.push_back(MigInstance{p->id, uint8_t(m.value("start", 0)), uint8_t(p->memory_slices), false});
      }
      (void)s.cluster.set_mig_layout(g, v.value("enabled", false), layout);
    }
  }
  for (uint32_t i = 0; i < s.cluster.node_count(); ++i) s.refresh_schedulable(NodeId{i});
  for (const JobRow& row : loaded.jobs) {
    auto rec = record_from_json(Json::parse(row.record, nullptr, false), *s.tree, s.cluster);
    if (!rec.ok()) return internal_error("store: job " + std::to_string(row.id) + ": " + rec.error().message);
    JobRecord r = std::move(*rec);
    // The pools holding its data, by today's storage config (a pool that lost a dataset no longer
    // takes the job; a job whose data is on no pool any more waits, saying so).
    if (auto pools = data_pools(r.spec, s.config.storage, s.cluster.pools()); pools.ok()) r.job.gang.task.pools = *pools;
    else r.job.gang.task.pools = {PoolId(uint32_t(s.cluster.pools().size()))};
    s.next_id = std::max(s.next_id, r.id + 1);
    if (!r.idempotency_key.empty()) s.by_idempotency_key[{r.job.user, r.idempotency_key}] = r.id;
    if (placed(r.job.state)) {
      // Recreate MIG instances the placement holds, then hold its resources again.
      std::vector<TaskPlacement> ps = r.job.placement;
      for (TaskPlacement& p : ps)
        for (GpuGrant& g : p.gpus) {
          if (g.kind != GrantKind::kMig) continue;
          const Gpu& gpu = s.cluster.node(p.node).gpus[g.gpu];
          bool exists = false;
          for (const MigInstance& m : gpu.mig.instances()) exists = exists || (m.start == g.mig_start && m.profile_id == g.mig_profile);
          g.mig_create = !exists;
        }
      if (s.cluster.apply_all(ps).ok()) {
        r.tasks.assign(r.job.placement.size(), TaskRun{});
        for (TaskRun& tr : r.tasks) tr.recovered = true;
      } else {
        r.job.placement.clear();
        r.job.state = JobState::kPending;
        fix.events.push_back(s.event(r.id, EventKind::kRequeued, "controller",
                                     Json{{"reason", "its placement no longer fits the configured cluster after restart"}}));
        fix.jobs.push_back(s.row(r));
      }
    }
    if (active(r.job.state)) s.active_ids.insert(r.id);
    if (placed(r.job.state)) s.mark_placed(r);
    if (r.array_job > 0) s.arrays[r.array_job].push_back(r.id);  // rows load in id order: index order
    s.jobs.insert(std::move(r));
  }
  return fix;
}

}  // namespace tessera::server
