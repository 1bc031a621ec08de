#!/usr/bin/env bash
# What the dependency step does when it meets another installation, and
# what a test does without its dependencies. scripts/apt-wait.sh (which
# scripts/test-deps.sh runs apt-get through) waits while another process
# holds dpkg's lock or the package lists' (apt-get alone gives up at once:
# "Could not get lock"), says so once, and gives up, naming the lock, when
# it is held past APT_LOCK_WAIT; a bad APT_LOCK_WAIT is refused by name. On
# apt's private lists and dpkg folder of this test (apt-get's -o Dir::...),
# not the machine's: nothing else is stopped by its locks. Then lib.sh's
# `missing` (software the test needs is not installed) skips a test, and
# fails it under CI=true; its `skip` (what no package changes) skips it
# either way. Root with apt-get (as scripts/test-deps.sh), else skipped.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
. "$src/tests/lib.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vram-deps.XXXXXX") || exit 1
trap 'kill $(jobs -p) 2>/dev/null; wait; rm -rf "$tmp"' EXIT

# --- lib.sh: missing and skip, with and without CI=true --------------------
ends() { # ENV... -- FUNCTION TEXT: "STATUS OUTPUT" of a test that calls it
  local env=()
  while [ "$1" != -- ]; do env+=("$1"); shift; done
  shift
  env -u CI "${env[@]}" bash -c '. "$1/tests/lib.sh"; "$2" "$3"; echo ran on' sh "$src" "$@" 2>&1
  echo "status $?"
}
ends -- missing "tmux is not installed" >"$tmp/m"
check "missing: skipped (77) by default" grep -q "^status 77" "$tmp/m"
check "  saying what is missing" grep -q "^SKIP: tmux is not installed" "$tmp/m"
ends CI=true -- missing "tmux is not installed" >"$tmp/mci"
check "missing under CI=true: failed (1), not skipped" grep -q "^status 1" "$tmp/mci"
check "  saying what is missing and why that fails" grep -q "^FAIL: tmux is not installed (CI=true" "$tmp/mci"
ends CI=true -- skip "needs root" >"$tmp/sci"
check "skip under CI=true: still skipped (77)" grep -q "^status 77" "$tmp/sci"
check "  saying why" grep -q "^SKIP: needs root" "$tmp/sci"
ends CI=false -- missing "tmux is not installed" >"$tmp/mno"
check "missing with CI=false: skipped" grep -q "^status 77" "$tmp/mno"
# One check of a test that runs on: counted as a failure under CI=true only.
for ci in true ""; do
  env -u CI ${ci:+CI=$ci} bash -c '. "$1/tests/lib.sh"; missing_for_check "python3 is not installed"
    echo "failures $failures"' sh "$src" >"$tmp/one.$ci" 2>&1
done
check "missing_for_check under CI=true: a failure" grep -q "^failures 1" "$tmp/one.true"
check "missing_for_check otherwise: a skipped check" sh -c "grep -q '^failures 0' '$tmp/one.' &&
  grep -q '^SKIP (one check): python3 is not installed' '$tmp/one.'"

# --- scripts/apt-wait.sh --------------------------------------------------
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "test_deps: $passed passed, $failures failed (apt-get's part skipped: needs root and apt-get)"
  [ "$failures" = 0 ]
  exit
fi
need_debian_python # its fcntl holds apt's locks as apt-get and dpkg do
apt=$tmp/apt
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/parts" "$apt/dpkg/updates"
: >"$apt/sources.list"
cp /var/lib/dpkg/status "$apt/dpkg/status"
private=(-o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o "Dir::Etc::SourceList=$apt/sources.list"
         -o "Dir::Etc::SourceParts=$apt/parts" -o "Dir::State::status=$apt/dpkg/status" -o "APT::Sandbox::User=root")
# hold FILE SECONDS: holds FILE's lock (fcntl, as apt does) for SECONDS,
# from when it writes "held"; its pid in $holder.
hold() {
  $py -c 'import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o640)
fcntl.lockf(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(float(sys.argv[2]))' "$1" "$2" >"$tmp/held" &
  holder=$!
  wait_for 10 grep -q held "$tmp/held"
}
ms() { echo $(( $(date +%s%N) / 1000000 )); }

"$src/scripts/apt-wait.sh" "${private[@]}" update >"$tmp/free" 2>&1
check "apt-wait.sh: apt-get update on the private lists works" test $? = 0

for lock in lists/lock dpkg/lock-frontend; do
  case $lock in lists/*) cmd=update ;; *) cmd=install ;; esac
  hold "$apt/$lock" 3
  apt-get "${private[@]}" $cmd >"$tmp/bare" 2>&1
  check "apt-get $cmd alone gives up at once while $lock is held (what apt-wait.sh is for)" \
    sh -c "grep -q 'Could not get lock' '$tmp/bare'"
  t0=$(ms)
  APT_LOCK_WAIT=60 "$src/scripts/apt-wait.sh" "${private[@]}" $cmd >"$tmp/out" 2>"$tmp/err"
  rc=$? t1=$(ms)
  check "apt-wait.sh $cmd: done once $lock is let go" test $rc = 0
  check "  it waited for it" test $((t1 - t0)) -ge 1500
  if [ $cmd = update ]; then
    check "  and said what it waited for, once" sh -c "[ \$(grep -c 'waiting up to 60 s' '$tmp/err') = 1 ] &&
      grep -q 'Could not get lock $apt/lists/lock' '$tmp/err'"
  fi
  wait $holder
done

hold "$apt/lists/lock" 30
APT_LOCK_WAIT=2 "$src/scripts/apt-wait.sh" "${private[@]}" update >"$tmp/out" 2>"$tmp/err"
check "apt-wait.sh: a lock held past APT_LOCK_WAIT: it fails" test $? != 0
check "  naming the lock and its holder" grep -q "Could not get lock $apt/lists/lock.*held by process $holder" "$tmp/out"
kill $holder; wait $holder 2>/dev/null

for bad in abc -1 08 1.5; do
  APT_LOCK_WAIT=$bad "$src/scripts/apt-wait.sh" "${private[@]}" update >"$tmp/out" 2>&1
  check "apt-wait.sh: APT_LOCK_WAIT=\"$bad\" refused (2), named, with what is accepted" \
    sh -c "[ $? = 2 ] && grep -q 'APT_LOCK_WAIT=$bad: expected a whole number of seconds' '$tmp/out'"
done

echo "test_deps: $passed passed, $failures failed"
[ "$failures" = 0 ]
