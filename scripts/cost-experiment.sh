#!/bin/bash
# The capacity-tier cost experiment of docs/results.md: the same workload (Philly training + 32
# steady inference services) on three setups, over the 130 days the services run, at several spot
# interruption rates and two commitment terms. Prints one line per run; JSON per run in OUT.
# Usage: scripts/cost-experiment.sh [PHILLY_DIR] [OUT_DIR]    (about 6 minutes on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
philly=${1:-../shared/data/philly-gavel}
out=${2:-/tmp/tessera-cost}
if [ ! -d "$philly" ]; then
  echo "skip: the Philly traces are not at $philly (give the directory as the first argument)" >&2
  exit 0
fi
mkdir -p "$out"
bin=build/bin/tessera
workload="philly:$philly+inference:services=32,days=130"
horizon=11232000  # 130 days

# variant NAME BASE_FILE RESERVED_NODES RESERVED_PRICE SPOT_RATE [SPOT_MAX_INTERRUPTIONS]
variant() {
  sed -e "s/{name: rs0-n, count: 24/{name: rs0-n, count: $3/" -e "s/price: \"1.73\"/price: \"$4\"/" \
      -e "s/interruption_rate: \"0.5\"/interruption_rate: \"$5\"/" \
      -e "s/spot_max_interruptions: 3/spot_max_interruptions: ${6:-3}/" "$2" > "$out/$1.yaml"
}
variant a examples/cost-a-on-demand.yaml 24 1.73 0.5
variant b-1y examples/cost-b-reserved.yaml 24 1.73 0.5
variant b-3y examples/cost-b-reserved.yaml 16 0.96 0.5
for rate in 0.5 0.1 0.02; do
  variant "c-1y-$rate" examples/cost-c-spot.yaml 24 1.73 "$rate"
  variant "c-3y-$rate" examples/cost-c-spot.yaml 16 0.96 "$rate"
done
# How often a job may be interrupted before it prefers other pools (0 = never prefers them).
for max in 10 30 0; do variant "c-3y-0.5-m$max" examples/cost-c-spot.yaml 16 0.96 0.5 "$max"; done
variant c-1y-0.5-m0 examples/cost-c-spot.yaml 24 1.73 0.5 0

run() {
  "$bin" sim run --cluster "$out/$1.yaml" --workload "$workload" --policy tessera --horizon $horizon \
      --json "$out/$1.json" > "$out/$1.txt" 2>&1
}
names=(a b-1y b-3y c-1y-0.5 c-3y-0.5 c-1y-0.1 c-3y-0.1 c-1y-0.02 c-3y-0.02 c-3y-0.5-m10 c-3y-0.5-m30 c-3y-0.5-m0
       c-1y-0.5-m0)
for ((i = 0; i < ${#names[@]}; i += 2)); do
  run "${names[$i]}" &
  if ((i + 1 < ${#names[@]})); then run "${names[$((i + 1))]}" & fi
  wait
  echo "  done: ${names[$i]} ${names[$((i + 1))]:-}" >&2
done

python3 - "$out" "${names[@]}" <<'PY'
import json, sys
out, names = sys.argv[1], sys.argv[2:]
base = json.load(open(f"{out}/a.json"))[0]
print(f"{'setup':12} {'cost $M':>8} {'vs A':>6} {'JCT h':>6} {'vs A':>6} {'p99 wait h':>10} {'reclaims':>8} {'hit jobs':>8} {'lost GPU-h':>10} {'inf. spot':>9}  billed GPU-h by pool")
for n in names:
    m = json.load(open(f"{out}/{n}.json"))[0]
    pools = ", ".join(f"{p['pool']} {p['billed_gpu_hours']/1000:.0f}k" for p in m["pools"])
    print(f"{n:12} {m['cost']/1e6:8.3f} {100*(m['cost']/base['cost']-1):+5.1f}% {m['batch_jct_mean_s']/3600:6.2f} "
          f"{100*(m['batch_jct_mean_s']/base['batch_jct_mean_s']-1):+5.1f}% {m['batch_wait_p99_s']/3600:10.2f} "
          f"{m['spot_reclaims']:8} {m['job_interruptions']:8} {m['interruption_lost_gpu_hours']:10.0f} {m['inference_spot_gpu_hours']:9.1f}  {pools}")
PY
