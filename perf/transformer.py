"""A GPT-2-small-sized decoder (random weights, torch.nn only) trained one step with every
Linear on torch and on triton_gemm: logits and gradients against a float64 copy, and the
training-step time ratio in the same run.

    python perf/transformer.py             # GPU: 12 layers, d_model 768, batch 8 x 1024
    python perf/transformer.py --tiny      # a few layers and tokens (the default on CPU)

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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", default=not ON_GPU,
                        help="2 layers, d_model 64, 32 tokens (default without a GPU)")
    args = parser.parse_args(argv)
    device = "cuda" if ON_GPU else "cpu"
    cfg = (dict(vocab=256, ctx=32, d=64, layers=2, heads=4, batch=2) if args.tiny else
           dict(vocab=50257, ctx=1024, d=768, layers=12, heads=12, batch=8))
    torch.manual_seed(0)
    base = GPT(cfg["vocab"], cfg["ctx"], cfg["d"], cfg["layers"], cfg["heads"]).to(device)
    idx = torch.randint(cfg["vocab"], (cfg["batch"], cfg["ctx"]), device=device)
    targets = torch.randint(cfg["vocab"], (cfg["batch"], cfg["ctx"]), device=device)
    reference = copy.deepcopy(base).double()
    ref_logits, _ = step(reference, idx, targets, None)

    print(f"{torch.cuda.get_device_name() if ON_GPU else 'CPU (Triton interpreter)'}; "
          f"config {cfg}")
    print(f"{'mode':10s} {'impl':12s} {'logits err':>11s} {'grad err':>9s} {'step ms':>9s}")
    failures = 0
    for mode, autocast_dtype, precision in (("bf16", torch.bfloat16, None),
                                            ("tf32x3", None, "tf32x3"),
                                            ("ieee", None, "ieee")):
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
