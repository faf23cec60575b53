// The cluster config's `storage:` section (storage_config.h): parsing and validation against the
// config's pools and queues, and the lookups the controller and agents use. Stateless; thread-safe.
#include "config/storage_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>

#include "config/job_spec_container.h"
#include "config/text.h"
#include "config/yaml_fields.h"

namespace tessera::config {
namespace {

constexpr size_t kMaxSources = 1024;  // per list
constexpr size_t kMaxHostPaths = 256;

Error bad(const std::string& at, const std::string& why) { return invalid_argument(at + ": " + why); }
std::string in_quotes(const std::string& s) { return "\"" + escape_for_log(truncate_utf8(s, 64)) + "\""; }
bool has(const std::vector<std::string>& v, const std::string& x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// What the cluster declares, for checking names against.
struct Declared {
  std::vector<std::string> pools, queues;
};

Status scalar(const YAML::Node& v, const std::string& at, const std::string& what, std::string& out) {
  if (!v.IsScalar()) return bad(at, "must be " + what);
  out = v.Scalar();
  return {};
}

Status host_path(const YAML::Node& v, const std::string& at, std::string& out) {
  TESSERA_TRY(scalar(v, at, "an absolute host path such as /mnt/data", out));
  if (const std::string why = path_problem(out); !why.empty()) return bad(at, why);
  return {};
}

// {POOL: PATH, ...}: each pool declared ("default" always is), each path an absolute normal path.
Status pool_paths(const YAML::Node& n, const std::string& at, const Declared& d, std::map<std::string, std::string>& out) {
  if (!n.IsMap() || n.size() == 0) return bad(at, "must be a non-empty map of pool name to host path, e.g. {gpu-a: /mnt/a/data}");
  for (const auto& kv : n) {
    if (!kv.first.IsScalar()) return bad(at, "keys must be pool names");
    const std::string pool = kv.first.Scalar();
    const std::string pat = at + "." + escape_for_log(truncate_utf8(pool, 64));
    if (!has(d.pools, pool)) return bad(pat, "no such pool; declared pools: " + join(d.pools));
    std::string p;
    TESSERA_TRY(host_path(kv.second, pat, p));
    out[pool] = std::move(p);
  }
  return {};
}

Status queue_names(const YAML::Node& n, const std::string& at, const Declared& d, std::vector<std::string>& out) {
  if (!n.IsSequence()) return bad(at, "must be a list of queue names, e.g. [vision, nlp] (absent = every queue)");
  for (size_t k = 0; k < n.size(); ++k) {
    const std::string qat = at + "[" + std::to_string(k) + "]";
    std::string q;
    TESSERA_TRY(scalar(n[k], qat, "a queue name", q));
    if (!has(d.queues, q)) return bad(qat, "no such queue " + in_quotes(q) + "; declared queues: " + join(d.queues));
    if (has(out, q)) return bad(qat, in_quotes(q) + " listed twice");
    out.push_back(std::move(q));
  }
  return {};
}

// `datasets:` or `volumes:` (`key`): a list of {name, path, pools, queues[, writable]}.
Status sources(const YAML::Node& list, const std::string& key, const Declared& d, std::vector<DataSource>& out) {
  const std::string at = "storage." + key;
  const bool volumes = key == "volumes";
  if (!list.IsSequence()) return bad(at, "must be a list of {name, path or pools, queues}");
  if (list.size() > kMaxSources) return bad(at, "at most " + std::to_string(kMaxSources) + " entries");
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node n = list[i];
    const std::string sat = at + "[" + std::to_string(i) + "]";
    if (volumes) TESSERA_TRY(known_keys(n, sat, {"name", "path", "pools", "queues", "writable"}));
    else TESSERA_TRY(known_keys(n, sat, {"name", "path", "pools", "queues"}));  // datasets are read-only
    DataSource s;
    if (!n["name"]) return bad(sat + ".name", "required: 1..128 characters of [A-Za-z0-9._-]");
    TESSERA_TRY(scalar(n["name"], sat + ".name", "a name", s.name));
    if (!valid_source_name(s.name)) return bad(sat + ".name", in_quotes(s.name) + " is not a name: 1..128 characters of [A-Za-z0-9._-]");
    for (size_t k = 0; k < out.size(); ++k)
      if (out[k].name == s.name)
        return bad(sat + ".name", in_quotes(s.name) + " used twice (also " + key + "[" + std::to_string(k) + "])");
    if (const YAML::Node p = n["path"]; p && !p.IsNull()) TESSERA_TRY(host_path(p, sat + ".path", s.path));
    if (const YAML::Node p = n["pools"]; p && !p.IsNull()) TESSERA_TRY(pool_paths(p, sat + ".pools", d, s.pool_paths));
    if (s.path.empty() && s.pool_paths.empty())
      return bad(sat, "needs path (the host path on every pool) or pools ({POOL: host path})");
    if (const YAML::Node q = n["queues"]; q && !q.IsNull()) TESSERA_TRY(queue_names(q, sat + ".queues", d, s.queues));
    if (volumes) TESSERA_TRY(get(n, "writable", sat, s.writable));
    out.push_back(std::move(s));
  }
  return {};
}

Status checkpoints(const YAML::Node& n, const Declared& d, StorageConfig& out) {
  const std::string at = "storage.checkpoints";
  if (n.IsScalar()) return host_path(n, at, out.checkpoints);
  if (!n.IsMap()) return bad(at, "must be a host path, or {path: /mnt/ckpt, pools: {POOL: host path}}");
  TESSERA_TRY(known_keys(n, at, {"path", "pools"}));
  if (const YAML::Node p = n["path"]; p && !p.IsNull()) TESSERA_TRY(host_path(p, at + ".path", out.checkpoints));
  if (const YAML::Node p = n["pools"]; p && !p.IsNull()) TESSERA_TRY(pool_paths(p, at + ".pools", d, out.checkpoint_pool_paths));
  if (out.checkpoints.empty() && out.checkpoint_pool_paths.empty()) return bad(at, "needs path or pools");
  return {};
}

}  // namespace

std::optional<std::string> DataSource::path_on(const std::string& pool) const {
  if (auto it = pool_paths.find(pool); it != pool_paths.end()) return it->second;
  if (!path.empty()) return path;
  return std::nullopt;
}

bool DataSource::allows_queue(const std::vector<std::string>& queue_and_ancestors) const {
  if (queues.empty()) return true;
  return std::any_of(queues.begin(), queues.end(), [&](const std::string& q) { return has(queue_and_ancestors, q); });
}

std::optional<std::string> StorageConfig::checkpoints_on(const std::string& pool) const {
  if (auto it = checkpoint_pool_paths.find(pool); it != checkpoint_pool_paths.end()) return it->second;
  if (!checkpoints.empty()) return checkpoints;
  return std::nullopt;
}

bool StorageConfig::host_path_allowed(const std::string& p) const {
  return std::any_of(host_paths.begin(), host_paths.end(), [&](const std::string& prefix) { return path_within(p, prefix); });
}

const DataSource* StorageConfig::dataset(const std::string& name) const {
  for (const DataSource& s : datasets)
    if (s.name == name) return &s;
  return nullptr;
}

const DataSource* StorageConfig::volume(const std::string& name) const {
  for (const DataSource& s : volumes)
    if (s.name == name) return &s;
  return nullptr;
}

Status parse_storage_config(const YAML::Node& n, const std::vector<std::string>& pools,
                            const std::vector<std::string>& queues, StorageConfig& out) {
  const std::string at = "storage";
  if (!n.IsMap()) return bad(at, "must be a map of checkpoints, host_paths, datasets, volumes");
  TESSERA_TRY(known_keys(n, at, {"checkpoints", "host_paths", "datasets", "volumes"}));
  Declared d{pools, queues};
  if (!has(d.pools, "default")) d.pools.insert(d.pools.begin(), "default");
  StorageConfig s;
  if (const YAML::Node c = n["checkpoints"]; c && !c.IsNull()) TESSERA_TRY(checkpoints(c, d, s));
  if (const YAML::Node h = n["host_paths"]; h && !h.IsNull()) {
    if (!h.IsSequence()) return bad(at + ".host_paths", "must be a list of host directories jobs may mount, e.g. [/mnt/shared]");
    if (h.size() > kMaxHostPaths) return bad(at + ".host_paths", "at most " + std::to_string(kMaxHostPaths) + " entries");
    for (size_t i = 0; i < h.size(); ++i) {
      const std::string hat = at + ".host_paths[" + std::to_string(i) + "]";
      std::string p;
      TESSERA_TRY(host_path(h[i], hat, p));
      if (p == "/") return bad(hat, "\"/\" would let jobs mount every host file (/etc, /root, ...); list the directories they may mount");
      if (has(s.host_paths, p)) return bad(hat, in_quotes(p) + " listed twice");
      s.host_paths.push_back(std::move(p));
    }
  }
  if (const YAML::Node l = n["datasets"]; l && !l.IsNull()) TESSERA_TRY(sources(l, "datasets", d, s.datasets));
  if (const YAML::Node l = n["volumes"]; l && !l.IsNull()) TESSERA_TRY(sources(l, "volumes", d, s.volumes));
  out = std::move(s);
  return {};
}

}  // namespace tessera::config
