#!/usr/bin/env bash
# make bench: recording and reading recordings.
#   - the recorder's cost per event: its API in a loop on 1, 2 and 4
#     threads with the writer running (vram-bench-record);
#   - vram plot, vram record convert and info on a made-up recording of a
#     million events (vram-synth-recording): wall-clock seconds, the median
#     of 3 runs.
set -eu
build=${1:?usage: record.sh BUILD_DIR}
"$build/vram-bench-record"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/vram-synth-recording" --events 1000000 "$tmp/million.vrec"
median() {
  local label=$1; shift
  local times=()
  for _ in 1 2 3; do
    local t0 t1
    t0=$(date +%s%N)
    "$@" >/dev/null 2>&1
    t1=$(date +%s%N)
    times+=($(( (t1 - t0) / 1000000 )))
  done
  local sorted
  sorted=$(printf '%s\n' "${times[@]}" | sort -n | sed -n 2p)
  awk -v l="$label" -v ms="$sorted" -v all="${times[*]}" \
    'BEGIN { printf "%-44s %6.2f s (runs: %s ms)\n", l, ms / 1000, all }'
}
median "vram plot -o timeline.html" "$build/vram" plot "$tmp/million.vrec" -o "$tmp/t.html"
median "vram plot -o timeline.svg" "$build/vram" plot "$tmp/million.vrec" -o "$tmp/t.svg"
median "vram record info" "$build/vram" record info "$tmp/million.vrec"
median "vram record convert -> .csv (RMM)" "$build/vram" record convert "$tmp/million.vrec" "$tmp/t.csv"
median "vram record convert -> .json (trace events)" "$build/vram" record convert "$tmp/million.vrec" "$tmp/t.json"
echo "sizes: .vrec $(du -h "$tmp/million.vrec" | cut -f1), .html $(du -h "$tmp/t.html" | cut -f1)," \
     ".svg $(du -h "$tmp/t.svg" | cut -f1), .csv $(du -h "$tmp/t.csv" | cut -f1), .json $(du -h "$tmp/t.json" | cut -f1)"
