#!/usr/bin/env bash
# vram-tracegen writes the benchmark traces of offset-baseline.md, so that
# `make bench` on a fresh clone measures what the report measured: W1 is
# 1,000,000 ops (500,000 allocations, sizes 256 B .. 64 MiB in multiples of
# 256 B, never more than 2,000 live, peak live 11.68 GiB, everything freed
# at the end), W2 620,128 ops (peak live 2.86 GiB, 193 live at most);
# every free names a live allocation with its size; the output is the same
# on every run; bad arguments are refused with a message. Where the shared
# traces are present, the output is byte for byte theirs.
set -u
gen=${1:?usage: test_tracegen.sh VRAM_TRACEGEN [SHARED_TRACES_DIR]}
shared=${2:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh"

# ops allocs max_live peak_live_GiB(2 decimals) bad_lines, of an RMM log
summary() {
    awk -F, 'NR == 1 { if ($0 != "Thread,Time,Action,Pointer,Size,Stream") bad++; next }
        $3 == "allocate" { if (($4 in size) || $5 % 256 || $5 < 256) bad++; size[$4] = $5; live += $5; n++;
                           if (++count > maxn) maxn = count; if (live > peak) peak = live; ops++; next }
        $3 == "free" { if (!($4 in size) || size[$4] != $5) bad++; live -= size[$4]; delete size[$4]; count--; ops++; next }
        { bad++ }
        END { left = 0; for (p in size) left++; printf "%d %d %d %.2f %d %d\n", ops, n, maxn, peak / 2^30, bad, left }' "$1"
}

"$gen" w1 > "$tmp/w1.csv"; rc1=$?
"$gen" w2 > "$tmp/w2.csv"; rc2=$?
check "writes both traces" test $rc1 = 0 -a $rc2 = 0
read -r ops allocs maxn peak bad left < <(summary "$tmp/w1.csv")
check "W1: 1,000,000 ops, half allocations" test "$ops $allocs" = "1000000 500000"
check "W1: at most 2,000 live" test "$maxn" = 2000
check "W1: peak live 11.68 GiB" test "$peak" = 11.68
check "W1: well formed, every free matches, nothing left" test "$bad $left" = "0 0"
check "W1: sizes up to 64 MiB" awk -F, 'NR > 1 && $5 > 67108864 { exit 1 }' "$tmp/w1.csv"
read -r ops allocs maxn peak bad left < <(summary "$tmp/w2.csv")
check "W2: 620,128 ops" test "$ops $allocs" = "620128 310064"
check "W2: 193 live at most, peak live 2.86 GiB" test "$maxn $peak" = "193 2.86"
check "W2: well formed, every free matches, nothing left" test "$bad $left" = "0 0"
check "the same bytes every run" cmp -s "$tmp/w2.csv" <("$gen" w2)
check "shorter traces" test "$("$gen" w1 --allocs 1000 | wc -l) $("$gen" w2 --steps 2 | wc -l)" = "2001 1369"

"$gen" w3 > /dev/null 2> "$tmp/err"; rc=$?
check "unknown trace refused" test $rc = 2
check "unknown trace named" contains "$tmp/err" 'unknown trace "w3"'
"$gen" w1 --allocs 0 > /dev/null 2> "$tmp/err"; rc=$?
check "zero allocations refused" test $rc = 2
check "bad count names flag and value" contains "$tmp/err" '--allocs "0": must be at least 1'
"$gen" w2 --allocs 5 > /dev/null 2> "$tmp/err"; rc=$?
check "a W1 flag for W2 refused" test $rc = 2

if [ -n "$shared" ] && [ -r "$shared/w1.csv.gz" ] && [ -r "$shared/w2.csv.gz" ]; then
    check "W1 byte for byte the shared trace" cmp -s "$tmp/w1.csv" <(gzip -dc "$shared/w1.csv.gz")
    check "W2 byte for byte the shared trace" cmp -s "$tmp/w2.csv" <(gzip -dc "$shared/w2.csv.gz")
else
    echo "note: no shared traces in '${shared}': not compared with them"
fi

echo "test_tracegen: $passed passed, $failures failed"
[ $failures = 0 ]
