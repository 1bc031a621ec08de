#!/usr/bin/env bash
# vram installed under a prefix of its own and used as the README says.
#   test_install.sh BUILD_DIR          the library: vram.pc names the prefix, the
#                                      README's C example (taken from README.md
#                                      itself) builds with pkg-config by the
#                                      README's own commands and runs on the
#                                      simulated driver; the installed vram
#                                      finds its interposer; DESTDIR staging
#   test_install.sh BUILD_DIR unit     vramd's systemd unit: ExecStart under the
#                                      prefix, hardened, systemd-analyze verify
set -u
build=$(cd "${1:?usage: test_install.sh BUILD_DIR [unit]}" && pwd)
mode=${2:-library}
src=$(cd "$(dirname "$0")/.." && pwd)
. "$src/tests/lib.sh"
private_install "$build"

if [ "$mode" = unit ]; then
  unit=$P/lib/systemd/system/vramd.service
  check "the unit is installed under the prefix" test -f "$unit"
  check "ExecStart follows the prefix" grep -qx "ExecStart=$P/bin/vramd" "$unit"
  check "the documentation follows the prefix" grep -q "file://$P/share/doc/vram/README.md" "$unit"
  for d in NoNewPrivileges=yes ProtectSystem=strict ProtectHome=yes PrivateTmp=yes \
           ProtectKernelTunables=yes ProtectKernelModules=yes ProtectControlGroups=yes \
           RestrictSUIDSGID=yes SystemCallFilter=@system-service RuntimeDirectory=vram; do
    check "hardened: $d" grep -qx "$d" "$unit"
  done
  command -v systemd-analyze >/dev/null ||
    missing "systemd-analyze is not installed (scripts/test-deps.sh installs systemd)"
  # man: links are checked against the pages installed beside it.
  MANPATH=$P/share/man: systemd-analyze verify "$unit" >"$tmp/verify" 2>&1; rc=$?
  check "systemd-analyze verify accepts the unit" test $rc = 0
  check "systemd-analyze verify says nothing" test ! -s "$tmp/verify"
  cat "$tmp/verify"
  echo "$passed passed, $failures failed"
  [ "$failures" = 0 ]
  exit
fi

command -v pkg-config >/dev/null || missing "pkg-config is not installed (scripts/test-deps.sh installs pkgconf)"
export PKG_CONFIG_PATH=$P/lib/pkgconfig
check "vram.pc names the prefix" test "$(pkg-config --variable=prefix vram)" = "$P"
check "vram.pc: -I under the prefix" test "$(echo $(pkg-config --cflags vram))" = "-I$P/include"
check "vram.pc: -L under the prefix" sh -c "pkg-config --libs vram | grep -q -- '-L$P/lib -lvram'"
for f in include/vram.h lib/libvram.so lib/libvram.a lib/libvram-preload.so bin/vram bin/vramd \
         share/vram/policy.conf.sample share/doc/vram/README.md; do
  check "installed: $f" test -e "$P/$f"
done

# The README's C example, exactly as README.md has it.
awk '/^## Using libvram/ { s = 1 } s && /^```c$/ { c = 1; next } c && /^```$/ { exit } c' \
  "$src/README.md" >"$tmp/example.c"
check "the README has a C example" grep -q "int main" "$tmp/example.c"
cc -std=c11 -Wall -Wextra -Wpedantic -Werror "$tmp/example.c" $(pkg-config --cflags --libs vram) \
  -o "$tmp/strict" 2>"$tmp/cc.err"
check "the README's C example compiles cleanly (C11, -Wall -Wextra -Wpedantic)" test -x "$tmp/strict"
cat "$tmp/cc.err"

# Built and run by the README's own commands: the sh block that follows
# the example, in a folder where build is this build, with a home of its
# own, on the simulated driver (libvram loads VRAM_CUDA_LIBRARY; the
# commands set LD_LIBRARY_PATH themselves).
awk '/^## Using libvram/ { s = 1 } s && /^```sh$/ { c = 1; next } c && /^```$/ { exit } c' \
  "$src/README.md" >"$tmp/commands.sh"
check "the README says how to build it" grep -q "pkg-config --cflags --libs vram" "$tmp/commands.sh"
mkdir "$tmp/work" "$tmp/home"
ln -s "$build" "$tmp/work/build"
cp "$tmp/example.c" "$tmp/work/example.c"
sim() { env -u PKG_CONFIG_PATH HOME="$tmp/home" VRAM_CUDA_LIBRARY="$build/sim/libcuda.so.1" \
          VRAM_SIM_DIR="$tmp/sim" VRAM_DAEMON=off "$@"; }
mkdir "$tmp/sim"
(cd "$tmp/work" && sim VRAM_SIM_DEVICES=12GiB bash -e "$tmp/commands.sh") >"$tmp/out" 2>&1; rc=$?
check "the README's commands build and run the example on a 12 GiB GPU" test $rc = 0
[ $rc = 0 ] || cat "$tmp/out"
check "it was installed where the README says" test -f "$tmp/home/.local/lib/pkgconfig/vram.pc"
# A third of 2 GiB is less than the 1 GiB it asks for: it says why and
# stops, without freeing what it never got.
(cd "$tmp/work" && sim VRAM_SIM_DEVICES=2GiB LD_LIBRARY_PATH="$tmp/home/.local/lib" ./example) \
  >"$tmp/out" 2>"$tmp/err"; rc=$?
check "on a 2 GiB GPU the example fails with status 1" test $rc = 1
check "and says why" grep -qi "out of memory" "$tmp/err"

# The installed vram finds the installed interposer (not the build's).
LD_LIBRARY_PATH=$build/sim VRAM_SIM_DIR=$tmp/sim VRAM_SIM_DEVICES=12GiB VRAM_DAEMON=off \
  "$P/bin/vram" run --limit 4GiB -- "$build/vram-demo-grab" A 1 >"$tmp/out" 2>&1
check "the installed vram run holds a program to its budget" \
  contains "$tmp/out" "RESULT A 4294967296 $((4294967296 - (518 << 20))) ok"

# Staged for a package (DESTDIR): the files name the final prefix.
DESTDIR=$tmp/stage cmake --install "$build" --prefix /opt/vram >/dev/null 2>&1
check "DESTDIR: vram.pc names the final prefix" grep -qx "prefix=/opt/vram" "$tmp/stage/opt/vram/lib/pkgconfig/vram.pc"
check "DESTDIR: the unit names the final prefix" \
  grep -qx "ExecStart=/opt/vram/bin/vramd" "$tmp/stage/opt/vram/lib/systemd/system/vramd.service"

# The same through the front door (issue 22, item 10): make install honours
# PREFIX and DESTDIR, and writes nothing anywhere else.
make -C "$src" BUILD="$build" PREFIX=/opt/vram-make DESTDIR="$tmp/mstage" install >"$tmp/make.out" 2>&1; rc=$?
check "make install PREFIX= DESTDIR= succeeds" test $rc = 0
check "make install: under DESTDIR/PREFIX" test -x "$tmp/mstage/opt/vram-make/bin/vram"
check "make install: vram.pc names PREFIX" grep -qx "prefix=/opt/vram-make" "$tmp/mstage/opt/vram-make/lib/pkgconfig/vram.pc"
check "make install: nothing installed elsewhere" \
  sh -c "! grep 'Installing: ' '$tmp/make.out' | grep -v 'Installing: $tmp/mstage/opt/vram-make/'"
# Without DESTDIR only once PREFIX is known to be honoured: else this would
# install into the configured prefix, /usr/local.
if [ $failures = 0 ]; then
  make -C "$src" BUILD="$build" PREFIX="$tmp/mprefix" install >"$tmp/make.out" 2>&1; rc=$?
  check "make install PREFIX= (no DESTDIR) installs there" sh -c "[ $rc = 0 ] && [ -x '$tmp/mprefix/bin/vramd' ]"
  check "make install PREFIX=: nothing installed elsewhere" \
    sh -c "! grep 'Installing: ' '$tmp/make.out' | grep -v 'Installing: $tmp/mprefix/'"
fi
[ $failures = 0 ] || cat "$tmp/make.out"

echo "$passed passed, $failures failed"
[ "$failures" = 0 ]
