"""Run every CUDA ladder step once on odd shapes; meant to run under compute-sanitizer:

    compute-sanitizer --tool memcheck python3 perf/sanitize_ladder.py
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from triton_gemm import cuda_ref  # noqa: E402
from triton_gemm.tolerances import tolerance  # noqa: E402

# Edges in every direction, K below one BK step, and one aligned shape for the float4 path.
SHAPES = [(1, 1, 1), (17, 33, 9), (129, 65, 33), (300, 17, 129), (130, 260, 36)]


def main() -> int:
    failures = 0
    for m, n, k in SHAPES:
        a, b = torch.randn(m, k, device="cuda"), torch.randn(k, n, device="cuda")
        c = torch.randn(m, n, device="cuda")
        ref = 2.0 * (a.double() @ b.double()) + 0.5 * c.double()
        for name in cuda_ref.NAMES:
            out = cuda_ref.sgemm(a, b, c, alpha=2.0, beta=0.5, kernel=name)
            err = ((out.double() - ref).norm() / ref.norm()).item()
            tol = tolerance(torch.float16 if name in cuda_ref.TENSOR_CORE_KERNELS
                            else torch.float32, "ieee")
            ok = err <= tol
            failures += not ok
            print(f"{name:16s} {m}x{n}x{k}: rel error {err:.2e} {'ok' if ok else 'FAIL'}")
    torch.cuda.synchronize()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
