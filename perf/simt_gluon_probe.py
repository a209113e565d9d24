"""Probe: kernels/simt_tma.py (fp32 FMA on Hopper, a TMA warp of its own) at chosen tiles, on
a staged A^T, beside cuBLAS SGEMM and the library's ieee path (its copies included), in
interleaved rounds after an L2 flush (bench.gpu_median_ms). Where the kernel's tile comes
from.

    python perf/simt_gluon_probe.py [--sizes 4096,8192] [--tiles BM,BN,BK,STAGES[,WARPS] ...]
    python perf/simt_gluon_probe.py --k-major M,N,K ... [--tiles BM,BN,WM,STAGES ...]
    python perf/simt_gluon_probe.py --as-given M,N,K[,nt] ... [--tiles ...] [--max-split S]

--k-major: skinny products against a K-major weight (x @ W^T, W (N, K), as `linear`
computes them) transposed, C^T = W A^T, on the kernel's K-major A path in K slices
(simt_tma.split_matmul, A^T staged row-major, as dispatch would), each tile replacing
simt_tma.K_MAJOR_TILES (default: the module's own).

--as-given: a @ b with both row-major (A K-major as given, no copy) on the same path
(simt_tma.split_matmul), beside cuBLAS SGEMM and the library; nt: b a K-major weight's
transpose, copied row-major (in the timed call); --max-split replaces
simt_tma.K_MAJOR_MAX_SPLIT (the most slices k_major_plan weighs).

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
from triton_gemm import dispatch  # noqa: E402
from triton_gemm.kernels import simt_tma  # noqa: E402
from triton_gemm.tolerances import rel_error, tolerance  # noqa: E402


def run_tile(a, b, out, bm, bn, bk, stages, warps=8):
    """simt_tma.matmul_2d at this tile (the module's constants set for the call)."""
    with constants(simt_tma, BM=bm, BN=bn, BK=bk, STAGES=stages, WARPS=warps):
        return simt_tma.matmul_2d(a, b, out)


def k_major_product(a, w, out, tile=None):
    """out = a @ w.T through simt_tma.split_matmul on C^T = W A^T (A^T staged row-major, as
    dispatch stages it); tile: (BM, BN, WM, STAGES) for every width, else the module's."""
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count
    tiles = simt_tma.K_MAJOR_TILES if tile is None else (tile,)
    with constants(simt_tma, K_MAJOR_TILES=tiles):
        return simt_tma.split_matmul(w, a.t().contiguous(), out.T, sms=sms).T


def as_given_product(a, b, out, tile=None, max_split=None):
    """out = a @ b through simt_tma.split_matmul on row-major a and b as given; tile as
    k_major_product's, max_split: k_major_plan's most slices (else the module's)."""
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count
    tiles = simt_tma.K_MAJOR_TILES if tile is None else (tile,)
    split = simt_tma.K_MAJOR_MAX_SPLIT if max_split is None else max_split
    with constants(simt_tma, K_MAJOR_TILES=tiles, K_MAJOR_MAX_SPLIT=split):
        return simt_tma.split_matmul(a, b, out, sms=sms)


def add_checked(fns: dict, name: str, fn, out, ref, label: str, bound: float | None = None
                ) -> None:
    """fns[name] = fn once fn() fills the NaN-poisoned out within bound (default: the ieee
    tolerance) of ref (its error printed); a config that does not compile is reported and
    left out."""
    out.fill_(float("nan"))
    try:
        fn()
        torch.cuda.synchronize()
    except Exception as exc:  # a config that does not compile: say so, go on
        print(f"{label}: failed {type(exc).__name__}: {str(exc)[:300]}")
        return
    err = rel_error(out, ref)
    print(f"{label}: rel error {err:.1e}", flush=True)
    if err <= (tolerance(torch.float32, "ieee") if bound is None else bound):
        fns[name] = fn


def time_and_print(label: str, fns: dict, timer, rounds: int, flops: float) -> None:
    """fns timed in interleaved rounds; a line each: median, range, TFLOPS, ratio to
    fns["cublas"]."""
    times = interleaved(fns, timer, rounds)
    base = statistics.median(times["cublas"])
    for name, ts in times.items():
        ms = statistics.median(ts)
        print(f"{label} {name:16s} {ms * 1e3:9.1f} us [{min(ts) * 1e3:.1f}-"
              f"{max(ts) * 1e3:.1f}] {flops / ms / 1e9:6.1f} TFLOPS {base / ms:5.3f}x",
              flush=True)


def k_major(shapes, tiles, rounds: int, graph: bool) -> None:
    """The --k-major probe: each M,N,K of shapes at each tile, beside cuBLAS SGEMM, the
    library's ieee `linear` product and that product on the split-K kernel (the plan before
    the K-major path; planned each call, as the tiles are); graph: CUDA-graph replays
    (bench.cold_graph_ms), not eager calls."""
    timer = bench.cold_graph_ms if graph else functools.partial(bench.gpu_median_ms, rep_ms=60)
    for shape in shapes:
        m, n, k = (int(v) for v in shape.split(","))
        a = torch.randn(m, k, device="cuda")
        w = torch.randn(n, k, device="cuda")
        ref = a.double() @ w.double().T
        out = torch.empty(m, n, device="cuda")
        torch.backends.cuda.matmul.allow_tf32 = False
        fns = {"cublas": lambda a=a, w=w: a @ w.T,
               "library": lambda a=a, w=w: triton_gemm.matmul(a, w.T, precision="ieee")}

        def split_k(a=a, w=w, out=out):
            # Planned each call (the launch cache would replay the K-major path): eager
            # times include the planning's host time, --graph times do not.
            with constants(dispatch, K_MAJOR_FMA_MIN_N=1 << 62):
                return dispatch.run(a[None], w.T[None], out[None], precision="ieee",
                                    force=dispatch.FMA_TRANSPOSED)
        fns["split-K"] = split_k
        for spec in tiles or [None]:
            tile = None if spec is None else tuple(int(v) for v in spec.split(","))

            def fn(tile=tile, a=a, w=w, out=out):
                return k_major_product(a, w, out, tile)
            add_checked(fns, str(spec), fn, out, ref, f"{shape} {spec}")
        time_and_print(f"{'graph' if graph else 'eager'} {shape}", fns, timer, rounds,
                       2.0 * m * n * k)


def as_given(shapes, tiles, max_split, rounds: int, graph: bool) -> None:
    """The --as-given probe: a @ b, both row-major, on split_matmul at each tile (planned by
    k_major_plan up to max_split slices), beside cuBLAS SGEMM, the library's ieee product
    (its own plan) and the plan without the as-given K-major path ("split-K": the split-K
    kernel, or the plain one for products too large for it)."""
    timer = bench.cold_graph_ms if graph else functools.partial(bench.gpu_median_ms, rep_ms=60)
    for shape in shapes:
        m, n, k, *layout = shape.split(",")
        m, n, k = int(m), int(n), int(k)
        a = torch.randn(m, k, device="cuda")
        # nt: B a K-major weight's transpose, copied row-major in each call below (as
        # dispatch copies it, K_MAJOR_COPIED_B).
        nt = layout == ["nt"]
        b = torch.randn(n, k, device="cuda").T if nt else torch.randn(k, n, device="cuda")
        ref = a.double() @ b.double()
        out = torch.empty(m, n, device="cuda")
        torch.backends.cuda.matmul.allow_tf32 = False
        fns = {"cublas": lambda a=a, b=b: a @ b,
               "library": lambda a=a, b=b: triton_gemm.matmul(a, b, precision="ieee")}

        def split_k(a=a, b=b, out=out):
            # The plan without the as-given K-major path, planned each call as above.
            with constants(dispatch, K_MAJOR_AS_GIVEN_MIN_MN=1 << 62, K_MAJOR_COPIED_B=False):
                return dispatch.run(a[None], b[None], out[None], precision="ieee")
        fns["split-K"] = split_k
        for spec in tiles or [None]:
            tile = None if spec is None else tuple(int(v) for v in spec.split(","))

            def fn(tile=tile, a=a, b=b, out=out):
                return as_given_product(a, b.contiguous() if nt else b, out, tile, max_split)
            add_checked(fns, str(spec), fn, out, ref, f"{shape} {spec}")
        time_and_print(f"{'graph' if graph else 'eager'} {shape}", fns, timer, rounds,
                       2.0 * m * n * k)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4096,8192")
    parser.add_argument("--tiles", nargs="*", default=None)
    parser.add_argument("--k-major", nargs="*", default=None, metavar="M,N,K")
    parser.add_argument("--as-given", nargs="*", default=None, metavar="M,N,K")
    parser.add_argument("--max-split", type=int, default=None,
                        help="--as-given: k_major_plan's most slices")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--graph", action="store_true",
                        help="--k-major, --as-given: CUDA-graph time")
    args = parser.parse_args()
    torch.manual_seed(0)
    if args.k_major:
        k_major(args.k_major, args.tiles, args.rounds, args.graph)
        return 0
    if args.as_given:
        as_given(args.as_given, args.tiles, args.max_split, args.rounds, args.graph)
        return 0
    for size in (int(s) for s in args.sizes.split(",")):
        a = torch.randn(size, size, device="cuda")
        b = torch.randn(size, size, device="cuda")
        a_m = a.t().contiguous().t()  # M-major, as the library's copy
        ref = a.double() @ b.double()
        out = torch.empty(size, size, device="cuda")
        torch.backends.cuda.matmul.allow_tf32 = False
        fns = {"cublas": lambda a=a, b=b: a @ b,
               "library": lambda a=a, b=b: triton_gemm.matmul(a, b, precision="ieee")}
        for spec in args.tiles or ["128,256,32,3", "128,256,32,4"]:
            bm, bn, bk, st, *rest = (int(v) for v in spec.split(","))
            warps = rest[0] if rest else 8

            def fn(bm=bm, bn=bn, bk=bk, st=st, warps=warps, a_m=a_m, b=b, out=out):
                return run_tile(a_m, b, out, bm, bn, bk, st, warps)
            add_checked(fns, spec, fn, out, ref, f"{size} {spec}")
        time_and_print(str(size), fns, functools.partial(bench.gpu_median_ms, rep_ms=60),
                       args.rounds, 2.0 * size ** 3)
    return 0


if __name__ == "__main__":
    sys.exit(main())
