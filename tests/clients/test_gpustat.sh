#!/usr/bin/env bash
# gpustat (Debian's 1.0.0, from contrib, over Debian's python3-pynvml), a
# monitor nobody here wrote, run as its users run it (`gpustat --json`, and
# its one-line table): alone, it shows the simulated H100 with NVML's
# total (81,559 MiB), its temperature, and another process at its size;
# under `vram run --limit 2GiB` it shows the budget as the device's memory,
# the temperature still, and the command's own process only, not the other
# one: the same view in every query (issue 28).
#
# nvitop, the other monitor issue 28 names, is on PyPI only (no Debian
# package), which this project's machines cannot reach: its temperature
# (nvmlDeviceGetTemperatureV) and MIG check (nvmlDeviceIsMigDeviceHandle)
# are tested in test_nvml_device, its per-process utilisation in
# test_nvml_view.
set -u
build=$(cd "${1:?usage: test_gpustat.sh BUILD_DIR HOLDER}" && pwd)
holder=${2:?usage: test_gpustat.sh BUILD_DIR HOLDER}
. "$(dirname "$0")/setup.sh"
need_contrib usr/lib/python3/dist-packages/gpustat/core.py "Debian's gpustat (contrib)"
need_contrib usr/lib/python3/dist-packages/pynvml.py "Debian's python3-pynvml (contrib)"
/usr/bin/python3 -c 'import blessed, psutil' 2>/dev/null ||
  missing "python3-blessed or python3-psutil is not installed (scripts/test-deps.sh installs them)"
export PYTHONPATH=$contrib/usr/lib/python3/dist-packages
gpustat=$contrib/usr/bin/gpustat
# gpustat's JSON, one line per GPU: total and used MiB, temperature, and
# its processes as PID:MiB.
summary() {
  /usr/bin/python3 -c '
import json, sys
for g in json.load(open(sys.argv[1]))["gpus"]:
    procs = " ".join("%d:%s" % (p["pid"], p["gpu_memory_usage"]) for p in g["processes"] or [])
    print("gpu %d total=%s used=%s temp=%s procs=%s" % (g["index"], g["memory.total"],
          g["memory.used"], g["temperature.gpu"], procs))' "$1"
}

check "another process holds 3 GiB" hold "$holder" 3GiB
other=$HOLD_PID

# Alone: NVML's figures. The other process: 3 GiB and its 518 MiB context,
# 3,590 MiB; with NVML's 480 MiB reserve 4,070 MiB used (sim/config.h).
/usr/bin/python3 "$gpustat" --json >"$tmp/alone.json" 2>"$tmp/alone.err"
check "gpustat --json ran" test $? = 0
summary "$tmp/alone.json" >"$tmp/alone"
check "alone: NVML's total, the other process's 3,590 MiB and the reserve used, a temperature, the other process at its size" \
  contains "$tmp/alone" "^gpu 0 total=81559 used=4070 temp=3[0-9] procs=$other:3590$"
/usr/bin/python3 "$gpustat" --no-color >"$tmp/alone.txt" 2>&1
check "its table: the device, its temperature, its memory" \
  contains "$tmp/alone.txt" "^\[0\] NVIDIA H100 80GB HBM3 | 3[0-9]°C, .* |  4070 / 81559 MB |"

# Under a budget, with a process of the command holding 512 MiB (and its
# 518 MiB context: 1,030 MiB) beside gpustat.
mkfifo "$tmp/in"
sleep 600 >"$tmp/in" &
writer=$!
qholder=$(printf %q "$holder") qgpustat=$(printf %q "$gpustat") qtmp=$(printf %q "$tmp")
cat >"$tmp/command.sh" <<EOC
$qholder 512MiB <$qtmp/in >$qtmp/inner & echo \$! >$qtmp/inner.pid
for i in \$(seq 200); do grep -q held $qtmp/inner && break; sleep 0.05; done
/usr/bin/python3 $qgpustat --json >$qtmp/budget.json 2>$qtmp/budget.err
/usr/bin/python3 $qgpustat --no-color >$qtmp/budget.txt 2>&1
wait # for the holder, which ends when the test closes its input
EOC
"$build/vram" run --limit 2GiB -- sh "$tmp/command.sh" >"$tmp/run" 2>&1 &
run=$!
check "the command's process holds its 512 MiB" wait_for 20 grep -q held "$tmp/inner"
inner=$(cat "$tmp/inner.pid" 2>/dev/null)
check "gpustat ran under vram run" wait_for 30 test -s "$tmp/budget.txt"
kill "$writer" 2>/dev/null
wait "$writer" 2>/dev/null
wait "$run"
check "vram run ended normally" test $? = 0
summary "$tmp/budget.json" >"$tmp/budget"
check "under the budget: the budget is the device's memory, the command's 1,030 MiB used, a temperature, the command's process alone" \
  contains "$tmp/budget" "^gpu 0 total=2048 used=1030 temp=3[0-9] procs=$inner:1030$"
check "its table: the budget, the temperature" \
  contains "$tmp/budget.txt" "^\[0\] NVIDIA H100 80GB HBM3 | 3[0-9]°C, .* |  1030 /  2048 MB |"
check "not the other process: it takes nothing from the budget" eval "! grep -q '[= ]$other:' '$tmp/budget'"
stop_hold
for f in alone alone.txt budget budget.txt alone.err budget.err run; do
  echo "--- $f"
  cat "$tmp/$f" 2>/dev/null
done
echo "$passed passed, $failures failed"
[ $failures = 0 ]
