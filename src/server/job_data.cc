// A job's container and mounts against the cluster's storage. See job_data.h.
#include "server/job_data.h"

#include <algorithm>

namespace tessera::server {

using Json = nlohmann::json;
using config::MountKind;
using config::MountSpec;

namespace {

std::string field(size_t i, const MountSpec& m) {
  return "mounts[" + std::to_string(i) + "]." + config::mount_kind_name(m.kind);
}

std::string names_of(const std::vector<config::DataSource>& v) {
  std::string out;
  for (const auto& d : v) out += (out.empty() ? "" : ", ") + d.name;
  return out.empty() ? "none" : out;
}

const config::DataSource* source_of(const MountSpec& m, const config::StorageConfig& s) {
  return m.kind == MountKind::kDataset ? s.dataset(m.source) : m.kind == MountKind::kVolume ? s.volume(m.source) : nullptr;
}

}  // namespace

Status check_job_data(const config::JobSpec& spec, const config::StorageConfig& storage,
                      const std::vector<std::string>& queue_path) {
  const std::string queue = queue_path.empty() ? "" : queue_path.front();
  for (size_t i = 0; i < spec.mounts.size(); ++i) {
    const MountSpec& m = spec.mounts[i];
    const std::string at = field(i, m);
    if (m.kind == MountKind::kHostPath) {
      if (storage.host_paths.empty())
        return permission_denied(at + ": host paths may not be mounted on this cluster (an admin allows prefixes in the "
                                 "cluster config's storage.host_paths); mount a dataset or volume instead");
      if (!storage.host_path_allowed(m.source)) {
        std::string allowed;
        for (const std::string& p : storage.host_paths) allowed += (allowed.empty() ? "" : ", ") + p;
        return permission_denied(at + ": " + m.source + " is not within the host paths this cluster allows (" + allowed + ")");
      }
      continue;
    }
    const config::DataSource* d = source_of(m, storage);
    if (!d)
      return invalid_argument(at + ": unknown " + config::mount_kind_name(m.kind) + " \"" + m.source + "\"; this cluster declares " +
                              names_of(m.kind == MountKind::kDataset ? storage.datasets : storage.volumes));
    if (!d->allows_queue(queue_path)) {
      std::string allowed;
      for (const std::string& q : d->queues) allowed += (allowed.empty() ? "" : ", ") + q;
      return permission_denied(at + ": queue " + queue + " may not mount " + config::mount_kind_name(m.kind) + " " + m.source +
                               " (it is open to queues " + allowed + ")");
    }
    if (m.read_only == false && !d->writable)
      return invalid_argument("mounts[" + std::to_string(i) + "].read_only: " + config::mount_kind_name(m.kind) + " " + m.source +
                              " is read-only (a volume declared writable: true can be mounted with read_only: false)");
  }
  return {};
}

Result<std::vector<PoolId>> data_pools(const config::JobSpec& spec, const config::StorageConfig& storage,
                                       const std::vector<Pool>& pools) {
  std::vector<PoolId> out;
  bool any = false;
  for (const MountSpec& m : spec.mounts) any = any || source_of(m, storage) != nullptr;
  if (!any) return out;
  for (const Pool& p : pools) {
    bool all = true;
    for (const MountSpec& m : spec.mounts)
      if (const config::DataSource* d = source_of(m, storage)) all = all && d->path_on(p.name).has_value();
    if (all) out.push_back(p.id);
  }
  if (out.empty()) {
    std::string what;
    for (const MountSpec& m : spec.mounts)
      if (source_of(m, storage)) what += (what.empty() ? "" : ", ") + std::string(config::mount_kind_name(m.kind)) + " " + m.source;
    return invalid_argument("mounts: no pool holds all of " + what + " (storage.datasets/volumes say which pools have each)");
  }
  std::sort(out.begin(), out.end(), [](PoolId a, PoolId b) { return a.value < b.value; });
  return out;
}

Json task_data_json(const config::JobSpec& spec, const config::StorageConfig& storage, const std::string& pool, int64_t job_id) {
  Json out = Json::object();
  if (spec.container)
    out["container"] = Json{{"image", spec.container->image},
                            {"user", spec.container->user},
                            {"network", config::container_network_name(spec.container->network)}};
  else
    out["container"] = nullptr;
  Json mounts = Json::array();
  for (const MountSpec& m : spec.mounts) {
    std::string source = m.source;
    bool read_only = m.read_only.value_or(true);
    if (const config::DataSource* d = source_of(m, storage)) {
      const auto p = d->path_on(pool);
      if (!p) continue;  // the scheduler keeps the job off such pools
      source = *p;
      if (!m.read_only) read_only = m.kind == MountKind::kDataset || !d->writable;
    }
    mounts.push_back(Json{{"source", source}, {"path", m.path}, {"read_only", read_only}});
  }
  out["mounts"] = mounts;
  const auto store = storage.checkpoints_on(pool);
  out["checkpoint_host_dir"] = store ? Json(*store + "/job-" + std::to_string(job_id)) : Json("");
  return out;
}

}  // namespace tessera::server
