#!/usr/bin/env bash
# vram devices on the simulated GPUs and NVML, as a person reads it: each
# GPU with its memory, then the processes holding memory (pid, user,
# command, used, and the budget vramd granted), like nvidia-smi's process
# table; never a row for the listing itself; --json for scripts.
set -u
build=${1:?usage: test_vram_devices.sh BUILD_DIR}
vram=$build/vram vramd=$build/vramd grab=$build/vram-demo-grab
tmp=$(mktemp -d)
export LD_LIBRARY_PATH="$build/sim" VRAM_SIM_DEVICES=12GiB,80GiB VRAM_SIM_DIR=$tmp/sim VRAM_DAEMON=off
mkdir "$VRAM_SIM_DIR"
unset VRAM_MEMORY_LIMIT VRAM_MEMORY_FRACTION LD_PRELOAD VRAM_LOG CUDA_VISIBLE_DEVICES
daemon=
trap 'kill $(jobs -p) $daemon 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh"
me=$(id -un)
gpu0=GPU-5a1d0e5a-a000-4000-8000-000000000000 gpu1=GPU-5a1d0e5a-a100-4000-8000-000000000001

"$vram" devices >"$tmp/out" 2>"$tmp/err"; rc=$?
check "idle: lists the GPUs" sh -c "[ $rc = 0 ] && grep -q '^0 .*12.00 GiB .* 0 B .*12.00 GiB' '$tmp/out' && grep -q '^1 .*80.00 GiB' '$tmp/out'"
check "idle: with their UUIDs" sh -c "grep -q '$gpu0' '$tmp/out' && grep -q '$gpu1' '$tmp/out'"
check "idle: no process holds memory, the listing included" contains "$tmp/out" "(no process holds GPU memory)"
check "no rows of the listing's own (logical devices, in use 0 B)" sh -c "! grep -qi 'logical\|in use' '$tmp/out'"

# Two programs under vram run, one on each GPU's budget.
"$vram" run --limit 5GiB -- "$grab" D 40 >/dev/null 2>&1 &
run_d=$!
wait_for 10 sh -c "'$vram' devices --brief | grep -q 'GPU 0 .* 5.00 GiB used'"
d=$(command_of $run_d) # vram run stays beside its command; the holder is its child
cmdline() { tr '\0' ' ' </proc/$1/cmdline | sed 's/ $//'; }
"$vram" devices >"$tmp/out" 2>"$tmp/err"
check "a holder: its GPU, pid, user, used" grep -Eq "^0 +$d +$me +5.00 GiB +- +" "$tmp/out"
check "a holder: its command" contains "$tmp/out" "vram-demo-grab D 40"
check "GPU 0 shows what is used" grep -Eq '^0 .*12.00 GiB +5.00 GiB +7.00 GiB' "$tmp/out"
# The simulated H100's load follows the share of its memory processes hold
# (sim/nvml_board.c): 5 of 12 GiB is 42%, 30 + 45 * 42% = 48 C, and
# 70 W + 6.3 W per percent = 334.6 W; the idle GPU 1 is at 0%, 30 C, 70 W.
check "and what NVML says it is doing: utilisation, temperature, power" \
  sh -c "grep -Eq '^GPU +NAME / UUID +TOTAL +USED +FREE +UTIL +TEMP +POWER$' '$tmp/out' && grep -Eq '^0 .*7.00 GiB +42% +48C +334W$' '$tmp/out'"
check "the GPUs' table in 80 columns" test "$(awk '/^$/ { exit } { if (length > m) m = length } END { print m + 0 }' "$tmp/out")" -le 80

# --format csv: nvidia-smi's --query-gpu names, units and forms.
"$vram" devices --format csv >"$tmp/csv" 2>"$tmp/err"; rc=$?
check "--format csv: the header as nvidia-smi writes it" sh -c "[ $rc = 0 ] && head -1 '$tmp/csv' | grep -qx 'index, uuid, name, memory.total \[MiB\], memory.used \[MiB\], memory.free \[MiB\], utilization.gpu \[%\], temperature.gpu, power.draw \[W\]'"
check "--format csv: a line per GPU, with units" sh -c "[ \$(wc -l <'$tmp/csv') = 3 ] && grep -qx '0, $gpu0, NVIDIA H100 80GB HBM3, 12288 MiB, 5120 MiB, 7168 MiB, 42 %, 48, 334.60 W' '$tmp/csv' && grep -qx '1, $gpu1, NVIDIA H100 80GB HBM3, 81920 MiB, 0 MiB, 81920 MiB, 0 %, 30, 70.00 W' '$tmp/csv'"
"$vram" devices --format csv,noheader,nounits >"$tmp/csv"
check "--format csv,noheader,nounits: bare values" sh -c "[ \$(wc -l <'$tmp/csv') = 2 ] && head -1 '$tmp/csv' | grep -qx '0, $gpu0, NVIDIA H100 80GB HBM3, 12288, 5120, 7168, 42, 48, 334.60'"
if [ -x /usr/bin/python3 ]; then
  check "--format csv: Python's csv reads it, the GPU with the most free memory first" sh -c \
    "'$vram' devices --format csv | /usr/bin/python3 -c 'import csv, sys; r = list(csv.DictReader(sys.stdin, skipinitialspace=True)); print(max(r, key=lambda x: int(x[\"memory.free [MiB]\"].split()[0]))[\"uuid\"])' | grep -qx '$gpu1'"
fi
"$vram" devices --format tsv 2>"$tmp/err"; rc=$?
check "--format tsv refused, saying what is accepted" sh -c "[ $rc = 2 ] && grep -q 'format \"tsv\".*accepted: csv' '$tmp/err'"
check "no row for vram devices itself" sh -c "[ \$(grep -c '^[0-9] ' '$tmp/out') = 3 ]"

"$vram" devices --json >"$tmp/json" 2>"$tmp/err"; rc=$?
check "--json exits 0" test $rc = 0
if [ -x /usr/bin/python3 ]; then
  check "--json: GPUs, memory and processes, in bytes" /usr/bin/python3 - "$tmp/json" "$d" "$me" "$gpu0" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
pid, me, uuid = int(sys.argv[2]), sys.argv[3], sys.argv[4]
g = j["gpus"]
assert [x["index"] for x in g] == [0, 1], g
assert g[0]["uuid"] == uuid and g[0]["total"] == 12 << 30 and g[0]["used"] == 5 << 30, g[0]
assert g[0]["free"] == 7 << 30 and g[1]["processes"] == [], g
assert (g[0]["utilization"], g[0]["temperature"], g[0]["power_mw"], g[0]["power_limit_mw"]) == (42, 48, 334600, 700000), g[0]
p = g[0]["processes"]
assert len(p) == 1 and p[0]["pid"] == pid and p[0]["user"] == me and p[0]["used"] == 5 << 30, p
assert "vram-demo-grab D 40" in p[0]["command"] and p[0]["budget"] is None, p
assert j["nvml_error"] is None and j["vramd"] is False, j
EOF
else
  check "--json: the holder" grep -q "\"pid\":$d,.*\"used\":5368709120" "$tmp/json"
fi
kill $run_d; wait $run_d 2>/dev/null

# With vramd, the budget it granted is in the table.
S=$tmp/vramd.sock
printf 'default-budget 4GiB\nreconcile-every 100ms\n' >"$tmp/policy"
"$vramd" --socket "$S" --policy "$tmp/policy" --state "$tmp/state" >"$tmp/daemon.out" 2>&1 &
daemon=$!
wait_for 10 test -S "$S"
VRAM_DAEMON=$S "$vram" run -- "$grab" E 40 >/dev/null 2>&1 &
run_e=$!
wait_for 10 sh -c "'$vram' devices --brief | grep -q 'GPU 0 .* 4.00 GiB used'"
e=$(command_of $run_e)
# vram run names its process to vramd within a report period (200 ms).
check "with vramd: the budget it granted" wait_for 10 sh -c \
  "VRAM_DAEMON='$S' '$vram' devices >'$tmp/out' 2>'$tmp/err' && grep -Eq '^0 +$e +$me +4.00 GiB +4.00 GiB +' '$tmp/out'"
VRAM_DAEMON=$S "$vram" devices --json >"$tmp/json"
check "with vramd: the budget in JSON" grep -q "\"pid\":$e,.*\"budget\":4294967296" "$tmp/json"
kill $run_e; wait $run_e 2>/dev/null

# Without NVML the GPUs are still listed, and what is unknown says why.
mkdir "$tmp/no-nvml"
ln -s "$(readlink -f "$build/sim/libcuda.so.1")" "$tmp/no-nvml/libcuda.so.1"
LD_LIBRARY_PATH=$tmp/no-nvml "$vram" devices >"$tmp/out" 2>"$tmp/err"; rc=$?
check "without NVML: still a listing" sh -c "[ $rc = 0 ] && grep -q '$gpu0' '$tmp/out'"
check "without NVML: says why processes are unknown" contains "$tmp/out" "cannot load NVML"

# Without a driver: where vram's simulated one is, by its real path in a
# build tree (no placeholder to fill in), and what it is elsewhere.
LD_LIBRARY_PATH= "$vram" devices >"$tmp/out" 2>"$tmp/err"; rc=$?
check "without a driver: status 1, the simulated one named by its path" sh -c \
  "[ $rc = 1 ] && grep -qF 'put vram'\''s simulated driver first: LD_LIBRARY_PATH=$(cd "$build" && pwd)/sim' '$tmp/err'"
check "without a driver: no placeholder" sh -c "! grep -q '<build>' '$tmp/err'"
mkdir "$tmp/lone"
cp "$vram" "$tmp/lone/vram"
LD_LIBRARY_PATH= "$tmp/lone/vram" devices >"$tmp/out" 2>"$tmp/err"
check "a vram with no build beside it: says where the simulated driver comes from" sh -c \
  "grep -q 'built with vram (make build), into the folder sim of the build' '$tmp/err' && ! grep -q '<build>' '$tmp/err'"

"$vram" devices --brief --json 2>"$tmp/err"; rc=$?
check "--brief with --json refused" sh -c "[ $rc = 2 ] && grep -q 'give one of them' '$tmp/err'"
"$vram" devices --help >"$tmp/out"
check "--help says what it shows" sh -c "grep -q 'who holds their memory' '$tmp/out' && grep -q -- '--json' '$tmp/out'"

echo "$passed passed, $failures failed"
[ "$failures" = 0 ]
