#include "cli/client_args.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>

namespace tessera::cli {

namespace {

std::string trim(std::string s) {
  const size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

}  // namespace

void fail(const std::string& verb, const std::string& msg, int code) {
  std::cerr << "tessera " << verb << ": " << msg << "\n";
  throw CLI::RuntimeError(code);
}

void add_conn_options(CLI::App* cmd, ConnArgs& c, bool json_flag) {
  cmd->add_option("--server", c.server,
                  "Tessera server URL http://HOST:PORT, or several separated by commas (controllers of one cluster: the "
                  "leader is found). Default: env TESSERA_SERVER, else the config file's server, else http://127.0.0.1:8420");
  cmd->add_option("--token", c.token, "API token (default: env TESSERA_TOKEN, else the config file's token or token_file)");
  cmd->add_option("--token-file", c.token_file, "read the API token from FILE (e.g. DATA_DIR/admin.token)");
  if (json_flag) cmd->add_flag("--json", c.json, "print the server's JSON instead of a table");
  cmd->add_option("--timeout", c.timeout, "seconds to wait for an answer")->capture_default_str();
}

std::string read_token_file(const std::string& verb, const std::string& path, const std::string& flag) {
  std::ifstream f(path);
  if (!f)
    fail(verb, flag + " " + path + ": cannot read it (" + std::strerror(errno) +
                   "); give the path of a token file such as DATA_DIR/admin.token");
  std::string t = trim(std::string(std::istreambuf_iterator<char>(f), {}));
  if (t.empty()) fail(verb, flag + " " + path + ": the file is empty; it should hold one token");
  return t;
}

namespace {

const Result<CliConfig>& loaded_cli_config() {
  static const Result<CliConfig> loaded = load_cli_config(process_env());
  return loaded;
}

}  // namespace

const CliConfig& cli_config(const std::string& verb) {
  const Result<CliConfig>& c = loaded_cli_config();
  if (!c.ok()) fail(verb, c.error().message, 2);
  return *c;
}

const CliConfig* cli_config_if_valid() {
  const Result<CliConfig>& c = loaded_cli_config();
  return c.ok() ? &*c : nullptr;
}

std::string resolve_token(const std::string& verb, const ConnArgs& c) {
  if (!c.token.empty()) return trim(c.token);
  if (!c.token_file.empty()) return read_token_file(verb, c.token_file);
  if (const char* env = std::getenv("TESSERA_TOKEN"); env && *env) return trim(env);
  const CliConfig& cfg = cli_config(verb);
  if (!cfg.token.empty()) return trim(cfg.token);
  if (!cfg.token_file.empty()) return read_token_file(verb, cfg.token_file, "token_file (config file " + cfg.path + ")");
  return {};
}

namespace {

Resolved server_setting(const std::string& verb, const ConnArgs& c) {
  std::optional<std::string> flag, env;
  if (!c.server.empty()) flag = c.server;
  if (const char* e = std::getenv("TESSERA_SERVER")) env = std::string(e);
  const std::string config = (flag || (env && !env->empty())) ? std::string() : cli_config(verb).server;
  return resolve_setting(flag, env, config, kDefaultServer);
}

}  // namespace

std::string resolve_server(const std::string& verb, const ConnArgs& c) { return server_setting(verb, c).value; }

std::unique_ptr<ApiClient> connect(const std::string& verb, const ConnArgs& c, int read_timeout) {
  if (c.timeout <= 0) fail(verb, "--timeout: must be > 0 seconds", 2);
  cli_config(verb);  // a malformed config file is reported even when flags and env give everything
  ClientOptions o;
  const Resolved server = server_setting(verb, c);
  o.server = server.value;
  o.token = resolve_token(verb, c);
  o.read_timeout_s = read_timeout > 0 ? std::max(read_timeout, c.timeout) : c.timeout;
  o.connect_timeout_s = std::min(c.timeout, 10);
  auto client = ApiClient::create(o);
  if (!client.ok()) {
    std::string msg = client.error().message;
    if (server.source == Source::kEnv) msg += " (from TESSERA_SERVER)";
    if (server.source == Source::kConfig) msg += " (from server: in the config file " + cli_config(verb).path + ")";
    fail(verb, msg, 2);
  }
  return std::move(*client);
}

}  // namespace tessera::cli
