"""Probe: kernels/sliced.py (16-bit products in K slices of TMA tiles, summed by
splitk.reduce) at chosen tiles and slice counts, beside cuBLAS and the library, in
interleaved rounds of CUDA-graph time after the L2 flush (bench.cold_graph_ms). Where the
module's tile and MIN_SLICE_K come from.

    python perf/sliced_probe.py --case 1024,1024,8192[,LAYOUT] [--case ...]
        [--tiles BM,BN,BK,WARPS,STAGES,SLICES ...] [--rounds 3] [--dtype fp16|bf16]

Each tile is first checked against float64 on a NaN-poisoned output. GPU (Hopper) only.
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
from perf.suites import Case  # noqa: E402
from perf.simt_gluon_probe import time_and_print  # noqa: E402
from perf.tile_probe import constants  # noqa: E402
from triton_gemm.kernels import sliced  # noqa: E402
from triton_gemm.kernels.common import cdiv  # noqa: E402
from triton_gemm.tolerances import rel_error, tolerance  # noqa: E402

# (BM, BN, BK, warps, stages, slices): the module's tile and its neighbours, in 2-4 slices.
TILES = ((128, 128, 64, 4, 5, 2), (128, 128, 64, 8, 5, 2), (128, 128, 64, 4, 4, 2),
         (128, 128, 64, 4, 5, 3), (128, 128, 64, 4, 5, 4), (128, 256, 64, 8, 3, 2))


def run_tile(a, b, out, bm, bn, bk, warps, stages, split):
    """sliced.matmul_2d at this tile in `split` slices (a wave of that many per tile)."""
    tiles = cdiv(out.shape[0], bm) * cdiv(out.shape[1], bn)
    with constants(sliced, BM=bm, BN=bn, BK=bk, WARPS=warps, STAGES=stages, MIN_SLICE_K=1):
        return sliced.matmul_2d(a, b, out, sms=tiles * split)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", required=True, metavar="M,N,K[,LAYOUT]",
                        help="a shape, and its layout as perf/suites.py names them (nn)")
    parser.add_argument("--tiles", nargs="*", default=None,
                        metavar="BM,BN,BK,WARPS,STAGES,SLICES")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dtype", default="fp16", choices=("fp16", "bf16"))
    args = parser.parse_args(argv)
    tiles = (TILES if args.tiles is None
             else [tuple(int(v) for v in t.split(",")) for t in args.tiles])
    dtype = bench.DTYPES[args.dtype]
    for spec in args.case:
        m, n, k, *layout = spec.split(",")
        m, n, k = int(m), int(n), int(k)
        a, b = bench.make_operands(Case(m, n, k, *layout), dtype, "cuda")[0]
        ref = a.double() @ b.double()
        fns = {"cublas": lambda: a @ b, "library": lambda: triton_gemm.matmul(a, b)}
        triton_gemm.matmul(a, b)
        print(f"{spec}: the library runs {triton_gemm.last_config()}")
        for tile in tiles:
            out = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
            try:
                run_tile(a, b, out, *tile)
            except Exception as exc:  # a tile that does not compile or fit: say so
                print(f"{spec} {tile}: failed {type(exc).__name__}: {str(exc)[:200]}")
                continue
            err = rel_error(out, ref)
            print(f"{spec} {tile}: rel error {err:.1e}", flush=True)
            if not err <= tolerance(dtype):
                print(f"{spec} {tile}: WRONG (tolerance {tolerance(dtype):.1e})")
                continue
            fns[str(tile)] = lambda out=out, tile=tile: run_tile(a, b, out, *tile)
        time_and_print(f"graph {spec}", fns, bench.cold_graph_ms, args.rounds, 2 * m * n * k)
    return 0


if __name__ == "__main__":
    sys.exit(main())
