// What every HTTP client verb of `tessera` shares (cmd_client.cc, cmd_report.cc, cmd_agent.cc): the
// connection options (--server, --token, --token-file, --timeout, optionally --json), reading a
// token, connecting, and failing with one message on stderr. Single-threaded (one command per process).
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/api_client.h"

namespace tessera::cli {

struct ConnArgs {
  std::string server = "http://127.0.0.1:8420";
  std::string token, token_file;
  bool json = false;
  int timeout = 60;
};

// Prints "tessera VERB: MSG" to stderr and exits the command with `code` (2 = usage error).
[[noreturn]] void fail(const std::string& verb, const std::string& msg, int code = 1);

// --server (env TESSERA_SERVER), --token, --token-file, --timeout; --json when `json_flag`.
void add_conn_options(CLI::App* cmd, ConnArgs& c, bool json_flag = true);

// The token in `path`, trimmed; fails naming `flag` when the file cannot be read or is empty.
std::string read_token_file(const std::string& verb, const std::string& path, const std::string& flag = "--token-file");

// The token: --token, else --token-file, else TESSERA_TOKEN, else none.
std::string resolve_token(const std::string& verb, const ConnArgs& c);

// A client for --server with the token; the read timeout is --timeout (or read_timeout if longer).
std::unique_ptr<ApiClient> connect(const std::string& verb, const ConnArgs& c, int read_timeout = 0);

}  // namespace tessera::cli
