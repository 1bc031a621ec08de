"""Inside `vram run`, what a monitor reads from NVML: this process takes a
CUDA context and HOLD bytes, then prints NVML's memory figures (_v1 and
_v2) and its compute process list (_v1 and _v3), one line each:
  mem total used free / mem2 total reserved used free / proc PID BYTES ...
    nvml_view.py HOLD"""
import ctypes
import os
import sys

cuda = ctypes.CDLL("libcuda.so.1")
nvml = ctypes.CDLL("libnvidia-ml.so.1")
ull = ctypes.c_ulonglong


class Memory(ctypes.Structure):
    _fields_ = [("total", ull), ("free", ull), ("used", ull)]


class Memory2(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("total", ull), ("reserved", ull), ("free", ull), ("used", ull)]


class Proc1(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("used", ull)]


class Proc3(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("used", ull), ("gi", ctypes.c_uint), ("ci", ctypes.c_uint)]


def ok(rc, what):
    if rc != 0:
        sys.exit(f"{what}: error {rc}")


ok(cuda.cuInit(0), "cuInit")
ctx = ctypes.c_void_p()
ok(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0), "cuDevicePrimaryCtxRetain")
ok(cuda.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
hold = int(sys.argv[1])
if hold:
    p = ctypes.c_ulonglong()
    ok(cuda.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(hold)), "cuMemAlloc_v2")
free, total = ctypes.c_size_t(), ctypes.c_size_t()
ok(cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)), "cuMemGetInfo_v2")
print("cuda", total.value, free.value)

ok(nvml.nvmlInit_v2(), "nvmlInit_v2")
dev = ctypes.c_void_p()
ok(nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(dev)), "nvmlDeviceGetHandleByIndex_v2")
m = Memory()
ok(nvml.nvmlDeviceGetMemoryInfo(dev, ctypes.byref(m)), "nvmlDeviceGetMemoryInfo")
print("mem", m.total, m.used, m.free)
m2 = Memory2(version=ctypes.sizeof(Memory2) | 2 << 24)
ok(nvml.nvmlDeviceGetMemoryInfo_v2(dev, ctypes.byref(m2)), "nvmlDeviceGetMemoryInfo_v2")
print("mem2", m2.total, m2.reserved, m2.used, m2.free)
for name, kind in (("nvmlDeviceGetComputeRunningProcesses", Proc1),
                   ("nvmlDeviceGetComputeRunningProcesses_v3", Proc3)):
    n = ctypes.c_uint(0)
    getattr(nvml, name)(dev, ctypes.byref(n), None)  # how many
    infos = (kind * max(n.value, 1))()
    ok(getattr(nvml, name)(dev, ctypes.byref(n), infos), name)
    print("proc" if kind is Proc1 else "proc3",
          " ".join(f"{'self' if i.pid == os.getpid() else 'other'}:{i.used}" for i in infos[:n.value]))
nvml.nvmlShutdown()
