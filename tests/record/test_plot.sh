#!/usr/bin/env bash
# vram plot on a made-up recording of a million events: the page and the
# SVG are written, self-contained, and show in a real browser (headless
# Chromium) every series, the peak and the budget line where the axes put
# them, every refusal, and the time and bytes under the pointer
# (browser.py). And a recording of a program whose driver takes memory of
# its own (recorded lazy: kernels' code loaded at their first launch on the
# simulated H100): NVML's line on its family chart at NVML's figure, in the
# legend and under the pointer; none on the million events, which have no
# NVML readings (as an old recording). Screenshots:
# BUILD_DIR/test-output/plot/.
set -u
build=${1:?usage: test_plot.sh BUILD_DIR RECORDED}
recorded=${2:?usage: test_plot.sh BUILD_DIR RECORDED}
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
check "no NVML readings in the made-up recording, so no NVML line" \
  sh -c "! grep -q 'class=\"nvml\"' '$out/timeline.svg' && ! grep -q 'nvml' '$tmp/info.json'"

# --- NVML's line: the driver's own memory --------------------------------
export VRAM_SIM_DIR=$tmp/sim
mkdir "$VRAM_SIM_DIR"
"$vram" run --limit 1276MiB --record "$tmp/lazy.vrec" --summary "$tmp/lazy-summary.json" \
  --log off -- "$recorded" lazy "$tmp/lazy.log" 8
check "the program ran" test $? = 0
"$vram" record info --json "$tmp/lazy.vrec" >"$tmp/lazy-info.json"
nvml=$(json_field "$tmp/lazy-summary.json" 'd["devices"][0]["nvml_peak"]')
check "the recording's NVML peak is what vram run read from NVML" \
  test "$(json_field "$tmp/lazy-info.json" 'd["devices"][0].get("nvml_peak")')" = "$nvml"
check "which is above what vram charged the calls: the driver's code" test "$nvml" -gt \
  "$(json_field "$tmp/lazy-info.json" 'sum(v for k, v in d["devices"][0]["family_peaks"].items() if k != "driver")')"
"$vram" plot "$tmp/lazy.vrec" -o "$out/lazy.html" --title "lazy code" 2>/dev/null
"$vram" plot "$tmp/lazy.vrec" -o "$out/lazy.svg" --title "lazy code" 2>/dev/null
$py "$here/browser.py" "$out/lazy.html" "$out/lazy.svg" "$tmp/lazy-info.json" "$out" lazy \
  >"$out/lazy-browser.log" 2>&1
rc=$?
cat "$out/lazy-browser.log"
check "what the browser shows of NVML's line" test $rc = 0
check "NVML's line was checked" grep -q "NVML's line peaks at NVML's peak" "$out/lazy-browser.log"

echo "$passed passed, $failures failed"
[ "$failures" = 0 ]
