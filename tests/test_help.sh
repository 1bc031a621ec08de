#!/usr/bin/env bash
# Every --help of vram's commands and of vramd: printed on stdout with
# status 0, as -h too, in 80 columns (no line wider, no tabs), and saying
# what the command is for.
set -u
build=${1:?usage: test_help.sh BUILD_DIR}
vram=$build/vram vramd=$build/vramd
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh"

fits() { # FILE: no line over 80 columns, no tab
  awk 'length($0) > 80 { print FILENAME ":" FNR ": " length($0) " columns: " $0; bad = 1 }
       /\t/ { print FILENAME ":" FNR ": a tab"; bad = 1 }
       END { exit bad }' "$1"
}

for cmd in "" run devices top status plot record cdi oci-hook; do
  name="vram${cmd:+ $cmd} --help"
  "$vram" $cmd --help >"$tmp/out" 2>"$tmp/err"; rc=$?
  check "$name: status 0" test $rc = 0
  check "$name: on stdout only" sh -c "[ -s '$tmp/out' ] && [ ! -s '$tmp/err' ]"
  check "$name: fits 80 columns" fits "$tmp/out"
  check "$name: starts with its usage" sh -c "head -1 '$tmp/out' | grep -q '^usage: vram${cmd:+ $cmd}'"
  "$vram" $cmd -h >"$tmp/short" 2>&1
  check "$name: -h says the same" cmp -s "$tmp/out" "$tmp/short"
  if [ -n "$cmd" ]; then
    "$vram" $cmd --no-such-option >/dev/null 2>"$tmp/err"; rc=$?
    check "$name: an unknown option points here" \
      sh -c "[ $rc = 2 ] && grep -q 'vram $cmd --help lists the options' '$tmp/err'"
  fi
done
"$vramd" --help >"$tmp/out" 2>"$tmp/err"; rc=$?
check "vramd --help: status 0" test $rc = 0
check "vramd --help: fits 80 columns" fits "$tmp/out"

# Each answers its own question: what it shows, and from where.
"$vram" devices --help >"$tmp/out"
check "devices --help: which GPUs and who holds their memory" \
  sh -c "grep -q 'Which GPUs' '$tmp/out' && grep -q 'who holds their memory' '$tmp/out'"
check "devices --help: names its columns" \
  sh -c "grep -q 'pid, user' '$tmp/out' && grep -q 'budget' '$tmp/out'"
"$vram" status --help >"$tmp/out"
check "status --help: who holds how much, from vramd, and without it" \
  sh -c "grep -q 'Who holds how much GPU memory' '$tmp/out' && grep -q 'Without vramd' '$tmp/out'"
check "status --help: names every section of --json" \
  sh -c "for k in host driver_version devices users processes waiting unseen history; do grep -q \"\\\"\$k\\\"\" '$tmp/out' || exit 1; done"
"$vram" --help >"$tmp/out"
check "vram --help lists every command" \
  sh -c "for c in run devices top status plot record cdi; do grep -q \"^  \$c \" '$tmp/out' || exit 1; done"

# The figures --help gives are the simulated driver's own (issue 27, item
# 14): the context a program makes there, as vram run measures it.
unset VRAM_SIM_CONTEXT_SIZE VRAM_MEMORY_LIMIT VRAM_MEMORY_FRACTION VRAM_LOG
mkdir "$tmp/sim"
VRAM_SIM_DIR=$tmp/sim VRAM_SIM_DEVICES=12GiB "$vram" run --limit 2GiB -- "$build/vram-demo-grab" A 0 1 \
  >/dev/null 2>"$tmp/run"
context=$(grep -o '(context [0-9.]* MiB' "$tmp/run" | head -1 | grep -o '[0-9.]* MiB' | sed 's/\.00 //')
check "a context on the simulated driver was measured ($(cat "$tmp/run"))" test -n "$context"
"$vram" --help >"$tmp/out"
check "vram --help: VRAM_SIM_CONTEXT_SIZE's default is what a context takes ($context)" \
  grep -q "VRAM_SIM_CONTEXT_SIZE .*($context)" "$tmp/out"
"$vram" run --help >"$tmp/out"
check "vram run --help: its peak line's context is the simulated one's" \
  grep -q "^  ${context%MiB}.00 MiB)" "$tmp/out"
check "vram run --help: memory the driver takes on its own is charged, not beyond the budget" \
  sh -c "tr '\\n' ' ' <'$tmp/out' | grep -q 'its stack) is charged to the budget' &&
         ! tr '\\n' ' ' <'$tmp/out' | grep -q 'beyond the budget'"

echo "$passed passed, $failures failed"
[ "$failures" = 0 ]
