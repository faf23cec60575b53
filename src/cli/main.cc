// tessera: one binary, subcommands per layer. Usage errors exit with status 2, failures with 1.
#include <CLI/CLI.hpp>

#include <csignal>
#include <functional>
#include <memory>
#include <string_view>
#include <utility>

#include "cli/commands.h"

namespace {

// The top-level verbs in the order `tessera --help` lists them, each with the function that adds it
// (and its options). A function may add more verbs than the one named. Building every verb's options
// costs a few milliseconds on each start, so a command line that names a verb first builds only that
// verb's function (docs/performance.md, "CLI start"); anything else (no verb, an option first, an
// unknown word) builds them all, so `tessera --help` and every error read as before. A verb missing
// here still works: it falls back to the full tree.
void add_bench(CLI::App& app) {
  tessera::cli::register_bench(app);
  tessera::cli::register_bench_api(*app.get_subcommand("bench"));
  tessera::cli::register_bench_attack(*app.get_subcommand("bench"));
}

struct VerbGroup {
  std::initializer_list<std::string_view> verbs;
  void (*add)(CLI::App&);
};

const VerbGroup kGroups[] = {
    {{"sim"}, tessera::cli::register_sim},
    {{"bench"}, add_bench},
    {{"server"}, tessera::cli::register_server},
    // register_client adds all the REST client verbs; the common ones have their own entry first.
    {{"submit"}, tessera::cli::register_submit},
    {{"jobs", "priority", "show", "logs"}, tessera::cli::register_job_verbs},
    {{"cancel", "hold", "release", "requeue"}, tessera::cli::register_workflow},
    {{"run"}, tessera::cli::register_run},
    {{"history"}, tessera::cli::register_history},
    {{"queues", "nodes", "cordon", "drain", "resume", "interrupt", "token", "whoami", "admin"},
     tessera::cli::register_client},
    {{"agent"}, tessera::cli::register_agent},
    {{"up"}, tessera::cli::register_up},
    {{"report"}, tessera::cli::register_report},
    {{"plan"}, tessera::cli::register_plan},
};

void add_all(CLI::App& app) {
  tessera::cli::register_sim(app);
  add_bench(app);
  tessera::cli::register_server(app);
  tessera::cli::register_client(app);
  tessera::cli::register_agent(app);
  tessera::cli::register_up(app);
  tessera::cli::register_report(app);
  tessera::cli::register_plan(app);
}

std::unique_ptr<CLI::App> make_app() {
  auto app = std::make_unique<CLI::App>("Tessera: a GPU cluster scheduler and orchestrator");
  app->require_subcommand(1);
  app->set_version_flag("--version", "tessera 0.1.0");
  return app;
}

// The app for this command line: only the named verb's group when argv[1] is a known verb (and the
// group did add it), else every verb.
std::unique_ptr<CLI::App> build_app(int argc, char** argv) {
  if (argc > 1) {
    const std::string_view verb = argv[1];
    for (const VerbGroup& g : kGroups)
      for (const std::string_view v : g.verbs)
        if (v == verb) {
          auto app = make_app();
          g.add(*app);
          const std::function<bool(const CLI::App*)> named = [&](const CLI::App* sub) { return sub->get_name() == verb; };
          if (!std::as_const(*app).get_subcommands(named).empty()) return app;
        }
  }
  auto app = make_app();
  add_all(*app);
  return app;
}

}  // namespace

int main(int argc, char** argv) {
  // A peer that closes a connection mid-write is an error to handle (EPIPE), never a reason to die.
  std::signal(SIGPIPE, SIG_IGN);
  const std::unique_ptr<CLI::App> owned = build_app(argc, argv);
  CLI::App& app = *owned;
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
