// A job spec's `container:` and `mounts:` (job_spec_container.h): strict parsing of the JSON tree (the
// YAML form arrives converted), every error naming its field path, and the canonical JSON. Stateless;
// thread-safe.
#include "config/job_spec_container.h"

#include <algorithm>
#include <array>

#include "config/text.h"
#include "config/yaml_fields.h"

namespace tessera::config {
namespace {

using json = nlohmann::json;

const std::vector<std::string> kContainerKeys = {"image", "user", "network"};
const std::vector<std::string> kMountKeys = {"dataset", "volume", "host_path", "path", "read_only"};
constexpr std::array<MountKind, 3> kKinds = {MountKind::kDataset, MountKind::kVolume, MountKind::kHostPath};
// Mount targets the container runtime provides itself.
constexpr std::array<std::string_view, 3> kRuntimeDirs = {"/proc", "/sys", "/dev"};
constexpr uint64_t kMaxId = 4294967294;  // (uid_t)-1 means "no change"

Error bad(const std::string& at, const std::string& why) { return invalid_argument(at + ": " + why); }

// For messages: cut short, control characters escaped (always valid UTF-8).
std::string in_quotes(std::string_view s) { return "\"" + escape_for_log(truncate_utf8(s, 64)) + "\""; }

std::string kind_of(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer()) return "integer";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "list";
  return "object";
}

bool present(const json& obj, const char* key) { return obj.contains(key) && !obj[key].is_null(); }

Status known_fields(const json& obj, const std::string& at, const std::vector<std::string>& keys) {
  for (const auto& [k, v] : obj.items())
    if (std::find(keys.begin(), keys.end(), k) == keys.end())
      return bad(at + "." + escape_for_log(truncate_utf8(k, 64)), "unknown field; expected one of " + join(keys));
  return {};
}

// A string of at most `max` bytes, valid UTF-8 without control characters.
Status text_of(const json& v, const std::string& at, size_t max, std::string& out) {
  if (!v.is_string()) {
    const bool scalar = v.is_number() || v.is_boolean();
    return bad(at, "must be a string, got " + kind_of(v) + (scalar ? " (quote it in YAML)" : ""));
  }
  const std::string& s = v.get_ref<const std::string&>();
  if (s.size() > max) return bad(at, "too long: " + std::to_string(s.size()) + " bytes; at most " + std::to_string(max));
  if (!printable_utf8(s)) return bad(at, "must be valid UTF-8 without control characters");
  out = s;
  return {};
}

// One id of container.user: digits, no leading zero, 1..kMaxId (0 is root).
Status user_id(std::string_view digits, const std::string& at, const std::string& user, const char* what) {
  const bool all_digits = !digits.empty() && digits.size() <= 10 &&
                          std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!all_digits || (digits.size() > 1 && digits[0] == '0'))
    return bad(at, "must be \"UID\" or \"UID:GID\" in digits without leading zeros, e.g. \"1000:1000\", got " + in_quotes(user));
  uint64_t v = 0;
  for (char c : digits) v = v * 10 + uint64_t(c - '0');
  if (v == 0)
    return bad(at, std::string(what) + " 0 is root's; jobs never run as root in their container: give another " + what +
                       ", e.g. 1000 (or leave user out: the node's task user for the job, never root)");
  if (v > kMaxId) return bad(at, std::string(what) + " " + std::string(digits) + " is out of range (at most " + std::to_string(kMaxId) + ")");
  return {};
}

}  // namespace

const char* container_network_name(ContainerNetwork n) { return n == ContainerNetwork::kNone ? "none" : "host"; }

const char* mount_kind_name(MountKind k) {
  switch (k) {
    case MountKind::kDataset: return "dataset";
    case MountKind::kVolume: return "volume";
    case MountKind::kHostPath: return "host_path";
  }
  return "dataset";
}

std::string path_problem(std::string_view p) {
  if (p.size() > kMaxMountPathBytes)
    return "too long: " + std::to_string(p.size()) + " bytes; at most " + std::to_string(kMaxMountPathBytes);
  if (!printable_utf8(p)) return "must be valid UTF-8 without control characters";
  if (p.empty() || p[0] != '/') return "must be an absolute path (starting with /), got " + in_quotes(p);
  if (p == "/") return "";
  if (p.back() == '/') return in_quotes(p) + " ends in \"/\"; write it without (e.g. \"/data\")";
  for (size_t start = 1; start <= p.size();) {
    size_t end = p.find('/', start);
    if (end == std::string_view::npos) end = p.size();
    const std::string_view part = p.substr(start, end - start);
    if (part.empty()) return in_quotes(p) + " has \"//\"; write the normal path with single slashes";
    if (part == "." || part == "..")
      return in_quotes(p) + " has a \"" + std::string(part) + "\" component; write the normal path without \".\" or \"..\"";
    start = end + 1;
  }
  return "";
}

bool path_within(std::string_view p, std::string_view prefix) {
  if (prefix == "/") return !p.empty() && p[0] == '/';
  return p.size() >= prefix.size() && p.substr(0, prefix.size()) == prefix &&
         (p.size() == prefix.size() || p[prefix.size()] == '/');
}

bool valid_source_name(std::string_view name) {
  return !name.empty() && name.size() <= kMaxSourceNameBytes && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
  });
}

Status parse_container(const json& v, std::optional<ContainerSpec>& out) {
  const std::string at = "container";
  if (!v.is_object())
    return bad(at, "must be an object like {image: localhost/train:1, user: \"1000:1000\", network: host}, got " + kind_of(v));
  TESSERA_TRY(known_fields(v, at, kContainerKeys));
  ContainerSpec c;
  if (!present(v, "image")) return bad(at + ".image", "required: the image to run, e.g. localhost/train:2026-11");
  TESSERA_TRY(text_of(v["image"], at + ".image", kMaxImageBytes, c.image));
  if (c.image.empty()) return bad(at + ".image", "must not be empty; give the image to run, e.g. localhost/train:2026-11");
  if (c.image.find(' ') != std::string::npos)
    return bad(at + ".image", in_quotes(c.image) + " has whitespace; an image reference has none");
  if (present(v, "user")) {
    TESSERA_TRY(text_of(v["user"], at + ".user", 32, c.user));
    if (!c.user.empty()) {
      const size_t colon = c.user.find(':');
      TESSERA_TRY(user_id(std::string_view(c.user).substr(0, colon), at + ".user", c.user, "uid"));
      if (colon != std::string::npos)
        TESSERA_TRY(user_id(std::string_view(c.user).substr(colon + 1), at + ".user", c.user, "gid"));
    }
  }
  if (present(v, "network")) {
    std::string n;
    TESSERA_TRY(text_of(v["network"], at + ".network", 64, n));
    if (n == "host") c.network = ContainerNetwork::kHost;
    else if (n == "none") c.network = ContainerNetwork::kNone;
    else return bad(at + ".network", "must be host or none, got " + in_quotes(n));
  }
  out = std::move(c);
  return {};
}

Status parse_mounts(const json& v, bool has_container, const std::string& checkpoint_dir, std::vector<MountSpec>& out) {
  if (!v.is_array())
    return bad("mounts", "must be a list of mounts like {dataset: imagenet, path: /data}, got " + kind_of(v));
  if (v.size() > kMaxMounts)
    return bad("mounts", "too many: " + std::to_string(v.size()) + "; at most " + std::to_string(kMaxMounts));
  if (!v.empty() && !has_container)
    return bad("mounts", "need container.image: bare processes see the host's files; run the job in a container "
                         "(container: {image: ...}) or drop mounts");
  out.clear();
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string at = "mounts[" + std::to_string(i) + "]";
    const json& m = v[i];
    if (!m.is_object()) return bad(at, "must be an object like {dataset: imagenet, path: /data}, got " + kind_of(m));
    TESSERA_TRY(known_fields(m, at, kMountKeys));
    MountSpec s;
    std::vector<std::string> given;
    for (MountKind k : kKinds)
      if (present(m, mount_kind_name(k))) {
        given.push_back(mount_kind_name(k));
        s.kind = k;
      }
    if (given.empty()) return bad(at, "needs a source: one of dataset, volume or host_path");
    if (given.size() > 1)
      return bad(at, "has more than one source (" + join(given) + "); give exactly one of dataset, volume or host_path");
    const std::string src_at = at + "." + mount_kind_name(s.kind);
    if (s.kind == MountKind::kHostPath) {
      TESSERA_TRY(text_of(m["host_path"], src_at, kMaxMountPathBytes, s.source));
      if (std::string why = path_problem(s.source); !why.empty()) return bad(src_at, why);
    } else {
      TESSERA_TRY(text_of(m[mount_kind_name(s.kind)], src_at, kMaxSourceNameBytes, s.source));
      if (!valid_source_name(s.source))
        return bad(src_at, in_quotes(s.source) + " is not a name: 1..128 characters of [A-Za-z0-9._-]");
    }
    if (!present(m, "path")) return bad(at + ".path", "required: where the mount appears inside the container, e.g. /data");
    TESSERA_TRY(text_of(m["path"], at + ".path", kMaxMountPathBytes, s.path));
    if (std::string why = path_problem(s.path); !why.empty()) return bad(at + ".path", why);
    if (s.path == "/") return bad(at + ".path", "must not be / (it would hide the image's files); mount at a directory such as /data");
    for (std::string_view dir : kRuntimeDirs)
      if (path_within(s.path, dir))
        return bad(at + ".path", in_quotes(s.path) + " is under " + std::string(dir) + ", which the container runtime provides; mount elsewhere");
    if (!checkpoint_dir.empty() && s.path == checkpoint_dir)
      return bad(at + ".path", in_quotes(s.path) + " is checkpoint.dir, where the job's checkpoint directory is mounted; use another path");
    for (size_t k = 0; k < out.size(); ++k)
      if (out[k].path == s.path)
        return bad(at + ".path", in_quotes(s.path) + " is also mounts[" + std::to_string(k) + "].path; each mount needs its own path");
    if (present(m, "read_only")) {
      if (!m["read_only"].is_boolean()) return bad(at + ".read_only", "must be true or false, got " + kind_of(m["read_only"]));
      s.read_only = m["read_only"].get<bool>();
    }
    out.push_back(std::move(s));
  }
  return {};
}

json container_to_json(const std::optional<ContainerSpec>& c) {
  if (!c) return nullptr;
  return {{"image", c->image}, {"user", c->user}, {"network", container_network_name(c->network)}};
}

json mounts_to_json(const std::vector<MountSpec>& mounts) {
  json l = json::array();
  for (const MountSpec& m : mounts)
    l.push_back({{mount_kind_name(m.kind), m.source},
                 {"path", m.path},
                 {"read_only", m.read_only ? json(*m.read_only) : json(nullptr)}});
  return l;
}

}  // namespace tessera::config
