"""How much of a tf32 product's time is its last, partial wave of tiles: the library and
cuBLAS on shapes whose tile count fills whole waves of the GPU's SMs and on the nearest
square shapes that leave a partial one, timed in interleaved rounds after an L2 flush
(bench.gpu_median_ms, the report's eager measure).

    python perf/wave_probe.py [--cases M,N,K,LAYOUT ...] [--rounds 3] [--sustain SECONDS]
                              [--dtype float16] [--cublas-kernels]
    ncu --profile-from-start off ... python perf/wave_probe.py --profile --cases ...

LAYOUT is nn (row-major A and B), nt (B K-major), tn (A M-major) or tt (both). With
128 x 256 tiles on 132 SMs, 4096^3 makes 512 tiles (3.88 waves) and 4096 x 4224 x 4096
makes 528 (4.00); 8192^3 2048 (15.5) and 8192 x 8448 x 8192 2112 (16.0). If the partial
wave costs a whole one, the whole-wave shapes run ~3% more TFLOPS than the square ones on
the library, not on cuBLAS (measured: they do not; docs/design.md, "tf32 at the power limit").
--sustain also runs each implementation back to back for SECONDS (no flush) while sampling
the SM clock and board power (torch.cuda.clock_rate / power_draw, through NVML): at the
H100's 700 W limit a kernel that spends more energy per product runs at a lower clock.
--dtype float16 / bfloat16 runs the same for 16-bit operands (float32: tf32), and
--cublas-kernels prints the kernels cuBLAS launches for each case (torch.profiler): H200,
fp16, sustained, ours against cuBLAS (thirty-eighth session), 2048x4096x4096 nt 640.6 vs
624.4 TFLOPS at 1485 / 1410 MHz, 4096^3 nn 634.7 vs 634.5, 8192^3 nn 649.9 vs 634.7, all
at 684-693 W; cuBLAS ran nvjet_sm90_hsh_256x128_64x4_1x2 there (192x192_64x4_2x1 at
2048x11008x4096 nt, 320x128_64x3_1x2 at 8192^3).
--profile runs each case's library call and cuBLAS call once, after warm-up, between
cudaProfilerStart and Stop, for Nsight Compute, and times nothing. GPU only.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import triton_gemm  # noqa: E402
from perf import bench  # noqa: E402

DEFAULT_CASES = ("4096,4096,4096,nn", "4096,4224,4096,nn", "8192,8192,8192,nn",
                 "8192,8448,8192,nn", "8192,8192,8192,nt", "8192,8448,8192,nt")


def _operands(text: str, dtype: torch.dtype = torch.float32, device: str = "cuda"):
    """(a, b) random of dtype for "M,N,K,LAYOUT": nn row-major, nt B K-major, tn A M-major,
    tt both."""
    m, n, k, layout = text.split(",")
    if layout not in ("nn", "nt", "tn", "tt"):
        raise ValueError(f"layout {layout!r}: use nn, nt, tn or tt")
    m, n, k = int(m), int(n), int(k)
    a = torch.randn(m, k, device=device).to(dtype)
    b = torch.randn(k, n, device=device).to(dtype)
    if layout in ("nt", "tt"):
        b = b.t().contiguous().t()
    if layout in ("tn", "tt"):
        a = a.t().contiguous().t()
    return a, b


def _cublas(a, b):
    torch.backends.cuda.matmul.allow_tf32 = True  # read for fp32 operands only
    try:
        return torch.matmul(a, b)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False


# dtype name -> the library's precision for it.
_PRECISION = {"float32": "tf32", "float16": None, "bfloat16": None}


def _kernel_names(fn) -> list:
    """Names of the GPU kernels one call of fn launches (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type.name == "CUDA"]


def _sustained(fn, seconds: float) -> tuple:
    """(ms per call, mean SM MHz, mean W) of fn run back to back for seconds,
    sampled every ~20 ms while the queued calls run."""
    import time
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    calls = max(3, int(seconds / max(time.perf_counter() - start, 1e-4)))
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(calls):
        fn()
    end.record()
    clocks, watts = [], []
    while not end.query():
        clocks.append(torch.cuda.clock_rate())
        watts.append(torch.cuda.power_draw() / 1000)
        time.sleep(0.02)
    end.synchronize()
    skip = len(clocks) // 5  # the first fifth: clocks still settling
    return (begin.elapsed_time(end) / calls, statistics.mean(clocks[skip:] or clocks or [0]),
            statistics.mean(watts[skip:] or watts or [0]))


def _kernels(a, b, ref) -> dict:
    """name -> call of kernels/register_fed.py alone on a, b (1 and 2 CTAs a cluster; fp32
    in tf32, 16-bit nt with both operands in shared memory), each first checked against
    float64 on a NaN-poisoned output; {} where it does not apply."""
    from triton_gemm.kernels import register_fed
    from triton_gemm.tolerances import rel_error, tolerance
    out = torch.empty(a.shape[0], b.shape[1], device="cuda", dtype=a.dtype)
    if not register_fed.supports(a, b, out):
        return {}
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count
    fns = {}
    for name, ctas in (("rf", 1), ("rf_cluster2", 2)):
        out.fill_(float("nan"))
        register_fed.matmul_2d(a, b, out, sms, ctas=ctas)
        torch.cuda.synchronize()
        error = rel_error(out, ref)
        ok = error <= tolerance(a.dtype, "tf32")
        print(f"  {name}: error {error:.1e} {'ok' if ok else 'FAILED'}", flush=True)
        if ok:
            fns[name] = functools.partial(register_fed.matmul_2d, a, b, out, sms, ctas=ctas)
    return fns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="*", default=DEFAULT_CASES)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sustain", type=float, default=0.0)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--kernels", action="store_true",
                        help="also time kernels/register_fed.py alone, without and with "
                             "clusters of 2 CTAs (nn, tt and nt cases; 16-bit: nt)")
    parser.add_argument("--dtype", choices=tuple(_PRECISION), default="float32",
                        help="operands' dtype (float32 runs tf32)")
    parser.add_argument("--cublas-kernels", action="store_true",
                        help="print the kernels cuBLAS launches for each case (torch.profiler)")
    parser.add_argument("--group-m", type=int, default=0,
                        help="kernels/register_fed.py's GROUP_M for this process's calls")
    args = parser.parse_args()
    torch.manual_seed(0)
    if args.group_m:
        from triton_gemm.kernels import register_fed
        register_fed.GROUP_M = args.group_m
    precision = _PRECISION[args.dtype]
    for text in args.cases:
        a, b = _operands(text, getattr(torch, args.dtype))
        ref = a.double() @ b.double()
        ours = triton_gemm.matmul(a, b, precision=precision)
        error = float((ours.double() - ref).norm() / ref.norm())
        config = triton_gemm.last_config()
        fns = {"library": lambda: triton_gemm.matmul(a, b, precision=precision),
               "cublas": lambda: _cublas(a, b)}
        if args.cublas_kernels:
            print(f"{text}: cuBLAS runs {', '.join(_kernel_names(fns['cublas']))}", flush=True)
        if args.kernels:
            fns.update(_kernels(a, b, ref))
        if args.profile:
            for fn in (*fns.values(), *fns.values()):
                fn()
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
            for fn in fns.values():
                fn()
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
            print(f"{text}: profiled library ({config}) then cuBLAS; error {error:.1e}")
            continue
        times = {name: [] for name in fns}
        for _ in range(args.rounds):
            for name, fn in fns.items():
                times[name].append(bench.gpu_median_ms(fn, rep_ms=60))
        flops = 2.0 * a.shape[0] * a.shape[1] * b.shape[1]
        base = statistics.median(times["cublas"])
        for name, ts in times.items():
            ms = statistics.median(ts)
            print(f"{text:20s} {name:8s} {ms * 1e3:8.1f} us {flops / ms / 1e9:6.1f} TFLOPS "
                  f"{base / ms:5.3f}x  rounds {' '.join(f'{t * 1e3:.1f}' for t in ts)}"
                  + (f"  error {error:.1e} {config}" if name == "library" else ""),
                  flush=True)
        for name, fn in fns.items() if args.sustain > 0 else ():
            ms, mhz, watts = _sustained(fn, args.sustain)
            print(f"{text:20s} {name:8s} sustained {ms * 1e3:8.1f} us "
                  f"{flops / ms / 1e9:6.1f} TFLOPS at {mhz:6.0f} MHz {watts:5.0f} W "
                  f"{flops / ms / 1e9 / max(watts, 1):5.3f} TFLOPS/W", flush=True)
        del a, b, ref, ours


if __name__ == "__main__":
    main()
