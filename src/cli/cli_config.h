// The CLI's own config file, ~/.config/tessera/config.yaml (or $XDG_CONFIG_HOME/tessera/config.yaml;
// TESSERA_CONFIG names another file), with the defaults a user would otherwise pass on every call:
//
//   server: http://gpu-head:8420
//   token_file: ~/.config/tessera/token     # or token: ... (a token_file keeps it out of the YAML)
//   queue: team-a                            # `tessera submit` without --queue
//
// Precedence, per setting: a flag, then the environment (TESSERA_SERVER, TESSERA_TOKEN), then this
// file, then the built-in default (http://127.0.0.1:8420, no token, no queue). Parsing and the
// precedence are pure functions (unit-tested in tests/cli); load_cli_config reads the file once.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace tessera::cli {

inline constexpr const char* kDefaultServer = "http://127.0.0.1:8420";

struct CliConfig {
  std::string path;        // the file it came from ("" = none)
  std::string server;      // "" = not set
  std::string token;       // "" = not set
  std::string token_file;  // "" = not set; "~/" expanded, relative to the file's directory
  std::string queue;       // "" = not set
};

using EnvLookup = std::function<std::optional<std::string>(const char*)>;

// The file to read: TESSERA_CONFIG if set, else $XDG_CONFIG_HOME/tessera/config.yaml, else
// $HOME/.config/tessera/config.yaml; `explicit_path` says whether TESSERA_CONFIG named it (then a
// missing file is an error). "" when there is no HOME either.
std::string cli_config_path(const EnvLookup& env, bool* explicit_path = nullptr);

// The file's text as a CliConfig. Keys: server, token, token_file, queue (strings); anything else is
// an error naming the key and the file. An empty file is an empty config.
Result<CliConfig> parse_cli_config(std::string_view text, const std::string& path, const EnvLookup& env);

// Reads the file cli_config_path names (none: an empty config). A file TESSERA_CONFIG names that
// cannot be read, or a malformed file, is an error that says which file.
Result<CliConfig> load_cli_config(const EnvLookup& env);

// The environment of this process, for the functions above.
EnvLookup process_env();

// Where a setting came from, for messages.
enum class Source { kFlag, kEnv, kConfig, kDefault, kNone };
const char* source_name(Source s);  // "flag", "environment", "config file", "default", "none"

struct Resolved {
  std::string value;
  Source source = Source::kNone;
};

// flag (if given) > env (if set and non-empty) > config (if non-empty) > fallback.
Resolved resolve_setting(const std::optional<std::string>& flag, const std::optional<std::string>& env,
                         const std::string& config, const std::string& fallback);

}  // namespace tessera::cli
