#!/usr/bin/env bash
# Tessera side by side with Slurm 22.05 (Debian's slurm-wlm) on this machine, in the same run.
#
# Both get one node with 8 GPUs (Slurm: a generic resource `gpu` on 8 stand-in device files, select/cons_tres,
# sched/backfill; Tessera: `tessera up` with 8 declared fake H100s) and the same two tests:
#   A. 1,000 submissions from 8 parallel command-line clients, one process per submission: held in
#      Slurm (`sbatch --hold`), held in Tessera (`tessera submit -H`); the time until all are
#      acknowledged.
#   B. 300 one-GPU `true` jobs, submitted by 8 parallel command-line clients, from the first submit
#      until every job has finished.
# Prints one table. Run as root from the repository root after building (README command 1 or 2):
#   bench/slurm-compare.sh            (JOBS_A=1000 JOBS_B=300 CLIENTS=8 by default)
# Installs slurm-wlm and munge from Debian if they are missing. The daemons run from a scratch
# directory with their own configuration (SLURM_CONF) and are stopped at the end; an existing Slurm
# setup in /etc/slurm is not touched. Tessera's tasks run as `nobody`, as `tessera up` runs them.
# KEEP=1 leaves the daemons and the scratch directory (logs, configuration) for inspection.
# Figures and what they mean: docs/performance.md, "Side by side with Slurm".
set -euo pipefail
cd "$(dirname "$0")/.."

JOBS_A=${JOBS_A:-1000}
JOBS_B=${JOBS_B:-300}
CLIENTS=${CLIENTS:-8}
TESSERA=${TESSERA:-$PWD/build/bin/tessera}
PORT=${PORT:-18520}
[ "$(id -u)" = 0 ] || { echo "slurm-compare: run as root (Slurm's daemons and the package install need it)" >&2; exit 2; }
[ -x "$TESSERA" ] || { echo "slurm-compare: $TESSERA is not built (cmake --preset release && cmake --build --preset release)" >&2; exit 2; }

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null; then
  echo "slurm-compare: installing slurm-wlm and munge from Debian"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends slurm-wlm munge >/dev/null
fi

work=$(mktemp -d /tmp/slurm-compare.XXXXXX)
host=$(hostname -s)
pids=()
started_munge=0
cleanup() {
  set +e
  [ -n "${SLURM_CONF:-}" ] && scancel --full --quiet --user root >/dev/null 2>&1
  for f in "$work"/slurmctld.pid "$work"/slurmd.pid; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null; done
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  [ "$started_munge" = 1 ] && pkill -x munged
  sleep 1
  rm -rf "$work"
}
trap cleanup EXIT
[ -n "${KEEP:-}" ] && trap - EXIT

now() { date +%s.%N; }
elapsed() { python3 -c "print('%.2f' % ($2 - $1))"; }

# ---- Slurm -------------------------------------------------------------------------------------
if ! pgrep -x munged >/dev/null; then
  [ -f /etc/munge/munge.key ] || { dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null; chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key; }
  mkdir -p /run/munge && chown munge:munge /run/munge
  runuser -u munge -- /usr/sbin/munged
  started_munge=1
fi
mkdir -p "$work/state" "$work/spool"
cat > "$work/slurm.conf" <<EOF
ClusterName=compare
SlurmctldHost=$host
SlurmUser=root
SlurmctldPort=${SLURMCTLD_PORT:-16817}
SlurmdPort=${SLURMD_PORT:-16818}
AuthType=auth/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmdParameters=config_overrides
MaxJobCount=100000
NodeName=$host CPUs=8 Gres=gpu:8 State=UNKNOWN
PartitionName=compare Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
# Slurm keeps only GPUs with a device file: 8 stand-ins for /dev/null (char 1:3) in the scratch dir.
mkdir -p "$work/dev"
for i in 0 1 2 3 4 5 6 7; do mknod "$work/dev/gpu$i" c 1 3 2>/dev/null || touch "$work/dev/gpu$i"; done
echo "NodeName=$host Name=gpu File=$work/dev/gpu[0-7]" > "$work/gres.conf"
export SLURM_CONF="$work/slurm.conf"
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
for _ in $(seq 100); do
  [ "$(sinfo -h -o %t 2>/dev/null | head -1)" = idle ] && break
  sleep 0.2
done
[ "$(sinfo -h -o %t | head -1)" = idle ] || { echo "slurm-compare: the Slurm node did not come up idle:" >&2; sinfo >&2; tail -n 20 "$work/slurmd.log" "$work/slurmctld.log" >&2; exit 1; }

slurm_submit() {  # N CLIENTS [sbatch options...]
  local n=$1 clients=$2; shift 2
  for k in $(seq 0 $((clients - 1))); do
    (for ((i = k; i < n; i += clients)); do sbatch --quiet --output=/dev/null --gres=gpu:1 "$@" --wrap true || exit 1; done) &
  done
  wait
}
echo "slurm-compare: Slurm test A ($JOBS_A held submissions, $CLIENTS clients)"
t0=$(now); slurm_submit "$JOBS_A" "$CLIENTS" --hold; t1=$(now)
slurm_a=$(elapsed "$t0" "$t1")
[ "$(squeue -h | wc -l)" = "$JOBS_A" ] || { echo "slurm-compare: Slurm holds $(squeue -h | wc -l) jobs, not $JOBS_A" >&2; exit 1; }
scancel --user root
for _ in $(seq 100); do [ "$(squeue -h | wc -l)" = 0 ] && break; sleep 0.2; done
echo "slurm-compare: Slurm test B ($JOBS_B one-GPU true jobs)"
t0=$(now); slurm_submit "$JOBS_B" "$CLIENTS"
while [ "$(squeue -h | wc -l)" != 0 ]; do sleep 0.05; done
t1=$(now)
slurm_b=$(elapsed "$t0" "$t1")
scontrol shutdown >/dev/null 2>&1 || true
unset SLURM_CONF
sleep 1

# ---- Tessera -----------------------------------------------------------------------------------
tessera_up() {  # DIR: a fresh one-machine cluster on PORT
  "$TESSERA" up --data "$1" --listen "127.0.0.1:$PORT" --gpus fake:8xH100-80GB-SXM --node n1 > "$1.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do
    [ -s "$1/admin.token" ] && "$TESSERA" nodes --server "http://127.0.0.1:$PORT" --token-file "$1/admin.token" 2>/dev/null | grep -q n1 && return 0
    sleep 0.2
  done
  echo "slurm-compare: tessera up did not come up:" >&2; tail -n 20 "$1.log" >&2; exit 1
}
tessera_down() { kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true; unset 'pids[-1]'; }
run_short() {  # DIR ARGS...: tools/short_jobs.py through the CLI; prints its figure in seconds
  local dir=$1; shift
  python3 tools/short_jobs.py --server "http://127.0.0.1:$PORT" --token-file "$dir/admin.token" --clients "$CLIENTS" \
    --cli "$TESSERA" "$@" | tee -a "$work/tessera.out" | sed -E 's/.* ([0-9.]+) s( after the first submit| \().*/\1/' | tail -1
}
echo "slurm-compare: Tessera test A ($JOBS_A held submissions, $CLIENTS clients)"
tessera_up "$work/ta"
tessera_a=$(run_short "$work/ta" --jobs "$JOBS_A" --hold)
tessera_down
echo "slurm-compare: Tessera test B ($JOBS_B one-GPU true jobs)"
tessera_up "$work/tb"
tessera_b=$(run_short "$work/tb" --jobs "$JOBS_B")
tessera_down

ratio() { python3 -c "print('%.1fx' % ($1 / $2))"; }
echo
echo "| test (one node, 8 GPUs; $CLIENTS parallel command-line clients) | Slurm 22.05 | Tessera | Slurm / Tessera |"
echo "|---|---|---|---|"
echo "| A. $JOBS_A submissions, held, until all acknowledged | ${slurm_a} s | ${tessera_a} s | $(ratio "$slurm_a" "$tessera_a") |"
echo "| B. $JOBS_B one-GPU \`true\` jobs, first submit to all finished | ${slurm_b} s | ${tessera_b} s | $(ratio "$slurm_b" "$tessera_b") |"
