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
# The command a `vram run` started in the background runs as its child.
child_of() { local c=; read -r c _ <"/proc/$1/task/$1/children" 2>/dev/null; [ -n "$c" ] && echo "$c"; }
command_of() { wait_for 5 child_of "$1" >/dev/null && child_of "$1"; }
