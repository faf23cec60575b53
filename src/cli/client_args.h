// What every HTTP client verb of `tessera` shares (cmd_client.cc, cmd_report.cc, cmd_agent.cc): the
// connection options (--server, --token, --token-file, --timeout, optionally --json), reading a
// token, connecting, and failing with one message on stderr. Single-threaded (one command per process).
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/api_client.h"
#include "cli/cli_config.h"

namespace tessera::cli {

struct ConnArgs {
  std::string server;  // "" = not given: TESSERA_SERVER, else the config file's, else http://127.0.0.1:8420
  std::string token, token_file;
  bool json = false;
  int timeout = 60;
};

// Prints "tessera VERB: MSG" to stderr and exits the command with `code` (2 = usage error).
[[noreturn]] void fail(const std::string& verb, const std::string& msg, int code = 1);

// --server, --token, --token-file, --timeout; --json when `json_flag`. The environment and the config
// file fill in what the flags leave out (resolve_server, resolve_token).
void add_conn_options(CLI::App* cmd, ConnArgs& c, bool json_flag = true);

// The token in `path`, trimmed; fails naming `flag` when the file cannot be read or is empty.
std::string read_token_file(const std::string& verb, const std::string& path, const std::string& flag = "--token-file");

// The token: --token, else --token-file, else TESSERA_TOKEN, else the config file's token or
// token_file (cli_config.h), else none.
std::string resolve_token(const std::string& verb, const ConnArgs& c);

// The server URL: --server, else TESSERA_SERVER, else the config file's, else http://127.0.0.1:8420.
std::string resolve_server(const std::string& verb, const ConnArgs& c);

// The CLI config file (~/.config/tessera/config.yaml or TESSERA_CONFIG), read once per process; a
// malformed file fails the command (exit 2) naming the file.
const CliConfig& cli_config(const std::string& verb);
// The same file, read once with cli_config; null when it is malformed (nothing printed).
const CliConfig* cli_config_if_valid();

// A client for --server with the token; the read timeout is --timeout (or read_timeout if longer).
std::unique_ptr<ApiClient> connect(const std::string& verb, const ConnArgs& c, int read_timeout = 0);

}  // namespace tessera::cli
