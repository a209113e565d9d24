"""One call each of the CUDA ladder's best SIMT kernel, triton_gemm at precision "ieee" and
cuBLAS SGEMM, for Nsight Compute.

    ncu --profile-from-start off --section WarpStateStats ... python3 perf/profile_simt.py

Warm-up calls (the extension build, autotuning) happen before cudaProfilerStart, so the
profile holds exactly the launches being compared, on the same operands.
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
from triton_gemm import cuda_ref  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4096, help="M = N = K")
    parser.add_argument("--kernel", default="best_simt", choices=cuda_ref.NAMES)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(args.size, args.size, device="cuda")
    b = torch.randn(args.size, args.size, device="cuda")
    calls = (lambda: cuda_ref.sgemm(a, b, kernel=args.kernel),
             lambda: triton_gemm.matmul(a, b, precision="ieee"),
             lambda: torch.mm(a, b))
    for _ in range(3):
        for call in calls:
            call()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for call in calls:
        call()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    print(f"extension: {cuda_ref.load().__file__}")
    print(f"triton config: {triton_gemm.last_config()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
