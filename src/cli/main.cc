// tessera: one binary, subcommands per layer. Usage errors exit with status 2, failures with 1.
#include <CLI/CLI.hpp>

#include <csignal>

#include "cli/commands.h"

int main(int argc, char** argv) {
  // A peer that closes a connection mid-write is an error to handle (EPIPE), never a reason to die.
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"Tessera: a GPU cluster scheduler and orchestrator"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tessera 0.1.0");
  tessera::cli::register_sim(app);
  tessera::cli::register_bench(app);
  tessera::cli::register_server(app);
  tessera::cli::register_bench_api(*app.get_subcommand("bench"));
  tessera::cli::register_bench_attack(*app.get_subcommand("bench"));
  tessera::cli::register_client(app);
  tessera::cli::register_agent(app);
  tessera::cli::register_up(app);
  tessera::cli::register_report(app);
  tessera::cli::register_plan(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {  // raised by a subcommand: its own exit status (1 = failed, 2 = usage)
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints help or the error
    return rc == 0 ? 0 : 2;
  }
  return 0;
}
