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
check "status --help: who holds how much, from vramd" \
  sh -c "grep -q 'Who holds how much GPU memory' '$tmp/out' && grep -q 'running vramd' '$tmp/out'"
check "status --help: names every section of --json" \
  sh -c "for k in host driver_version devices users processes waiting unseen history; do grep -q \"\\\"\$k\\\"\" '$tmp/out' || exit 1; done"
"$vram" --help >"$tmp/out"
check "vram --help lists every command" \
  sh -c "for c in run devices top status plot record cdi; do grep -q \"^  \$c \" '$tmp/out' || exit 1; done"

echo "$passed passed, $failures failed"
[ "$failures" = 0 ]
