#!/usr/bin/env bash
# vram record: a recording read from a recorder's directory or from one
# merged file says the same; its RMM log is a consistent history that
# vram-replay replays to the recording's peak; its trace is valid
# trace-event JSON whose counters peak where the recording does; bad input
# of every kind is refused with its name and the accepted forms.
set -u
build=${1:?usage: test_formats.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
vram=$build/vram synth=$build/vram-synth-recording replay=$build/vram-replay
. "$here/../lib.sh"
need_debian_python
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The same made-up run as one file and as a directory of one file per
# process: 3 processes on 2 GPUs, one of them killed.
args=(--events 60000 --processes 3 --devices 2 --budget 2GiB --killed 1)
"$synth" "${args[@]}" "$tmp/rec.vrec" >/dev/null
mkdir "$tmp/dir" && "$synth" "${args[@]}" "$tmp/dir" >/dev/null
"$vram" record info --json "$tmp/rec.vrec" >"$tmp/info.json"
"$vram" record info --json "$tmp/dir" >"$tmp/info-dir.json"
check "a directory reads as the merged file" cmp -s "$tmp/info.json" "$tmp/info-dir.json"
check "three processes, one without exit" \
  test "$(json_field "$tmp/info.json" '[p["exited"] for p in d["processes"]]')" = "[True, True, False]"
peak0=$(json_field "$tmp/info.json" 'd["devices"][0]["peak"]')
refused0=$(json_field "$tmp/info.json" 'd["devices"][0]["refusals"]')
check "the run reached its budget and was refused" test "$refused0" -gt 0
"$vram" record info "$tmp/rec.vrec" >"$tmp/info.txt"
check "info for people" contains "$tmp/info.txt" "GPU 0: peak .* ($peak0 bytes) at"
check "info says a process left no exit record" contains "$tmp/info.txt" "no exit record"

# Converting the directory merges it into one file that says the same.
"$vram" record convert "$tmp/dir" "$tmp/merged.vrec"
"$vram" record info --json "$tmp/merged.vrec" >"$tmp/info-merged.json"
check "merged file reads the same" cmp -s "$tmp/info.json" "$tmp/info-merged.json"

# RMM's log: GPU 0's charges as a history RMM's replay accepts, whose
# peak is the recording's; refusals are its "allocate failure" lines.
"$vram" record convert "$tmp/rec.vrec" "$tmp/gpu0.csv" --device 0
$py "$here/check_csv.py" "$tmp/gpu0.csv" >"$tmp/csv.json" 2>"$tmp/err"
check "the log is a consistent history" test -s "$tmp/csv.json"
check "the log's peak is the recording's" test "$(json_field "$tmp/csv.json" 'd["peak"]')" = "$peak0"
check "refusals are allocate failures" test "$(json_field "$tmp/csv.json" 'd["failures"]')" = "$refused0"
peak_text=$($py -c '
import sys
b = int(sys.argv[1]); v = b / 1024; u = 0
while v >= 1024 and u < 5: v /= 1024; u += 1
print("%.2f %s" % (v, ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"][u]))' "$peak0")
"$replay" --runs 1 "$tmp/gpu0.csv" >"$tmp/replay" 2>&1
check "vram-replay replays it to the same peak" contains "$tmp/replay" "/ $peak_text)"
check "vram-replay: nothing failed" sh -c "! grep -q failed '$tmp/replay'"
"$vram" record convert "$tmp/rec.vrec" "$tmp/all.csv"
$py "$here/check_csv.py" "$tmp/all.csv" >"$tmp/all.json" 2>"$tmp/err"
check "both GPUs in one log: pointers the processes share are told apart" test -s "$tmp/all.json"
check "both GPUs' peak" test "$(json_field "$tmp/all.json" 'd["peak"]')" = "$(json_field "$tmp/info.json" 'd["peak_all"]')"

# Trace events: valid, and its counters say what the recording says.
"$vram" record convert "$tmp/rec.vrec" "$tmp/trace.json"
$py "$here/check_trace.py" "$tmp/trace.json" >"$tmp/trace-summary.json" 2>"$tmp/err"
check "valid trace-event JSON" test -s "$tmp/trace-summary.json"
for g in 0 1; do
  check "GPU $g counter peaks at the recording's peak" \
    test "$(json_field "$tmp/trace-summary.json" "d['gpus']['$g']['peak']")" = \
         "$(json_field "$tmp/info.json" "d['devices'][$g]['peak']")"
  check "GPU $g refusals marked" \
    test "$(json_field "$tmp/trace-summary.json" "d['gpus']['$g']['refusals']")" = \
         "$(json_field "$tmp/info.json" "d['devices'][$g]['refusals']")"
  check "GPU $g budget counter" \
    test "$(json_field "$tmp/trace-summary.json" "d['gpus']['$g']['budget']")" = \
         "$(json_field "$tmp/info.json" "d['devices'][$g]['budget']")"
done
check "processes named by pid and command" \
  test "$(json_field "$tmp/trace-summary.json" 'd["processes"][0]')" = "4000 python train.py --rank 0"

# Standard output, with --format.
"$vram" record convert "$tmp/rec.vrec" - --format csv | head -1 >"$tmp/head"
check "to stdout" test "$(cat "$tmp/head")" = "Thread,Time,Action,Pointer,Size,Stream"

# A file cut short (a killed writer) is read up to its last whole block.
cp "$tmp/rec.vrec" "$tmp/cut.vrec"
truncate -s -1000 "$tmp/cut.vrec"
"$vram" record info "$tmp/cut.vrec" >"$tmp/out" 2>&1
check "cut file still reads" contains "$tmp/out" "GPU 0: peak"
check "cut file: the reader says what it skipped" contains "$tmp/out" "cut short"

# Bad input: named, with what is accepted; nothing written.
"$vram" record convert "$tmp/rec.vrec" "$tmp/out.txt" 2>"$tmp/err"; rc=$?
check "unknown extension refused" test $rc = 2
check "unknown extension: names it and the forms" contains "$tmp/err" 'out.txt".*\.vrec, \.csv, \.json'
check "nothing written" test ! -e "$tmp/out.txt"
"$vram" record convert "$tmp/rec.vrec" "$tmp/x.csv" --format xml 2>"$tmp/err"
check "unknown format named" contains "$tmp/err" '--format "xml": unknown format; accepted: vrec'
"$vram" record convert "$tmp/missing.vrec" "$tmp/x.csv" 2>"$tmp/err"; rc=$?
check "missing input" sh -c "[ $rc = 1 ] && grep -q 'missing.vrec: No such file' '$tmp/err'"
echo "Thread,Time,Action,Pointer,Size,Stream" >"$tmp/not.vrec"
"$vram" record info "$tmp/not.vrec" 2>"$tmp/err"; rc=$?
check "not a recording" sh -c "[ $rc = 1 ] && grep -q 'not.vrec: not a vram recording' '$tmp/err'"
"$vram" record convert "$tmp/rec.vrec" "$tmp/x.csv" --device 7 2>"$tmp/err"
check "device out of range" contains "$tmp/err" "devices 0 to 1 only"
"$vram" record convert "$tmp/rec.vrec" "$tmp/x.csv" --device one 2>"$tmp/err"; rc=$?
check "device not a number" sh -c "[ $rc = 2 ] && grep -q -- '--device \"one\"' '$tmp/err'"
"$vram" record convert "$tmp/rec.vrec" "$tmp/nodir/x.csv" 2>"$tmp/err"; rc=$?
check "unwritable output" sh -c "[ $rc = 1 ] && grep -q 'nodir/x.csv: cannot create it' '$tmp/err'"
"$vram" record convert "$tmp/rec.vrec" - 2>"$tmp/err"; rc=$?
check "stdout needs --format" sh -c "[ $rc = 2 ] && grep -q 'give --format' '$tmp/err'"
"$vram" record convert "$tmp/rec.vrec" 2>"$tmp/err"; rc=$?
check "convert needs two operands" sh -c "[ $rc = 2 ] && grep -q 'IN and OUT' '$tmp/err'"
"$vram" record frobnicate 2>"$tmp/err"; rc=$?
check "unknown subcommand" sh -c "[ $rc = 2 ] && grep -q 'unknown command \"frobnicate\"' '$tmp/err'"
"$vram" record info "$tmp/rec.vrec" --bogus 2>"$tmp/err"; rc=$?
check "unknown option" sh -c "[ $rc = 2 ] && grep -q 'unknown option \"--bogus\"' '$tmp/err'"
"$vram" plot "$tmp/rec.vrec" 2>"$tmp/err"; rc=$?
check "plot needs -o" sh -c "[ $rc = 2 ] && grep -q 'give -o OUT' '$tmp/err'"
"$vram" plot "$tmp/rec.vrec" -o "$tmp/x.png" 2>"$tmp/err"; rc=$?
check "plot names its forms" sh -c "[ $rc = 2 ] && grep -q '.html (a page) or .svg' '$tmp/err'"
"$vram" plot "$tmp/rec.vrec" -o "$tmp/x.html" --width 10 2>"$tmp/err"; rc=$?
check "plot width bounded" sh -c "[ $rc = 2 ] && grep -q 'from 200 to 8000' '$tmp/err'"
"$vram" plot "$tmp/rec.vrec" -o "$tmp/x.html" --device 5 2>"$tmp/err"; rc=$?
check "plot: a device without events" sh -c "[ $rc = 1 ] && grep -q 'no events of GPU 5' '$tmp/err'"
"$vram" plot "$tmp/rec.vrec" -o - --format svg 2>/dev/null | head -c 5 >"$tmp/out"
check "plot to stdout" test "$(cat "$tmp/out")" = "<?xml"
"$vram" record --help >"$tmp/out"
check "record --help" contains "$tmp/out" "REPLAY_BENCHMARK"
check "record --help fits 80 columns" awk 'length($0) > 80 { bad = 1 } END { exit bad }' "$tmp/out"
"$vram" record --bogus 2>"$tmp/err"; rc=$?
check "record: an unknown option points to --help" \
  sh -c "[ $rc = 2 ] && grep -q 'vram record --help lists the options' '$tmp/err'"
"$vram" plot --help >"$tmp/out"
check "plot --help" contains "$tmp/out" "no peak is lost"
check "plot --help fits 80 columns" awk 'length($0) > 80 { bad = 1 } END { exit bad }' "$tmp/out"
# Issue 22, item 16: events at 0 and at 2^64 - 1 (a file may say anything)
# were a division by zero; the fuzzer keeps the file in its corpus.
span=$here/../fuzz/corpus/record/span-0-to-max.vrec
"$vram" plot "$span" -o "$tmp/span.html" 2>"$tmp/err"; rc=$?
check "plot: a recording spanning all of time is drawn" sh -c "[ $rc = 0 ] && [ -s '$tmp/span.html' ]"
"$vram" plot "$span" -o "$tmp/span.svg" 2>"$tmp/err"; rc=$?
check "plot: and as SVG" test $rc = 0
"$vram" --help >"$tmp/out"
check "vram --help lists plot and record" sh -c "grep -q '  plot FILE' '$tmp/out' && grep -q '  record convert' '$tmp/out'"

echo "$passed passed, $failures failed"
[ "$failures" = 0 ]
