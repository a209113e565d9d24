"""Probe: split-K on TMA tiles for 16-bit products of few output tiles over a long K (the
`mid` suite's), beside cuBLAS and the library. Each program takes one (tile, K slice) of a
row-major A and B through host TMA descriptors, its fp32 partial goes by TMA to a
(slices, M, N) workspace, and splitk.reduce sums the slices. What it asks: whether the
wgmma tiles run at full rate when every SM has a tile, where the persistent kernel leaves
SMs idle (1024x1024 is 64 tiles of 128x128 on 132 SMs) and the split-K kernel's pointer
loads and stream-K's shared steps ran slower (kernels/streamk.py's docstring).

    python perf/sliced_probe.py --case 1024,1024,8192 [--tiles BM,BN,BK,WARPS,STAGES,SLICES ...]
        [--rounds 3]

GPU (Hopper) only. CUDA-graph time after the L2 flush (bench.cold_graph_ms).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import triton_gemm  # noqa: E402
from perf import bench  # noqa: E402
from perf.suites import Case  # noqa: E402
from perf.tile_probe import interleaved  # noqa: E402
from triton_gemm.kernels import splitk  # noqa: E402
from triton_gemm.kernels.common import cdiv  # noqa: E402
from triton_gemm.kernels.persistent import tile_origin  # noqa: E402
from triton_gemm.tolerances import rel_error, tolerance  # noqa: E402

# (BM, BN, BK, warps, stages, slices): 128x128 and 128x256 wgmma tiles, K cut so that
# tiles x slices is about one or two waves of 132 SMs at the mid suite's sizes.
TILES = ((128, 128, 64, 4, 4, 2), (128, 128, 64, 8, 4, 2), (128, 256, 64, 8, 3, 4),
         (128, 128, 64, 8, 4, 4), (128, 64, 64, 4, 5, 2), (64, 128, 64, 4, 5, 2))


@triton.jit
def _sliced_kernel(a_desc, b_desc, w_desc, M, N, K_SLICE_STEPS,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                   GROUP_M: tl.constexpr):
    """W[s] tile = A[:, slice s] @ B[slice s, :] for program (tile, s); steps past K read
    zeros (TMA's bounds), so every slice runs K_SLICE_STEPS steps."""
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    tiles = num_pid_m * num_pid_n
    pid = tl.program_id(0)
    s = pid // tiles
    off_m, off_n = tile_origin(pid % tiles, num_pid_m, num_pid_n, BM, BN, GROUP_M)
    k0 = s * K_SLICE_STEPS * BK
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for ki in range(K_SLICE_STEPS):
        a = a_desc.load([off_m, k0 + ki * BK])
        b = b_desc.load([k0 + ki * BK, off_n])
        acc = tl.dot(a, b, acc)
    w_desc.store([s, off_m, off_n], acc.reshape(1, BM, BN))


def sliced(a, b, out, bm, bn, bk, warps, stages, slices, reduce=True):
    """out = a @ b by _sliced_kernel's slices and splitk.reduce (row-major a and b); without
    reduce, the partials only (to time the reduce apart)."""
    m, k = a.shape
    n = b.shape[1]
    steps = cdiv(cdiv(k, slices), bk)
    slices = cdiv(k, steps * bk)
    work = torch.empty((slices, m, n), device=a.device, dtype=torch.float32)
    a_desc = TensorDescriptor(a, [m, k], [a.stride(0), 1], [bm, bk])
    b_desc = TensorDescriptor(b, [k, n], [b.stride(0), 1], [bk, bn])
    w_desc = TensorDescriptor(work, [slices, m, n], [m * n, n, 1], [1, bm, bn])
    grid = (cdiv(m, bm) * cdiv(n, bn) * slices,)
    _sliced_kernel[grid](a_desc, b_desc, w_desc, m, n, steps, BM=bm, BN=bn, BK=bk,
                         GROUP_M=8, num_warps=warps, num_stages=stages)
    return splitk.reduce(work, slices, out) if reduce else out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", required=True, metavar="M,N,K")
    parser.add_argument("--tiles", nargs="*", default=None,
                        metavar="BM,BN,BK,WARPS,STAGES,SLICES")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dtype", default="fp16", choices=("fp16", "bf16"))
    parser.add_argument("--partials", action="store_true",
                        help="also time each tile's partials without the reduce")
    args = parser.parse_args(argv)
    tiles = (TILES if args.tiles is None
             else [tuple(int(v) for v in t.split(",")) for t in args.tiles])
    torch.manual_seed(0)
    for spec in args.case:
        m, n, k = (int(v) for v in spec.split(","))
        dtype = bench.DTYPES[args.dtype]
        a, b = bench.make_operands(Case(m, n, k), dtype, "cuda")[0]
        ref = a.double() @ b.double()
        tol = tolerance(dtype, None)
        fns = {"cublas": lambda: a @ b, "library": lambda: triton_gemm.matmul(a, b)}
        for tile in tiles:
            out = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
            try:
                sliced(a, b, out, *tile)
            except Exception as exc:  # a tile that does not compile or fit: say so
                print(f"{spec} {tile}: failed {type(exc).__name__}: {str(exc)[:200]}")
                continue
            err = rel_error(out, ref)
            print(f"{spec} {tile}: rel error {err:.1e}", flush=True)
            if not err <= tol:
                print(f"{spec} {tile}: WRONG (tolerance {tol:.1e})")
                continue
            fns[str(tile)] = lambda out=out, tile=tile: sliced(a, b, out, *tile)
            if args.partials:
                fns[f"{tile} partials"] = lambda out=out, tile=tile: sliced(a, b, out, *tile,
                                                                           reduce=False)
        times = interleaved(fns, bench.cold_graph_ms, args.rounds)
        base = statistics.median(times["cublas"])
        for name, ts in times.items():
            us = statistics.median(ts) * 1e3
            print(f"graph {spec} {name:28s} {us:8.1f} us [{min(ts) * 1e3:.1f}-"
                  f"{max(ts) * 1e3:.1f}] {2 * m * n * k / us / 1e6:6.1f} TFLOPS "
                  f"{base * 1e3 / us:5.3f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
