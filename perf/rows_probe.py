"""Probe: how the library's time on a weight of N x K runs with the rows M in front of it,
beside cuBLAS, warm (CUDA graph, operands left in L2) and cold (CUDA graph after the L2
flush), and beside the same product on A zero-padded to whole 64-row tiles (the padded rows
allocated outside the timing; the output's extra rows dropped): whether rows that leave the
last row of tiles part empty cost more than their share. Two more rows split the padding
between the persistent kernel's TMA boxes (its tiles over the padded rows, tuned over the
mid tiles as the library's): A's boxes past its rows with C's inside a padded output ("A boxes
out of bounds"), and C's past its rows with A's inside ("C boxes out of bounds"); the
last again with A copied into the padded rows' buffer inside the timing ("A copied, C
out": what padding A alone would cost).

    python perf/rows_probe.py --weight 4096,4096 --rows 64,80,96,112,128 [--dtype fp16]

Layout nt (a linear layer: the weight K-major). GPU only.
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
from triton_gemm.kernels import persistent  # noqa: E402
from triton_gemm.tolerances import tolerance  # noqa: E402

PAD_ROWS = 64  # the mid tiles' height (configs "half_mid")


def boxes_out_of_bounds(padded, w, out, m: int, a_rows: int, c_rows: int):
    """out = padded @ w.T on the persistent kernel over padded's rows, its A descriptor
    holding a_rows of them and its C descriptor c_rows of out's (the boxes past those rows
    read zeros, or are not stored), tuned over the mid tiles."""
    original = persistent.tma_descriptors

    def descriptors(a, b, c, *args, **kwargs):
        with_a = original(a[:a_rows], b, c[:a_rows], *args, **kwargs)
        with_c = original(a[:c_rows], b, c[:c_rows], *args, **kwargs)
        return (with_a[0], *with_c[1:])
    persistent.tma_descriptors = descriptors
    try:
        return persistent.matmul_2d(padded, w.T, out, mid_tiles=True)
    finally:
        persistent.tma_descriptors = original


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weight", default="4096,4096", metavar="N,K")
    parser.add_argument("--rows", default="64,80,96,112,128", metavar="M[,M...]")
    parser.add_argument("--dtype", default="fp16", choices=("fp16", "bf16"))
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("perf/rows_probe.py times kernels beside cuBLAS on a CUDA GPU; none found")
    dtype = bench.DTYPES[args.dtype]
    n, k = (int(v) for v in args.weight.split(","))
    w = torch.randn(n, k, device="cuda", dtype=dtype)
    status = 0
    for m in (int(v) for v in args.rows.split(",")):
        a = torch.randn(m, k, device="cuda", dtype=dtype)
        padded = torch.zeros(-(-m // PAD_ROWS) * PAD_ROWS, k, device="cuda", dtype=dtype)
        padded[:m] = a
        ref = a.double() @ w.double().T
        fns = {"cublas": lambda a=a: a @ w.T,
               "library": lambda a=a: triton_gemm.matmul(a, w.T),
               "library, A padded": lambda p=padded: triton_gemm.matmul(p, w.T)}
        if padded.shape[0] > m:
            big = torch.empty(padded.shape[0], n, device="cuda", dtype=dtype)
            fns["A boxes out of bounds"] = (
                lambda p=padded, big=big, m=m: boxes_out_of_bounds(p, w, big, m, m, len(p)))
            fns["C boxes out of bounds"] = (
                lambda p=padded, big=big, m=m: boxes_out_of_bounds(p, w, big, m, len(p), m))
            fns["A copied, C out"] = (
                lambda a=a, p=padded, big=big, m=m: (
                    p[:m].copy_(a), boxes_out_of_bounds(p, w, big, m, len(p), m))[1])
        configs = {}
        for name, fn in fns.items():
            out = fn()[:m]
            out.fill_(float("nan"))  # the variants reusing `big` must store every row
            out = fn()[:m]
            err = ((out.double() - ref).norm() / ref.norm()).item()
            if not err <= tolerance(dtype, None):
                print(f"{m}x{n}x{k} {name}: rel error {err:.1e} over tolerance")
                status = 1
            configs[name] = triton_gemm.last_config() if name != "cublas" else ""
        times = {name: ([], []) for name in fns}
        for _ in range(args.rounds):
            for name, fn in fns.items():
                times[name][0].append(bench.warm_graph_ms(fn))
                times[name][1].append(bench.cold_graph_ms(fn))
        base = [statistics.median(t) for t in times["cublas"]]
        for name in fns:
            warm, cold = (statistics.median(t) for t in times[name])
            print(f"{m}x{n}x{k} nt {name:18s} warm {warm * 1e3:6.1f} us ({base[0] / warm:.2f}x)"
                  f"  cold {cold * 1e3:6.1f} us ({base[1] / cold:.2f}x)  {configs[name]}",
                  flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
