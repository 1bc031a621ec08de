#!/usr/bin/env bash
# vram run --record: a program that uses every family the interposer
# governs, its CUDA contexts and modules among them, records exactly the
# events it caused, with what the budget charged and what the simulated GPU
# held (check_recording.py reads the file on its own), and the peak vram run
# reports; RMM's log of it replays
# with vram-replay to that peak; its trace events are valid; several
# processes record into one recording; a SIGKILLed program's events are
# there up to its last buffer; what cannot be written is kept, and said how
# to convert by hand; bad --record and --format are refused before
# anything starts; a threaded program's 200 forked children neither hang
# nor record.
set -u
build=${1:?usage: test_run_record.sh BUILD_DIR RECORDED}
recorded=${2:?usage: test_run_record.sh BUILD_DIR RECORDED}
here=$(cd "$(dirname "$0")" && pwd)
vram=$build/vram replay=$build/vram-replay
. "$here/../lib.sh"
need_debian_python
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export VRAM_SIM_DIR=$tmp/sim
mkdir "$VRAM_SIM_DIR"
run() { "$vram" run --limit 1276MiB "$@"; }
mib() { echo $(($1 * 1048576)); }
context=$(mib 518) # what a context takes on the simulated H100, inside the budget

# --- every family, as vram's own form -------------------------------------
run --record "$tmp/fam.vrec" --summary "$tmp/fam-summary.json" -- \
  "$recorded" families "$tmp/fam.log" 2>"$tmp/fam.err"
rc=$?
check "the program ran" test $rc = 0
$py "$here/check_recording.py" "$tmp/fam.vrec" "$tmp/fam.log" >"$tmp/fam.json" 2>"$tmp/err"
check "exactly the program's events, and what the budget and the GPU counted" test -s "$tmp/fam.json"
cat "$tmp/err"
peak=$(json_field "$tmp/fam-summary.json" 'd["devices"][0]["peak"]')
check "the peak vram run reported is the program's: its context and 640 MiB" \
  test "$peak" = "$((context + $(mib 640)))"
check "the contexts' part of it: two at once" \
  test "$(json_field "$tmp/fam-summary.json" 'd["devices"][0]["context"]')" = "$((2 * context))"
check "the modules' part: a module and a library of 4 MiB each" \
  test "$(json_field "$tmp/fam-summary.json" 'd["devices"][0]["modules"]')" = "$(mib 8)"
check "the recording's peak is vram run's" test "$(json_field "$tmp/fam.json" 'd["peak"]')" = "$peak"
check "every refusal recorded" \
  test "$(json_field "$tmp/fam.json" 'd["refusals"]')" = "$(json_field "$tmp/fam.json" 'd["expected_refusals"]')"
"$vram" record info --json "$tmp/fam.vrec" >"$tmp/info.json"
check "vram record info reads the same peak" \
  test "$(json_field "$tmp/info.json" 'd["devices"][0]["peak"]')" = "$peak"
check "and the command's budget" test "$(json_field "$tmp/info.json" 'd["devices"][0]["budget"]')" = "$(mib 1276)"
check "every family in it" test "$(json_field "$tmp/info.json" \
  'sorted(k for k, v in d["devices"][0]["family_peaks"].items() if v)')" = \
  "['array', 'context', 'graph', 'managed', 'module', 'pitched', 'plain', 'pool', 'vmm']"
check "no recorders' directory left" sh -c "! ls -d '$tmp'/*.recording-* 2>/dev/null"
check "nothing noted for a program that ended well" sh -c "! grep -q 'note:' '$tmp/fam.err'"

# --- a threaded program that forks 200 children ----------------------------
# As PyTorch's DataLoader forks its workers: no child hangs (a child of a
# recording process starts no thread and waits on no lock a thread of its
# parent held), the children, which cannot use CUDA (forked after cuInit),
# record nothing and leave no file, and the parent's threads' events are
# all there, once each.
run --record "$tmp/forks.vrec" --log off -- "$recorded" forks "$tmp/forks.log" 200 2>"$tmp/forks.err"
check "the forking program ran, and none of its 200 children hung" test $? = 0
cat "$tmp/forks.err"
$py "$here/check_recording.py" "$tmp/forks.vrec" "$tmp/forks.log" >"$tmp/forks.json" 2>"$tmp/err"
check "its threads' events, each once, and nothing of its children" test -s "$tmp/forks.json"
cat "$tmp/err"

# --- the driver's own memory: NVML's readings -----------------------------
# Eight kernels' code loaded lazily at their first launch (2 MiB each, no
# call vram governs): NVML's readings are in the recording, the last before
# the program's step what NVML said, exceeding what vram charged the calls
# by the driver's part (check_recording.py --lazy); the other forms show
# NVML's figure (the trace) or leave it out (RMM's log, which has only
# allocations: its peak stays vram's).
run --record "$tmp/lazy.vrec" --summary "$tmp/lazy-summary.json" --log off -- \
  "$recorded" lazy "$tmp/lazy.log" 8
check "the lazy program ran" test $? = 0
$py "$here/check_recording.py" --lazy "$tmp/lazy.vrec" "$tmp/lazy.log" 8 >"$tmp/lazy.json" \
  2>"$tmp/err"
check "NVML's readings recorded: its figure is what vram charged and the driver's part" \
  test -s "$tmp/lazy.json"
cat "$tmp/err"
echo "lazy: $(cat "$tmp/lazy.json")"
nvml=$(json_field "$tmp/lazy-summary.json" 'd["devices"][0]["nvml_peak"]')
check "the driver's part: eight kernels' code" \
  test "$(json_field "$tmp/lazy.json" 'd.get("driver")' 2>/dev/null)" = "$(mib 16)"
"$vram" record convert "$tmp/lazy.vrec" "$tmp/lazy.trace.json"
check "the trace's NVML counter peaks at vram run's NVML peak" test "$($py -c '
import json, sys
print(max(e["args"]["NVML"] for e in json.load(open(sys.argv[1]))["traceEvents"]
          if e.get("name") == "GPU 0 NVML"))' "$tmp/lazy.trace.json" 2>&1)" = "$nvml"
"$vram" record convert "$tmp/lazy.vrec" "$tmp/lazy.csv"
$py "$here/check_csv.py" "$tmp/lazy.csv" >"$tmp/lazy-csv.json" 2>"$tmp/err"
check "RMM's log has no line for NVML's readings: its peak is vram's" \
  test "$(json_field "$tmp/lazy-csv.json" 'd["peak"]' 2>/dev/null)" = \
  "$(json_field "$tmp/lazy-summary.json" 'd["devices"][0]["peak"]')"
cat "$tmp/err"
"$vram" record convert "$tmp/lazy.vrec" "$tmp/lazy2.vrec"
check "vram's own form keeps NVML's readings" \
  $py "$here/check_recording.py" --lazy "$tmp/lazy2.vrec" "$tmp/lazy.log" 8

# --- RMM's log: replays to the same peak ----------------------------------
run --record "$tmp/fam.csv" --summary "$tmp/csv-summary.json" --log off -- \
  "$recorded" families "$tmp/csv.log"
check "recorded as RMM's log" test -s "$tmp/fam.csv"
$py "$here/check_csv.py" "$tmp/fam.csv" >"$tmp/csv.json" 2>"$tmp/err"
check "the log is a consistent history" test -s "$tmp/csv.json"
cat "$tmp/err"
peak=$(json_field "$tmp/csv-summary.json" 'd["devices"][0]["peak"]')
check "the log's peak is vram run's" test "$(json_field "$tmp/csv.json" 'd["peak"]')" = "$peak"
check "refusals are allocate failures" test "$(json_field "$tmp/csv.json" 'd["failures"]')" = 10
"$replay" --runs 1 "$tmp/fam.csv" >"$tmp/replay" 2>&1
check "vram-replay replays it to the same peak" contains "$tmp/replay" "/ 1.13 GiB)"
check "vram-replay: nothing failed" sh -c "! grep -q failed '$tmp/replay'"

# --- trace events, by --format --------------------------------------------
run --record "$tmp/fam.trace" --format json --summary "$tmp/trace-summary.json" --log off -- \
  "$recorded" families "$tmp/trace.log"
$py "$here/check_trace.py" "$tmp/fam.trace" >"$tmp/trace.json" 2>"$tmp/err"
check "valid trace-event JSON" test -s "$tmp/trace.json"
cat "$tmp/err"
check "its GPU 0 counter peaks at vram run's peak" test "$(json_field "$tmp/trace.json" \
  'd["gpus"]["0"]["peak"]')" = "$(json_field "$tmp/trace-summary.json" 'd["devices"][0]["peak"]')"
check "its refusals marked" test "$(json_field "$tmp/trace.json" 'd["gpus"]["0"]["refusals"]')" = 10
check "as many as vram run counted (a graph node over the budget too)" test \
  "$(json_field "$tmp/trace-summary.json" 'd["devices"][0]["refused"]')" = 10
check "its budget" test "$(json_field "$tmp/trace.json" 'd["gpus"]["0"]["budget"]')" = "$(mib 1276)"

# --- several processes, one recording -------------------------------------
run --log off --record "$tmp/multi.vrec" -- bash -c \
  "'$recorded' pairs '$tmp/a.log' 40 & '$recorded' pairs '$tmp/b.log' 60 & wait; \
   '$recorded' pairs '$tmp/c.log' 20"
$py "$here/check_recording.py" "$tmp/multi.vrec" "$tmp/a.log" "$tmp/b.log" "$tmp/c.log" \
  >"$tmp/multi.json" 2>"$tmp/err"
check "three processes, each exactly its events, in one file" \
  test "$(json_field "$tmp/multi.json" 'd["processes"]' 2>/dev/null)" = 3
cat "$tmp/err"

# --- exec: the image it leaves held memory that the driver freed at exec --
run --record "$tmp/exec.csv" --summary "$tmp/exec-summary.json" -- \
  "$recorded" exec 512 "$recorded" pairs "$tmp/exec.log" 10 2>"$tmp/exec.err"
$py "$here/check_csv.py" "$tmp/exec.csv" >"$tmp/exec.json" 2>"$tmp/err"
check "exec: the 512 MiB and the context the first image held are in the recording" \
  test "$(json_field "$tmp/exec.json" 'd["peak"]' 2>/dev/null)" = "$((context + $(mib 512)))"
check "exec: and freed when the next image began, nothing held at the end" \
  test "$(json_field "$tmp/exec.json" 'd["live_at_end"]' 2>/dev/null)" = 0
check "exec: the peak is vram run's" \
  test "$(json_field "$tmp/exec-summary.json" 'd["devices"][0]["peak"]')" = "$((context + $(mib 512)))"
check "exec: the note says so" contains "$tmp/exec.err" "followed by another of its pid (exec)"
cat "$tmp/err"

# --- a process killed with SIGKILL ----------------------------------------
"$vram" run --limit 1276MiB --record "$tmp/killed.vrec" -- "$recorded" churn "$tmp/killed.log" \
  2>"$tmp/killed.err" &
runner=$!
cmd=$(command_of $runner)
wait_for 20 sh -c "[ \$(wc -l <'$tmp/killed.log' 2>/dev/null || echo 0) -ge 200 ]"
sleep 2.5
kill -KILL "$cmd"
wait $runner
rc=$?
check "vram run says the command was killed" test $rc = 137
$py "$here/check_recording.py" --killed "$tmp/killed.vrec" "$tmp/killed.log" >"$tmp/kill.json" \
  2>"$tmp/err"
check "the killed program's events are there up to its last buffer" test -s "$tmp/kill.json"
echo "killed: $(cat "$tmp/kill.json")"
cat "$tmp/err"
check "vram run notes the process left no exit record" contains "$tmp/killed.err" "no exit record"

# --- what cannot be written is kept ---------------------------------------
# A directory where the file should go: the merged file cannot take its place.
run --log off --record "$tmp/late.vrec" -- sh -c \
  "'$recorded' pairs '$tmp/late.log' 10 && mkdir '$tmp/late.vrec'" 2>"$tmp/late.err"
rc=$?
check "the command's status, not the recording's" test $rc = 0
kept=$(sed -n 's/.*the events are kept in \([^ ]*\) (vram record convert .*/\1/p' "$tmp/late.err")
check "the message says where the events are kept" test -d "$kept"
check "and how to convert them" contains "$tmp/late.err" "vram record convert $kept FILE"
"$vram" record convert "$kept" "$tmp/late2.vrec" 2>"$tmp/err"
$py "$here/check_recording.py" "$tmp/late2.vrec" "$tmp/late.log" >/dev/null 2>&1
check "converted by hand, they are all there" test $? = 0
rm -rf "$kept"

# --- bad --record and --format: refused, nothing started ------------------
refused() { # NAME PATTERN ARGS...: status 2, the message, nothing started or left
  local name=$1 pattern=$2; shift 2
  rm -f "$tmp/started"
  "$vram" run --limit 1276MiB "$@" -- touch "$tmp/started" 2>"$tmp/err"
  local rc=$?
  check "$name: refused" test $rc = 2
  check "$name: says why" contains "$tmp/err" "$pattern"
  check "$name: nothing started" test ! -e "$tmp/started"
  check "$name: no recorders' directory left" sh -c "! ls -d '$tmp'/*.recording-* 2>/dev/null"
}
refused "an extension that is no form" 'x.txt".*\.vrec, \.csv, \.json' --record "$tmp/x.txt"
refused "an unknown --format" '--format "xml": unknown format; accepted: vrec' \
  --record "$tmp/x.vrec" --format xml
refused "--format without --record" '--format csv: .*no --record' --format csv
refused "standard output" '--record "-": expected a file name' --record -
refused "a directory" "--record $tmp: a directory" --record "$tmp" --format vrec
refused "a folder that is not there" "nodir/x.vrec: .*No such file" --record "$tmp/nodir/x.vrec"

# Refusals say why: a budget that cannot be read, a command that cannot be
# joined (the interposer alone, recording into a directory of its own). The
# one refusal is the program's first request: its context.
refusal_reason() { # WHY ENV...: the reason of the one refusal a recording holds
  local why=$1; shift
  rm -rf "$tmp/why" && mkdir "$tmp/why"
  env "$@" VRAM_RECORD="$tmp/why" LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$build" LD_PRELOAD=libvram-preload.so \
    "$recorded" churn "$tmp/why.log" >/dev/null 2>&1
  "$vram" record convert "$tmp/why" "$tmp/why.json" 2>/dev/null
  $py -c '
import json, sys
names = [e["name"] for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "i"
         and e["name"].startswith("refused")]
sys.exit(names != ["refused: " + sys.argv[2]])' "$tmp/why.json" "$why"
}
check "a refusal for bad settings says so" \
  refusal_reason "bad budget settings" VRAM_MEMORY_LIMIT=4Gx
check "a refusal for a command that cannot be joined says so" \
  refusal_reason "budget unavailable" VRAM_MEMORY_LIMIT=1276MiB VRAM_COMMAND=00000000:1/3

# The interposer told to record where it cannot says so, always, and the
# program runs on.
VRAM_RECORD=$tmp/nowhere LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$build" LD_PRELOAD=libvram-preload.so VRAM_MEMORY_LIMIT=1276MiB \
  "$recorded" pairs "$tmp/alone.log" 2 2>"$tmp/err"
rc=$?
check "a bad VRAM_RECORD: the program runs" test $rc = 0
check "a bad VRAM_RECORD: said without VRAM_LOG, naming it" \
  contains "$tmp/err" "vram: error: VRAM_RECORD=\"$tmp/nowhere\": No such file"

echo "$passed passed, $failures failed"
[ "$failures" = 0 ]
