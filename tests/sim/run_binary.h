// Test helper: runs the real `tessera` binary with a shell-quoted argument string and returns its
// exit status and output (stderr merged unless asked otherwise).
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>
#include <utility>

namespace tessera::testing {

inline std::pair<int, std::string> run_tessera(const std::string& args, bool merge_stderr = true) {
  const std::string cmd = std::string(TESSERA_BINARY) + " " + args + (merge_stderr ? " 2>&1" : " 2>/dev/null");
  FILE* f = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), f)) out.append(buf.data(), n);
  const int status = pclose(f);
  return {WEXITSTATUS(status), out};
}

}  // namespace tessera::testing
