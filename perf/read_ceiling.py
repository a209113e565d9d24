"""How fast the GPU can read a product's operands at all, beside cuBLAS and triton_gemm on
that product: the ceiling under a memory-bound (skinny) row's time, where the report's
floor (bytes / copy bandwidth) may lie below what any kernel reaches.

    python perf/read_ceiling.py --case 16,8192,8192,nt --case 8,4104,4104
    python perf/read_ceiling.py --suite skinny --precision fp16 --out perf/results/<gpu>

The read: a kernel summing a flat buffer of the operands' bytes (A and B, contiguous, so
every sector is read once and whole) in blocks of READ_BLOCKS, the fastest block per case
kept. Everything is timed as the report times it (bench.gpu_median_ms: eager, after the L2
flush; bench.cold_graph_ms: replayed from a CUDA graph after the same flush), in
interleaved rounds. Prints (and with --out writes read_ceiling.csv) microseconds, the
floor, and each time as a multiple of the floor. GPU only.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import pandas as pd
import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import triton_gemm
from perf import bench, suites

# (elements per program step, warps, pipeline stages) of the flat read, the fastest kept per
# case. H100, fp16 (this script, thirty-fifth session): 16384 w8 s3 was fastest on every
# 134-470 MB case (47.0-48.0 us at 134 MB), 8192 w4 s4 on the 34-90 MB ones. Reading the
# same 134 MB weight row-wise in 2-D blocks (64x128 .. 16x512) took 49.4-50.4 us, torch.sum
# 61.2 (a probe, not kept).
READ_BLOCKS = ((8192, 4, 4), (16384, 8, 3), (4096, 4, 6))


@triton.jit
def _read_kernel(src_ptr, partial_ptr, numel, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    """partial[pid] = the fp32 sum of src's BLOCK-element blocks pid, pid + grid, ... (the
    last block masked)."""
    pid = tl.program_id(0)
    acc = tl.zeros((BLOCK,), tl.float32)
    for start in tl.range(pid * BLOCK, numel, tl.num_programs(0) * BLOCK, num_stages=STAGES):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(src_ptr + offs, mask=offs < numel, other=0.0).to(tl.float32)
    tl.store(partial_ptr + pid, tl.sum(acc, 0))


def read_sum(src: torch.Tensor, partial: torch.Tensor, block: int, warps: int,
             stages: int) -> torch.Tensor:
    """Launch the streaming read of contiguous src on partial.numel() programs; returns the
    partial sums (their total is src's sum)."""
    _read_kernel[(partial.numel(),)](src, partial, src.numel(), block, stages, num_warps=warps)
    return partial


def operand_bytes(case: suites.Case, elem_bytes: int) -> int:
    """Bytes of A and B: what a product must read."""
    return (case.m * case.k + case.k * case.n) * elem_bytes


def measure(case: suites.Case, precision: str, rounds: int) -> dict:
    """One row: the best read of the case's operand bytes, cuBLAS and triton_gemm on the
    case, each timed eager and replayed (us, medians of `rounds` interleaved rounds)."""
    dtype = bench.DTYPES[precision]
    a, b = bench.make_operands(case, dtype, "cuda")[0]
    out = torch.empty(case.m, case.n, device="cuda", dtype=dtype)
    # U(0, 1): a read that skips any part of the buffer sums measurably less.
    flat = torch.rand(operand_bytes(case, a.element_size()) // a.element_size(),
                      device="cuda").to(dtype)
    partial = torch.empty(torch.cuda.get_device_properties(0).multi_processor_count * 4,
                          device="cuda")
    # The library's precision argument: fp32 precisions by name, 16-bit ones by dtype.
    lib_precision = None if dtype in (torch.float16, torch.bfloat16) else precision

    def cublas():
        with bench.cublas_precision(precision):
            return torch.matmul(a, b, out=out)

    fns = {"cublas": cublas,
           "triton_gemm": lambda: triton_gemm.matmul(a, b, precision=lib_precision, out=out)}
    for block, warps, stages in READ_BLOCKS:
        fns[f"read {block} w{warps} s{stages}"] = (
            lambda block=block, warps=warps, stages=stages:
            read_sum(flat, partial, block, warps, stages))
    want = flat.double().sum().item()
    for name, fn in fns.items():
        fn()
        if name.startswith("read"):
            got = partial.double().sum().item()
            if abs(got - want) > 1e-4 * want:
                raise RuntimeError(f"{name} summed {got}, expected {want}")
    torch.cuda.synchronize()
    eager = {name: [] for name in fns}
    graph = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            eager[name].append(1e3 * bench.gpu_median_ms(fn))
            graph[name].append(1e3 * bench.cold_graph_ms(fn))
    eager = {name: statistics.median(t) for name, t in eager.items()}
    graph = {name: statistics.median(t) for name, t in graph.items()}
    best = min((name for name in fns if name.startswith("read")), key=eager.get)
    return {"shape": case.label, "M": case.m, "N": case.n, "K": case.k, "precision": precision,
            "operand_mb": operand_bytes(case, a.element_size()) / 1e6,
            "read_us": eager[best], "read_graph_us": graph[best], "read_config": best,
            "cublas_us": eager["cublas"], "cublas_graph_us": graph["cublas"],
            "triton_us": eager["triton_gemm"], "triton_graph_us": graph["triton_gemm"]}


def table(rows: list[dict], copy_bps: float) -> pd.DataFrame:
    """rows with the report's floor (bench.min_bytes / copy bandwidth, us) and every eager
    time as a multiple of it."""
    df = pd.DataFrame(rows)
    df["floor_us"] = [
        1e6 * bench.min_bytes(suites.Case(m, n, k), torch.finfo(bench.DTYPES[p]).bits // 8)
        / copy_bps for m, n, k, p in zip(df["M"], df["N"], df["K"], df["precision"],
                                          strict=True)]
    for col in ("read", "cublas", "triton"):
        df[f"{col}_vs_floor"] = df[f"{col}_us"] / df["floor_us"]
    df["copy_tbps"] = copy_bps / 1e12
    return df


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", default=[], metavar="M,N,K[,LAYOUT]")
    parser.add_argument("--suite", action="append", default=[], choices=sorted(suites.SUITES))
    parser.add_argument("--precision", action="append", default=None,
                        choices=bench.PRECISIONS)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for read_ceiling.csv (default: print only)")
    args = parser.parse_args(argv)
    cases = suites.cases(args.suite) + [
        suites.Case(*map(int, spec.split(",")[:3]), *spec.split(",")[3:]) for spec in args.case]
    if not cases:
        parser.error("give --case or --suite")
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    if not torch.cuda.is_available():
        print("perf/read_ceiling.py times GPU reads: no CUDA GPU here", file=sys.stderr)
        return 2
    rows = [measure(case, precision, args.rounds)
            for case in cases for precision in (args.precision or ["fp16"])]
    df = table(rows, bench.copy_bandwidth())
    print(f"{torch.cuda.get_device_name(0)}, L2 flushed by a read before each call, us")
    print(df.round(3).to_string(index=False))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        df.to_csv(args.out / "read_ceiling.csv", index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
