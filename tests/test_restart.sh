#!/usr/bin/env bash
# A grant survives vramd's kill -9 at every point between the REQUEST and
# the client hearing GRANT (issue 22 item 13): the daemon stops at a named
# point (VRAMD_TEST_EXIT), is started again, and root at once asks 8 GiB of
# the 12 GiB GPU, while a libvram process asked 8 GiB before the kill. Never
# both: 16 GiB of budgets on 12. And a process whose budget the restarted
# daemon refuses takes no more memory until the daemon counts it.
set -u
build=${1:?usage: test_restart.sh BUILD_DIR PEER HOLDER}
peer=${2:?} holder=${3:?}
vram=$build/vram vramd=$build/vramd
. "$(dirname "$0")/lib.sh"
daemon_test restart "$build"
G=$((1 << 30))
printf 'when-full fail\nreconcile-every 100ms\n' >"$tmp/policy"

start_daemon() { # [environment for vramd]
  env "$@" "$vramd" --socket "$S" --policy "$tmp/policy" --state "$tmp/state" --log info \
    >>"$tmp/daemon.out" 2>&1 &
  daemon_pid=$!
  # Answering, not only bound: a connection between bind and listen is refused.
  wait_for 10 sh -c "'$vram' status >/dev/null 2>&1"
}
gone() { ! kill -0 "$1" 2>/dev/null; }
# A libvram process asking 8 GiB, holding 1 GiB; each line on its FIFO
# (fd 8) asks 1 GiB more (a region more from the device).
hold() { # NAME
  rm -f "$tmp/$1.fifo"; mkfifo "$tmp/$1.fifo"
  exec 8<>"$tmp/$1.fifo"
  VRAM_MEMORY_LIMIT=8GiB VRAM_ALLOW_GROWTH=true "$holder" 1GiB >"$tmp/$1" 2>"$tmp/$1.err" <&8 &
  h=$!
}
# Root's request for 8 GiB, answered at once (when-full fail), and held.
root_asks() {
  "$peer" "$S" hold "$uuid" $((8 * G)) >"$tmp/root" 2>&1 &
  r=$!
  wait_for 10 grep -qE 'GRANT|DENY' "$tmp/root"
}

check "daemon starts" start_daemon
uuid=$("$vram" status --json | grep -o '"uuid":"[^"]*"' | head -1 | cut -d'"' -f4)
kill -TERM $daemon_pid; wait $daemon_pid 2>/dev/null

for point in admitted written sent; do
  rm -f "$tmp"/state*   # and its journal
  start_daemon VRAMD_TEST_EXIT=$point
  hold "h-$point"
  check "$point: vramd stops there" wait_for 10 gone $daemon_pid
  kill -9 $daemon_pid 2>/dev/null; wait $daemon_pid 2>/dev/null
  # The holder may not re-register (or ask again) before root asks.
  kill -STOP $h
  start_daemon
  root_asks
  kill -CONT $h
  if grep -q GRANT "$tmp/root"; then
    # Root has 8 GiB: the holder must have none, or have given it up.
    check "$point: root granted, so the holder holds no budget" \
      wait_for 10 sh -c "grep -q oom '$tmp/h-$point' || grep -q 'takes no more memory' '$tmp/h-$point.err'"
    echo >&8
    check "$point: and it allocates nothing more" wait_for 10 sh -c "grep -c oom '$tmp/h-$point' | grep -qx '[12]'"
  else
    check "$point: root refused, the held grant counted" contains "$tmp/root" "DENY.*8.00 GiB granted"
    check "$point: the holder holds its grant" wait_for 10 contains "$tmp/h-$point" held
    check "$point: never more granted than the GPU" is granted $((8 * G))
  fi
  # A point where the client has heard GRANT is one where it must be kept.
  case $point in
  written|sent) check "$point: the client heard GRANT and it was kept" contains "$tmp/root" DENY ;;
  esac
  kill -9 $h $r 2>/dev/null; wait $h $r 2>/dev/null; exec 8>&-
  kill -TERM $daemon_pid; wait $daemon_pid 2>/dev/null
done

# A grant the restarted daemon does not know (its state file lost): the
# re-registration is refused, and the holder takes no more memory until
# the daemon counts its budget again.
rm -f "$tmp"/state*   # and its journal
start_daemon
hold lost
check "lost: granted" wait_for 10 contains "$tmp/lost" held
kill -STOP $h
kill -9 $daemon_pid; wait $daemon_pid 2>/dev/null
rm -f "$tmp"/state*   # and its journal
start_daemon
root_asks
check "lost: root is granted (the daemon knows no other grant)" contains "$tmp/root" GRANT
kill -CONT $h
check "lost: the holder says it takes no more" \
  wait_for 10 contains "$tmp/lost.err" "did not take back the budget of 8.00 GiB .* this process takes no more memory of that GPU"
echo >&8
check "lost: and its next allocation is refused" wait_for 10 contains "$tmp/lost" "^oom"
check "lost: never more granted than the GPU" is granted $((8 * G))
# Root's grant ends: the budget is registered again, and may be used again.
kill -9 $r; wait $r 2>/dev/null
check "lost: the budget is counted again once it fits" \
  wait_for 15 contains "$tmp/lost.err" "now counts the budget of 8.00 GiB .* may take memory of it again"
echo >&8
check "lost: and the holder allocates again" wait_for 10 sh -c "tail -1 '$tmp/lost' | grep -qx held"
kill -9 $h; wait $h 2>/dev/null; exec 8>&-
kill -TERM $daemon_pid; wait $daemon_pid 2>/dev/null
daemon_pid=
echo "test_restart: $passed passed, $failures failed"
[ $failures = 0 ]
