#!/usr/bin/env bash
# How a test ends in the suite (tests/isolate.sh under scripts/ctest.sh, as
# make test runs them), on a project of three made-up tests: one that ctest
# kills at its TIMEOUT (SIGKILL: its trap never runs) leaves no process and
# no file, and fails once, as timed out, not again for what it left; one
# that leaves a file in /tmp and a process running fails, and the message
# names them under its name; one that cleans up passes. Needs root and
# unshare (elsewhere tests run as they are): else skipped.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
. "$src/tests/lib.sh"
[ "$(id -u)" = 0 ] && unshare --pid --fork --kill-child --mount-proc true 2>/dev/null ||
  skip "needs root and unshare, with which tests/isolate.sh gives each test its namespaces"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vram-leftovers.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
p=$tmp/project
mkdir -p "$p"   # built where it is: ctest.sh shows the build alone inside its /tmp
# A name only this run's processes and files carry.
mark=vram-leftover-$$-$RANDOM

cat >"$p/killed.sh" <<EOF
#!/usr/bin/env bash
d=\$(mktemp -d /tmp/$mark-killed.XXXXXX)
trap 'rm -rf "\$d"' EXIT
(exec -a $mark-killed sleep 1000) &
sleep 1000
EOF
cat >"$p/leaves.sh" <<EOF
#!/usr/bin/env bash
mktemp -d /tmp/$mark-leaves.XXXXXX >/dev/null
(exec -a $mark-leaves sleep 1000) &
exit 0
EOF
cat >"$p/clean.sh" <<EOF
#!/usr/bin/env bash
d=\$(mktemp -d /tmp/$mark-clean.XXXXXX) && rm -rf "\$d"
EOF
chmod +x "$p"/*.sh
cat >"$p/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.16)
project(leftovers NONE)
enable_testing()
set(ISOLATE "$src/tests/isolate.sh" "$p")
add_test(NAME killed COMMAND \${ISOLATE} "$p/killed.sh")
set_tests_properties(killed PROPERTIES TIMEOUT 2)
add_test(NAME leaves COMMAND \${ISOLATE} "$p/leaves.sh")
add_test(NAME clean COMMAND \${ISOLATE} "$p/clean.sh")
EOF
cmake -S "$p" -B "$p" >"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; echo "FAIL: cmake"; exit 1; }
"$src/scripts/ctest.sh" "$p" --output-on-failure >"$tmp/out" 2>&1
rc=$?
sed 's/^/  | /' "$tmp/out"

# The processes of this run that are still there (by their name), into `alive`.
marked() {
  local d c
  alive=()
  for d in /proc/[0-9]*; do
    c=$(tr '\0' ' ' 2>/dev/null <"$d/cmdline") || continue
    [[ $c == *"$mark"* ]] && alive+=("${d#/proc/}")
  done
}
marked
check "the run fails" test "$rc" != 0
check "the killed test fails as timed out" grep -q "killed .*Timeout" "$tmp/out"
check "its process is gone" test ${#alive[@]} = 0
check "nothing is said left by the tests as a whole (the killed test's folder, its process)" \
  sh -c "! grep -q 'the tests left' '$tmp/out'"
check "the killed test's folder is nowhere in what is said" sh -c "! grep -q '$mark-killed' '$tmp/out'"
check "the test that leaves a folder and a process fails" grep -q "leaves .*Failed" "$tmp/out"
check "  the folder is named in its output" grep -q "the test left these in /tmp.*" "$tmp/out"
check "  by its path" grep -q "^ */tmp/$mark-leaves\." "$tmp/out"
check "  and the process by its command" grep -q "pid [0-9]*: $mark-leaves" "$tmp/out"
check "the test that cleans up passes" grep -q "clean .*Passed" "$tmp/out"
[ ${#alive[@]} = 0 ] || kill -9 "${alive[@]}" 2>/dev/null

echo "test_leftovers: $passed passed, $failures failed"
[ "$failures" = 0 ]
