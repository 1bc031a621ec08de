# Helpers of the shell tests: `check NAME CONDITION...` counts a pass or
# prints the failure; `wait_for SECONDS CONDITION...` polls, bounded.
failures=0 passed=0
check() {
  local name=$1; shift
  if "$@"; then passed=$((passed + 1)); else echo "FAIL: $name"; failures=$((failures + 1)); fi
}
contains() { grep -q -- "$2" "$1"; }
wait_for() {
  local deadline=$(( $(date +%s%N) / 1000000 + $1 * 1000 )); shift
  until "$@"; do
    [ $(( $(date +%s%N) / 1000000 )) -ge $deadline ] && return 1
    sleep 0.1
  done
}
# private_install BUILD: vram installed (cmake --install) under a prefix
# of the test's own, $P, in a folder $tmp removed when the test exits; on
# failure the log is shown and the test ends.
private_install() {
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  P=$tmp/prefix
  cmake --install "$1" --prefix "$P" >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log"; echo "FAIL: cmake --install --prefix $P"; exit 1; }
}
# Debian's python3 as $py (with its json and csv), or the test is skipped.
need_debian_python() {
  py=/usr/bin/python3
  [ -x $py ] && return
  echo "SKIP: Debian's python3 is not installed (scripts/test-deps.sh installs it)"
  exit 77
}
# field FILE EXPR: EXPR (Python) of the JSON in FILE, as d.
field() { $py -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }
# The command a `vram run` started in the background runs as its child.
child_of() { local c=; read -r c _ <"/proc/$1/task/$1/children" 2>/dev/null; [ -n "$c" ] && echo "$c"; }
command_of() { wait_for 5 child_of "$1" >/dev/null && child_of "$1"; }
