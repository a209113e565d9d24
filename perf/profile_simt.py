"""One launch each of the CUDA ladder's best SIMT kernel and cuBLAS SGEMM, for Nsight Compute.

    ncu --profile-from-start off --section WarpStateStats ... python3 perf/profile_simt.py

Warm-up launches (and the extension build) happen before cudaProfilerStart, so the profile
holds exactly the two launches being compared, on the same operands.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from triton_gemm import cuda_ref  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4096, help="M = N = K")
    parser.add_argument("--kernel", default="best_simt", choices=cuda_ref.NAMES)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(args.size, args.size, device="cuda")
    b = torch.randn(args.size, args.size, device="cuda")
    for _ in range(3):
        cuda_ref.sgemm(a, b, kernel=args.kernel)
        torch.mm(a, b)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    cuda_ref.sgemm(a, b, kernel=args.kernel)
    torch.mm(a, b)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    print(f"extension: {cuda_ref.load().__file__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
