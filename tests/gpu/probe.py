"""What a framework sees and gets under vram run.

    python probe.py FRAMEWORK [MODE]

Prints one line: FRAMEWORK MODE total=<bytes the framework reports as the
device size> got=<bytes it could allocate, in 64 MiB steps, before
out-of-memory> nvml=<bytes nvidia-smi lists for this process then, while
it holds them all; -1 if it does not list it> error=<the exception's first
line>. Run by tests/gpu/run.sh.
"""
import os
import subprocess
import sys

STEP = 64 << 20


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
    held, got, err = [], 0, ""
    try:
        while True:
            held.append(torch.empty(STEP, dtype=torch.uint8, device="cuda"))
            got += STEP
    except Exception as e:  # torch.cuda.OutOfMemoryError
        err = str(e).splitlines()[0]
    return total, got, nvml_own(), err


def jax_probe(mode):
    import jax
    import jax.numpy as jnp
    dev = jax.devices()[0]
    stats = dev.memory_stats() or {}
    total = stats.get("bytes_limit", 0)
    held, got, err = [], 0, ""
    try:
        while True:
            held.append(jnp.zeros((STEP,), dtype=jnp.uint8).block_until_ready())
            got += STEP
    except Exception as e:
        err = str(e).splitlines()[0]
    return total, got, nvml_own(), err


def cupy_probe(mode):
    import cupy
    free, total = cupy.cuda.runtime.memGetInfo()
    held, got, err = [], 0, ""
    try:
        while True:
            held.append(cupy.empty(STEP, dtype=cupy.uint8))
            got += STEP
    except Exception as e:  # cupy.cuda.memory.OutOfMemoryError
        err = str(e).splitlines()[0]
    return total, got, nvml_own(), err


if __name__ == "__main__":
    fw = sys.argv[1]
    mode = sys.argv[2] if len(sys.argv) > 2 else "default"
    total, got, nvml, err = {"torch": torch_probe, "jax": jax_probe, "cupy": cupy_probe}[fw](mode)
    print(f"{fw} {mode} total={total} got={got} nvml={nvml} error={err[:160]}")
