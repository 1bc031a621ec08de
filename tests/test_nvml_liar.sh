#!/usr/bin/env bash
# An NVML that misbehaves (tests/nvml_liar.c; issue 26 items 9 and 10):
# a process count past the room it was given, with SUCCESS, is taken as a
# list that did not fit, never read past the buffer (under ASan that read
# and write were a heap overflow in vram top, vram devices and vramd);
# figures of 2^63 bytes are summed without wrapping to 0; and NVML's
# strings reach the terminal printable only, with vramd and without it.
set -u
build=${1:?usage: test_nvml_liar.sh BUILD_DIR LIAR_DIR}
liar=${2:?}
vram=$build/vram vramd=$build/vramd
. "$(dirname "$0")/lib.sh"
tmp=$(mktemp -d /tmp/vram-liar.XXXXXX)
daemon_pid=
trap '[ -n "$daemon_pid" ] && kill -9 $daemon_pid 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
unset VRAM_MEMORY_LIMIT VRAM_MEMORY_FRACTION LD_PRELOAD VRAM_LOG
# The liar's NVML first, the simulated CUDA driver for vram devices.
export LD_LIBRARY_PATH="$liar:$build/sim" VRAM_SIM_DIR=$tmp/sim VRAM_SIM_DEVICES=12GiB
mkdir "$VRAM_SIM_DIR"
ESC=$(printf '\033') BEL=$(printf '\007')
clean() { ! grep -q "[$ESC$BEL]" "$1"; }
no_report() { ! grep -qE 'AddressSanitizer|runtime error|LeakSanitizer' "$1"; }
# rc: a program that ran to its end (0, or 1 for what it could not read), not a signal.
ended() { [ "$1" = 0 ] || [ "$1" = 1 ]; }

# --- vram top without vramd ---------------------------------------------------
VRAM_DAEMON=off COLUMNS=100 "$vram" top --once >"$tmp/top" 2>&1
check "vram top without vramd: runs" test $? = 0
check "and prints no terminal escape from NVML's name or driver version" clean "$tmp/top"
check "the name shown printable" grep -q '?\[2J?\]0;owned?NVIDIA Liar' "$tmp/top"
check "the driver version too" grep -q 'driver ?\[31m999.99?\[0m' "$tmp/top"

NVML_LIAR=count VRAM_DAEMON=off COLUMNS=100 "$vram" top --once >"$tmp/count" 2>&1
rc=$?
check "a count past the room: vram top ends (rc $rc), no sanitizer report" sh -c "[ $rc = 0 ] || [ $rc = 1 ]"
check "  no sanitizer report" no_report "$tmp/count"
check "  and says the list did not fit" grep -q "did not fit the room NVML asked for" "$tmp/count"

NVML_LIAR=huge VRAM_DAEMON=off COLUMNS=100 "$vram" top --once >"$tmp/huge" 2>&1
check "two processes of 2^63 bytes: a user's total saturates, never wraps to 0" \
  grep -qE '^root +0 +2 +- +16.00 EiB' "$tmp/huge"

# --- vram devices ---------------------------------------------------------------
NVML_LIAR=huge "$vram" devices >"$tmp/dev" 2>&1
check "vram devices: runs" grep -q "8.00 EiB\|1.00 GiB" "$tmp/dev"
NVML_LIAR=count "$vram" devices >"$tmp/dev-count" 2>&1
rc=$?
check "vram devices with a count past the room: ends (rc $rc)" ended $rc
check "  no sanitizer report" no_report "$tmp/dev-count"

# --- vramd -------------------------------------------------------------------------
printf 'reconcile-every 100ms\n' >"$tmp/policy"
S=$tmp/vramd.sock
start_daemon() {
  env "$@" "$vramd" --socket "$S" --policy "$tmp/policy" --log info >"$tmp/daemon.out" 2>&1 &
  daemon_pid=$!
  wait_for 20 sh -c "VRAM_DAEMON='$S' '$vram' status >/dev/null 2>&1"
}
stop_daemon() { kill -TERM $daemon_pid; wait $daemon_pid; local rc=$?; daemon_pid=; return $rc; }
check "vramd starts on it" start_daemon
VRAM_DAEMON=$S COLUMNS=100 "$vram" status >"$tmp/status" 2>&1
check "vram status: NVML's strings printable, as vramd passed them" clean "$tmp/status"
check "  shown" grep -q '?\[2J?\]0;owne' "$tmp/status"
check "vramd stops cleanly" stop_daemon
check "  no sanitizer report" no_report "$tmp/daemon.out"

check "vramd starts, the list past the room" start_daemon NVML_LIAR=count
check "  and reads it a few times" wait_for 20 grep -q "did not fit the room NVML asked for" "$tmp/daemon.out"
sleep 0.5
check "  still answers" sh -c "VRAM_DAEMON='$S' '$vram' status >/dev/null"
check "  stops cleanly" stop_daemon
check "  no sanitizer report" no_report "$tmp/daemon.out"

check "vramd starts, processes of 2^63 bytes" start_daemon NVML_LIAR=huge
G12=$((12 << 30))
seen() { VRAM_DAEMON=$S "$vram" status --json >"$tmp/huge.json" 2>/dev/null &&
         [ "$(grep -o "\"used\":$G12}" "$tmp/huge.json" | wc -l)" = 2 ]; }
check "  each held at most the GPU's 12 GiB, not 8 EiB" wait_for 20 seen
check "  and the device's use is their sum, not wrapped" grep -q "\"used\":$((2 * G12))," "$tmp/huge.json"
check "  stops cleanly" stop_daemon
check "  no sanitizer report" no_report "$tmp/daemon.out"

echo "test_nvml_liar: $passed passed, $failures failed"
[ $failures = 0 ]
