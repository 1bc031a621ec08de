"""What a framework sees and gets under vram run.

    python probe.py FRAMEWORK [MODE]

Prints one line: FRAMEWORK MODE total=<bytes the framework reports as the
device size> got=<bytes it could allocate, in 64 MiB steps, before
out-of-memory> error=<the exception's first line>. Run by tests/gpu/run.sh.
"""
import sys

STEP = 64 << 20


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
    return total, got, err


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
    return total, got, err


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
    return total, got, err


if __name__ == "__main__":
    fw = sys.argv[1]
    mode = sys.argv[2] if len(sys.argv) > 2 else "default"
    total, got, err = {"torch": torch_probe, "jax": jax_probe, "cupy": cupy_probe}[fw](mode)
    print(f"{fw} {mode} total={total} got={got} error={err[:160]}")
