"""A real training workload for tests/gpu/run.sh: torchvision's ResNet-50,
bf16 autocast, batch 64, random data, SGD.

    python train.py STEPS

Prints its pid first (`pid=N`, so that the script's nvidia-smi sampler can
find its figures), then one line: `train steps=N ms_per_step=X
torch_peak=BYTES error=...` — error is empty when every step ran, else the
first line of the exception (out-of-memory under a budget it does not fit).
"""
import os
import sys
import time

print(f"pid={os.getpid()}", flush=True)
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
err, ms, done = "", 0.0, 0
try:
    import torch
    import torchvision

    torch.backends.cudnn.benchmark = True
    model = torchvision.models.resnet50().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(64, 3, 224, 224, device="cuda")
    y = torch.randint(0, 1000, (64,), device="cuda")
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(3):  # warm-up: cuDNN's choices, lazily loaded kernels
        step()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for done in range(1, steps + 1):
        step()
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t) * 1000 / steps
except Exception as e:  # torch.cuda.OutOfMemoryError, or a CUDA error under a budget
    err = str(e).splitlines()[0] if str(e) else type(e).__name__
peak = 0
try:
    peak = torch.cuda.max_memory_reserved()
except Exception:
    pass
print(f"train steps={done} ms_per_step={ms:.2f} torch_peak={peak} error={err[:160]}", flush=True)
