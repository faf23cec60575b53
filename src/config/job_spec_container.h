// A job spec's `container:` (image, user, network) and `mounts:` (datasets, volumes and host paths
// the cluster's `storage:` declares, storage_config.h): the types, their strict parsing from the spec's
// JSON tree and their canonical JSON. job_spec.h includes this; job_spec_from_json and
// job_spec_to_json call it. The path and name rules are shared with storage_config.cc. Value types;
// pure functions (thread-safe).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace tessera::config {

enum class ContainerNetwork : uint8_t { kHost, kNone };
const char* container_network_name(ContainerNetwork n);  // "host", "none"

struct ContainerSpec {
  std::string image;   // image reference, 1..512 bytes, no whitespace or control characters
  std::string user;    // "UID" or "UID:GID" (never 0); "" = the agent's task user for the job (default nobody)
  ContainerNetwork network = ContainerNetwork::kHost;
  bool operator==(const ContainerSpec&) const = default;
};

enum class MountKind : uint8_t { kDataset, kVolume, kHostPath };
const char* mount_kind_name(MountKind k);  // "dataset", "volume", "host_path"

struct MountSpec {
  MountKind kind = MountKind::kDataset;
  std::string source;              // dataset/volume name, or absolute host path
  std::string path;                // absolute, inside the container
  std::optional<bool> read_only;   // nullopt = the source's default (datasets read-only)
  bool operator==(const MountSpec&) const = default;
};

inline constexpr size_t kMaxMounts = 64;
inline constexpr size_t kMaxImageBytes = 512;
inline constexpr size_t kMaxMountPathBytes = 1024;
inline constexpr size_t kMaxSourceNameBytes = 128;

// Why `p` is not an absolute, lexically normal path of at most 1024 bytes ("/" alone, or "/"-joined
// components none of which is empty, "." or ".."; valid UTF-8 without control characters), or ""
// when it is one.
std::string path_problem(std::string_view p);
// Whether `p` is `prefix` or under it (prefix + "/..."); both lexically normal.
bool path_within(std::string_view p, std::string_view prefix);
// Dataset and volume names: [A-Za-z0-9._-]{1,128}.
bool valid_source_name(std::string_view name);

// The spec's `container` value (an object; the caller skips absent or null). Errors name
// "container.<field>".
Status parse_container(const nlohmann::json& v, std::optional<ContainerSpec>& out);
// The spec's `mounts` value (a list; the caller skips absent or null). A non-empty list needs a
// container; no two mounts share a path and none is `checkpoint_dir`. Errors name "mounts[i].<field>".
Status parse_mounts(const nlohmann::json& v, bool has_container, const std::string& checkpoint_dir,
                    std::vector<MountSpec>& out);
// Canonical JSON: null or {image, user, network}; [{dataset|volume|host_path, path, read_only}].
nlohmann::json container_to_json(const std::optional<ContainerSpec>& c);
nlohmann::json mounts_to_json(const std::vector<MountSpec>& mounts);

}  // namespace tessera::config
