"""Probe: kernels/split_fed.py (3xTF32 with one operand split in registers) beside cuBLAS
SGEMM, the library's tf32x3 path and the staged halves (dispatch.SPLIT_TF32), any layout,
in interleaved rounds after an L2 flush (bench.gpu_median_ms): the kernel with its copy of
Y's remainder (or halves, tn), the kernel alone on staged ones, and each one's relative
error against float64 beside SGEMM's.

    python perf/split_fed_probe.py [--sizes 4096,8192 | --shapes M,N,K ...]
        [--layouts nn,tt,nt,tn] [--rounds 3]
        [--tiles BQ,BK,STAGES ...] [--flush K]

--tiles: more tiles of the kernel alone (the module's constants set for the call); --flush:
hi_acc's flush interval instead of persistent.hi_flush_k (timing what the flush costs).

GPU (Hopper) only.
"""

from __future__ import annotations

import argparse
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
from triton_gemm import dispatch  # noqa: E402
from triton_gemm.kernels import split_fed  # noqa: E402
from triton_gemm.kernels.persistent import gpu_sms  # noqa: E402
from triton_gemm.tolerances import rel_error  # noqa: E402


def run_tile(a, b, y_hi, y_lo, out, sms, bq, bk, stages):
    """split_fed.matmul_2d at this tile (the module's constants set for the call)."""
    with constants(split_fed, BQ=bq, BK=bk, STAGES=stages):
        return split_fed.matmul_2d(a, b, y_hi, y_lo, out, sms)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4096,8192", help="squares")
    parser.add_argument("--shapes", nargs="*", default=None, metavar="M,N,K",
                        help="these shapes instead of --sizes' squares")
    parser.add_argument("--layouts", default="nn,tt,nt")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tiles", nargs="*", default=[])
    parser.add_argument("--flush", type=int, default=None)
    args = parser.parse_args()
    if args.flush:
        split_fed.hi_flush_k = lambda k: args.flush
    torch.manual_seed(0)
    sms = gpu_sms(torch.device("cuda"))[0]
    torch.backends.cuda.matmul.allow_tf32 = False
    shapes = ([tuple(int(v) for v in s.split(",")) for s in args.shapes] if args.shapes
              else [(int(s),) * 3 for s in args.sizes.split(",")])
    for m, n, k in shapes:
        size = f"{m}x{n}x{k}"
        for layout in args.layouts.split(","):
            a = torch.randn(m, k, device="cuda")
            b = torch.randn(k, n, device="cuda")
            a = a if layout[0] == "n" else a.t().contiguous().t()
            b = b if layout[1] == "n" else b.t().contiguous().t()
            ref = a.double() @ b.double()
            out = torch.empty(m, n, device="cuda")
            # Y's halves as dispatch stages them, kept: cloned out of the scratch.
            y_hi, y_lo = (t.clone() for t in dispatch.split_fed_stage(a, b))
            fns = {"cublas sgemm": lambda a=a, b=b: a @ b,
                   "library tf32x3": lambda a=a, b=b: triton_gemm.matmul(
                       a, b, precision="tf32x3"),
                   "staged halves": lambda a=a, b=b, out=out: dispatch.run(
                       a[None], b[None], out[None], precision="tf32x3",
                       force=dispatch.SPLIT_TF32)[0],
                   "split_fed + copy": lambda a=a, b=b, out=out: (
                       dispatch._split_fed_run(a, b, out), out)[1],
                   "split_fed alone": lambda a=a, b=b, out=out, y_hi=y_hi, y_lo=y_lo:
                       split_fed.matmul_2d(a, b, y_hi, y_lo, out, sms)}
            for spec in args.tiles:
                bq, bk, st = (int(v) for v in spec.split(","))
                fns[f"alone {bq}x{bk} s{st}"] = (
                    lambda a=a, b=b, out=out, y_hi=y_hi, y_lo=y_lo, bq=bq, bk=bk, st=st:
                    run_tile(a, b, y_hi, y_lo, out, sms, bq, bk, st))
            for name, fn in fns.items():
                out.fill_(float("nan"))
                got = fn()
                torch.cuda.synchronize()
                print(f"{size} {layout} {name:18s} rel error {rel_error(got, ref):.2e}",
                      flush=True)
            times = interleaved(fns, bench.gpu_median_ms, args.rounds)
            base = statistics.median(times["cublas sgemm"])
            for name, ts in times.items():
                ms = statistics.median(ts)
                print(f"{size} {layout} {name:18s} {ms * 1e3:9.1f} us "
                      f"{2 * m * n * k / ms / 1e9:6.1f} TFLOPS {base / ms:5.3f}x "
                      f"[{min(ts) * 1e3:.1f}-{max(ts) * 1e3:.1f}]", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
