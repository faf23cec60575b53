#!/usr/bin/env bash
# Installs the Debian packages Tessera builds with, skipping those already present.
# Run as root (or with sudo available). Safe to run repeatedly.
# The web portal (web/, docs/portal.md) is built with node and npm: Debian's `npm` (which brings
# node 18) is added only when node or npm is missing, so a newer node already installed (e.g. from
# nodesource) is kept. Its browser tests drive Debian's `chromium`.
set -euo pipefail
packages=(
  g++ cmake ninja-build pkg-config
  libcli11-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # The client-only `tessera` is a static PIE (src/cli/CMakeLists.txt): libyaml-cpp-dev's libyaml-cpp.a,
  # and the static libc and libstdc++ that g++ brings (libc6-dev, libstdc++-12-dev).
  libyaml-cpp-dev libsqlite3-dev libssl-dev libcpp-httplib-dev libspdlog-dev libfmt-dev sqlite3
  libmicrohttpd-dev  # the controller's HTTP server (event-driven: slow clients hold no thread)
  libpq-dev      # the PostgreSQL store (docs/ha.md)
  postgresql-15  # its tests start a throwaway PostgreSQL server of their own
  libcurl4-openssl-dev  # tessera bench cluster: thousands of concurrent agent connections (curl multi)
  libjemalloc-dev  # tessera-full's allocator (src/cli/CMakeLists.txt)
  libglpk-dev    # the LP solver of `sim alloc --bound` (src/sim/alloc_bound.h)
  python3-torch  # the distributed-training tests (PyTorch, CPU, gloo)
  chromium       # the portal's browser tests (tests/web)
  podman runc    # jobs in containers (docs/containers.md): podman with runc as its OCI runtime
  busybox-static # the container tests build a small image from it, offline
)
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  packages+=(npm)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
# PostgreSQL is for tests that start their own throwaway server: no system-wide "main" cluster.
if [[ " ${missing[*]} " == *" postgresql-15 "* ]] && [ ! -e /etc/postgresql-common/createcluster.conf ]; then
  $SUDO mkdir -p /etc/postgresql-common
  echo "create_main_cluster = false" | $SUDO tee /etc/postgresql-common/createcluster.conf >/dev/null
fi
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
