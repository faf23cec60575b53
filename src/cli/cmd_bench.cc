#include "cli/commands.h"

namespace tessera::cli {
void register_bench(CLI::App& app) { app.add_subcommand("bench", "Benchmarks (placement at scale)"); }
}  // namespace tessera::cli
