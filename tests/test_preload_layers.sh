#!/usr/bin/env bash
# The interposer's charge path reads in one direction (src/preload/real.h):
# the real driver at the bottom, then NVML's readings, the driver's part,
# the budget, what governed calls share, the families of hooks, and the
# resolution on top. Read from the built objects (what each one calls, as
# the linker sees it, and who defines it):
#   - no file of src/preload calls a file that calls it back, however far
#     round (a loop of any length);
#   - each of the lower parts calls only the parts named below it;
#   - src/command, which the interposer and vram run share, calls nothing
#     of the interposer.
# The check is first run on a made-up graph with a loop, to show that it
# can fail.
#   tests/test_preload_layers.sh BUILD
set -u
build=${1:?usage: test_preload_layers.sh BUILD}
objects="$build/CMakeFiles/vram_preload.dir/src"
[ -d "$objects/preload" ] || { echo "no objects of the interposer under $objects"; exit 1; }
command -v nm >/dev/null || { echo "nm (binutils) is needed"; exit 1; }

# "FILE DEFINED|CALLS SYMBOL" for every object.
edges() {
  local o
  for o in "$objects"/preload/*.o "$objects"/command/*.o; do
    local f
    f=$(basename "$(dirname "$o")")/$(basename "$o" .c.o)
    nm --defined-only -g "$o" | awk -v f="$f" 'NF == 3 { print f, "DEFINED", $3 }'
    nm -u "$o" | awk -v f="$f" '{ print f, "CALLS", $2 }'
  done
}

judge() { # reads edges on stdin; prints every breach; exit 1 if any
  python3 -c '
import sys
defined, calls = {}, {}
for line in sys.stdin:
    f, what, sym = line.split()
    if what == "DEFINED":
        defined[sym] = f
    else:
        calls.setdefault(f, set()).add(sym)
graph = {f: sorted({defined[s] for s in syms if s in defined and defined[s] != f})
         for f, syms in calls.items()}
bad = 0
# Loops: a depth-first search that meets a file still on its path.
state, path = {}, []
def visit(f):
    global bad
    state[f] = 1
    path.append(f)
    for g in graph.get(f, []):
        if state.get(g) == 1:
            print("loop: " + " -> ".join(path[path.index(g):] + [g]))
            bad = 1
        elif not state.get(g):
            visit(g)
    path.pop()
    state[f] = 2
for f in sorted(graph):
    if not state.get(f):
        visit(f)
# The lower parts, bottom first: each calls only parts before it.
order = ["preload/real", "preload/nvml_reader", "preload/driver_memory", "preload/budget"]
for i, f in enumerate(order):
    for g in graph.get(f, []):
        if g.startswith("preload/") and g not in order[:i]:
            print(f"{f} calls {g}, which is not below it")
            bad = 1
for f in graph:
    if f.startswith("command/"):
        for g in graph[f]:
            if g.startswith("preload/"):
                print(f"{f} calls {g}: src/command calls nothing of the interposer")
                bad = 1
sys.exit(bad)
'
}

out=$(printf '%s\n' "preload/a DEFINED fa" "preload/b DEFINED fb" "preload/c DEFINED fc" \
  "preload/a CALLS fb" "preload/b CALLS fc" "preload/c CALLS fa" | judge)
if [ $? -eq 0 ] || [[ $out != *"loop: preload/a -> preload/b -> preload/c -> preload/a"* ]]; then
  echo "FAIL: the check did not see a loop of three files: $out"
  exit 1
fi

if ! out=$(edges | judge); then
  echo "FAIL: the interposer's parts do not call in one direction:"
  echo "$out"
  exit 1
fi
echo "the interposer's parts call in one direction"
