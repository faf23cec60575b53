#!/usr/bin/env bash
# Container start overhead (docs/performance.md): how long from the agent's decision to start a task
# to the task's first instruction, in a podman container (runc) and as a bare process. A real server
# and agent (fake GPUs) on loopback; each job's first act prints the time (date +%s%N); the agent logs
# when it decided (its task_started line's time minus start_ms). Needs root, podman, runc, busybox.
# Usage: tools/container_start_overhead.sh [TESSERA_BINARY] [JOBS]
set -euo pipefail
BIN=${1:-build/bin/tessera}
N=${2:-10}
D=$(mktemp -d /tmp/tessera-overhead.XXXXXX)
chmod 711 "$D"
trap 'kill $(jobs -p) 2>/dev/null; podman rm -af -t0 >/dev/null 2>&1 || true; [ -n "${KEEP:-}" ] || rm -rf "$D"' EXIT
cat > "$D/containers.conf" <<CONF
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
netns = "host"
CONF
printf '[storage]\ndriver = "vfs"\ngraphroot = "%s/root"\nrunroot = "%s/run"\n' "$D" "$D" > "$D/storage.conf"
export CONTAINERS_CONF=$D/containers.conf CONTAINERS_STORAGE_CONF=$D/storage.conf
# An image whose /usr is the host's (bound read-only by the job): GNU date with nanoseconds.
mkdir -p "$D/img/usr" "$D/img/etc" "$D/img/tmp" && for d in bin lib lib64 sbin; do ln -s usr/$d "$D/img/$d"; done
cp /etc/ld.so.cache "$D/img/etc/" && tar -C "$D/img" -cf "$D/img.tar" . && podman import "$D/img.tar" localhost/overhead:1 >/dev/null
cat > "$D/cluster.yaml" <<CONF
levels: [leaf]
nodes:
  - {name: n, count: 1, gpu_model: H100-80GB-SXM, gpus: 8, cpu: 64000, memory: 262144, path: [l0]}
queues:
  - {name: default}
storage:
  host_paths: [/usr]
CONF
PORT=$((20000 + RANDOM % 20000))
"$BIN" server --config "$D/cluster.yaml" --data "$D/data" --listen 127.0.0.1:$PORT --heartbeat-interval-ms 200 > "$D/server.log" 2>&1 &
for _ in $(seq 50); do [ -s "$D/data/admin.token" ] && break; sleep 0.2; done
TOKEN=$(cat "$D/data/admin.token")
"$BIN" agent --server http://127.0.0.1:$PORT --token "$TOKEN" --node n --gpus fake:8xH100-80GB-SXM --state-dir "$D/state" \
  --heartbeat-interval-ms 200 --pull never > "$D/agent.log" 2>&1 &
sleep 2
submit() {  # $1: container JSON or null
  curl -s -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' http://127.0.0.1:$PORT/api/v1/jobs \
    -d "{\"name\":\"t\",\"queue\":\"default\",\"resources\":{\"gpus\":1},\"container\":$1,$2\"command\":[\"/usr/bin/date\",\"+%s%N\"]}" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'
}
measure() {  # $1: label, $2: container JSON, $3: mounts
  local out=()
  for _ in $(seq "$N"); do
    id=$(submit "$2" "$3")
    for _ in $(seq 100); do
      s=$(curl -s -H "Authorization: Bearer $TOKEN" http://127.0.0.1:$PORT/api/v1/jobs/$id | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')
      [ "$s" = succeeded ] && break; sleep 0.1
    done
    first=$(curl -s -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT/api/v1/jobs/$id/logs?task=0" | head -1)
    line=$(grep "event=task_started node=n job=$id " "$D/agent.log")
    at=$(date -d "$(echo "$line" | cut -d' ' -f1)" +%s%3N)
    sms=$(echo "$line" | sed 's/.*start_ms=\([0-9]*\).*/\1/')
    out+=($(( first / 1000000 - (at - sms) )))
  done
  printf '%s' "$1: ms from decision to first instruction:"; printf ' %s' $(printf '%s\n' "${out[@]}" | sort -n); echo
}
measure "bare process" null ""
measure "podman+runc container" '{"image":"localhost/overhead:1"}' '"mounts":[{"host_path":"/usr","path":"/usr"}],'
