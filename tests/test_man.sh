#!/usr/bin/env bash
# The manual pages, installed under a prefix and read with man(1) as a
# person would: found by name, rendered without a single warning from man
# or groff, and true to the commands: the options of each --help are the
# options the page describes, the variables of vram --help are those of
# vram(1), and every directive vramd's policy parser knows is in
# vram-policy(5).
set -u
build=$(cd "${1:?usage: test_man.sh BUILD_DIR}" && pwd)
vram=$build/vram vramd=$build/vramd
. "$(dirname "$0")/lib.sh"
{ command -v man >/dev/null && command -v groff >/dev/null; } ||
  missing "man or groff is not installed (scripts/test-deps.sh installs man-db and groff-base)"
private_install "$build"
export MANPATH=$P/share/man MANWIDTH=80 LANG=C.UTF-8 MAN_DISABLE_SECCOMP=1

declare -A section=([vram]=1 [vram-run]=1 [vram-cdi]=1 [vramd]=8 [vram-policy]=5)
for page in vram vram-run vram-cdi vramd vram-policy; do
  s=${section[$page]}
  where=$(man -w "$s" "$page" 2>/dev/null)
  check "$page($s) is found by man under the prefix" test "$where" = "$P/share/man/man$s/$page.$s"
  man --warnings -E UTF-8 -l "$where" >"$tmp/$page.txt" 2>"$tmp/$page.err"
  check "$page($s): man -l renders it without a warning" \
    sh -c "[ -s '$tmp/$page.txt' ] && [ ! -s '$tmp/$page.err' ]"
  cat "$tmp/$page.err"
  groff -ww -z -b -man -t -Tutf8 "$where" 2>"$tmp/$page.groff"
  check "$page($s): groff -ww has nothing to say" test ! -s "$tmp/$page.groff"
  cat "$tmp/$page.groff"
  check "$page($s): fits 80 columns" sh -c "[ \$(wc -L <'$tmp/$page.txt') -le 80 ]"
done

# The options a --help lists, one a line, sorted.
help_options() {
  "$@" --help | grep -oE '^  --[a-z][a-z-]*(, --[a-z][a-z-]*)*' | tr ',' '\n' | tr -d ' ' | sort -u
}
# The options a rendered page describes in one of its sections (or, for
# vram(1), under one of its COMMANDS): the items that start with --.
page_options() { # PAGE SECTION-TITLE [COMMAND]
  awk -v sect="$2" -v cmd="${3:-}" '
    /^[A-Z]/ { in_sect = ($0 == sect); current = ""; next }
    !in_sect { next }
    cmd != "" && /^       [a-z]/ { split($0, w, " "); current = w[1]; next }
    cmd != "" && current != cmd { next }
    cmd != "" && /^              --[a-z]/ || cmd == "" && /^       --[a-z]/ {
      match($0, /--[a-z][a-z-]*/); print substr($0, RSTART, RLENGTH) }
  ' "$tmp/$1.txt" | sort -u
}
same() { # NAME A B: the same lines, or the difference shown
  if diff "$2" "$3" >"$tmp/diff"; then return 0; fi
  echo "$1: --help (<) and the manual page (>) differ:"; cat "$tmp/diff"; return 1
}
help_options "$vram" run >"$tmp/h"; page_options vram-run OPTIONS >"$tmp/m"
check "vram-run(1) describes exactly the options of vram run --help" same "vram run" "$tmp/h" "$tmp/m"
for cmd in devices top status plot record; do # (vram(1) describes their --help once, for all)
  help_options "$vram" $cmd | grep -vx -- --help >"$tmp/h"; page_options vram COMMANDS $cmd >"$tmp/m"
  check "vram(1) describes exactly the options of vram $cmd --help" same "vram $cmd" "$tmp/h" "$tmp/m"
done
{ help_options "$vram" cdi; help_options "$vram" oci-hook; } | sort -u >"$tmp/h"
page_options vram-cdi OPTIONS >"$tmp/m"
check "vram-cdi(1) describes exactly the options of vram cdi and vram oci-hook --help" \
  same "vram cdi, vram oci-hook" "$tmp/h" "$tmp/m"
help_options "$vramd" >"$tmp/h"; page_options vramd OPTIONS >"$tmp/m"
check "vramd(8) describes exactly the options of vramd --help" same vramd "$tmp/h" "$tmp/m"
"$vram" --help | grep -o '^  VRAM_[A-Z_]*' | tr -d ' ' | sort -u >"$tmp/h"
awk '/^[A-Z]/ { in_sect = ($0 == "ENVIRONMENT"); next } in_sect && /^       VRAM_/ { print $1 }' \
  "$tmp/vram.txt" | sort -u >"$tmp/m"
check "vram(1) describes exactly the variables of vram --help" same "variables" "$tmp/h" "$tmp/m"
for cmd in run cdi devices top status plot record; do
  check "vram(1) names the command $cmd" grep -q "^       $cmd" "$tmp/vram.txt"
done

# Every directive the policy parser accepts, as its own message lists them.
printf 'no-such-directive 1\n' >"$tmp/policy"
"$vramd" --check --policy "$tmp/policy" 2>"$tmp/err"
directives=$(sed -n 's/.*accepted: \([a-z, -]*\)$/\1/p' "$tmp/err" | tr -d ',')
check "vramd names the directives it accepts" test -n "$directives"
for d in $directives; do
  check "vram-policy(5) describes $d" grep -q "^       $d" "$tmp/vram-policy.txt"
done

echo "$passed passed, $failures failed"
[ "$failures" = 0 ]
