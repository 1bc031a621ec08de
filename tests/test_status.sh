#!/usr/bin/env bash
# vram status --json and --prometheus against a private vramd on the
# simulated GPU, read by real parsers (Python's json; the Prometheus
# client's text parser, python3-prometheus-client): every section of the
# screen in one object; usage without a grant attributed to its process and
# user; a user's peak that never goes down; counters of refusals, reclaims
# and waiting; DCGM exporter's labels; per-process series bounded; other
# users' processes private (as another user, where root can make users).
set -u
build=${1:?usage: test_status.sh BUILD_DIR HOLDER PEER MEMBER}
holder=${2:?} peer=${3:?} member=${4:?}
vram=$build/vram vramd=$build/vramd
. "$(dirname "$0")/lib.sh"
need_debian_python
$py -c 'import prometheus_client.parser' 2>/dev/null ||
  missing "Python's Prometheus client is not installed (scripts/test-deps.sh installs python3-prometheus-client)"
daemon_test status "$build"
export VRAM_SIM_CONTEXT_SIZE=0
M=$((1 << 20)) G=$((1 << 30))
me=$(id -un)

cat >"$tmp/prom.py" <<'EOF'
import sys
from prometheus_client.parser import text_string_to_metric_families
fams = {f.name: f for f in text_string_to_metric_families(open(sys.argv[1]).read())}
def samples(name):
    return [s for f in fams.values() for s in f.samples if s.name == name]
print(eval(sys.argv[2]))
EOF
prom() { $py "$tmp/prom.py" "$@"; }

# --- without vramd: as vram top --once, in all three forms (issue 27, item 13) --
sleep 600 | VRAM_DAEMON=off "$vram" run --limit 1GiB -- "$holder" 100MiB >/dev/null 2>&1 &
off() { VRAM_DAEMON=off "$vram" status "$@"; }
command_seen() { off --json >"$tmp/off.json" 2>&1; [ $? = 3 ] &&
  [ "$(json_field "$tmp/off.json" '[(p["role"], p["budget"]) for p in d["processes"] if p["role"] == "job"]')" = "[('job', $G)]" ]; }
check "VRAM_DAEMON=off: the command's job and budget, as vram top --once shows them" wait_for 30 command_seen
COLUMNS=80 off >"$tmp/off" 2>"$tmp/off.err"; rc=$?
check "VRAM_DAEMON=off: a screen, nothing on stderr, status 3 (no vramd answered)" sh -c "[ $rc = 3 ] && [ ! -s '$tmp/off.err' ]"
check "headed vram status, not vram top" sh -c "head -1 '$tmp/off' | grep -q '^vram status ' && ! grep -q '^vram top' '$tmp/off'"
check "says plainly that vramd is not asked, naming no socket" sh -c \
  "grep -q 'vramd is not asked (VRAM_DAEMON=off): NVML' '$tmp/off' && ! grep -qE 'sock|/run/vram' '$tmp/off'"
check "NVML's view: the GPU's used and free, the command's budget" sh -c \
  "grep -qE '^GPU NAME .* USED +FREE +BUDGETS' '$tmp/off' && grep -qE '^ +job root +0 +run-[0-9]+ +1.00 GiB +100.00 MiB' '$tmp/off'"
check "--json: vramd false, the ledger's own figures null" test "$(json_field "$tmp/off.json" \
  '(d["vramd"], d["devices"][0]["grantable"], d["devices"][0]["reserved"], d["devices"][0]["free"] == d["devices"][0]["total"] - d["devices"][0]["used"])')" = \
  "(False, None, None, True)"
off --prometheus >"$tmp/off.prom" 2>&1
check "--prometheus: status 3 too" test $? = 3
check "--prometheus: parsed, vram_vramd_up 0, the GPU's memory, none of the ledger's families" \
  test "$(prom "$tmp/off.prom" '(samples("vram_vramd_up")[0].value, len(samples("vram_gpu_memory_total_bytes")), "vram_gpu_memory_grantable_bytes" in fams, "vram_refusals" in fams)')" = \
  "(0.0, 1, False, False)"
"$vram" status >"$tmp/gone" 2>"$tmp/gone.err"; rc=$?
check "VRAM_DAEMON names a socket no vramd answers at: NVML's view, and why" sh -c \
  "[ $rc = 3 ] && tr '\\n' ' ' <'$tmp/gone' | grep -q 'vramd does not answer: cannot reach vramd at $S'"
if [ ! -e /run/vram/vramd.sock ]; then
  env -u VRAM_DAEMON "$vram" status >"$tmp/none" 2>&1; rc=$?
  check "no vramd found: says it is not running, and where it looked" sh -c \
    "[ $rc = 3 ] && grep -q 'vramd is not running (no socket at /run/vram/vramd.sock' '$tmp/none'"
fi
"$vram" status --socket "$tmp/none.sock" >/dev/null 2>"$tmp/err"; rc=$?
check "--socket names a vramd: none there is an error" sh -c "[ $rc = 1 ] && grep -q 'cannot reach vramd at $tmp/none.sock' '$tmp/err'"
kill $(jobs -p) 2>/dev/null; wait 2>/dev/null

printf 'default-budget 64MiB\nwhen-full wait 5m\nreconcile-every 100ms\n' >"$tmp/policy"
"$vramd" --socket "$S" --policy "$tmp/policy" --state "$tmp/state" \
  --metrics-file "$tmp/m.prom" --metrics-every 100ms >"$tmp/daemon.out" 2>&1 &
daemon_pid=$!
wait_for 30 test -S "$S" || { echo "FAIL: vramd did not start"; cat "$tmp/daemon.out"; exit 1; }

j() { "$vram" status --json >"$tmp/s.json" && json_field "$tmp/s.json" "$1"; }
is_j() { [ "$(j "$1" 2>/dev/null)" = "$2" ]; }

sleep 600 | VRAM_MEMORY_LIMIT=500MiB "$holder" 400MiB >/dev/null 2>&1 &
a=$!
sleep 600 | VRAM_MEMORY_LIMIT=1000MiB "$holder" 800MiB >/dev/null 2>&1 &
b=$!
sleep 600 | VRAM_DAEMON=off VRAM_MEMORY_LIMIT=400MiB "$holder" 300MiB >/dev/null 2>&1 &
outside=$!
check "two processes with grants" wait_for 30 is_j 'len(d["processes"])' 2
check "one without" wait_for 30 is_j 'len(d["unseen"])' 1

"$vram" status >/dev/null 2>&1
check "with vramd: status 0" test $? = 0
# --- grantable: what vramd would grant now, beside free (issue 27, item 13) ---
check "grantable: the GPU less its grants, reservations and usage outside grants" is_j \
  '[x["grantable"] == x["total"] - x["granted"] - x["reserved"] - x["unseen"] and x["grantable"] < x["free"] for x in d["devices"]]' "[True]"
"$vram" status --prometheus >"$tmp/g.prom"
check "the same in Prometheus, and vram_vramd_up 1" test "$(prom "$tmp/g.prom" \
  '(samples("vram_vramd_up")[0].value, samples("vram_gpu_memory_grantable_bytes")[0].value)')" = "(1.0, $(j 'd["devices"][0]["grantable"]').0)"
COLUMNS=80 "$vram" status >"$tmp/screen"
check "the screen is headed vram status" grep -q '^vram status ' "$tmp/screen"

# --- one object with every section ------------------------------------------
check "the sections of the screen, and whose they are" is_j 'sorted(d)' \
  "['cuda_driver_version', 'devices', 'driver_version', 'host', 'nvml_version', 'processes', 'unseen', 'users', 'vramd', 'waiting']"
check "vramd's ledger" is_j 'd["vramd"]' True
check "the header's: host and versions" is_j '(d["host"], d["driver_version"] != None, d["cuda_driver_version"])' \
  "('$(hostname | cut -c1-63)', True, '13.0')"
check "a device with its name and bus" is_j '(d["devices"][0]["name"], d["devices"][0]["pci_bus_id"][:9])' \
  "('NVIDIA H100 80GB HBM3', '00000000:')"
check "free is what is not used" is_j 'd["devices"][0]["free"] == d["devices"][0]["total"] - d["devices"][0]["used"]' True
check "usage without a grant: its pid, user, command and size" \
  is_j 'd["unseen"][0]' "{'device': 0, 'pid': $outside, 'uid': $(id -u), 'user': '$me', 'command': 'holder', 'used': $((300 * M))}"
check "and in its user's total" \
  wait_for 30 is_j '[(u["processes"], u["used"], u["unseen"]) for u in d["users"]]' "[(3, $((1500 * M)), $((300 * M)))]"
check "processes: budget, used, NVML's figure" \
  is_j 'sorted((p["pid"], p["budget"], p["used"], p["nvml_used"]) for p in d["processes"])' \
  "$(printf '%s\n' "($a, $((500 * M)), $((400 * M)), $((400 * M)))" "($b, $((1000 * M)), $((800 * M)), $((800 * M)))" | sort -t, -k1n | paste -sd, | sed 's/^/[/; s/$/]/; s/,(/, (/g')"

# --- a user's peak never goes down when a process of theirs ends -------------
kill -9 $b  # (no wait: it would wait for the whole pipeline)
check "b's grant is taken back" wait_for 30 is_j 'len(d["processes"])' 1
check "the user's use goes down, the peak stays" \
  wait_for 30 is_j '[(u["used"], u["peak"] >= 1500 * 2**20) for u in d["users"]]' "[($((700 * M)), True)]"
check "a reclaim counted, with its bytes" is_j '(d["devices"][0]["reclaimed"], d["devices"][0]["reclaimed_bytes"])' "(1, $((1000 * M)))"

# --- refusals and waits ---------------------------------------------------------
uuid=$(j 'd["devices"][0]["uuid"]')
timeout 10 "$peer" "$S" hold "$uuid" $((20 * G)) >"$tmp/deny" 2>&1
check "a request larger than the GPU is refused" contains "$tmp/deny" DENY
check "and counted" is_j 'd["devices"][0]["refused"]' 1
# (peer's waiters mode holds its connection without reading: the grant
# that ends the wait is the ledger's to show, however long it takes.)
"$peer" "$S" waiters 1 "$uuid" $((23 * G / 2)) - 300000 >"$tmp/wait" 2>&1 &
w=$!
check "a request that waits" wait_for 30 is_j '[(x["pid"], x["queue_position"], x["waiting_for"]) for x in d["waiting"]]' "[($w, 1, $((23 * G / 2)))]"
check "the device says how many wait" is_j 'd["devices"][0]["waiting"]' 1
sleep 0.5
kill -9 $a
check "is granted when memory comes back" wait_for 60 is_j \
  "[(p['budget'], p['waiting_for']) for p in d['processes'] if p['pid'] == $w]" "[($((23 * G / 2)), 0)]"
check "its wait counted, and how long it took" \
  is_j '(d["devices"][0]["waits"], d["devices"][0]["waited_seconds"] >= 0.4, d["waiting"])' "(1, True, [])"

# --- Prometheus: parsed, DCGM's labels, counters, bounded processes ---------
"$peer" "$S" waiters 300 "$uuid" $((M / 2)) - 0 >"$tmp/waiters" 2>&1 &
many=$!
check "300 clients more" wait_for 30 is_j 'len(d["processes"])' 301
"$vram" status --prometheus >"$tmp/root.prom"
check "Prometheus's parser reads it" test "$(prom "$tmp/root.prom" 'len(fams) > 20')" = True
check "counters are counters" test "$(prom "$tmp/root.prom" \
  '[fams[n].type for n in ("vram_refusals", "vram_reclaims", "vram_reclaimed_bytes", "vram_waits", "vram_wait_seconds")] == ["counter"] * 5')" = True
labels=$(prom "$tmp/root.prom" 'sorted(samples("vram_gpu_memory_total_bytes")[0].labels)')
check "gpu, UUID, pci_bus_id, device, modelName, Hostname, DCGM_FI_DRIVER_VERSION" test "$labels" = \
  "['DCGM_FI_DRIVER_VERSION', 'Hostname', 'UUID', 'device', 'gpu', 'modelName', 'pci_bus_id']"
check "with DCGM's values" test "$(prom "$tmp/root.prom" '[(l["gpu"], l["device"], l["modelName"], l["UUID"]) for l in [samples("vram_gpu_memory_total_bytes")[0].labels]]')" = \
  "[('0', 'nvidia0', 'NVIDIA H100 80GB HBM3', '$uuid')]"
check "the counters' values" test "$(prom "$tmp/root.prom" '[samples(n)[0].value for n in ("vram_refusals_total", "vram_reclaims_total", "vram_waits_total")]')" = "[1.0, 2.0, 1.0]"
check "usage without a grant, by process" test "$(prom "$tmp/root.prom" '[(s.labels["user"], s.labels["command"], s.value) for s in samples("vram_process_nvml_used_bytes") if s.labels["role"] == "unseen"]')" = \
  "[('$me', 'holder', $((300 * M)).0)]"
check "at most 256 series per process metric" test "$(prom "$tmp/root.prom" 'len(samples("vram_process_used_bytes"))')" = 256
check "the rest counted, not shown" test "$(prom "$tmp/root.prom" 'samples("vram_process_series_omitted")[0].value')" = "$((302 - 256)).0"
check "the largest kept" test "$(prom "$tmp/root.prom" 'max(s.value for s in samples("vram_process_budget_bytes"))')" = "$((23 * G / 2)).0"
check "users' totals count every process" test "$(prom "$tmp/root.prom" '[s.value for s in samples("vram_user_processes")]')" = "[302.0]"
parsed() { [ "$(prom "$1" 'len(fams) > 20' 2>/dev/null)" = True ]; }
check "the metrics file (anyone may read it) is parsed too" wait_for 20 parsed "$tmp/m.prom"
check "and has users' totals, no process" test "$(prom "$tmp/m.prom" '(len(samples("vram_user_used_bytes")), len(samples("vram_process_used_bytes")))')" = "(1, 0)"
kill -9 $many $w; wait $many $w 2>/dev/null

# --- the screen at 80 columns: jobs, free memory, versions ------------------------
# Two runs of one program, each a job of its own with its process under it.
for _ in 1 2; do
  "$vram" run --limit 100MiB -- "$member" hold $((40 * M)) 600 >/dev/null 2>&1 &
done
jobs_shown() { [ "$("$vram" status --json | grep -o '"role":"job"' | wc -l)" = 2 ] &&
  [ "$(COLUMNS=80 "$vram" status | grep -cE '^ *[0-9]+ +[^ ]+ +0 run-[0-9]+ +- +40.00 MiB')" = 2 ]; }
check "two jobs, each with its process" wait_for 30 jobs_shown
COLUMNS=80 "$vram" status >"$tmp/screen"
check "a JOB column at 80 columns" grep -qE '^ +PID USER +GPU JOB +BUDGET +USED' "$tmp/screen"
check "two jobs of one program tell apart" \
  test "$(grep -oE '^ +job +[^ ]+ +0 run-[0-9]+' "$tmp/screen" | awk '{ print $4 }' | sort -u | wc -l)" = 2
check "a job's process: under its job, BUDGET - (the job's budget is its)" \
  sh -c "[ \$(grep -A1 -E '^ +job ' '$tmp/screen' | grep -cE '^ *[0-9]+ +[^ ]+ +0 run-[0-9]+ +- +40.00 MiB') = 2 ]"
check "FREE and GRANTABLE at 80 columns, UNSEEN left out first" \
  sh -c "grep -qE '^GPU NAME .* USED +FREE +GRANTABLE\$' '$tmp/screen' && ! grep -q '^GPU .*UNSEEN' '$tmp/screen'"
nvml_version=$(j 'd["nvml_version"]')
check "the NVML version whole at 80 columns" grep -qE "(^|  )NVML $nvml_version( |\$)" "$tmp/screen"
# (characters, not bytes: the trend's marks are UTF-8)
check "no line wider than 80" test "$(LC_ALL=C sed 's/[\x80-\xbf]//g' "$tmp/screen" | awk '{ if (length > m) m = length } END { print m + 0 }')" -le 80
"$vram" status >"$tmp/screen.plain"
check "nor in vram status without COLUMNS" grep -qE "(^|  )NVML $nvml_version( |\$)" "$tmp/screen.plain"
# Each job's row is followed by its process, whatever the sort.
grouped() { awk '/^ +job / { job = $4; next } job { if ($4 != job) bad = 1; job = "" } END { exit bad }' "$1"; }
for key in p g pid gpu mem u t; do
  COLUMNS=80 "$vram" top --once --sort $key >"$tmp/sorted" 2>&1
  check "--sort $key: each job with its process" grouped "$tmp/sorted"
done
COLUMNS=80 "$vram" top --once --sort p >"$tmp/sorted"
check "--sort p: jobs in their holders' pid order" \
  sh -c "grep -oE '^ +job +[^ ]+ +0 run-[0-9]+' '$tmp/sorted' | grep -oE '[0-9]+\$' | sort -c -n"
check "--sort m: memory, the only sort that starts so" sh -c "'$vram' top --once --sort m >/dev/null"
kill $(jobs -p | tail -2) 2>/dev/null

# --- another user sees their own processes, and others' totals --------------
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && command -v useradd >/dev/null &&
   test_users u v; then
  kit=$tmp/kit
  make_kit "$build" "$peer" "$kit"
  cp "$holder" "$kit/"
  chmod -R a+rX "$kit"
  as() { local uid=$1 gid=$2; shift 2; setpriv --reuid="$uid" --regid="$gid" --clear-groups env LD_LIBRARY_PATH="$kit/sim" VRAM_DAEMON="$S" VRAM_SIM_DIR="$VRAM_SIM_DIR" VRAM_SIM_DEVICES=12GiB VRAM_SIM_CONTEXT_SIZE=0 "$@"; }
  sleep 600 | as "$uid_u" "$gid_u" VRAM_DAEMON=off VRAM_MEMORY_LIMIT=300MiB "$kit/holder" 200MiB >/dev/null 2>&1 &
  sleep 600 | as "$uid_u" "$gid_u" VRAM_MEMORY_LIMIT=300MiB "$kit/holder" 100MiB >/dev/null 2>&1 &
  check "u's process without a grant is seen by root as u's" \
    wait_for 30 sh -c "'$vram' status --json | grep -q '\"uid\":$uid_u,\"user\":\"$user_u\",\"command\":\"holder\",\"used\":$((200 * M))}'"
  check "and u's process with a grant" wait_for 30 is_j "len([p for p in d['processes'] if p['uid'] == $uid_u])" 1
  uo=$(j "[p['pid'] for p in d['unseen'] if p['uid'] == $uid_u][0]")
  ug=$(j "[p['pid'] for p in d['processes'] if p['uid'] == $uid_u][0]")
  as "$uid_v" "$gid_v" "$kit/vram" status --json >"$tmp/v.json"
  check "v sees none of u's processes" sh -c "! grep -qE '\"pid\":($uo|$ug),' '$tmp/v.json'"
  check "but u's total, with what u uses without a grant" \
    test "$(json_field "$tmp/v.json" "[(u['processes'], u['unseen']) for u in d['users'] if u['user'] == '$user_u']")" = "[(2, $((200 * M)))]"
  as "$uid_u" "$gid_u" "$kit/vram" status --json >"$tmp/u.json"
  check "u sees its own, with and without a grant" \
    test "$(json_field "$tmp/u.json" '(len(d["processes"]), len(d["unseen"]), len([u for u in d["users"]]))')" = "(1, 1, 2)"
  as "$uid_v" "$gid_v" "$kit/vram" status --prometheus >"$tmp/v.prom"
  check "v's metrics: no process of u's" sh -c "! grep -qE 'pid=\"($uo|$ug)\"' '$tmp/v.prom' && grep -q 'vram_user_unseen_bytes{.*user=\"$user_u\".*} $((200 * M))' '$tmp/v.prom'"
  kill -9 "$uo" "$ug" 2>/dev/null
else
  echo "SKIP: the other-user part needs root, setpriv and useradd"
fi

kill -9 $outside 2>/dev/null
echo "test_status: $passed passed, $failures failed"
[ $failures = 0 ]
