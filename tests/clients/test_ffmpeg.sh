#!/usr/bin/env bash
# ffmpeg, a program nobody here wrote, on the simulated GPU as its users run
# it: `-init_hw_device cuda` and frames uploaded to the device and downloaded
# again (hwupload,hwdownload) come back identical to a CPU-only run; under
# `vram run --limit 530MiB` (its CUDA context, 518 MiB on the simulated
# H100, and 12 MiB beside it) 1080p frames still pass and 4K frames (14 MiB
# each) do not fit: a clean allocation failure, not a crash.
set -u
build=$(cd "${1:?usage: test_ffmpeg.sh BUILD_DIR}" && pwd)
. "$(dirname "$0")/../lib.sh"
command -v ffmpeg >/dev/null || missing "ffmpeg is not installed (scripts/test-deps.sh installs it as root)"
. "$(dirname "$0")/setup.sh"

# clip SIZE: 10 frames of a generated pattern.
clip() { echo "-f lavfi -i testsrc2=size=$1:rate=10:duration=1"; }
through_gpu() { # SIZE FORMAT OUT [vram run options...]
  local size=$1 fmt=$2 out=$3; shift 3
  ${1:+"$build/vram" run "$@" --} ffmpeg -nostdin -hide_banner -loglevel error -init_hw_device cuda=gpu:0 \
    -filter_hw_device gpu $(clip "$size") -vf "format=$fmt,hwupload,hwdownload,format=$fmt" \
    -f rawvideo -y "$out"
}
on_cpu() { ffmpeg -nostdin -hide_banner -loglevel error $(clip "$1") -vf "format=$2" -f rawvideo -y "$3"; }

for fmt in nv12 yuv420p yuv444p; do
  on_cpu 640x360 $fmt "$tmp/cpu.$fmt"
  through_gpu 640x360 $fmt "$tmp/gpu.$fmt" 2>"$tmp/err.$fmt"
  check "$fmt through the GPU: ffmpeg succeeds" test $? = 0
  check "$fmt through the GPU: frames identical to the CPU's" cmp -s "$tmp/cpu.$fmt" "$tmp/gpu.$fmt"
done

on_cpu 1920x1080 nv12 "$tmp/cpu.hd"
through_gpu 1920x1080 nv12 "$tmp/gpu.hd" --limit 530MiB 2>"$tmp/err.hd"
check "1080p under a budget of a context and 12 MiB" test $? = 0
check "1080p under a budget of a context and 12 MiB: identical" cmp -s "$tmp/cpu.hd" "$tmp/gpu.hd"
through_gpu 3840x2160 nv12 "$tmp/gpu.4k" --limit 530MiB 2>"$tmp/err.4k"; rc=$?
check "4K under a budget of a context and 12 MiB fails" test $rc = 1
check "... as an allocation failure ffmpeg reports" contains "$tmp/err.4k" "CUDA_ERROR_OUT_OF_MEMORY"
check "... which vram explains" contains "$tmp/err.4k" "budget 530.00 MiB, in use 518.00 MiB by the command (this process 518.00 MiB including contexts 518.00 MiB)"
check "... and no frame was written" test ! -s "$tmp/gpu.4k"
cat "$tmp"/err.* 2>/dev/null
echo "$passed passed, $failures failed"
[ $failures = 0 ]
