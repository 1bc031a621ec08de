#!/usr/bin/env bash
# libvram.so exports exactly the functions include/vram.h declares (issue
# 22, item 9: vram_status_name was declared VRAM_EXPORT but hidden, so a
# program using it did not link against the shared library), and a program
# that calls every one of them links against it.
set -u
build=${1:?usage: test_exports.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
command -v nm >/dev/null || missing "nm (binutils) is not installed"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Every declaration is one line: VRAM_EXPORT type name(…
grep '^VRAM_EXPORT' "$here/../include/vram.h" | sed 's/(.*//' | awk '{print $NF}' | tr -d '*' |
  sort -u >"$tmp/declared"
nm -D --defined-only "$build/libvram.so" | awk '$2 == "T" {print $3}' | sort -u >"$tmp/exported"
check "vram.h declares functions" test "$(wc -l <"$tmp/declared")" -gt 20
comm -23 "$tmp/declared" "$tmp/exported" >"$tmp/hidden"
comm -13 "$tmp/declared" "$tmp/exported" >"$tmp/extra"
check "every function vram.h declares is exported: missing $(tr '\n' ' ' <"$tmp/hidden")" \
  test ! -s "$tmp/hidden"
check "nothing else is: $(tr '\n' ' ' <"$tmp/extra")" test ! -s "$tmp/extra"
# A program naming each of them links against libvram.so alone.
{
  echo '#include <vram.h>'
  echo '#include <stdio.h>'
  echo 'int main(void) {'
  sed 's/.*/    printf("%p\\n", (void *)\&&);/' "$tmp/declared"
  echo '    return 0; }'
} >"$tmp/all.c"
cc=${CC:-cc}
check "a program using every declared function links against libvram.so" \
  "$cc" -I"$here/../include" "$tmp/all.c" -L"$build" -lvram -Wl,--no-as-needed -o "$tmp/all"
echo "test_exports: $passed passed, $failures failed"
[ $failures = 0 ]
