"""What a framework sees and gets under vram run.

    python probe.py FRAMEWORK [MODE]

Prints one line: FRAMEWORK MODE total=<bytes the framework reports as the
device size> free=<what it said was free before> got=<bytes it could
allocate, in 64 MiB steps, before out-of-memory (a stream-ordered pool's
modes go on in halving steps down to 2 MiB)> nvml=<bytes nvidia-smi lists
for this process then, while it holds them all; -1 if it does not list it>
error=<the exception's first line>. Run by tests/gpu/run.sh.
"""
import os
import subprocess
import sys

STEP = 64 << 20
GRAIN = 2 << 20


def fill(alloc, halving):
    """Allocates STEP at a time until refused (then, for a pool, halving down
    to GRAIN); returns the bytes got, what is held, the last error."""
    held, got, err, step = [], 0, "", STEP
    while step >= GRAIN:
        try:
            held.append(alloc(step))
            got += step
        except Exception as e:  # the framework's out-of-memory error
            err = str(e).splitlines()[0] if str(e) else type(e).__name__
            if not halving:
                break
            step //= 2
    return got, held, err


def nvml_own():
    """What nvidia-smi lists for this process (MiB, as it says it), in bytes.
    Run without the interposer: it is a program of its own."""
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                              "--format=csv,noheader,nounits"], env=env, capture_output=True,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return -1
    mib = [int(u) for p, u in (line.split(",") for line in out.splitlines() if "," in line)
           if p.strip() == str(os.getpid()) and u.strip().isdigit()]
    return sum(mib) << 20 if mib else -1


def torch_probe(mode):
    import torch
    free, total = torch.cuda.mem_get_info()
    got, held, err = fill(lambda n: torch.empty(n, dtype=torch.uint8, device="cuda"),
                          mode == "cudaMallocAsync")
    return total, free, got, nvml_own(), err


def jax_probe(mode):
    import jax
    import jax.numpy as jnp
    dev = jax.devices()[0]
    stats = dev.memory_stats() or {}
    total = stats.get("bytes_limit", 0)
    got, held, err = fill(lambda n: jnp.zeros((n,), dtype=jnp.uint8).block_until_ready(), False)
    return total, -1, got, nvml_own(), err


def cupy_probe(mode):
    import cupy
    if mode == "MemoryAsyncPool":  # cudaMallocFromPoolAsync on the device's current pool
        cupy.cuda.set_allocator(cupy.cuda.MemoryAsyncPool().malloc)
    free, total = cupy.cuda.runtime.memGetInfo()
    got, held, err = fill(lambda n: cupy.empty(n, dtype=cupy.uint8), mode == "MemoryAsyncPool")
    return total, free, got, nvml_own(), err


if __name__ == "__main__":
    fw = sys.argv[1]
    mode = sys.argv[2] if len(sys.argv) > 2 else "default"
    total, free, got, nvml, err = {"torch": torch_probe, "jax": jax_probe,
                                   "cupy": cupy_probe}[fw](mode)
    print(f"{fw} {mode} total={total} free={free} got={got} nvml={nvml} error={err[:160]}")
