"""Where the host time of one eager call goes, layer by layer (GPU only).

    python perf/overhead.py [--shape M,N,K] [--dtype fp16] [--profile]

Each row is the host time per call of one layer of the call path, measured by timing N
back-to-back calls on shapes small enough that the GPU never becomes the bottleneck (so
wall time / N is host time). --profile adds a cProfile of the public call.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import triton_gemm
from triton_gemm import configs, dispatch, launch_cache, ops
from triton_gemm.kernels import matmul as plain

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


@triton.jit
def _tiny_kernel(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr) + 1)


def host_us(fn, calls: int = 300) -> float:
    """Host microseconds per call: median of 5 batches of back-to-back calls."""
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    batches = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        batches.append((time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()
    return sorted(batches)[2]


def gpu_us(fn, calls: int = 10, replays: int = 20) -> float:
    """GPU microseconds per call, host cost excluded: calls captured in a CUDA graph and
    replayed (operands stay in L2 between calls when they fit, so this is a lower bound)."""
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / (calls * replays)


def _replay_rows(recipe, operands, device, uncached) -> list:
    """Rows timing one recorded call's replay: straight into triton's C launch function
    (kernels/c_launch.py), through triton's own launcher layers, and with every descriptor
    encoded afresh."""
    through_triton = recipe._replace(direct=())
    return [
        (f"_replay, direct ({len(recipe.direct)} launches)" if recipe.direct else
         "_replay (cannot go direct here)",
         lambda: launch_cache._replay(recipe, operands, device)),
        (f"_replay, triton's launcher ({len(recipe.launches)})",
         lambda: launch_cache._replay(through_triton, operands, device)),
        ("  and descriptors encoded", uncached(
            lambda: launch_cache._replay(through_triton, operands, device))),
    ]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="perf/overhead.py")
    parser.add_argument("--shape", default="256,256,256")
    parser.add_argument("--dtype", default="fp16", choices=tuple(DTYPES))
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--nt", action="store_true", help="B K-major (a transposed weight)")
    parser.add_argument("--precision", default=None, choices=("ieee", "tf32", "tf32x3"),
                        help="for fp32 operands (default: torch's float32 matmul precision)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("perf/overhead.py measures host launch cost on a CUDA GPU; none found")
    m, n, k = (int(x) for x in args.shape.split(","))
    dtype = DTYPES[args.dtype]
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype)
    if args.nt:  # B as the transpose of a row-major (N, K) weight, as linear() reads it
        b = torch.randn(n, k, device="cuda", dtype=dtype).t()
    a3, b3 = a.unsqueeze(0), b.unsqueeze(0)
    out = torch.empty(1, m, n, device="cuda", dtype=dtype)
    prec = triton_gemm.api.resolve_precision(args.precision, dtype)
    if prec == "tf32":  # cuBLAS at the same precision
        torch.backends.cuda.matmul.allow_tf32 = True
    family = configs.family_for(dtype, prec)
    x = torch.randn(m, k, device="cuda", dtype=dtype, requires_grad=True)
    w = torch.randn(n, k, device="cuda", dtype=dtype, requires_grad=True)
    bias = torch.randn(n, device="cuda", dtype=dtype, requires_grad=True)

    def train(linear):
        return lambda: linear(x, w, bias).backward(grad)

    def uncached(fn):
        """fn with every TMA descriptor encoded afresh (common.cached_encoder bypassed)."""
        from triton.backends.nvidia import driver as nvidia_driver

        def call():
            cached = nvidia_driver.make_tensordesc_arg
            nvidia_driver.make_tensordesc_arg = getattr(cached, "uncached", cached)
            try:
                fn()
            finally:
                nvidia_driver.make_tensordesc_arg = cached
        return call
    grad = torch.randn(m, n, device="cuda", dtype=dtype)
    # This signature's recipe (None where the call cannot be replayed). The first call may
    # tune, and a tuning call is not recorded, so the second is.
    launch_cache.run(a3, b3, out, precision=prec)
    launch_cache.clear()
    launch_cache.run(a3, b3, out, precision=prec)
    recipe = next(iter(launch_cache._recipes.values()), None)
    device = torch.cuda.current_device()
    rows = [
        ("torch.matmul (cuBLAS)", lambda: torch.matmul(a, b)),
        ("torch.empty", lambda: torch.empty(1, m, n, device="cuda", dtype=dtype)),
        ("triton_gemm.matmul", lambda: triton_gemm.matmul(a, b, precision=args.precision)),
        ("ops.gemm (custom op)", lambda: ops.gemm(a3, b3, None, 1.0, 0.0, prec, "none")),
        ("ops.gemm_impl (2-D, as matmul)", lambda: ops.gemm_impl(a, b, None, 1.0, 0.0, prec)),
        ("ops.gemm_impl (batch of 1)", lambda: ops.gemm_impl(a3, b3, None, 1.0, 0.0, prec)),
        ("launch_cache.run (replay)" if recipe else "launch_cache.run (planned: no "
         "recipe)", lambda: launch_cache.run(a3, b3, out, precision=prec)),
        *(_replay_rows(recipe, (a3, b3, out, None), device, uncached) if recipe else ()),
        ("torch.nn.functional.linear", lambda: torch.nn.functional.linear(a, w.detach())),
        ("triton_gemm.linear, no grad", lambda: triton_gemm.linear(a, w.detach())),
        ("dispatch.run", lambda: dispatch.run(a3, b3, out, precision=prec)),
        ("plain kernel, pinned config", lambda: plain.matmul_3d(
            a3, b3, out, precision=prec, config=configs.default_config(family))),
        ("one-argument triton kernel", lambda: _tiny_kernel[(1,)](out)),
        ("triton_gemm.linear fwd, grad on", lambda: triton_gemm.linear(x, w, bias)),
        ("F.linear fwd+bwd (torch)", train(torch.nn.functional.linear)),
        ("triton_gemm.linear fwd+bwd", train(triton_gemm.linear)),
    ]
    print(f"{torch.cuda.get_device_name()}  {m}x{n}x{k} {args.dtype}")
    for name, fn in rows:
        print(f"{name:28s} {host_us(fn):8.1f} us/call")
    for name, fn in rows[:1] + rows[2:3]:
        print(f"{name:28s} {gpu_us(fn):8.1f} us/call of GPU time (CUDA graph replay)")
    print("last config:", triton_gemm.last_config(), "launch cache:", launch_cache.stats)
    print("plan:", dispatch.plan(a3, b3, prec, *dispatch._persistent.gpu_sms(a.device)))
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(500):
            triton_gemm.matmul(a, b)
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU]) as torch_prof:
            for _ in range(50):
                train(triton_gemm.linear)()
            torch.cuda.synchronize()
        print(torch_prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20,
                                              max_name_column_width=50))
        prof.disable()
        torch.cuda.synchronize()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
