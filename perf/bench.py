"""Measurement: operands, implementations, timing, TFLOPS, error."""

from __future__ import annotations

import contextlib
import functools
import statistics
import time
from typing import Callable, NamedTuple

import torch

from perf.suites import Case

# precision -> operand dtype
DTYPES = {"ieee": torch.float32, "tf32": torch.float32, "tf32x3": torch.float32,
          "fp16": torch.float16, "bf16": torch.bfloat16}
PRECISIONS = tuple(DTYPES)
# The cuBLAS setting each precision is compared with: 3xTF32 replaces SGEMM.
BASELINE = {"ieee": "ieee", "tf32": "tf32", "tf32x3": "ieee", "fp16": "fp16", "bf16": "bf16"}

# Dense peak TFLOPS per unit (datasheets; H200 shares the H100 SXM's compute).
_SXM = {"fp32": 66.9, "tf32": 494.7, "fp16": 989.4}
PEAKS = {"H100 80GB HBM3": _SXM, "H200": _SXM, "H100 PCIe": {"fp32": 51.2, "tf32": 378.0,
                                                             "fp16": 756.0}}
# tf32x3 runs three tf32 products per output, so its ceiling is a third of tf32's.
_PEAK_UNIT = {"ieee": ("fp32", 1), "tf32": ("tf32", 1), "tf32x3": ("tf32", 3),
              "fp16": ("fp16", 1), "bf16": ("fp16", 1)}


def peak_tflops(gpu: str, precision: str) -> float:
    for name, peaks in PEAKS.items():
        if name in gpu:
            unit, div = _PEAK_UNIT[precision]
            return peaks[unit] / div
    return float("nan")


def tflops(m: int, n: int, k: int, ms: float) -> float:
    return 2.0 * m * n * k / (ms * 1e-3) / 1e12


class Impl(NamedTuple):
    name: str         # "triton", "cublas", or a cuda_ref step
    precision: str    # arithmetic precision (see PRECISIONS)
    fn: Callable      # (a, b) -> a @ b
    layouts: tuple    # operand layouts it accepts
    operands: str     # precision whose operand set it reads (wmma reads fp32 operands)


@contextlib.contextmanager
def cublas_precision(precision: str):
    """torch.matmul's setting for a precision: TF32 on only for 'tf32'."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def make_operands(case: Case, dtype: torch.dtype, device: str, l2_bytes: int = 0,
                  gen: Callable = torch.randn):
    """Fresh operand pairs in the case's layout, drawn by gen (N(0,1): torch.randn; U(0,1):
    torch.rand); several pairs when one fits in L2, so timing rotates through them and
    measures memory, not cache."""
    per_set = case.batch * (case.m * case.k + case.k * case.n) * torch.finfo(dtype).bits // 8
    sets = 1 if per_set == 0 else max(1, min(8, -(-2 * l2_bytes // per_set)))

    def one():
        def rnd(*shape):
            return gen(*shape, device=device).to(dtype)
        if case.batch > 1:
            if case.layout not in ("nn", "nt"):
                raise ValueError(f"{case.label}: batched cases take layout nn or nt")
            a = rnd(case.batch, case.m, case.k)
            b = (rnd(case.batch, case.n, case.k).transpose(1, 2) if case.layout == "nt"
                 else rnd(case.batch, case.k, case.n))
            return a, b
        if case.layout in ("nt", "tn", "tt"):
            a = rnd(case.k, case.m).t() if case.layout[0] == "t" else rnd(case.m, case.k)
            b = rnd(case.n, case.k).t() if case.layout[1] == "t" else rnd(case.k, case.n)
            return a, b
        if case.layout == "pad":
            return rnd(case.m, case.k + 3)[:, :case.k], rnd(case.k, case.n + 5)[:, :case.n]
        return rnd(case.m, case.k), rnd(case.k, case.n)
    return [one() for _ in range(sets)]


def rel_error(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> float:
    ref = a.double() @ b.double()
    return ((out.double() - ref).norm() / ref.norm()).item()


def time_ms(fn: Callable, operand_sets, on_gpu: bool, rep_ms: float = 100) -> float:
    """Median milliseconds of fn(a, b) with L2 flushed before each call (gpu_median_ms),
    rotating through the operand sets; rep_ms: the milliseconds spent timing (after 25 of
    warm-up)."""
    state = {"i": 0}

    def call():
        a, b = operand_sets[state["i"] % len(operand_sets)]
        state["i"] += 1
        return fn(a, b)

    if on_gpu:
        call()  # compile / tune / build outside the timed region
        torch.cuda.synchronize()
        return gpu_median_ms(call, rep_ms)
    samples = []
    for _ in range(3):
        start = time.perf_counter()
        call()
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


# The L2 flush before each timed call reads FLUSH_BYTES (five times the H100's 50 MB L2),
# leaving L2 full of clean lines. triton.testing.do_bench flushes by writing zeros instead,
# which leaves L2 full of dirty lines that the timed kernel must write back to HBM as its
# reads evict them: a cost of the harness, not of the product. H100, fp16, us, zero-writing
# flush against reading flush (cuBLAS / triton_gemm): 16x8192x8192 nt 60.1 / 59.5 against
# 50.4 / 50.2 (memory floor 44.9: 128 MB of B, plus ~50 MB written back = 59 us at 3.0
# TB/s); 128x128x65536 26.5 / 25.8 against 19.6 / 21.5; 4096^3 178.9 / 194.9 against
# 184.2 / 192.9 (compute-bound: unchanged within noise).
FLUSH_BYTES = 256 << 20
L2_FLUSH = "read"  # the report's name for this flush (its l2_flush column)


@functools.lru_cache(maxsize=None)
def _flush_buffers(device: int):
    return (torch.ones(FLUSH_BYTES // 4, device=f"cuda:{device}"),
            torch.empty((), device=f"cuda:{device}"))


def gpu_median_ms(fn: Callable, rep_ms: float = 100, warmup_ms: float = 25) -> float:
    """Median milliseconds of fn() on the current stream, between CUDA events recorded
    around each call, each call after an L2 flush (FLUSH_BYTES read): cold-L2 GPU time,
    and host time too where the host takes longer than the flush to launch fn's kernels.
    As many calls as fit in rep_ms (at least 5)."""
    source, sink = _flush_buffers(torch.cuda.current_device())

    def timed(calls: int) -> list:
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(calls)]
        for start, end in events:
            torch.sum(source, dim=0, out=sink)
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        return [start.elapsed_time(end) for start, end in events]

    # One call's cost with its flush, from 5 calls (as do_bench sizes its loops).
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    timed(5)
    end.record()
    torch.cuda.synchronize()
    per_call = max(start.elapsed_time(end) / 5, 1e-3)
    timed(max(1, int(warmup_ms / per_call)))
    return statistics.median(timed(max(5, int(rep_ms / per_call))))


def min_bytes(case: Case, elem_bytes: int) -> int:
    """Bytes a product (each of a batch) must move at least: each operand read once, the
    output written once."""
    return case.batch * (case.m * case.k + case.k * case.n + case.m * case.n) * elem_bytes


def copy_bandwidth(nbytes: int = 1 << 30) -> float:
    """Bytes per second (read plus written) of a device-to-device copy of nbytes, far past
    L2: the denominator of a product's memory floor, min_bytes / copy_bandwidth."""
    import triton.testing
    src = torch.ones(nbytes // 4, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), warmup=25, rep=100,
                                 return_mode="median")
    return 2 * nbytes / (ms * 1e-3)


# Implementations whose launches can be captured in a CUDA graph (the CUDA ladder's
# binding launches outside torch's stream machinery and is timed eagerly only).
GRAPH_IMPLS = ("triton", "cublas")
# Implementations that take batched (3-D) operands.
BATCH_IMPLS = ("triton", "cublas")


def graph_ms(fn: Callable, operand_sets) -> float:
    """Median milliseconds of fn(a, b) replayed from a CUDA graph: GPU time without the
    host's launch cost (and without an L2 flush, so operands that fit in L2 stay there)."""
    a, b = operand_sets[0]
    return warm_graph_ms(lambda: fn(a, b))


def warm_graph_ms(fn: Callable) -> float:
    """Median milliseconds of fn() replayed from a CUDA graph, operands left in L2."""
    import triton.testing
    return triton.testing.do_bench_cudagraph(fn, rep=100, return_mode="median")


def cold_graph_ms(fn: Callable) -> float:
    """Median milliseconds of fn() captured in a CUDA graph and replayed after an L2 flush
    (gpu_median_ms): cold-L2 GPU time without the host's cost, where the eager median of a
    call whose host work outlasts the flush (a path dispatch.run plans afresh each call,
    perf/plans.py) times the host instead."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()  # allocations and compilation outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return gpu_median_ms(graph.replay)
