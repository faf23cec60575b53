#!/usr/bin/env bash
# Fails if a layer includes one it must not (arrows point inward: core <- config <- sim, server <- cli),
# or if src/core includes an I/O / thread / clock header.
set -u
src=${1:?usage: check_layers.sh SRC_DIR}
fail=0
check() {  # check DIR REGEX WHY
  local bad
  bad=$(grep -rnE "#include *[<\"]($2)" "$src/$1" 2>/dev/null || true)
  if [ -n "$bad" ]; then
    echo "$1 $3:"
    echo "$bad"
    fail=1
  fi
}
check core 'config/|sim/|server/|agent/|cli/|iostream|fstream|thread|mutex|chrono|filesystem|cstdio|httplib|sqlite3|nlohmann|CLI/|spdlog' \
  "must stay pure (no outer layers, no I/O, threads or clock)"
check config 'sim/|server/|agent/|cli/|httplib|sqlite3' "depends on core only"
check sim 'server/|agent/|cli/' "depends on config and core only"
check server 'sim/|agent/|cli/' "depends on config and core only"
check agent 'sim/|server/|cli/|sqlite3' "depends on config and core only (talks to the server over HTTP)"
check bench 'server/|agent/|cli/|sqlite3' "depends on sim, config and core only (talks to the server over HTTP)"
[ "$fail" -eq 0 ] || exit 1
echo "layers hold: $(ls "$src"/core/*.h "$src"/core/*/*.h 2>/dev/null | wc -l) core headers pure; config, sim, server, agent, bench point inward"
