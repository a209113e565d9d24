"""Probe: the library on products whose A runs as two planes of rows (persistent.a_planes),
with each plane's last row of tiles moved back inside it (persistent.CLAMP_PLANES) and
without, beside cuBLAS in the same rounds: eager after the L2 flush (the report's time),
CUDA graph after the flush, and CUDA graph warm.

    python perf/clamp_probe.py --shapes 1000,1000,1000 2000,1000,1000 [--dtype bf16]

Layout nn. GPU only.
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
from triton_gemm import launch_cache  # noqa: E402
from triton_gemm.kernels import persistent  # noqa: E402
from triton_gemm.tolerances import tolerance  # noqa: E402

VARIANTS = {"cublas": None, "planes clamped": True, "planes not clamped": False}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", nargs="+", default=["1000,1000,1000"], metavar="M,N,K")
    parser.add_argument("--dtype", default="fp16", choices=("fp16", "bf16"))
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("perf/clamp_probe.py times kernels beside cuBLAS on a CUDA GPU; none found")
    dtype = bench.DTYPES[args.dtype]
    status = 0
    for shape in args.shapes:
        m, n, k = (int(v) for v in shape.split(","))
        a = torch.randn(m, k, device="cuda", dtype=dtype)
        b = torch.randn(k, n, device="cuda", dtype=dtype)
        ref = a.double() @ b.double()
        times = {name: ([], [], []) for name in VARIANTS}
        tiles = {}
        for _ in range(args.rounds):
            for name, clamp in VARIANTS.items():
                if clamp is None:
                    fn = lambda: a @ b  # noqa: E731
                else:
                    persistent.CLAMP_PLANES = clamp
                    launch_cache._recipes.clear()  # replan: CLAMP is in the tuning key
                    fn = lambda: triton_gemm.matmul(a, b)  # noqa: E731
                out = fn()
                err = ((out.double() - ref).norm() / ref.norm()).item()
                if not err <= tolerance(dtype, None):
                    print(f"{shape} {name}: relative error {err:.2e} over tolerance")
                    status = 1
                tiles[name] = triton_gemm.last_config() if clamp is not None else ""
                for column, timer in zip(times[name], (bench.gpu_median_ms,
                                                       bench.cold_graph_ms, bench.warm_graph_ms)):
                    column.append(1e3 * timer(fn))
        print(f"{shape} {args.dtype} nn, A planes {persistent.a_planes(a, b=b)}: us, "
              f"eager after the flush / graph after the flush / graph warm, "
              f"medians of {args.rounds} rounds")
        for name, columns in times.items():
            print(f"  {name:20s}" + " / ".join(f"{statistics.median(c):7.2f}" for c in columns)
                  + f"  {tiles[name]}", flush=True)
    persistent.CLAMP_PLANES = True
    return status


if __name__ == "__main__":
    sys.exit(main())
