#!/usr/bin/env bash
# nvtop (Debian's 3.0.1, from contrib), a monitor nobody here wrote, driven
# in tmux and its screen read back: alone, it shows the simulated H100 (its
# PCIe link, its memory as NVML counts it: 79.647 GiB with the driver's
# reserve) and another process's memory; under `vram run --limit 2GiB` it
# shows the budget as the device and the command's own process, not the
# other one (NVML's process list is the command's view). Before the
# simulated NVML exported all of nvml.h, nvtop said "No GPU to monitor."
set -u
build=$(cd "${1:?usage: test_nvtop.sh BUILD_DIR HOLDER}" && pwd)
holder=${2:?usage: test_nvtop.sh BUILD_DIR HOLDER}
. "$(dirname "$0")/setup.sh"
need_contrib usr/bin/nvtop "Debian's nvtop (contrib)"
command -v tmux >/dev/null || missing "tmux is not installed (scripts/test-deps.sh installs it)"
nvtop=$contrib/usr/bin/nvtop
# The commands tmux runs are shell text: the paths quoted for it (a
# checkout's may have a space).
qnvtop=$(printf %q "$nvtop") qvram=$(printf %q "$build/vram") qholder=$(printf %q "$holder")
qtmp=$(printf %q "$tmp")
sock=$tmp/tmux.sock # a private tmux server
export TERM=xterm-256color
screen() { tmux -S "$sock" capture-pane -p >"$tmp/screen" 2>/dev/null && grep -q -- "$1" "$tmp/screen"; }
# nvtop's own key: without a terminal nvtop would spin rather than end.
quit() {
  tmux -S "$sock" send-keys q 2>/dev/null
  wait_for 10 eval '! tmux -S "$sock" has-session 2>/dev/null'
}
trap 'tmux -S "$sock" kill-server 2>/dev/null; rm -rf "$tmp"' EXIT

check "another process holds 3 GiB" hold "$holder" 3GiB
other=$HOLD_PID

# Alone: the device, its memory, the process.
tmux -S "$sock" -f /dev/null new-session -d -x 150 -y 45 "exec $qnvtop"
check "nvtop shows the device" wait_for 20 screen "Device 0 \[NVIDIA H100 80GB HBM3\]"
check "its PCIe link: Gen 5 x16" screen "PCIe GEN 5@16x"
# The other process: 3 GiB and its 518 MiB context, 3,590 MiB; with NVML's
# 480 MiB reserve 4,070 MiB of 81,559 (sim/config.h).
check "its memory: NVML's total (81,559 MiB) and the other process's 3,590 MiB with the reserve" \
  screen "3.975Gi/79.647Gi"
check "the power limit: 700 W" screen "/ 700 W"
check "the other process at its size" wait_for 10 screen "^ *$other .*Compute .*3590MiB"
cp "$tmp/screen" "$tmp/alone"
quit

# Under a budget, with a process of the command holding 512 MiB.
mkfifo "$tmp/in"
sleep 600 >"$tmp/in" &
writer=$!
# The command: a holder in the background, then nvtop.
printf '%s 512MiB <%s >%s & echo $! >%s; exec %s\n' "$qholder" "$qtmp/in" "$qtmp/inner" \
  "$qtmp/inner.pid" "$qnvtop" >"$tmp/command.sh"
tmux -S "$sock" -f /dev/null new-session -d -x 150 -y 45 \
  "exec $qvram run --limit 2GiB -- sh $qtmp/command.sh"
check "under vram run: the device" wait_for 20 screen "Device 0 \[NVIDIA H100 80GB HBM3\]"
check "the budget is the device's memory; the command's 1,030 MiB (512 and a context) in it" wait_for 10 screen "1.006Gi/2.000Gi"
inner=$(cat "$tmp/inner.pid" 2>/dev/null)
check "the command's process, at its size" wait_for 10 screen "^ *$inner .*Compute .*1030MiB"
check "not the other process: it takes nothing from the budget" eval "! grep -q '^ *$other ' '$tmp/screen'"
cp "$tmp/screen" "$tmp/budget"
quit
kill "$writer" 2>/dev/null
wait "$writer" 2>/dev/null
check "nvtop quit, and vram run with it" eval '! tmux -S "$sock" has-session 2>/dev/null'
stop_hold
for f in alone budget; do echo "--- $f"; cat "$tmp/$f" 2>/dev/null | sed -n '1,4p;/PID USER/,/^ *$/p'; done
echo "$passed passed, $failures failed"
[ $failures = 0 ]
