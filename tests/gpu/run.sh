#!/usr/bin/env bash
# On a machine with a real NVIDIA GPU: frameworks under vram run with a
# budget well below the card. Each must see the budget as the device size
# and fail with out-of-memory at the budget (not before, not after; its CUDA
# context and modules are inside it). For each, the line also says what its
# contexts and modules took (vram run --summary) and what nvidia-smi listed
# for the process while it held everything, against the budget: the
# tolerance README.md speaks of ("over" when it passed the budget; a line
# more than the tolerance over is BAD). Stream-ordered pools (the runtime's
# cudaMallocAsync and cudaMallocFromPoolAsync, PyTorch's cudaMallocAsync
# backend, CuPy's MemoryAsyncPool) fill in halving steps down to 2 MiB and
# must get what the program was told was free to within a pool's chunk
# (32 MiB), with nvidia-smi's figure within the budget, or the line is BAD.
# Record what you ran and saw in docs/gpu-validation.md.
#
#   tests/gpu/run.sh [BUDGET [train]]   default budget 4GiB; "train": only
#                                       the training check
#
# Needs: the driver (libcuda.so.1), nvcc, and whichever of PyTorch, JAX and
# CuPy are installed (missing ones are reported as skipped); the training
# check needs torchvision and nvidia-ml-py. VRAM_GPU_TOLERANCE_MIB sets the
# tolerance it holds NVML's figure to (README.md, "The tolerance").
set -u
cd "$(dirname "$0")/../.."
budget=${1:-4GiB}
only=${2:-all} # "train": the training check alone
build=build-gpu
cmake -S . -B $build -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build $build -j >/dev/null || exit 1
vram=$build/vram
unset LD_LIBRARY_PATH VRAM_SIM_DEVICES VRAM_SIM_DIR  # the real driver, not the simulator
bytes=$(python3 -c "
import re,sys; s='$budget'; m=re.fullmatch(r'([0-9.]+)(GiB|G|MiB|M)?', s)
print(int(float(m.group(1)) * {'GiB':1<<30,'G':1<<30,'MiB':1<<20,'M':1<<20,None:1}[m.group(2)]))")
out=$(mktemp -d)
echo "device: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)"
echo "budget: $budget ($bytes bytes)"

rc=0
# README.md, "The tolerance": what the driver can take between two of the
# interposer's readings.
tolerance_mib=${VRAM_GPU_TOLERANCE_MIB:-32}
judged() { # prints what it is given; a BAD line fails the script
  echo "$1"
  case "$1" in *"  BAD "*) rc=1 ;; esac
}
verdict() { judged "$(verdict_of "$@")"; }
verdict_of() { # LINE SUMMARY: checks total == budget and budget - 1 GiB <= got <= budget
  # (a pool's line: free - 32 MiB <= got <= free, and nvidia-smi within the budget);
  # says what the contexts and modules took and NVML's figure against the budget
  python3 - "$1" "$bytes" "$2" "$tolerance_mib" <<'PY'
import json, re, sys
line, budget, summary, tol = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]) << 20
t = re.search(r"total=(\d+)", line); g = re.search(r"got=(\d+)", line)
n = re.search(r"nvml=(-?\d+)", line); f = re.search(r"free=(-?\d+)", line)
if not t or not g:
    print("  ??  " + line); sys.exit(0)
total, got = int(t.group(1)), int(g.group(1))
pool = line.split()[1] in ("async", "pool", "cudaMallocAsync", "MemoryAsyncPool")
# XLA takes 75% of the device it is shown (XLA_PYTHON_CLIENT_MEM_FRACTION's
# default): under vram, 75% of the budget is right, not a fault.
xla = line.startswith("jax") and abs(total - budget * 3 // 4) <= (2 << 20)
ok_total = abs(total - budget) <= (2 << 20) or total == 0 or xla
ok_got = (total if xla else budget) - (1 << 30) <= got <= budget
free = int(f.group(1)) if f else -1
if pool and free >= 0:  # to within a pool's chunk of what it was told was free
    ok_got = free - (32 << 20) <= got <= free
nvml = int(n.group(1)) if n else -1
ok_nvml = nvml <= budget + (0 if pool else tol)
note = "  (XLA's default: 75% of the budget)" if xla else ""
if pool and free >= 0:
    note += f"  (short of what was free by {(free - got) / (1 << 20):.0f} MiB)"
print(("  ok  " if ok_total and ok_got and ok_nvml else "  BAD ") + line + note)
mib = lambda b: f"{b / (1 << 20):.0f} MiB"
try:
    d = json.load(open(summary))["devices"][0]
    part = f"context {mib(d['context'])}, modules {mib(d['modules'])}, peak {mib(d['peak'])}"
except (OSError, ValueError, KeyError, IndexError):
    part = "no summary"
if nvml < 0:
    seen = "nvidia-smi did not list the process"
elif nvml <= budget:
    seen = f"nvidia-smi {mib(nvml)} of the {mib(budget)} budget: within it"
else:
    seen = f"nvidia-smi {mib(nvml)} of the {mib(budget)} budget: over by {mib(nvml - budget)}"
print(f"        {part}; {seen}")
PY
}

run() { # NAME ENV... -- COMMAND...
  local name=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local line
  line=$(env "${envs[@]}" "$vram" run --limit "$budget" --summary "$out/$name.json" -- "$@" \
    2>"$out/$name.err" | tail -1)
  if [ -z "$line" ]; then echo "  --  $name: no result ($(head -c 200 "$out/$name.err"))"
  else verdict "$line" "$out/$name.json"; fi
}

have() { python3 -c "import $1" 2>/dev/null; }

if [ "$only" != train ]; then
if command -v nvcc >/dev/null; then
  # The driver's own figures (what sim/config.h's H100 is calibrated to).
  nvcc -o "$out/facts" tests/gpu/facts.cu && "$out/facts"
  if nvcc -o "$out/alloc_runtime" tests/gpu/alloc_runtime.cu; then
    run runtime -- "$out/alloc_runtime"
    run runtime-async -- "$out/alloc_runtime" async
    run runtime-pool -- "$out/alloc_runtime" pool
  fi
  nvcc -o "$out/alloc_driver" tests/gpu/alloc_driver.c -lcuda && run driver -- "$out/alloc_driver"
else
  echo "  skipped: nvcc not found"
fi
if have torch; then
  run torch-native -- python3 tests/gpu/probe.py torch native
  run torch-expandable PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True -- python3 tests/gpu/probe.py torch expandable
  run torch-async PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync -- python3 tests/gpu/probe.py torch cudaMallocAsync
else
  echo "  skipped: PyTorch not installed"
fi
if have jax; then
  run jax-prealloc -- python3 tests/gpu/probe.py jax preallocate
  run jax-growth XLA_PYTHON_CLIENT_PREALLOCATE=false -- python3 tests/gpu/probe.py jax growth
else
  echo "  skipped: JAX not installed"
fi
if have cupy; then
  run cupy -- python3 tests/gpu/probe.py cupy
  run cupy-async -- python3 tests/gpu/probe.py cupy MemoryAsyncPool
else
  echo "  skipped: CuPy not installed"
fi
# Two budgeted processes at once on one GPU.
if have torch; then
  for p in a b; do
    "$vram" run --limit "$budget" --summary "$out/$p.json" -- \
      python3 tests/gpu/probe.py torch two-$p >"$out/$p" 2>"$out/$p.err" &
  done
  wait
  verdict "$(tail -1 "$out/a")" "$out/a.json"
  verdict "$(tail -1 "$out/b")" "$out/b.json"
fi
fi

# A real training workload (torchvision ResNet-50, bf16, batch 64) while
# NVML is sampled every 100 ms from outside vram: once under a budget it
# fits, once under one it does not. Fails when NVML's largest figure for
# the process passes the budget by more than the tolerance README.md states
# ("The tolerance"): what the driver can take between two of the
# interposer's readings.
train() { # NAME BUDGET|none
  local name=$1 limit=$2 pid max line s
  python3 tests/gpu/sample.py 100 >"$out/$name.nvml" 2>"$out/$name.nvml.err" &
  s=$!
  until grep -q ready "$out/$name.nvml" 2>/dev/null || ! kill -0 $s 2>/dev/null; do sleep 0.1; done
  if [ "$limit" = none ]; then
    python3 tests/gpu/train.py 20 >"$out/$name.out" 2>"$out/$name.err"
  else
    "$vram" run --limit "$limit" --summary "$out/$name.json" -- \
      python3 tests/gpu/train.py 20 >"$out/$name.out" 2>"$out/$name.err"
  fi
  kill -TERM $s; wait $s
  pid=$(sed -n 's/^pid=//p' "$out/$name.out" | head -1)
  max=$(sed -n "s/^pid=$pid max=\([0-9]*\).*/\1/p" "$out/$name.nvml")
  line=$(grep '^train ' "$out/$name.out" | tail -1)
  judged "$(python3 - "$name" "$limit" "${max:--1}" "$line" "$out/$name.json" "$tolerance_mib" "$out/$name.err" <<'PY'
import json, re, sys
name, limit, nvml, line, summary, tol, err = sys.argv[1:8]
nvml, tol = int(nvml), int(tol)
mib = lambda b: f"{b / (1 << 20):,.0f} MiB"
if not line:
    print(f"  --  {name}: no result ({open(err).read()[-300:]!r})"); sys.exit(0)
if limit == "none":
    print(f"  ok  {name} (no vram): {line}; nvidia-smi at most {mib(nvml)}"); sys.exit(0)
m = re.fullmatch(r"([0-9.]+)(GiB|MiB)", limit)
budget = int(float(m.group(1)) * (1 << 30 if m.group(2) == "GiB" else 1 << 20))
try:
    d = json.load(open(summary))["devices"][0]
    parts = ", ".join(f"{k} {mib(v)}" for k, v in d.items() if isinstance(v, int) and k not in ("index", "refused", "refusals"))
except (OSError, ValueError, KeyError, IndexError):
    parts = "no summary"
over = nvml - budget
ok = nvml >= 0 and over <= tol << 20
how = (f"within it by {mib(-over)}" if over <= 0 else f"over by {mib(over)}") if nvml >= 0 else "not listed"
print(("  ok  " if ok else "  BAD ") + f"{name} under {limit}: {line}")
print(f"        vram: {parts}; nvidia-smi at most {mib(nvml)}: {how} (tolerance {tol} MiB)")
PY
)"
}
if have torch && have torchvision && have pynvml; then
  train resnet-plain none
  train resnet-fits 6GiB
  train resnet-tight 3GiB
else
  echo "  skipped: the training check needs PyTorch, torchvision and nvidia-ml-py"
fi
echo "took $SECONDS s"
rm -rf "$out"
exit $rc
