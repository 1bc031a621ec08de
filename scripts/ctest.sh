#!/usr/bin/env bash
# ctest BUILD_DIR [CTEST_ARGS...], checking that the tests leave nothing
# behind: no file in /tmp, no process.
#
# Files. Other people's programs use /tmp at the same time, so a
# before/after listing of it proves nothing. Instead the tests get a /tmp of
# their own: where we may (root, with unshare), a private mount namespace
# with an empty tmpfs on /tmp, which catches every path, fixed or not;
# elsewhere a fresh folder as TMPDIR, which catches the tests that honour
# TMPDIR (all of ours do, except those that name /tmp/NAME.XXXXXX
# themselves). A checkout or build under /tmp (where many people try a
# project) is bound back into the private /tmp at its own path, and is not
# counted as left there. Whatever else is left when ctest ends is listed,
# and fails the run.
#
# Processes. Every process the tests start inherits CTEST_VRAM_RUN (not a
# VRAM_ name: vram warns about unknown ones), a token
# of this run, in its environment; one that still runs a few seconds after
# ctest ended is listed, killed, and fails the run. (A process that empties
# its environment escapes this; none of ours does.)
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
. "$src/scripts/leftovers.sh"
if [ "${1:-}" = --inside ]; then
  build=$2; shift 2
    private_tmp "$src" "$build"
  case $? in
    1) exit 3 ;;
    2) echo "ctest.sh: the tests' /tmp would hide them"; exit 1 ;;
  esac
  tmp=/tmp
else
  build=$(cd "${1:?usage: ctest.sh BUILD_DIR [CTEST_ARGS...]}" && pwd) || exit 1
  shift
  if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null &&
     unshare -m --propagation private true 2>/dev/null; then
    unshare -m --propagation private "$0" --inside "$build" "$@"
    rc=$?
    [ $rc = 3 ] || exit $rc   # 3: no tmpfs could be mounted there; use TMPDIR
  fi
  tmp=$(mktemp -d /tmp/vram-ctest.XXXXXX) || exit 1
  export TMPDIR=$tmp
  kept=()
fi

token=$$-$(date +%s%N)
export CTEST_VRAM_RUN=$token
(cd "$build" && ctest "$@")
rc=$?

# The processes of this run still there (this shell aside), into `running`.
find_strays() {
  local p v env
  running=()
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [ "$p" = $$ ] && continue
    mapfile -t -d '' env 2>/dev/null <"/proc/$p/environ" || continue
    for v in "${env[@]}"; do
      [ "$v" = "CTEST_VRAM_RUN=$token" ] && { running+=("$p"); break; }
    done
  done
}
status=$rc
stop_left find_strays "the tests" || status=1
[ "$(id -u)" = 0 ] && remove_dead_test_users

left=$(cd "$tmp" && ls -A)
for k in "${kept[@]}"; do
  left=$(echo "$left" | grep -vxF -- "$k")
done
[ "$tmp" = /tmp ] || rm -rf "$tmp"
if [ -n "$left" ]; then
  echo "FAIL: the tests left these in /tmp (each test removes what it makes):"
  echo "$left" | sed 's/^/  /'
  status=1
fi
[ $status = 0 ] && echo "nothing was left in /tmp, and no process"
exit $status
