#!/usr/bin/env bash
# vram plot --job: a job's memory over time from vramd's history, after the
# job ended, drawn by the same timeline and pages as a recording and
# checked in a real browser (headless Chromium, browser.py). The job is as
# Slurm makes one: a grant of 10 GiB registered by root (the plugin's JOB
# message, here from peer), and two programs under vram run --per-process
# --job that draw from it (as processes that ask vramd themselves do), each taking its 4 GiB budget (the demo's grab), the second
# starting while the first runs. The page must show both processes, the
# peak of 8 GiB while both held, the job's grant as the budget line, no
# refusal. Screenshots: BUILD_DIR/test-output/plot-job/.
set -u
build=${1:?usage: test_plot_job.sh BUILD_DIR PEER}
peer=${2:?usage: test_plot_job.sh BUILD_DIR PEER}
here=$(cd "$(dirname "$0")" && pwd)
vram=$build/vram vramd=$build/vramd grab=$build/vram-demo-grab
. "$here/../lib.sh"
need_browser
daemon_test plot-job "$build"
out=$build/test-output/plot-job
rm -rf "$out" && mkdir -p "$out"
G=$((1 << 30))
ms() { echo $(( $(date +%s%N) / 1000000 )); }

"$vramd" --socket "$S" --state "$tmp/state" --log info >"$tmp/daemon.out" 2>&1 &
daemon_pid=$!
check "daemon starts" wait_for 10 test -S "$S"
uuid=$("$vram" status --json | $py -c 'import json,sys; print(json.load(sys.stdin)["devices"][0]["uuid"])')

"$peer" "$S" job J7 0 0 "$uuid" $((10 * G)) >"$tmp/job.out" 2>&1 &
holder=$!
check "the job's grant" wait_for 5 contains "$tmp/job.out" GRANT
t_job=$(ms)
"$vram" run --per-process --limit 4GiB --job J7 -- "$grab" A 60 >"$tmp/a.out" 2>&1 &
a=$!
sleep 3
t_b=$(ms)
"$vram" run --per-process --limit 4GiB --job J7 -- "$grab" B 60 >"$tmp/b.out" 2>&1 &
b=$!
clients() { "$vram" status --json --no-history >"$tmp/status.json" &&
  [ "$($py -c 'import json,sys; print(sum(c["job"] == "J7" and c["role"] == "process" and c["used"] > 0
        for c in json.load(open(sys.argv[1]))["processes"]))' "$tmp/status.json")" = 2 ]; }
check "both processes hold their memory" wait_for 10 clients
wait $a
t_a=$(ms)
wait $b
check "the programs ran" sh -c "grep -q 'RESULT A .* ok' '$tmp/a.out' && grep -q 'RESULT B .* ok' '$tmp/b.out'"
kill $holder; wait $holder 2>/dev/null
check "the job ended" wait_for 5 sh -c "! '$vram' status --json --no-history | grep -q J7"

"$vram" plot --job J7 -o "$out/job.html"
check "page written" test -s "$out/job.html"
"$vram" plot --job J7 -o "$out/job.svg"
check "SVG written" test -s "$out/job.svg"
check "the page refers to nothing outside it" \
  sh -c "! grep -Eo '(src|href)=|https?://|@import|url\\(' '$out/job.html'"
check "the page says where its figures come from" contains "$out/job.html" "From vramd&#39;s history of job J7: 3 clients"

# What the page must show: the two programs (as they named themselves to
# vramd), 8 GiB when both held, no earlier than the second began (the
# page's time 0 is the job's grant, up to a second before t_job), no later
# than the first ended; the job's grant as the budget.
$py - "$tmp/status.json" $((t_b - t_job)) $((t_a - t_job)) >"$tmp/info.json" <<'EOF'
import json, sys
status, b, a = json.load(open(sys.argv[1])), int(sys.argv[2]), int(sys.argv[3])
procs = [{"pid": c["pid"], "command": c["command"]} for c in status["processes"]
         if c["job"] == "J7" and c["role"] == "process"]
G = 1 << 30
print(json.dumps({"devices": [{"device": 0, "family_peaks": {"reported": 8 * G}, "peak": 8 * G,
                               "peak_time_range": [b / 1000 - 1, a / 1000 + 1],
                               "budget": 10 * G, "refusals": 0}],
                  "processes": procs}))
EOF
$py "$here/browser.py" "$out/job.html" "$out/job.svg" "$tmp/info.json" "$out" \
  >"$out/browser.log" 2>&1
rc=$?
cat "$out/browser.log"
check "what the browser shows" test $rc = 0
check "screenshots" test -s "$out/timeline.png" -a -s "$out/timeline-svg.png"

kill -TERM $daemon_pid; wait $daemon_pid 2>/dev/null
daemon_pid=
echo "$passed passed, $failures failed"
[ "$failures" = 0 ]
