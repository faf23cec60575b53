// The CLI config file and the precedence of its settings: see cli_config.h.
#include "cli/cli_config.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace tessera::cli {
namespace {

std::optional<std::string> nonempty(const EnvLookup& env, const char* name) {
  auto v = env(name);
  if (v && v->empty()) return std::nullopt;
  return v;
}

}  // namespace

std::string cli_config_path(const EnvLookup& env, bool* explicit_path) {
  if (explicit_path) *explicit_path = false;
  if (auto p = nonempty(env, "TESSERA_CONFIG")) {
    if (explicit_path) *explicit_path = true;
    return *p;
  }
  if (auto x = nonempty(env, "XDG_CONFIG_HOME")) return *x + "/tessera/config.yaml";
  if (auto h = nonempty(env, "HOME")) return *h + "/.config/tessera/config.yaml";
  return {};
}

Result<CliConfig> parse_cli_config(std::string_view text, const std::string& path, const EnvLookup& env) {
  CliConfig c;
  c.path = path;
  auto bad = [&](const std::string& why) {
    return invalid_argument("config file " + path + ": " + why +
                            " (it holds server, token or token_file, and queue; e.g. `server: http://HOST:8420`)");
  };
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return bad("not YAML: " + std::string(e.what()));
  }
  if (!root || root.IsNull()) return c;
  if (!root.IsMap()) return bad("expected a mapping of settings");
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    std::string* out = key == "server" ? &c.server : key == "token" ? &c.token : key == "token_file" ? &c.token_file
                                                   : key == "queue" ? &c.queue : nullptr;
    if (!out) return bad("unknown setting '" + key + "'");
    if (!kv.second.IsScalar()) return bad(key + ": must be a string");
    *out = kv.second.Scalar();
  }
  if (!c.token.empty() && !c.token_file.empty()) return bad("give token or token_file, not both");
  if (!c.token_file.empty()) {
    if (c.token_file.rfind("~/", 0) == 0) {
      if (auto h = nonempty(env, "HOME")) c.token_file = *h + c.token_file.substr(1);
    } else if (c.token_file[0] != '/') {
      const std::filesystem::path dir = std::filesystem::path(path).parent_path();
      if (!dir.empty()) c.token_file = (dir / c.token_file).string();
    }
  }
  return c;
}

Result<CliConfig> load_cli_config(const EnvLookup& env) {
  bool explicit_path = false;
  const std::string path = cli_config_path(env, &explicit_path);
  if (path.empty()) return CliConfig{};
  std::ifstream f(path);
  if (!f) {
    if (!explicit_path && errno == ENOENT) return CliConfig{};
    const int e = errno;
    std::error_code ec;
    if (!explicit_path && !std::filesystem::exists(path, ec)) return CliConfig{};
    return invalid_argument("config file " + path + (explicit_path ? " (TESSERA_CONFIG)" : "") + ": cannot read it (" +
                            std::strerror(e) + ")" + (explicit_path ? "; unset TESSERA_CONFIG or fix the path" : ""));
  }
  const std::string text(std::istreambuf_iterator<char>(f), {});
  return parse_cli_config(text, path, env);
}

EnvLookup process_env() {
  return [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

const char* source_name(Source s) {
  switch (s) {
    case Source::kFlag: return "flag";
    case Source::kEnv: return "environment";
    case Source::kConfig: return "config file";
    case Source::kDefault: return "default";
    case Source::kNone: break;
  }
  return "none";
}

Resolved resolve_setting(const std::optional<std::string>& flag, const std::optional<std::string>& env,
                         const std::string& config, const std::string& fallback) {
  if (flag) return {*flag, Source::kFlag};
  if (env && !env->empty()) return {*env, Source::kEnv};
  if (!config.empty()) return {config, Source::kConfig};
  if (!fallback.empty()) return {fallback, Source::kDefault};
  return {};
}

}  // namespace tessera::cli
