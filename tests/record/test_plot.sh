#!/usr/bin/env bash
# vram plot on a made-up recording of a million events: the page and the
# SVG are written, self-contained, and show in a real browser (headless
# Chromium) every series, the peak and the budget line where the axes put
# them, every refusal, and the time and bytes under the pointer
# (browser.py). Screenshots: BUILD_DIR/test-output/plot/.
set -u
build=${1:?usage: test_plot.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
vram=$build/vram synth=$build/vram-synth-recording
. "$here/../lib.sh"
need_browser
out=$build/test-output/plot
rm -rf "$out" && mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Four processes on two GPUs, a million events, the command held to one
# budget (a flat line) and refused now and then.
"$synth" --events 1000000 --processes 4 --devices 2 --command-budget 16GiB --killed 1 \
  "$tmp/rec.vrec" >/dev/null
"$vram" record info --json "$tmp/rec.vrec" >"$tmp/info.json"
"$vram" plot "$tmp/rec.vrec" -o "$out/timeline.html" --title "a million events" 2>/dev/null
check "the recording has refusals to show" $py -c '
import json, sys; d = json.load(open(sys.argv[1]))
sys.exit(not all(g["refusals"] > 0 for g in d["devices"]) or len(d["devices"]) != 2)' "$tmp/info.json"
check "page written" test -s "$out/timeline.html"
"$vram" plot "$tmp/rec.vrec" -o "$out/timeline.svg" --title "a million events" 2>/dev/null
check "SVG written" test -s "$out/timeline.svg"
# Self-contained: no address to fetch anything from (the SVG namespace is
# a name, not a fetch).
check "the page refers to nothing outside it" \
  sh -c "! grep -Eo '(src|href)=|https?://|@import|url\\(' '$out/timeline.html'"
check "the SVG refers to nothing outside it" \
  sh -c "[ \"\$(grep -Eo '(src|href)=|https?://[^\"]*|@import|url\\(' '$out/timeline.svg' | sort -u)\" = 'http://www.w3.org/2000/svg' ]"

$py "$here/browser.py" "$out/timeline.html" "$out/timeline.svg" "$tmp/info.json" "$out" \
  >"$out/browser.log" 2>&1
rc=$?
cat "$out/browser.log"
check "what the browser shows" test $rc = 0
check "screenshots" test -s "$out/timeline.png" -a -s "$out/timeline-svg.png"

echo "$passed passed, $failures failed"
[ "$failures" = 0 ]
