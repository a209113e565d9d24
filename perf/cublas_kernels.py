"""Which kernels cuBLAS runs for torch.matmul on given shapes (torch.profiler's CUDA kernel
names), to compare tile shapes with the library's.

    python perf/cublas_kernels.py --case 1536,1536,4096[,LAYOUT] [--case ...] [--dtype fp16]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from perf import bench  # noqa: E402
from perf.suites import Case  # noqa: E402


def kernel_names(fn) -> list[str]:
    """Names of the CUDA kernels one call of fn launches (after a warm-up call)."""
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", required=True, metavar="M,N,K[,LAYOUT]")
    parser.add_argument("--dtype", default="fp16", choices=tuple(bench.DTYPES))
    args = parser.parse_args(argv)
    for spec in args.case:
        m, n, k, *layout = spec.split(",")
        a, b = bench.make_operands(Case(int(m), int(n), int(k), *layout),
                                   bench.DTYPES[args.dtype], "cuda")[0]
        with bench.cublas_precision(args.dtype):
            print(spec, args.dtype, "; ".join(kernel_names(lambda: a @ b)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
