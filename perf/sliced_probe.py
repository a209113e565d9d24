"""Probe: kernels/sliced.py (products in K slices of TMA tiles, summed by splitk.reduce) at
chosen tiles and slice counts, beside cuBLAS and the library, in interleaved rounds of
CUDA-graph time after the L2 flush (bench.cold_graph_ms), each checked against float64 on a
NaN-poisoned output first (its error printed). Where the module's tile, MIN_SLICE_K and
FLUSH_K come from.

    python perf/sliced_probe.py --case 1024,1024,8192[,LAYOUT] [--case ...]
        [--tiles BM,BN,BK,WARPS,STAGES,SLICES ...] [--rounds 3]
        [--precision fp16|bf16|tf32|tf32x3] [--uniform] [--flush K ...]

fp32 precisions (tf32, tf32x3) run on a K-major copy of B made once, as dispatch stages it
(the library's line includes its copy; cuBLAS is tf32 or SGEMM as perf/report.py compares);
BK is then the 16-bit K step, halved for fp32 as the module does. --uniform: U(0,1) data
(every product positive: the tensor core's truncating adds all go one way) instead of
N(0,1). --flush: each tile at each of these sliced.FLUSH_K values (tf32x3; 0: none).
GPU (Hopper) only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import triton_gemm  # noqa: E402
from perf import bench  # noqa: E402
from perf.simt_gluon_probe import time_and_print  # noqa: E402
from perf.suites import Case  # noqa: E402
from perf.tile_probe import constants  # noqa: E402
from triton_gemm.kernels import sliced  # noqa: E402
from triton_gemm.kernels.common import cdiv  # noqa: E402
from triton_gemm.tolerances import rel_error, tolerance  # noqa: E402

# (BM, BN, BK, warps, stages, slices): the module's tile and its neighbours, in 2-4 slices.
TILES = ((128, 128, 64, 4, 5, 2), (128, 128, 64, 8, 5, 2), (128, 128, 64, 4, 4, 2),
         (128, 128, 64, 4, 5, 3), (128, 128, 64, 4, 5, 4), (128, 256, 64, 8, 3, 2))


def run_tile(a, b, out, precision, bm, bn, bk, warps, stages, split, flush_k):
    """sliced.matmul_2d at this tile in `split` slices (a wave of that many per tile), 3xTF32
    flushed every flush_k elements of K."""
    tiles = cdiv(out.shape[0], bm) * cdiv(out.shape[1], bn)
    with constants(sliced, BM=bm, BN=bn, BK=bk, WARPS=warps, WARPS_3XTF32=warps,
                   STAGES=stages, MIN_SLICE_K=1, FLUSH_K=flush_k):
        return sliced.matmul_2d(a, b, out, precision=precision, sms=tiles * split)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", required=True, metavar="M,N,K[,LAYOUT]",
                        help="a shape, and its layout as perf/suites.py names them (nn)")
    parser.add_argument("--tiles", nargs="*", default=None,
                        metavar="BM,BN,BK,WARPS,STAGES,SLICES")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--precision", default="fp16", choices=("fp16", "bf16", "tf32", "tf32x3"))
    parser.add_argument("--uniform", action="store_true", help="U(0,1) data, not N(0,1)")
    parser.add_argument("--flush", nargs="*", type=int, default=None, metavar="K",
                        help="sliced.FLUSH_K values to try (tf32x3; default: the module's)")
    args = parser.parse_args(argv)
    tiles = (TILES if args.tiles is None
             else [tuple(int(v) for v in t.split(",")) for t in args.tiles])
    flushes = args.flush if args.flush is not None else [sliced.FLUSH_K]
    dtype = bench.DTYPES[args.precision]
    fp32 = dtype == torch.float32
    library = args.precision if fp32 else None
    for spec in args.case:
        m, n, k, *layout = spec.split(",")
        m, n, k = int(m), int(n), int(k)
        a, b = bench.make_operands(Case(m, n, k, *layout), dtype, "cuda")[0]
        if args.uniform:
            a.uniform_(), b.uniform_()
        b_kernel = b.t().contiguous().t() if fp32 and b.stride(0) != 1 else b
        ref = a.double() @ b.double()
        tol = tolerance(dtype, library)

        def cublas():
            with bench.cublas_precision(args.precision):
                return a @ b
        lib_error = rel_error(triton_gemm.matmul(a, b, precision=library), ref)
        print(f"{spec}: cuBLAS error {rel_error(cublas(), ref):.1e}; the library runs "
              f"{triton_gemm.last_config()} at error {lib_error:.1e}")
        fns = {"cublas": cublas, "library": lambda: triton_gemm.matmul(a, b, precision=library)}
        for tile in tiles:
            for flush_k in flushes:
                label = f"{tile} flush {flush_k}" if len(flushes) > 1 else str(tile)
                out = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
                try:
                    run_tile(a, b_kernel, out, args.precision, *tile, flush_k)
                except Exception as exc:  # a tile that does not compile or fit: say so
                    print(f"{spec} {label}: failed {type(exc).__name__}: {str(exc)[:200]}")
                    continue
                err = rel_error(out, ref)
                print(f"{spec} {label}: rel error {err:.1e}", flush=True)
                if not err <= tol:
                    print(f"{spec} {label}: WRONG (tolerance {tol:.1e})")
                    continue
                fns[label] = lambda out=out, tile=tile, f=flush_k: run_tile(
                    a, b_kernel, out, args.precision, *tile, f)
        time_and_print(f"graph {spec}", fns, bench.cold_graph_ms, args.rounds, 2 * m * n * k)
    return 0


if __name__ == "__main__":
    sys.exit(main())
