// tessera sim scenario FILE...: runs timed scheduling scenarios (docs/scenarios.md) through the
// core scheduler; prints each unmet expectation and exits 1 if any, 2 on a bad file.
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "sim/schedule_sim.h"

namespace tessera::cli {

void register_scenario(CLI::App& sim) {
  auto files = std::make_shared<std::vector<std::string>>();
  auto verbose = std::make_shared<bool>(false);
  CLI::App* cmd = sim.add_subcommand("scenario", "Run timed scheduling scenarios and check their expectations");
  cmd->add_option("files", *files, "scenario YAML files")->required();
  cmd->add_flag("-v,--verbose", *verbose, "print every event");
  cmd->callback([files, verbose] {
    int failed = 0;
    for (const std::string& path : *files) {
      std::ifstream in(path);
      if (!in) {
        std::cerr << "tessera sim scenario: " << path << ": cannot open file\n";
        throw CLI::RuntimeError(2);
      }
      std::stringstream text;
      text << in.rdbuf();
      auto sc = sim::parse_schedule_scenario(text.str());
      if (!sc.ok()) {
        std::cerr << "tessera sim scenario: " << path << ": " << sc.error().message << "\n";
        throw CLI::RuntimeError(2);
      }
      auto r = sim::run_schedule_scenario(*sc);
      if (!r.ok()) {
        std::cerr << "tessera sim scenario: " << path << ": " << r.error().message << "\n";
        throw CLI::RuntimeError(2);
      }
      if (*verbose)
        for (const std::string& line : r->log) std::cout << "  " << line << "\n";
      std::cout << (r->ok() ? "PASS " : "FAIL ") << path << " (" << sc->name << "; " << r->cycles << " cycles, "
                << sc->expect.size() << " expectations)\n";
      for (const std::string& f : r->failures) std::cout << "  " << f << "\n";
      failed += r->ok() ? 0 : 1;
    }
    std::cout << (files->size() - size_t(failed)) << " passed, " << failed << " failed\n";
    if (failed > 0) throw CLI::RuntimeError(1);
  });
}

}  // namespace tessera::cli
