#!/usr/bin/env bash
# vram_spank.so in a real single-node Slurm (Debian's slurm-wlm, munge on a
# private socket and key, all state in a temporary folder) on two simulated
# GPUs, which slurmd finds through NVML as sites configure it (AutoDetect=nvml,
# Debian contrib's gpu/nvml plugin, unpacked by scripts/test-deps.sh; where it
# is not, gres.conf names them), with vramd: srun/sbatch --gpu-mem budgets,
# refusal of a bad value,
# shards mapped to budgets, two jobs on one GPU held to their own, a step as
# one job of the ledger with its processes (one budget per task, whatever
# the task starts; the peak in the job's output), a cancelled job's grant
# gone from the ledger; a step held by the driver's own limit (simulated
# driver R615; the test, and so Slurm, in a cgroup of its own in the host's
# cgroup2 hierarchy: this machine mounts it at /sys/fs/cgroup/unified), its
# task in a cgroup made for the step below slurmstepd's (task/none), never out
# of it. Stops exactly the processes it started; every wait is bounded.
# Exit 77 (skipped) when Slurm is missing.
#   test_slurm.sh BUILD_DIR
set -u
build=${1:?usage: test_slurm.sh BUILD_DIR}
build=$(cd "$build" && pwd)
. "$(dirname "$0")/../lib.sh"
[ "$(id -u)" = 0 ] || skip "a single-node Slurm needs root"
for c in slurmctld slurmd srun sbatch squeue scancel sinfo munged munge mungekey runuser; do
  command -v $c >/dev/null || missing "$c is not installed (scripts/test-deps.sh installs slurm-wlm and munge)"
done
[ -f "$build/vram_spank.so" ] ||
  missing "vram_spank.so was not built (no slurm/spank.h at configure time: scripts/test-deps.sh installs libslurm-dev)"
case $build in *" "*) skip "the build is under a folder with a space: plugstack.conf cannot name such a path, and the plugin names the interposer in LD_PRELOAD by its path";; esac
id munge >/dev/null 2>&1 || missing "no munge user (Debian's munge package makes it)"

W=$(mktemp -d /tmp/vram-slurm.XXXXXX)
chmod 755 "$W"
PIDS=()
# A cgroup of the test's own, which this shell moves into before it starts
# anything: Slurm's daemons and the steps' tasks (task/none runs them in
# slurmstepd's cgroup) run there, and a step's cgroup, made below the
# task's, lands there too.
cgmnt=$(awk '{ for (i = 7; i < NF; i++) if ($i == "-") { if ($(i + 1) == "cgroup2") { print $5; exit } break } }' \
  /proc/self/mountinfo)
cghere=$cgmnt$(sed -n 's/^0:://p' /proc/self/cgroup)
cghere=${cghere%/}
cgroot=
if [ -n "$cgmnt" ] && mkdir "$cgmnt/vram-slurm-$$" 2>/dev/null; then
  cgroot=$cgmnt/vram-slurm-$$
  echo $$ >"$cgroot/cgroup.procs" || { rmdir "$cgroot"; cgroot=; }
fi
cleanup() {
  [ -n "${SLURM_CONF:-}" ] && scancel --quiet -u root 2>/dev/null
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do
    for i in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
  done
  if [ -n "${cgroot:-}" ] && [ -d "$cgroot" ]; then # processes back, then the cgroups
    for d in $(find "$cgroot" -depth -type d); do
      for p in $(cat "$d/cgroup.procs" 2>/dev/null); do echo "$p" >"$cghere/cgroup.procs" 2>/dev/null; done
      rmdir "$d" 2>/dev/null
    done
  fi
  [ -n "${KEEP_TMP:-}" ] && echo "kept $W" || rm -rf "$W"
}
trap cleanup EXIT
G=$((1 << 30))

# --- munge, private --------------------------------------------------------
mkdir -p "$W"/{munge,etc,state,spool,log,run,dev,sim,out}
chmod 755 "$W/munge"
mungekey -c -k "$W/munge/munge.key" -b 1024 || skip "mungekey failed"
chown -R munge:munge "$W/munge"
runuser -u munge -- munged --socket="$W/munge/munge.socket" --key-file="$W/munge/munge.key" \
  --pid-file="$W/munge/munged.pid" --log-file="$W/munge/munged.log" \
  --seed-file="$W/munge/munged.seed" || { cat "$W/munge/munged.log"; skip "munged did not start"; }
for i in $(seq 50); do [ -s "$W/munge/munged.pid" ] && break; sleep 0.1; done
PIDS+=("$(cat "$W/munge/munged.pid")")

# --- two simulated GPUs, vramd -----------------------------------------------
chmod 1777 "$W/sim"
export LD_LIBRARY_PATH=$build/sim VRAM_SIM_DIR=$W/sim VRAM_SIM_DEVICES=12GiB,12GiB
S=$W/vramd.sock
printf 'reconcile-every 200ms\nwhen-full fail\n' >"$W/etc/policy.conf"
start_vramd() {
  "$build/vramd" --socket "$S" --policy "$W/etc/policy.conf" --log info "$@" >>"$W/log/vramd.log" 2>&1 &
  vramd_pid=$!
  PIDS+=($vramd_pid)
}
start_vramd
wait_for 10 test -S "$S" || { cat "$W/log/vramd.log"; echo "FAIL: vramd"; exit 1; }
export VRAM_DAEMON=$S

# --- Slurm: one node, 8 CPUs, 2 GPUs with 4 shards each -------------------------
# The GPUs as slurmd detects them through NVML (AutoDetect=nvml), with
# Debian's gpu/nvml plugin beside Slurm's own (PluginDir lists both): the
# simulated H100s, their type cut to slurm.conf's h100 (Slurm keeps what
# names a substring of NVML's "nvidia_h100_80gb_hbm3"), /dev/nvidia0 and 1
# by their minor numbers. Without the plugin, gres.conf names them.
nvml_plugin=${VRAM_DEB_CACHE:-$(cd "$(dirname "$0")/../.." && pwd)/.cache/debian}/root/usr/lib/x86_64-linux-gnu/slurm-wlm
slurm_plugins=$(dirname "$(ls /usr/lib/*/slurm-wlm/gres_gpu.so /usr/lib*/slurm/gres_gpu.so 2>/dev/null | head -1)")
if [ -f "$nvml_plugin/gpu_nvml.so" ] && [ "$slurm_plugins" != . ]; then
  gres_conf="AutoDetect=nvml
NodeName=localhost Name=shard Count=8"
  plugin_dir="PluginDir=$slurm_plugins:$nvml_plugin"
  gpu_type=h100
else
  echo "(no gpu_nvml.so in $nvml_plugin: scripts/test-deps.sh fetches it from Debian's contrib, as root; the GPUs are named in gres.conf, AutoDetect=nvml is not tried)"
  gres_conf="AutoDetect=off
NodeName=localhost Name=gpu Type=fake File=$W/dev/nvidia[0-1]
NodeName=localhost Name=shard Count=8 File=$W/dev/nvidia[0-1]"
  plugin_dir=
  gpu_type=fake
fi
# Ports of our own, free now, so that this test runs beside a node's real
# Slurm or another run of itself (Slurm's defaults are 6817 and 6818).
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() {
  local p
  for _ in $(seq 100); do
    p=$((20000 + RANDOM % 20000))
    port_free $p && port_free $((p + 1)) && { echo $p; return; }
  done
  echo "FAIL: no free port pair found" >&2; exit 1
}
CTLD_PORT=$(free_port) || exit 1
mknod "$W/dev/nvidia0" c 195 0 && mknod "$W/dev/nvidia1" c 195 1
cat >"$W/etc/slurm.conf" <<EOC
ClusterName=vramtest
SlurmctldHost=localhost
SlurmctldPort=$CTLD_PORT
SlurmdPort=$((CTLD_PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$W/munge/munge.socket
StateSaveLocation=$W/state
SlurmdSpoolDir=$W/spool
SlurmctldPidFile=$W/run/slurmctld.pid
SlurmdPidFile=$W/run/slurmd.pid
SlurmctldLogFile=$W/log/slurmctld.log
SlurmdLogFile=$W/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
SlurmdParameters=config_overrides
GresTypes=gpu,shard
PlugStackConfig=$W/etc/plugstack.conf
$plugin_dir
NodeName=localhost NodeAddr=127.0.0.1 CPUs=8 RealMemory=2000 Gres=gpu:$gpu_type:2,shard:8 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=10 State=UP
EOC
printf '%s\n' "$gres_conf" >"$W/etc/gres.conf"
echo "required $build/vram_spank.so preload=$build/libvram-preload.so shard_mem=2G socket=$S default=none" \
  >"$W/etc/plugstack.conf"
export SLURM_CONF=$W/etc/slurm.conf
if [ -n "$plugin_dir" ]; then
  # What slurmd detects (-G prints it and exits): each GPU, near the CPUs
  # NVML names, which on this host are those of the node the simulator
  # puts it on: on a host of one NUMA node every online CPU, so every core
  # slurm.conf gives the node (Slurm maps the host's CPUs onto its 8).
  # Before the simulated NVML answered nvmlDeviceGetCpuAffinity, slurmd -G
  # died: "fatal: _set_cpu_set_bitstr: cpu_set_bitstr is empty!". (Its
  # errors about stat(/dev/nvidia0) are the device files this machine has
  # not: Slurm names them by NVML's minor numbers.)
  timeout 60 slurmd -G -N localhost >"$W/out/gres" 2>&1
  check "slurmd -G with AutoDetect=nvml ends normally" test $? = 0
  check "no fatal error, none from NVML" sh -c "! grep -E 'fatal|Failed to get|NVML' '$W/out/gres'"
  check "gpu/nvml detects the two GPUs" contains "$W/out/gres" "2 GPU system device(s) detected"
  cores=[0-9][-,0-9]*
  [ "$(ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | wc -l)" -le 1 ] && cores=0-7
  for i in 0 1; do
    check "GPU $i: type h100, /dev/nvidia$i, its cores ($cores), no NVLink" contains "$W/out/gres" \
      "Gres Name=gpu Type=h100 Count=1 Index=$i ID=[0-9]* File=/dev/nvidia$i Cores=$cores CoreCnt=8 Links=$( [ $i = 0 ] && echo -1,0 || echo 0,-1)$"
  done
  check "and the shards over them" contains "$W/out/gres" "Gres Name=shard Type=h100 Count=4 Index=0 .*File=/dev/nvidia0"
  grep 'Gres Name=' "$W/out/gres"
fi
slurmctld -D -c -i >"$W/log/slurmctld.out" 2>&1 & PIDS+=($!)
slurmd -D -N localhost >"$W/log/slurmd.out" 2>&1 & PIDS+=($!)
if ! wait_for 30 sh -c '[ "$(sinfo -h -N -o %t 2>/dev/null)" = idle ]'; then
  tail -5 "$W/log/slurmctld.log" "$W/log/slurmd.log"
  echo "FAIL: the Slurm node did not become idle"; exit 1
fi
sinfo -h -N -o %G >"$W/out/node-gres"
check "the node has its two GPUs, of type $gpu_type, and the shards: $(cat "$W/out/node-gres")" grep -q "gpu:$gpu_type:2[(,].*shard:\($gpu_type:\)\?8" "$W/out/node-gres"
grab=$build/vram-demo-grab member=$build/tests/member
ledger() { "$build/vram" status --json; }
# A task's CUDA context (the simulated H100's, sim/config.h) is inside its
# budget: it takes the rest.
C=$((518 << 20))

# --- srun and sbatch with --gpu-mem ----------------------------------------------
srun --help 2>&1 | grep -q -- "--gpu-mem=SIZE" && passed=$((passed + 1)) || { echo "FAIL: srun --help lists --gpu-mem"; failures=$((failures + 1)); }
timeout 60 srun --gpu-mem=4G "$grab" A 1 >"$W/out/a" 2>&1
check "srun: the task sees its budget and takes what its context leaves" contains "$W/out/a" "RESULT A 4294967296 $((4294967296 - C)) ok"
check "srun: the task's peak in the job's output" contains "$W/out/a" "^vram: GPU 0 (GPU-[-0-9a-f]*): peak 4.00 GiB of 4.00 GiB budget (context 518.00 MiB)$"
timeout 60 srun --gpu-mem=3G "$grab" B 1 >"$W/out/b" 2>&1
check "srun: out of memory at the budget" contains "$W/out/b" "cuMemAlloc refused with CUDA_ERROR_OUT_OF_MEMORY: device 0 (GPU-[-0-9a-f]*) budget 3.00 GiB"
timeout 60 srun --gpu-mem=lots true >"$W/out/bad" 2>&1; rc=$?
check "a bad value is refused" test $rc != 0
check "and named with the accepted forms" contains "$W/out/bad" '--gpu-mem=lots: .*accepted: a size such as 4G'
timeout 60 sbatch --gpu-mem=4Gx --wrap true >"$W/out/bad2" 2>&1; rc=$?
check "sbatch refuses a bad value at submission" sh -c "[ $rc != 0 ] && grep -q 'gpu-mem=4Gx' '$W/out/bad2'"
jid=$(timeout 30 sbatch --parsable --gpu-mem=5G -o "$W/out/s-%j" --wrap "'$grab' S 1")
check "sbatch accepted" test -n "$jid"
wait_for 30 sh -c "! squeue -h -j $jid 2>/dev/null | grep -q ."
check "sbatch: the batch task has the budget" contains "$W/out/s-$jid" "RESULT S 5368709120 $((5368709120 - C)) ok"
check "sbatch: the peak in the job's output" contains "$W/out/s-$jid" "^vram: GPU 0 (GPU-[-0-9a-f]*): peak 5.00 GiB of 5.00 GiB budget (context 518.00 MiB)$"
timeout 60 srun --gpu-mem=0=2G "$grab" P 1 >"$W/out/p" 2>&1
check "the per-device form" contains "$W/out/p" "RESULT P 2147483648 0 OOM"
# A budget for one of the step's two GPUs: the step is refused, naming the
# GPU left without one (before: it started with GPU 0 unusable, "was not
# one of" the GPUs it could see).
timeout 60 srun --gres=gpu:2 --gpu-mem=1=2G "$grab" Q 1 >"$W/out/q" 2>&1; rc=$?
check "--gpu-mem for one of two GPUs: refused" sh -c "[ $rc != 0 ] && ! grep -q 'RESULT Q' '$W/out/q'"
check "naming the GPU without a budget" \
  contains "$W/out/q" "gpu-mem=1=2G gives GPU 0 (the step's device 0) no budget, and the step has 2 GPUs"
check "not as a GPU the step could not see" sh -c "! grep -q 'was not one of' '$W/out/q'"

# --- shards: N × shard_mem; more than they allow is refused -----------------------------
timeout 60 srun --gres=shard:2 "$grab" H 1 >"$W/out/h" 2>&1
check "shard:2 is a 4 GiB budget" contains "$W/out/h" "RESULT H 4294967296 $((4294967296 - C)) ok"
timeout 60 srun --gres=shard:1 --gpu-mem=4G true >"$W/out/h2" 2>&1; rc=$?
check "--gpu-mem beyond the shards is refused" sh -c "[ $rc != 0 ] && grep -q 'more than the 1 shard(s) of this job allow' '$W/out/h2'"
timeout 60 srun --gres=shard:1 --gpu-mem=1G "$grab" K 1 >"$W/out/k" 2>&1
check "--gpu-mem within the shards wins" contains "$W/out/k" "RESULT K 1073741824 0 OOM"

# --- two jobs on one GPU, each held to its own; the ledger shows them by job --------------
timeout 60 srun --gpu-mem=5G "$grab" J1 60 >"$W/out/j1" 2>&1 &
j1=$!
timeout 60 srun --gpu-mem=5G "$grab" J2 60 >"$W/out/j2" 2>&1 &
j2=$!
check "both jobs' grants in the ledger" wait_for 20 sh -c "[ \$('$build/vram' status --json | grep -o '\"role\":\"job\"' | wc -l) = 2 ]"
ledger >"$W/out/ledger"
check "by Slurm job id and user" grep -q '"user":"root","role":"job","command":"job","job":"[0-9]*\.0"' "$W/out/ledger"
timeout 60 srun --gpu-mem=5G true >"$W/out/j3" 2>&1; rc=$?
check "a third does not fit beside them" sh -c "[ $rc != 0 ] && grep -q 'vram: job [0-9]*.0: vramd refused 5.00 GiB on GPU 0: .*10.00 GiB granted' '$W/out/j3'"
wait $j1 $j2
check "each took its own budget" sh -c "grep -q 'RESULT J1 5368709120 $((5368709120 - C)) ok' '$W/out/j1' && grep -q 'RESULT J2 5368709120 $((5368709120 - C)) ok' '$W/out/j2'"
check "both grants gone with the jobs" wait_for 10 sh -c "! '$build/vram' status --json | grep -q '\"role\":\"job\"'"

# --- a step is one job: one grant, its tasks' processes inside it (issue 10) --------------
# Everything a task starts shares the task's budget; the tasks' processes never
# ask vramd themselves; the step's usage is reported by the plugin (every 200 ms),
# and vram status shows the step with its processes. (Contexts cost nothing here:
# what is counted is the processes' allocations.)
VRAM_SIM_CONTEXT_SIZE=0 timeout 60 srun --gpu-mem=4G bash -c "
  '$member' hold $((3 * G)) 30 >'$W/out/m1' &
  for i in \$(seq 200); do grep -qs HELD '$W/out/m1' && '$build/vram' status --json | grep -q '\"command\":\"member\",\"job\":\"[0-9]*\.0\",\"budget\":0,\"used\":$((3 * G))' && break; sleep 0.05; done
  '$build/vram' status --json >'$W/out/mledger'
  '$member' hold $((2 * G)) 0 >'$W/out/m2'
  '$member' hold $((1 * G)) 0 >'$W/out/m3'
  kill %1; wait" >"$W/out/m" 2>&1
check "a task's processes share its budget: the first takes 3 of 4 GiB" contains "$W/out/m1" "^HELD"
check "the second is refused at the task's budget" contains "$W/out/m2" "^REFUSED"
check "the third gets the last GiB" contains "$W/out/m3" "^HELD"
check "and the refusal names the task's use" contains "$W/out/m" "device 0 (GPU-[-0-9a-f]*) budget 4.00 GiB, in use 3.00 GiB by the command"
check "the step is one job of the ledger" grep -q '"role":"job","command":"job","job":"[0-9]*\.0","budget":4294967296,"used":3221225472' "$W/out/mledger"
check "with its process, inside its grant" grep -q '"role":"process","command":"member","job":"[0-9]*\.0","budget":0,"used":3221225472' "$W/out/mledger"
check "the peak of the task in the job's output" contains "$W/out/m" "^vram: GPU 0 (GPU-[-0-9a-f]*): peak 4.00 GiB of 4.00 GiB budget; 1 allocation refused$"
check "the task's processes never asked vramd themselves" sh -c "! grep -q '(root, member): granted' '$W/log/vramd.log'"
VRAM_SIM_CONTEXT_SIZE=0 timeout 60 srun -n2 --gpu-mem=4G "$grab" T 1 >"$W/out/t" 2>&1
check "two tasks: each its own budget" sh -c "[ \$(grep -c 'RESULT T 4294967296 4294967296 ok' '$W/out/t') = 2 ]"
check "two tasks: one grant for the step" grep -q "job [0-9]*\.0 (root): granted 8.00 GiB" "$W/log/vramd.log"
check "two tasks: each one's peak" sh -c "grep -q '^vram: task 0: GPU 0 (GPU-[-0-9a-f]*): peak 4.00 GiB of 4.00 GiB budget$' '$W/out/t' && grep -q '^vram: task 1: GPU 0 (GPU-[-0-9a-f]*): peak 4.00 GiB of 4.00 GiB budget$' '$W/out/t'"

# --- a cancelled job's grant leaves the ledger -------------------------------------------
jid=$(timeout 30 sbatch --parsable --gpu-mem=4G -o "$W/out/z" --wrap "'$grab' Z 600")
check "a running job holds its grant" wait_for 30 sh -c "'$build/vram' status --json | grep -q '\"job\":\"$jid\.batch\"'"
check "its task is a process of the job, inside its grant" wait_for 20 sh -c "'$build/vram' status --json | grep -q '\"command\":\"vram-demo-grab\",\"job\":\"$jid\.batch\",\"budget\":0,\"used\":4294967296'"
scancel "$jid"
check "cancelled: its grant is gone" wait_for 20 sh -c "! '$build/vram' status --json | grep -q '\"job\":\"$jid\.'"
check "and the GPU is empty" wait_for 20 sh -c "'$build/vram' status --json | grep -q '\"granted\":0,\"used\":0'"

# --- a job's grant survives a vramd restart (issue 11, item 6) ------------------------------
jid=$(timeout 30 sbatch --parsable --gpu-mem=4G -o "$W/out/r" --wrap "'$grab' R 600")
check "a running job holds its grant" wait_for 30 sh -c "'$build/vram' status --json | grep -q '\"job\":\"$jid\.batch\",\"budget\":4294967296'"
check "and vramd wrote it down" wait_for 5 grep -q "^j .* $jid\.batch GPU-" "$W/vramd.state"
kill -9 "$vramd_pid"; wait "$vramd_pid" 2>/dev/null
start_vramd
wait_for 10 test -S "$S"
check "after a vramd restart the job's grant is back" wait_for 10 sh -c "'$build/vram' status --json | grep -q '\"role\":\"job\",\"command\":\"job\",\"job\":\"$jid\.batch\",\"budget\":4294967296'"
check "the plugin re-registered it" wait_for 10 contains "$W/log/vramd.log" "job $jid.batch (root): re-registered 4.00 GiB"
timeout 10 "$build/tests/peer" "$S" hold "$(ledger | grep -o '"uuid":"[^"]*"' | head -1 | cut -d'"' -f4)" $((9 * G)) >"$W/out/r9" 2>&1
check "and nobody else can take it meanwhile" contains "$W/out/r9" "DENY"
# Meanwhile (past the daemon's grace for held grants): the plugin's holder
# thread in the job's slurmstepd, idle, costs under 0.1 s of CPU in 11 s and
# wakes for its reports (5 a second) and little else (issue 22).
holder_thread() {
  local t
  for t in /proc/[0-9]*/task/[0-9]*; do
    [ "$(cat "$t/comm" 2>/dev/null)" = vram-job ] || continue
    case $(tr '\0' ' ' <"${t%/task/*}/cmdline" 2>/dev/null) in "slurmstepd: [$jid.batch]"*) echo "$t"; return;; esac
  done
  return 1
}
t=$(holder_thread)
check "the job's holder thread is in its slurmstepd" test -n "$t"
[ -n "$t" ] && idle_cost "the Slurm holder thread" "$t" 11 110 || sleep 11
check "it stays the job's" sh -c "'$build/vram' status --json | grep -q '\"job\":\"$jid\.batch\",\"budget\":4294967296'"
scancel "$jid"
check "cancelled: its grant is gone" wait_for 20 sh -c "! '$build/vram' status --json | grep -q '\"job\":\"$jid\.'"

# --- the driver's own limit (R615, simulated): the step in a cgroup of its own (issue 21) ---
# vramd again, on the simulated driver 615, the test in a cgroup of its own:
# the task joins the step's cgroup, made below the one it runs in, before it
# runs (PLACE, as root), the
# driver holds it to the step's grant even without the interposer
# (env -u LD_PRELOAD: 3 GiB and its context fit in 4 GiB, 4 GiB does not),
# and the cgroup goes with the step.
if [ -n "$cgroot" ]; then
  kill -TERM "$vramd_pid"; wait "$vramd_pid" 2>/dev/null
  VRAM_SIM_DRIVER=615 start_vramd
  wait_for 10 test -S "$S"
  check "driver 615: vramd says the driver holds jobs' grants" \
    wait_for 5 contains "$W/log/vramd.log" "grants of jobs are held by the driver .* below the one it runs in"
  VRAM_SIM_DRIVER=615 timeout 60 srun --gpu-mem=4G bash -c "
    sed -n 's/^0:://p' /proc/self/cgroup >'$W/out/d-cg'
    env -u LD_PRELOAD '$member' hold $((3 * G)) 0 >'$W/out/d-below'
    env -u LD_PRELOAD '$member' hold $((4 * G)) 0 >'$W/out/d-past'
    '$build/vram' status --json >'$W/out/d-ledger'
    '$build/tests/nvml_limits' '$cgmnt'\$(cat '$W/out/d-cg') >'$W/out/d-get'" >"$W/out/d" 2>&1
  check "the step's task runs in the step's cgroup, made below slurmstepd's (task/none), never out of it" \
    grep -q "^/vram-slurm-$$/vram-job-[0-9]*\\.0$" "$W/out/d-cg"
  check "it joined it itself, as root" grep -q "job [0-9]*\.0 (root): pid [0-9]* joined its cgroup" "$W/log/vramd.log"
  check "NVML: the cgroup's hard limit is the step's grant" grep -q "^soft=0 hard=$((4 * G)) " "$W/out/d-get"
  check "without the interposer, below the grant: allocated" contains "$W/out/d-below" "^HELD"
  check "without the interposer, past the grant: the driver refuses" contains "$W/out/d-past" "^REFUSED"
  check "vram status: the driver holds the step's grant" \
    grep -q '"role":"job","command":"job","job":"[0-9]*\.0","budget":4294967296,.*"backend":"driver"' "$W/out/d-ledger"
  check "the step ended: its cgroup is gone" wait_for 10 sh -c "! ls -d '$cgroot'/vram-job-* >/dev/null 2>&1"
else
  echo "(no cgroup2 hierarchy this test can make a cgroup in: the driver's limits under Slurm not tried)"
fi

echo "test_slurm: $passed passed, $failures failed"
[ $failures = 0 ]
