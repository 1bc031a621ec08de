#!/usr/bin/env bash
# isolate.sh BUILD_DIR COMMAND [ARGS...]: one test, as ctest runs each of
# them (tests/CMakeLists.txt), where it can leave nothing behind.
#
# Where we may (root, with unshare), the test runs in namespaces of its
# own: a mount namespace with an empty tmpfs on /tmp (the checkout and the
# build, where they are under /tmp, bound back at their paths, as
# scripts/ctest.sh does for the whole run) and a PID namespace, whose first
# process is this script. When the test ends, whatever it left running or
# left in /tmp is named and fails it (this test, not "the tests"), and the
# processes are killed.
#
# ctest ends a test that outlives its TIMEOUT with SIGKILL, sent to the
# test's first process alone: no trap of the test runs, and what it started
# runs on. Here that first process is unshare, which takes this script
# with it (--kill-child); the kernel then kills every process of the PID
# namespace, and the tmpfs goes with the last of them. So a test killed at
# its timeout leaves no process and no file, and fails once: as timed out.
#
# isolate.sh --tmp-only BUILD_DIR COMMAND...: the /tmp alone, for a test
# that looks at pids as the machine's init sees them (containers: "the
# host pid" is that namespace's); what it leaves running, also at a
# timeout, is scripts/ctest.sh's to find.
#
# Elsewhere (not root, no unshare) the test runs as it is, and only
# scripts/ctest.sh's checks of the whole run catch what it leaves.
set -u
pids=(--pid --fork --kill-child --mount-proc)
if [ "${1:-}" = --tmp-only ]; then
  pids=()
  shift
fi
if [ "${1:-}" != --inside ]; then
  if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null &&
     unshare --mount "${pids[@]}" --propagation private true 2>/dev/null; then
    exec unshare --mount "${pids[@]}" --propagation private "$0" --inside $$ ${pids:+pids} "$@"
  fi
  shift
  exec "$@"
fi
shift
outer=$1; shift # unshare's pid outside: no other process on the machine has it now
own_pids=
[ "$1" = pids ] && { own_pids=1; shift; }
src=$(cd "$(dirname "$0")/.." && pwd)
build=$1; shift

. "$src/scripts/leftovers.sh"
private_tmp "$src" "$build"
case $? in
  0) private=1 ;;
  1) private=0; echo "isolate.sh: no tmpfs of the test's own on /tmp; what it leaves there is not checked here" ;;
  *) echo "isolate.sh: the test's /tmp would hide them"; exit 1 ;;
esac

# Tests name what they make on the machine (users, cgroups) after their
# pid, as unique as a pid outside: the test's pid here is unshare's there,
# not 2 in every test at once.
[ -n "$own_pids" ] && echo $((outer - 1)) >/proc/sys/kernel/ns_last_pid 2>/dev/null
"$@"
rc=$?

# What still runs in the namespace but this shell (which is 1 here), and
# is not a zombie, into `running`; builtins only, so that the listing is
# not itself listed.
list_running() {
  local p line
  running=()
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [ "$p" = 1 ] && continue
    read -r line 2>/dev/null <"/proc/$p/stat" || continue
    line=${line##*) }
    [ "${line:0:1}" = Z ] || running+=("$p")
  done
}
[ -z "$own_pids" ] || stop_left list_running "the test" || rc=1

if [ "$private" = 1 ]; then
  shopt -s nullglob dotglob
  left=()
  for f in /tmp/*; do
    for k in "${kept[@]}"; do [ "$f" = "/tmp/$k" ] && continue 2; done
    left+=("$f")
  done
  if [ ${#left[@]} != 0 ]; then
    echo "FAIL: the test left these in /tmp (a test removes what it makes):"
    printf '  %s\n' "${left[@]}"
    rc=1
  fi
fi
exit $rc
