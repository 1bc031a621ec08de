"""Numba (Debian's python3-numba) on the simulated GPU, driven as its users
drive it: detect the device, ask its memory, copy data in and out, pinned and
mapped host arrays, stream copies, then allocate until out of memory.

    numba_client.py EXPECTED_TOTAL EXPECTED_FREE_AT_START

prints one line per check and exits non-zero on the first that fails."""
import io
import sys
from contextlib import redirect_stdout

# Numba 0.56 binds each driver function to its `_v2` symbol when there is one.
# CUDA 13 added cuCtxGetDevice_v2 and cuCtxSynchronize_v2 with an extra
# argument (a context), so on a CUDA 13 driver, real or simulated, Numba 0.56
# passes them garbage (NVIDIA/numba-cuda#173). Pin the two to the versions
# Numba's own prototypes describe, as later Numba versions do.
from numba.cuda.cudadrv import driver as _driver

_find_api = _driver.Driver._find_api


def _pinned_find_api(self, fname):
    if fname in ("cuCtxGetDevice", "cuCtxSynchronize"):
        return getattr(self.lib, fname)
    return _find_api(self, fname)


_driver.Driver._find_api = _pinned_find_api

import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402
from numba.cuda.cudadrv.driver import CudaAPIError  # noqa: E402

MiB = 1 << 20
total_want, free_want = int(sys.argv[1]), int(sys.argv[2])


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + (": " + detail if detail else ""))
    if not ok:
        sys.exit(1)


out = io.StringIO()
with redirect_stdout(out):
    supported = cuda.detect()
text = out.getvalue()
check("detect lists the device", supported and "NVIDIA H100 80GB HBM3" in text
      and "[SUPPORTED]" in text and "Compute Capability: 9.0" in text, text.replace("\n", " | "))

ctx = cuda.current_context()
free, total = ctx.get_memory_info()
check("memory info", (total, free) == (total_want, free_want), f"free {free} total {total}")

rng = np.random.default_rng(7)
a = rng.random(1 << 16).astype(np.float32)
d = cuda.to_device(a)
check("to_device / copy_to_host round trip", np.array_equal(d.copy_to_host(), a))

pinned = cuda.pinned_array(a.shape, dtype=a.dtype)
pinned[:] = a
mapped = cuda.mapped_array(a.shape, dtype=a.dtype)
mapped[:] = a[::-1]
stream = cuda.stream()
d2 = cuda.to_device(pinned, stream=stream)
back = cuda.pinned_array(a.shape, dtype=a.dtype)
d2.copy_to_host(back, stream=stream)
stream.synchronize()
check("pinned array through a stream", np.array_equal(back, a))
# A mapped array's device side is its host memory: read it as device memory.
seen = np.empty_like(a)
cuda.driver.device_to_host(seen, mapped, mapped.nbytes)
check("mapped array", np.array_equal(seen, a[::-1]))
del d, d2
ctx.deallocations.clear()

# Until out of memory: large arrays, then 1 MiB ones for what is left.
held, nbytes = [], 0
for chunk in (256 * MiB, MiB):
    while True:
        try:
            held.append(cuda.device_array(chunk, dtype=np.uint8))
            nbytes += chunk
        except CudaAPIError as e:
            error = e
            break
free_end, _ = ctx.get_memory_info()
check("out of memory is CUDA_ERROR_OUT_OF_MEMORY", error.code == 2
      and "CUDA_ERROR_OUT_OF_MEMORY" in str(error), str(error))
check("allocated all that was free and not a byte more", nbytes == free_want and free_end == 0,
      f"allocated {nbytes}, free at the end {free_end}")
