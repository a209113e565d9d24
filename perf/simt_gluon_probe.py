"""Probe: kernels/simt_tma.py (fp32 FMA on Hopper, a TMA warp of its own) at chosen tiles, on
a staged A^T, beside cuBLAS SGEMM and the library's ieee path (its copies included), in
interleaved rounds after an L2 flush (bench.gpu_median_ms). Where the kernel's tile comes
from.

    python perf/simt_gluon_probe.py [--sizes 4096,8192] [--tiles BM,BN,BK,STAGES[,WARPS] ...]

Each tile is first checked against float64 on a NaN-poisoned output. GPU (Hopper) only.
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
from perf.tile_probe import constants, interleaved  # noqa: E402
from triton_gemm.kernels import simt_tma  # noqa: E402
from triton_gemm.tolerances import rel_error, tolerance  # noqa: E402


def run_tile(a, b, out, bm, bn, bk, stages, warps=8):
    """simt_tma.matmul_2d at this tile (the module's constants set for the call)."""
    with constants(simt_tma, BM=bm, BN=bn, BK=bk, STAGES=stages, WARPS=warps):
        return simt_tma.matmul_2d(a, b, out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4096,8192")
    parser.add_argument("--tiles", nargs="*", default=["128,256,32,3", "128,256,32,4"])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    for size in (int(s) for s in args.sizes.split(",")):
        a = torch.randn(size, size, device="cuda")
        b = torch.randn(size, size, device="cuda")
        a_m = a.t().contiguous().t()  # M-major, as the library's copy
        ref = a.double() @ b.double()
        out = torch.empty(size, size, device="cuda")
        torch.backends.cuda.matmul.allow_tf32 = False
        fns = {"cublas": lambda a=a, b=b: a @ b,
               "library": lambda a=a, b=b: triton_gemm.matmul(a, b, precision="ieee")}
        for spec in args.tiles:
            bm, bn, bk, st, *rest = (int(v) for v in spec.split(","))
            warps = rest[0] if rest else 8

            def fn(bm=bm, bn=bn, bk=bk, st=st, warps=warps, a_m=a_m, b=b, out=out):
                return run_tile(a_m, b, out, bm, bn, bk, st, warps)
            out.fill_(float("nan"))
            try:
                fn()
                torch.cuda.synchronize()
            except Exception as exc:  # a config that does not compile: say so, go on
                print(f"{size} {spec}: failed {type(exc).__name__}: {str(exc)[:300]}")
                continue
            err = rel_error(out, ref)
            print(f"{size} {spec}: rel error {err:.1e}", flush=True)
            if err <= tolerance(torch.float32, "ieee"):
                fns[spec] = fn
        times = interleaved(fns, functools.partial(bench.gpu_median_ms, rep_ms=60),
                            args.rounds)
        base = statistics.median(times["cublas"])
        flops = 2.0 * size ** 3
        for name, ts in times.items():
            ms = statistics.median(ts)
            print(f"{size} {name:16s} {ms * 1e3:9.1f} us {flops / ms / 1e9:6.1f} TFLOPS "
                  f"{base / ms:5.3f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
