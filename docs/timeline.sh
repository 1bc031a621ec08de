#!/usr/bin/env bash
# The README's picture of GPU memory over time, docs/timeline.svg, made with
# vram's own commands on the simulated GPU: two training-like jobs
# (tests/record/recorded.c, linked as ./train: weights, optimizer state, a workspace,
# activations from the stream-ordered pool every step, a CUDA graph from the
# middle on, an evaluation array now and then) share one budget of 6 GiB
# under vram run --record; vram plot draws the recording.
#   docs/timeline.sh [BUILD_DIR]      (after make build; BUILD_DIR: build)
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export LD_LIBRARY_PATH=$build/sim VRAM_DAEMON=off VRAM_SIM_DIR=$tmp/sim
mkdir "$VRAM_SIM_DIR"
cd "$tmp"
ln -s "$build/tests/recorded" train
"$build/vram" run --limit 6GiB --log off --record train.vrec -- \
  bash -c './train 40 & sleep 0.8; ./train 30; wait'
"$build/vram" record info train.vrec
"$build/vram" plot train.vrec -o "$src/docs/timeline.svg" --width 800 \
  --title "two training jobs under vram run --limit 6GiB"
