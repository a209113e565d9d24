"""Probe: kernels/tall.py's 192-row tiles (a 128-row and a 64-row accumulator stacked over
one B tile) beside cuBLAS and the library, in interleaved rounds of CUDA-graph time after
the L2 flush. For the rows of a short prefill (129-192) against a transformer's weights.

    python perf/tall_probe.py --case 144,16384,4096,nt [--case ...]
        [--tiles auto|BN,BK,WARPS,STAGES[,SLICES] ...] [--rounds 3] [--dtype fp16|bf16]

auto: the module's tile for the rows and its K slices (tall.slices); otherwise one K slice
unless SLICES says.

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
from perf.simt_gluon_probe import add_checked, time_and_print  # noqa: E402
from perf.suites import Case  # noqa: E402
from triton_gemm import dispatch, launch_cache  # noqa: E402
from triton_gemm.kernels import persistent, tall  # noqa: E402
from triton_gemm.tolerances import tolerance  # noqa: E402

TILES = ("auto", "128,64,4,4", "128,64,4,5", "128,64,4,3", "128,64,8,4", "256,64,8,3",
         "64,64,4,6")


def _without_tall(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The library's product under the plan it would make without dispatch.TALL (the launch
    cache cleared either side: its replays skip planning)."""
    launch_cache.clear()
    dispatch.TALL = False
    try:
        return triton_gemm.matmul(a, b)
    finally:
        dispatch.TALL = True
        launch_cache.clear()


def parse_tile(spec: str) -> tuple | None:
    """BN,BK,WARPS,STAGES[,SLICES]; None for auto."""
    return None if spec == "auto" else tuple(int(v) for v in spec.split(","))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", required=True, metavar="M,N,K[,LAYOUT]")
    parser.add_argument("--tiles", nargs="*", default=TILES,
                        metavar="auto|BN,BK,WARPS,STAGES[,SLICES]")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dtype", default="fp16", choices=("fp16", "bf16"))
    args = parser.parse_args(argv)
    dtype = bench.DTYPES[args.dtype]
    sms = persistent.gpu_sms(torch.device("cuda"))[0]
    for spec in args.case:
        m, n, k, *layout = spec.split(",")
        m, n, k = int(m), int(n), int(k)
        a, b = bench.make_operands(Case(m, n, k, *layout), dtype, "cuda")[0]
        ref = a.double() @ b.double()
        fns = {"cublas": lambda a=a, b=b: a @ b,
               "library": lambda a=a, b=b: triton_gemm.matmul(a, b),
               "library, TALL off": lambda a=a, b=b: _without_tall(a, b)}
        triton_gemm.matmul(a, b)
        print(f"{spec}: the library runs {triton_gemm.last_config()}", flush=True)
        for tile_spec in args.tiles:
            tile = parse_tile(tile_spec)
            out = torch.empty(m, n, device="cuda", dtype=dtype)

            def fn(out=out, tile=tile, a=a, b=b):
                return tall.matmul_2d(a, b, out, sms=sms, tile=tile)
            add_checked(fns, "tall " + tile_spec, fn, out, ref, f"{spec} tall {tile_spec}",
                        tolerance(dtype, None))
        time_and_print(f"graph {spec}", fns, bench.cold_graph_ms, args.rounds, 2 * m * n * k)
    return 0


if __name__ == "__main__":
    sys.exit(main())
