// `tessera bench cluster`: runs tessera-bench-cluster, installed beside this binary, with the rest of
// the command line (`tessera bench cluster --help` lists its options). The live-scale benchmark is its
// own executable so that its HTTP client library (libcurl) is not loaded by every tessera command.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "cli/commands.h"

namespace tessera::cli {

void register_bench_cluster(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("cluster", "The real controller driven by hollow nodes (agent protocol over HTTP, fake GPUs) "
                                              "and REST clients: submits/s, submit->start, heartbeats, CPU, RSS "
                                              "(`tessera bench cluster --help` for its options)");
  cmd->prefix_command();
  cmd->set_help_flag();  // --help goes to tessera-bench-cluster, which knows the options
  cmd->callback([cmd] {
    std::error_code ec;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    const std::string exe = ((ec ? std::filesystem::path(".") : self.parent_path()) / "tessera-bench-cluster").string();
    std::vector<std::string> args{exe};
    for (const std::string& a : cmd->remaining()) args.push_back(a);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(exe.c_str(), argv.data());
    std::cerr << "tessera bench cluster: cannot run " << exe << ": " << std::strerror(errno)
              << " (it is built beside tessera: cmake --build --preset release)\n";
    throw CLI::RuntimeError(2);
  });
}

}  // namespace tessera::cli
