"""Probe: kernels/register_fed.py's rows_2d (a few rows against a K-major weight, C^T = W
A^T, A's rows one 128-row tile) at chosen cluster sizes and ring depths, beside cuBLAS and
the library, in interleaved rounds of CUDA-graph replays after an L2 flush
(bench.cold_graph_ms). Where dispatch.FED_ROWS and register_fed.ROWS_BQ / ROWS_STAGES come
from.

    python perf/fed_rows_probe.py --case 128,11008,4096,tf32 [--case ...] \
        [--tiles CTAS,STAGES[,BQ[,BP]] ...] [--rounds 3]

BQ: A's rows a tile (default register_fed.ROWS_BQ); BP: the weight's rows a tile, 64 on
one wgmma warpgroup (4 compute warps) or 128 on two (the module's).

Each candidate is first checked against float64 on a NaN-poisoned output. GPU (Hopper)
only.
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
from triton_gemm.kernels import register_fed  # noqa: E402
from triton_gemm.tolerances import rel_error, tolerance  # noqa: E402

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "tf32": torch.float32}


def rows_product(a, w, out, ctas, stages, sms, bq=None, bp=None):
    """out = a @ w.T on rows_2d's tile (bq of A's rows, bp of the weight's: 64 on one
    warpgroup, 128 on two) in clusters of ctas CTAs, rings of `stages` slots."""
    bp = bp or register_fed.BP
    warps = bp // 16
    with constants(register_fed, BP=bp, WARPS=warps,
                   MAX_REGISTERS=min(register_fed.max_registers(warps), 240)):
        return register_fed._launch(a, w.T, out, sms, w, a, True, True, w.shape[0],
                                    a.shape[0], ctas, bq or register_fed.ROWS_BQ, stages)


def probe(case: str, tiles: list, rounds: int) -> None:
    m, n, k, name = case.split(",")
    m, n, k, dtype = int(m), int(n), int(k), DTYPES[name]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    torch.backends.cuda.matmul.allow_tf32 = True
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    w = torch.randn(n, k, device="cuda", dtype=dtype)
    ref = a.double() @ w.double().T
    out = torch.empty(m, n, device="cuda", dtype=dtype)
    precision = "tf32" if dtype == torch.float32 else None
    fns = {"cublas": lambda: a @ w.T,
           "library": lambda: triton_gemm.matmul(a, w.T, precision=precision)}
    fns["library"]()
    print(f"{case} library config {triton_gemm.last_config()}")
    bound = tolerance(dtype, "tf32" if precision else "half")
    for ctas, stages, *sizes in tiles:
        fn = functools.partial(rows_product, a, w, out, ctas, stages, sms, *sizes)
        label = f"c{ctas} s{stages}" + "".join(f" {v}" for v in sizes)
        out.fill_(float("nan"))
        try:
            fn()
            torch.cuda.synchronize()
        except Exception as exc:  # a candidate that does not compile or run: say so
            print(f"{case} {label}: failed {type(exc).__name__}: {str(exc)[:300]}")
            continue
        err = rel_error(out, ref)
        print(f"{case} {label}: rel error {err:.1e}", flush=True)
        if err <= bound:
            fns[label] = fn
    times = interleaved(fns, bench.cold_graph_ms, rounds)
    base = statistics.median(times["cublas"])
    for label, ts in times.items():
        t = statistics.median(ts)
        print(f"{case} {label:16s} {t * 1e3:8.1f} us [{min(ts) * 1e3:.1f}-{max(ts) * 1e3:.1f}]"
              f" {base / t:5.3f}x", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", required=True, metavar="M,N,K,DTYPE",
                        help="DTYPE: fp16, bf16 or tf32 (fp32 operands); the weight (N, K)")
    parser.add_argument("--tiles", nargs="*", default=None, metavar="CTAS,STAGES[,BQ[,BP]]",
                        help="default: the module's (1 CTA, ROWS_STAGES) and 4 stages")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("fed_rows_probe needs a GPU")
        return 1
    tiles = ([tuple(int(v) for v in t.split(",")) for t in args.tiles] if args.tiles
             else [(1, register_fed.ROWS_STAGES), (1, 4)])
    for case in args.case:
        probe(case, tiles, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
