#include "cli/commands.h"

namespace tessera::cli {
void register_sim(CLI::App& app) { app.add_subcommand("sim", "Simulations and experiments"); }
}  // namespace tessera::cli
