#!/bin/sh
# The allocator's part of `make bench`: the W1 and W2 traces of
# offset-baseline.md replayed through libvram's heap, one thread pinned to
# one core; then two threads at once, on one heap (its lock contended) and
# on a heap each.
#
# Usage: bench/allocator.sh BUILD_DIR TRACES_DIR
# The shared traces in TRACES_DIR (w1.csv.gz, w2.csv.gz) are used when they
# are there; otherwise vram-tracegen writes W1 and W2 from their description
# into BUILD_DIR/traces. Either way the output says which were used.
set -eu
build=$1
traces=$2
out=$build/traces
mkdir -p "$out"
for w in w1 w2; do
    "$build/vram-tracegen" $w > "$out/$w.csv"
done
if [ -r "$traces/w1.csv.gz" ] && [ -r "$traces/w2.csv.gz" ]; then
    w1=$traces/w1.csv.gz
    w2=$traces/w2.csv.gz
    same=yes
    for w in w1 w2; do
        gzip -dc "$traces/$w.csv.gz" | cmp -s - "$out/$w.csv" || same=no
    done
    if [ $same = yes ]; then
        echo "traces: $w1, $w2 (shared; vram-tracegen writes the same bytes)"
    else
        echo "traces: $w1, $w2 (shared; NOT what vram-tracegen writes: figures are not comparable with a fresh clone's)"
    fi
else
    w1=$out/w1.csv
    w2=$out/w2.csv
    echo "traces: $w1, $w2 (written by vram-tracegen from offset-baseline.md's description; no shared traces in $traces)"
fi
cpu=$(( $(nproc) - 1 ))
echo "one thread, pinned to CPU $cpu:"
taskset -c $cpu "$build/vram-replay" "$w1" "$w2"
echo "two threads at once (the wall time over one thread's ops):"
"$build/vram-replay" --threads 2 "$w1" "$w2"
