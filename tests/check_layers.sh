#!/usr/bin/env bash
# Fails if src/core includes an outer layer or an I/O / thread / clock header.
set -u
src=${1:?usage: check_layers.sh SRC_DIR}
bad=$(grep -rnE '#include *[<"](sim/|server/|agent/|cli/|iostream|fstream|thread|mutex|chrono|filesystem|cstdio|httplib|sqlite3|nlohmann|CLI/|spdlog)' "$src/core" || true)
if [ -n "$bad" ]; then
  echo "core must stay pure (no outer layers, no I/O, threads or clock):"
  echo "$bad"
  exit 1
fi
echo "core is pure: $(ls "$src"/core/*.h "$src"/core/*/*.h 2>/dev/null | wc -l) headers checked"
