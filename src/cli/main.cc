// tessera and tessera-full: one command line, two executables built from this file
// (docs/performance.md, "CLI start"). Usage errors exit with status 2, failures with 1.
//
// tessera-full (built with TESSERA_FULL) has every verb, with the server's, agent's and simulator's
// libraries. `tessera` has only the client verbs (submit ... report: REST calls), is linked without
// shared libraries where the toolchain allows (src/cli/CMakeLists.txt) and has no HTTP or TLS library,
// so that a client verb starts in a few milliseconds. Every other command line (server, agent, up,
// sim, bench, plan, admin; no verb, an option first or an unknown word, so `tessera --help` and every
// error read as before; a server URL that may be https) it hands to tessera-full, installed beside
// it (run_full), with execv: the same process and arguments, so the output, exit status and signals
// are tessera-full's own.
#include <CLI/CLI.hpp>

#include <csignal>
#include <functional>
#include <memory>
#include <string_view>
#include <utility>

#include "cli/commands.h"

#ifdef TESSERA_FULL
#include <sys/prctl.h>

#include <cstring>
#else
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "cli/client_args.h"
#endif

namespace {

using namespace tessera::cli;

// The top-level verbs in the order `tessera --help` lists them, each with the function that adds it
// (and its options). A function may add more verbs than the one named. Building every verb's options
// costs a few milliseconds on each start, so a command line that names a verb first builds only that
// verb's function; anything else (no verb, an option first, an unknown word) builds them all, so
// `tessera --help` and every error read as before. A verb missing here still works: it falls back to
// the full tree.
struct VerbGroup {
  std::initializer_list<std::string_view> verbs;
  void (*add)(CLI::App&);
};

#ifdef TESSERA_FULL
void add_bench(CLI::App& app) {
  register_bench(app);
  register_bench_api(*app.get_subcommand("bench"));
  register_bench_attack(*app.get_subcommand("bench"));
}
#endif

const VerbGroup kGroups[] = {
#ifdef TESSERA_FULL
    {{"sim"}, register_sim},
    {{"bench"}, add_bench},
    {{"server"}, register_server},
#endif
    {{"submit"}, register_submit},
    {{"jobs", "priority", "show", "logs"}, register_job_verbs},
    {{"cancel", "hold", "release", "requeue"}, register_workflow},
    {{"run"}, register_run},
    {{"history"}, register_history},
    {{"queues", "nodes", "cordon", "drain", "resume", "interrupt"}, register_infra},
    {{"token", "whoami"}, register_tokens},
#ifdef TESSERA_FULL
    {{"admin"}, register_admin},
    {{"agent"}, register_agent},
    {{"up"}, register_up},
#endif
    {{"report"}, register_report},
#ifdef TESSERA_FULL
    {{"plan"}, register_plan},
#endif
};

std::unique_ptr<CLI::App> make_app() {
  auto app = std::make_unique<CLI::App>("Tessera: a GPU cluster scheduler and orchestrator");
  app->require_subcommand(1);
  app->set_version_flag("--version", "tessera 0.1.0");
  return app;
}

// The app with only the group of verb argv[1], when it is a known verb (and the group did add it).
std::unique_ptr<CLI::App> verb_app(int argc, char** argv) {
  if (argc < 2) return nullptr;
  const std::string_view verb = argv[1];
  for (const VerbGroup& g : kGroups)
    for (const std::string_view v : g.verbs)
      if (v == verb) {
        auto app = make_app();
        g.add(*app);
        const std::function<bool(const CLI::App*)> named = [&](const CLI::App* sub) { return sub->get_name() == verb; };
        if (!std::as_const(*app).get_subcommands(named).empty()) return app;
      }
  return nullptr;
}

#ifdef TESSERA_FULL

// The app for this command line: the named verb's group, else every verb.
std::unique_ptr<CLI::App> build_app(int argc, char** argv) {
  if (auto app = verb_app(argc, argv)) return app;
  auto app = make_app();
  for (const VerbGroup& g : kGroups) g.add(*app);
  return app;
}

#else

// Whether the command may talk to an https server: this binary has no TLS library, tessera-full
// runs those. Errs on the side of yes: "https://" in an argument before `--` (a --server URL, or
// anything else), in TESSERA_SERVER, or in the config file's server.
bool may_use_https(int argc, char** argv) {
  constexpr std::string_view kHttps = "https://";
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--") break;
    if (a.find(kHttps) != std::string_view::npos) return true;
  }
  if (const char* env = std::getenv("TESSERA_SERVER"); env && std::string_view(env).find(kHttps) != std::string_view::npos)
    return true;
  const CliConfig* config = cli_config_if_valid();  // read once: the verb uses it too
  return config && config->server.find(kHttps) != std::string::npos;
}

// Runs tessera-full with the same arguments (argv[0] too, so that its usage lines name the command
// as typed): the one beside this binary; else, for a copy of tessera taken elsewhere (as tests do),
// the build's (TESSERA_FULL_BUILT); else the first on PATH.
[[noreturn]] void run_full(char** argv) {
  char self[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  std::string beside = n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string("./tessera");
  beside = beside.substr(0, beside.rfind('/') + 1) + "tessera-full";
  ::execv(beside.c_str(), argv);
  const int err = errno;
#ifdef TESSERA_FULL_BUILT
  if (err == ENOENT) ::execv(TESSERA_FULL_BUILT, argv);
#endif
  if (err == ENOENT) ::execvp("tessera-full", argv);
  std::cerr << "tessera: cannot run " << beside << ": " << std::strerror(err)
            << " (tessera-full is built beside tessera and runs every verb but the client ones: "
               "cmake --build --preset release, and install both)\n";
  std::exit(1);
}

// The app for this command line when this binary runs it: a client verb's group, or no verb at all
// for `tessera --version`; else tessera-full runs it.
std::unique_ptr<CLI::App> build_app(int argc, char** argv) {
  if (argc == 2 && std::string_view(argv[1]) == "--version") return make_app();
  if (auto app = verb_app(argc, argv); app && !may_use_https(argc, argv)) return app;
  run_full(argv);
}

#endif

}  // namespace

int main(int argc, char** argv) {
#ifdef TESSERA_FULL
  // Run by `tessera`, this process is named as typed (tessera) in ps and top, not tessera-full.
  if (argc > 0) {
    const char* slash = std::strrchr(argv[0], '/');
    ::prctl(PR_SET_NAME, slash ? slash + 1 : argv[0]);
  }
#endif
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
