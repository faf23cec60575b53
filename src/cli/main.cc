// tessera: one binary, subcommands per layer.
#include <CLI/CLI.hpp>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"Tessera: a GPU cluster scheduler and orchestrator"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tessera 0.1.0");
  tessera::cli::register_sim(app);
  tessera::cli::register_bench(app);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
