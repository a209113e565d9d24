"""A GPT-2-small-sized decoder (random weights, torch.nn only) trained one step with every
Linear on torch and on triton_gemm: logits and gradients against a float64 copy, and the
training-step time ratio in the same run.

    python perf/transformer.py             # GPU: 12 layers, d_model 768, batch 8 x 1024
    python perf/transformer.py --tiny      # a few layers and tokens (the default on CPU)
    python perf/transformer.py --modes bf16 --profile   # + GPU kernel time table per impl
    python perf/transformer.py --gemms     # each GEMM of a bf16 step: triton_gemm vs torch

Modes: bf16 autocast, fp32 with tf32x3, fp32 with ieee. A mode passes when triton_gemm's
error against float64 is no worse than twice torch's at the same setting, or within the
precision's tolerance.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd import DeviceType

ON_GPU = torch.cuda.is_available()
if not ON_GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton_gemm defines its kernels

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import triton_gemm  # noqa: E402
from triton_gemm.tolerances import tolerance  # noqa: E402


class Block(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                           v.transpose(1, 2), is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab: int, ctx: int, d: int, layers: int, heads: int):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def step(model, idx, targets, autocast_dtype):
    """One forward and backward; returns (logits, loss) and leaves .grad on parameters."""
    model.zero_grad(set_to_none=True)
    with torch.autocast(idx.device.type, dtype=autocast_dtype or torch.bfloat16,
                        enabled=autocast_dtype is not None):
        logits = model(idx)
        loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())
    loss.backward()
    return logits.detach(), loss.detach()


def rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def grad_error(model, ref):
    return max(rel(p.grad, r.grad) for p, r in zip(model.parameters(), ref.parameters()))


def timed(fn, reps: int) -> float:
    """Median seconds of fn() (synchronised)."""
    if ON_GPU:
        import triton.testing
        return triton.testing.do_bench(fn, warmup=100, rep=1000, return_mode="median") / 1e3
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return sorted(samples)[len(samples) // 2]


def profile(model, idx, targets, autocast_dtype, rows: int = 25) -> None:
    """GPU kernel time of one training step, per kernel (torch.profiler), beside the step's
    wall time: where the two differ, the host is the limit."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile
    step(model, idx, targets, autocast_dtype)
    torch.cuda.synchronize()
    with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step(model, idx, targets, autocast_dtype)
        torch.cuda.synchronize()
    averages = prof.key_averages()
    print(averages.table(sort_by="device_time_total", row_limit=rows,
                         max_name_column_width=60))
    kernels = sum(e.device_time_total for e in averages if e.device_type == DeviceType.CUDA)
    print(f"GPU kernel time per step: {kernels / 1e3:.2f} ms")


def gemm_shapes(cfg: dict) -> list:
    """(name, M, N, K, A, B) of every GEMM in a training step: per Linear the forward
    x @ W^T, the input gradient dY @ W and the weight gradient dY^T @ x, with the layouts
    autograd hands over. A/B: "row" (K contiguous for A, N for B), "t" (transposed view)."""
    t, d = cfg["batch"] * cfg["ctx"], cfg["d"]
    rows = []
    for name, n_out, k_in in (("qkv", 3 * d, d), ("proj", d, d), ("fc", 4 * d, d),
                              ("out", d, 4 * d), ("head", cfg["vocab"], d)):
        rows += [(f"{name} fwd", t, n_out, k_in, "row", "t"),
                 (f"{name} dX", t, k_in, n_out, "row", "row"),
                 (f"{name} dW", n_out, k_in, t, "t", "row")]
    return rows


def gemm_table(cfg: dict, dtype=torch.bfloat16) -> None:
    """GPU time (CUDA-graph replay) and eager time of every GEMM of a step, triton_gemm
    against torch in the same run, with the path dispatch chose."""
    import triton.testing
    from triton_gemm import dispatch
    from triton_gemm.kernels.persistent import gpu_sms

    def operand(rows, cols, layout):
        x = torch.randn(rows if layout == "row" else cols, cols if layout == "row" else rows,
                        device="cuda", dtype=dtype)
        return x if layout == "row" else x.t()

    print(f"{'gemm':10s} {'M':>6s} {'N':>6s} {'K':>6s} {'torch us':>9s} {'ours us':>9s} "
          f"{'gpu ratio':>9s} {'eager ratio':>11s}  plan / config")
    total = {"torch": 0.0, "ours": 0.0}
    for name, m, n, k, la, lb in gemm_shapes(cfg):
        a, b = operand(m, k, la), operand(k, n, lb)
        fns = {"torch": lambda: torch.matmul(a, b), "ours": lambda: triton_gemm.matmul(a, b)}
        fns["ours"]()
        config = triton_gemm.last_config()
        gpu = {key: triton.testing.do_bench_cudagraph(fn, rep=50, return_mode="median")
               for key, fn in fns.items()}
        eager = {key: triton.testing.do_bench(fn, rep=50, return_mode="median")
                 for key, fn in fns.items()}
        for key in total:
            total[key] += gpu[key]
        p = dispatch.plan(a.unsqueeze(0), b.unsqueeze(0), "half", *gpu_sms(a.device))
        path = ("splitk" if p.split_k else "persistent" if p.persistent else "plain") + (
            "+pad" if p.pad else "")
        print(f"{name:10s} {m:6d} {n:6d} {k:6d} {gpu['torch'] * 1e3:9.1f} "
              f"{gpu['ours'] * 1e3:9.1f} {gpu['torch'] / gpu['ours']:9.2f} "
              f"{eager['torch'] / eager['ours']:11.2f}  {path} {config}")
    print(f"sum of GEMM GPU time per layer type: torch {total['torch']:.3f} ms, "
          f"triton_gemm {total['ours']:.3f} ms")


MODES = ("bf16", "tf32x3", "ieee")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", default=not ON_GPU,
                        help="2 layers, d_model 64, 32 tokens (default without a GPU)")
    parser.add_argument("--modes", default=",".join(MODES),
                        help=f"comma-separated subset of {MODES}")
    parser.add_argument("--profile", action="store_true",
                        help="GPU: print each impl's kernel times for one step")
    parser.add_argument("--gemms", action="store_true",
                        help="GPU: time each GEMM of a bf16 step (triton_gemm vs torch) and "
                             "exit")
    args = parser.parse_args(argv)
    device = "cuda" if ON_GPU else "cpu"
    cfg = (dict(vocab=256, ctx=32, d=64, layers=2, heads=4, batch=2) if args.tiny else
           dict(vocab=50257, ctx=1024, d=768, layers=12, heads=12, batch=8))
    if args.gemms:
        if not ON_GPU:
            parser.error("--gemms times GEMMs on a GPU; none found")
        gemm_table(cfg)
        return 0
    torch.manual_seed(0)
    base = GPT(cfg["vocab"], cfg["ctx"], cfg["d"], cfg["layers"], cfg["heads"]).to(device)
    idx = torch.randint(cfg["vocab"], (cfg["batch"], cfg["ctx"]), device=device)
    targets = torch.randint(cfg["vocab"], (cfg["batch"], cfg["ctx"]), device=device)
    reference = copy.deepcopy(base).double()
    ref_logits, _ = step(reference, idx, targets, None)

    print(f"{torch.cuda.get_device_name() if ON_GPU else 'CPU (Triton interpreter)'}; "
          f"config {cfg}")
    print(f"{'mode':10s} {'impl':12s} {'logits err':>11s} {'grad err':>9s} {'step ms':>9s}")
    modes = args.modes.split(",")
    unknown = set(modes) - set(MODES)
    if unknown:
        parser.error(f"--modes: unknown {sorted(unknown)}; choose from {MODES}")
    failures = 0
    for mode, autocast_dtype, precision in (("bf16", torch.bfloat16, None),
                                            ("tf32x3", None, "tf32x3"),
                                            ("ieee", None, "ieee")):
        if mode not in modes:
            continue
        torch_model = copy.deepcopy(base)
        ours = triton_gemm.patch(copy.deepcopy(base), precision=precision)
        torch.backends.cuda.matmul.allow_tf32 = False  # torch's fp32 baseline: plain SGEMM
        results = {}
        for name, model in (("torch", torch_model), ("triton_gemm", ours)):
            logits, _ = step(model, idx, targets, autocast_dtype)
            secs = timed(lambda: step(model, idx, targets, autocast_dtype), reps=3)
            results[name] = (rel(logits, ref_logits), grad_error(model, reference), secs)
            print(f"{mode:10s} {name:12s} {results[name][0]:11.2e} {results[name][1]:9.2e} "
                  f"{secs * 1e3:9.2f}")
            if args.profile and ON_GPU:
                profile(model, idx, targets, autocast_dtype)
        dtype = torch.bfloat16 if autocast_dtype else torch.float32
        bound = [max(2 * t, tolerance(dtype, precision)) for t in results["torch"][:2]]
        ok = all(o <= b for o, b in zip(results["triton_gemm"][:2], bound))
        failures += not ok
        speed = results["torch"][2] / results["triton_gemm"][2]
        print(f"{mode:10s} {'':12s} {'PASS' if ok else 'FAIL'}; training step "
              f"{speed:.2f}x torch{'' if ON_GPU else ' (interpreter: not a GPU figure)'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
