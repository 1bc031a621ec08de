#!/usr/bin/env bash
# vramd's history end to end, on the simulated GPU: a job under vram run is
# in vram status --json's history (its device's and its own) while it runs,
# vram top draws its trend (Unicode blocks in a UTF-8 locale, ASCII
# otherwise, in 80 columns), vram plot --job draws it after it ended; one
# user cannot see another's job (root can); bad HISTORY messages and bad
# vram plot options are refused with what was wrong.
set -u
build=${1:?usage: test_daemon_history.sh BUILD_DIR PEER}
peer=${2:?usage: test_daemon_history.sh BUILD_DIR PEER}
vram=$build/vram vramd=$build/vramd grab=$build/vram-demo-grab
. "$(dirname "$0")/lib.sh"
need_debian_python
daemon_test history "$build"
G=$((1 << 30))

"$vramd" --socket "$S" --state "$tmp/state" --log info >"$tmp/daemon.out" 2>&1 &
daemon_pid=$!
check "daemon starts" wait_for 10 test -S "$S"
uuid=$("$vram" status --json | $py -c 'import json,sys; print(json.load(sys.stdin)["devices"][0]["uuid"])')

# --- a job while it runs: status --json and top ---------------------------
"$vram" run --limit 4GiB --job train -- "$grab" A 600 >"$tmp/a.out" 2>&1 &
a=$!   # a minute at most: it is stopped once looked at
# The history of a second at least with the job's 4 GiB in it.
held() {
  date +%s.%N >"$tmp/before"
  "$vram" status --json >"$tmp/status.json" && date +%s.%N >"$tmp/after" &&
  $py - "$tmp/status.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
me = [c for c in d["processes"] if c["job"] == "train" and c["role"] == "job"]
sys.exit(not me or 4 << 30 not in me[0]["history"]["recent"]["used"])
EOF
}
check "the job's usage is in its history" wait_for 10 held
$py - "$tmp/status.json" "$(cat "$tmp/before")" "$(cat "$tmp/after")" >"$tmp/facts" 2>&1 <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
before, after = float(sys.argv[2]), float(sys.argv[3])
dev, = d["devices"]
me, = [c for c in d["processes"] if c["job"] == "train" and c["role"] == "job"]
for name, h, budget in (("device", dev["history"], "granted"), ("job", me["history"], "budget")):
    for ring, step in (("recent", 1), ("hour", 10)):
        r = h[ring]
        assert r["step_s"] == step and len(r["used"]) == len(r[budget]) >= 1, (name, ring)
        # The last step is the one the daemon answered in.
        last = r["start"] + step * (len(r["used"]) - 1)
        assert before - step - 0.01 <= last <= after + 0.01, (name, ring, last, before, after)
assert 4 << 30 in dev["history"]["recent"]["granted"]
assert set(me["history"]["recent"]["budget"]) == {4 << 30}
print("ok")
EOF
check "status --json: each ring's steps, times and figures" contains "$tmp/facts" "^ok"
cat "$tmp/facts" | grep -v '^ok' | head -5
"$vram" status --json --no-history >"$tmp/bare.json"
check "status --json --no-history: none" sh -c "! grep -q history '$tmp/bare.json'"
"$vram" status --prometheus --no-history >/dev/null 2>"$tmp/err"; rc=$?
check "--no-history is for --json" sh -c "[ $rc = 2 ] && grep -q 'no-history is an option of --json' '$tmp/err'"

LANG=C.UTF-8 LC_ALL= "$vram" top --once >"$tmp/top.utf8"
check "top: a trend section" contains "$tmp/top.utf8" "^TREND, the last 120 s"
check "top: the device's trend, in blocks" grep -q "^device  *0  .*[▁▂▃▄▅▆▇█].* of 12.00 GiB" "$tmp/top.utf8"
check "top: the job's trend, against its budget" grep -q "^job train  *0  .*[▁▂▃▄▅▆▇█].*4.00 GiB of 4.00 GiB" "$tmp/top.utf8"
check "top: 80 columns in UTF-8 too" sh -c "[ \$(LC_ALL=C.UTF-8 wc -L <'$tmp/top.utf8') -le 80 ]"
LANG=C LC_ALL= "$vram" top --once >"$tmp/top.c"
check "top in the C locale: ASCII only" sh -c "! LC_ALL=C grep -q '[^ -~]' '$tmp/top.c'"
check "top in the C locale: the job's trend" grep -q "^job train  *0  .*[#*+=]" "$tmp/top.c"
"$vram" status >"$tmp/status.txt"
check "status shows the trend too" contains "$tmp/status.txt" "^job train"
kill $a; wait $a

# --- after it ended: plot --job --------------------------------------------
check "the job is gone from the ledger" wait_for 5 sh -c "! '$vram' status --json | grep -q '\"job\":\"train\"'"
"$vram" plot --job train -o "$tmp/train.svg" 2>"$tmp/err"; rc=$?
check "plot --job after the job ended" sh -c "[ $rc = 0 ] && grep -q 'vram-demo-grab' '$tmp/train.svg'"
check "plot --job: its peak" grep -q "peak 4.00 GiB" "$tmp/train.svg"
check "plot --job says nothing more on stderr" test ! -s "$tmp/err"
"$vram" plot --job train --device 0 --width 300 --title "the train job" -o "$tmp/train.html"
check "plot --job with plot's other options" grep -q "the train job" "$tmp/train.html"
"$vram" plot --job nothing -o "$tmp/x.svg" 2>"$tmp/err"; rc=$?
check "a job vramd has no history of" sh -c "[ $rc = 1 ] && grep -q 'no history of a job \"nothing\"' '$tmp/err' && [ ! -e '$tmp/x.svg' ]"
"$vram" plot "$tmp/rec.vrec" --job train -o "$tmp/x.svg" 2>"$tmp/err"; rc=$?
check "a recording and a job: refused" sh -c "[ $rc = 2 ] && grep -q 'give a recording or a job, not both' '$tmp/err'"
"$vram" plot --job 'a b' -o "$tmp/x.svg" 2>"$tmp/err"; rc=$?
check "a job name that is not one: refused" sh -c "[ $rc = 2 ] && grep -q -- '--job \"a b\": not a job name' '$tmp/err'"
"$vram" plot "$tmp/rec.vrec" --socket "$S" -o "$tmp/x.svg" 2>"$tmp/err"; rc=$?
check "--socket without --job: refused" sh -c "[ $rc = 2 ] && grep -q -- '--socket is for --job' '$tmp/err'"
VRAM_DAEMON=$tmp/none.sock "$vram" plot --job train -o "$tmp/x.svg" 2>"$tmp/err"; rc=$?
check "no daemon: said" sh -c "[ $rc = 1 ] && grep -q 'cannot reach vramd' '$tmp/err'"

# --- bad HISTORY messages: ERR with the reason, the connection goes on -------
"$peer" "$S" send "VRAM/1 HISTORY tier=week" "VRAM/1 HISTORY after=x" "VRAM/1 HISTORY job=a\$b" \
  "VRAM/1 HISTORY job=train tier=recent" >"$tmp/bad"
check "tier= named" contains "$tmp/bad" 'ERR text=HISTORY: tier="week": expected recent or all'
check "after= named" contains "$tmp/bad" 'ERR text=HISTORY: after="x": not a whole number'
check "job= named" contains "$tmp/bad" 'ERR text=HISTORY: job= must be a name'
check "and a good one answered after them" grep -Eq "^SERIES key=[0-9]* dev=0 kind=(process|job)" "$tmp/bad"

# --- users: a job's history is its user's (and root's) ----------------------
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && command -v useradd >/dev/null &&
   test_users a b; then
  kit=$tmp/kit
  make_kit "$build" "$peer" "$kit"
  mkdir -m 1777 "$tmp/out"
  env_kit=(env LD_LIBRARY_PATH="$kit/sim" VRAM_DAEMON="$S" VRAM_SIM_DIR="$VRAM_SIM_DIR" VRAM_SIM_DEVICES=12GiB LANG=C)
  as_a=(setpriv --reuid="$uid_a" --regid="$gid_a" --clear-groups "${env_kit[@]}")
  as_b=(setpriv --reuid="$uid_b" --regid="$gid_b" --clear-groups "${env_kit[@]}")
  "${as_a[@]}" "$kit/vram" run --limit 4GiB --job secret -- "$kit/vram-demo-grab" S 30 >"$tmp/sa" 2>&1 &
  sa=$!
  check "a's job runs" wait_for 10 sh -c "'$vram' status --json | grep -q '\"job\":\"secret\"'"
  "${as_b[@]}" "$kit/vram" status --json >"$tmp/b.json"
  $py - "$tmp/b.json" "$uid_a" >"$tmp/b.facts" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
a = int(sys.argv[2])
others = [u for u in d["users"] if u["uid"] == a]
mine = [c for c in d["processes"] if c["uid"] == a]
print("a's total", all("history" not in u for u in others) and not mine and len(others))
print("devices", all("history" in x for x in d["devices"]))
EOF
  check "b sees a's total, without a history" contains "$tmp/b.facts" "a's total 1"
  check "b sees the device's history" contains "$tmp/b.facts" "devices True"
  "${as_b[@]}" "$kit/peer" "$S" send "VRAM/1 HISTORY job=secret" >"$tmp/b.history"
  check "b asking for a's job gets nothing of it" grep -q '^END now=[0-9]* wall=[0-9]*$' "$tmp/b.history"
  wait $sa
  "${as_b[@]}" "$kit/vram" plot --job secret -o "$tmp/out/b.svg" 2>"$tmp/err"; rc=$?
  check "b cannot plot a's job" sh -c "[ $rc = 1 ] && grep -q 'another user.s jobs are for root to see' '$tmp/err' && [ ! -e '$tmp/out/b.svg' ]"
  "${as_a[@]}" "$kit/vram" plot --job secret -o "$tmp/out/a.svg"
  check "a plots a's own job after it ended" grep -q "peak 4.00 GiB" "$tmp/out/a.svg"
  "$vram" plot --job secret -o "$tmp/root.svg"
  check "root plots anyone's" grep -q "peak 4.00 GiB" "$tmp/root.svg"
else
  echo "SKIP: the several-users part needs root, setpriv and useradd"
  remove_test_users
fi

kill -TERM $daemon_pid; wait $daemon_pid 2>/dev/null
daemon_pid=
echo "$passed passed, $failures failed"
[ "$failures" = 0 ]
