#!/usr/bin/env bash
# ctest BUILD_DIR [CTEST_ARGS...], checking that the tests leave nothing
# behind in /tmp.
#
# Other people's programs use /tmp at the same time, so a before/after
# listing of it proves nothing. Instead the tests get a /tmp of their own:
# where we may (root, with unshare), a private mount namespace with an
# empty tmpfs on /tmp, which catches every path, fixed or not; elsewhere a
# fresh folder as TMPDIR, which catches the tests that honour TMPDIR (all of
# ours do, except those that name /tmp/NAME.XXXXXX themselves). Whatever is
# left there when ctest ends is listed, and fails the run.
set -u
if [ "${1:-}" = --inside ]; then
  shift
  mount -t tmpfs -o mode=1777 vram-tests /tmp || exit 3
  tmp=/tmp
else
  build=${1:?usage: ctest.sh BUILD_DIR [CTEST_ARGS...]}
  if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null &&
     unshare -m --propagation private true 2>/dev/null; then
    unshare -m --propagation private "$0" --inside "$@"
    rc=$?
    [ $rc = 3 ] || exit $rc   # 3: no tmpfs could be mounted there; use TMPDIR
  fi
  tmp=$(mktemp -d /tmp/vram-ctest.XXXXXX) || exit 1
  export TMPDIR=$tmp
fi
build=$1; shift
(cd "$build" && ctest "$@")
rc=$?
left=$(cd "$tmp" && ls -A)
[ "$tmp" = /tmp ] || rm -rf "$tmp"
if [ -n "$left" ]; then
  echo "FAIL: the tests left these in /tmp (each test removes what it makes):"
  echo "$left" | sed 's/^/  /'
  exit 1
fi
[ $rc = 0 ] && echo "nothing was left in /tmp"
exit $rc
