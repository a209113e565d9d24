"""Sweep tile shapes of the warp-tiled SIMT kernel (triton_gemm/cuda_ref/warp_tile.cuh)
against cuBLAS SGEMM in one run; the measurement behind the tiles of ladder steps 7 and 9.

    python3 perf/tune_simt.py            # needs a CUDA GPU and nvcc
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perf.bench import tflops  # noqa: E402
from triton_gemm.cuda_ref import SOURCE_DIR  # noqa: E402

# BM, BN, BK, WM, WN, WNITER, TM, TN, MIN_BLOCKS (double-buffered);
# threads = (BM/WM)*(BN/WN)*32. MIN_BLOCKS caps registers at 65536 / (threads * MIN_BLOCKS).
VARIANTS = [
    (128, 128, 8, 64, 32, 2, 4, 4, 1),     # step 7 uncapped (its ladder build took 133 registers)
    (128, 128, 8, 64, 32, 2, 4, 4, 2),     # step 7 as built: <= 128 registers, 2 blocks/SM
    (128, 128, 16, 64, 32, 2, 4, 4, 2),
    (128, 128, 16, 64, 64, 4, 8, 4, 2),    # the public worklog's best tiles (step 9)
    (128, 128, 16, 64, 64, 2, 8, 8, 2),
    (128, 128, 16, 32, 64, 1, 8, 8, 1),
    (128, 128, 16, 64, 32, 1, 8, 8, 1),
    (128, 256, 8, 64, 64, 4, 8, 4, 1),
    (256, 128, 8, 64, 64, 4, 8, 4, 1),
    (64, 128, 16, 32, 64, 2, 4, 4, 2),
    (128, 64, 16, 64, 32, 2, 4, 4, 2),
]


def _source() -> str:
    lines = ['#include "ladder.cuh"', '#include "warp_tile.cuh"', ""]
    for i, (bm, bn, bk, wm, wn, wniter, tm, tn, min_blocks) in enumerate(VARIANTS):
        threads = (bm // wm) * (bn // wn) * 32
        lines.append(
            f"cudaError_t variant{i}(int M, int N, int K, float alpha, const float* A, "
            f"const float* B, float beta, float* C, cudaStream_t s) {{\n"
            f"  dim3 grid(ladder::ceil_div(N, {bn}), ladder::ceil_div(M, {bm}));\n"
            f"  warp_tile::kernel<{bm}, {bn}, {bk}, {wm}, {wn}, {wniter}, {tm}, {tn}, true, "
            f"{min_blocks}, true>"
            f"<<<grid, {threads}, 0, s>>>(M, N, K, alpha, A, B, beta, C);\n"
            f"  return cudaGetLastError();\n}}")
    return "\n".join(lines)


_BINDING = """
#include <ATen/cuda/CUDAContext.h>
#include <torch/extension.h>
#include <cuda_runtime_api.h>
%s
void run_variant(int64_t i, torch::Tensor A, torch::Tensor B, torch::Tensor C) {
    using Fn = cudaError_t (*)(int, int, int, float, const float*, const float*, float, float*,
                               cudaStream_t);
    static const Fn table[] = {%s};
    cudaError_t err = table[i](A.size(0), B.size(1), A.size(1), 1.f, A.data_ptr<float>(),
                               B.data_ptr<float>(), 0.f, C.data_ptr<float>(),
                               at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == cudaSuccess, cudaGetErrorString(err));
}
"""


def main() -> int:
    from torch.utils.cpp_extension import load_inline
    import triton.testing

    n = len(VARIANTS)
    decls = "\n".join(f"cudaError_t variant{i}(int, int, int, float, const float*, const float*,"
                      f" float, float*, cudaStream_t);" for i in range(n))
    module = load_inline(
        name="triton_gemm_tune_simt", cpp_sources=[_BINDING % (decls, ", ".join(
            f"variant{i}" for i in range(n)))],
        cuda_sources=[_source()], functions=["run_variant"],
        extra_include_paths=[str(SOURCE_DIR)], extra_cuda_cflags=["-O3"])
    torch.backends.cuda.matmul.allow_tf32 = False
    print(f"{torch.cuda.get_device_name()}: TFLOPS (ratio to cuBLAS SGEMM in this run)")
    for size in (4096, 8192):
        a = torch.randn(size, size, device="cuda")
        b = torch.randn(size, size, device="cuda")
        ref = a.double() @ b.double()
        cublas_ms = triton.testing.do_bench(lambda: a @ b, return_mode="median")
        base = tflops(size, size, size, cublas_ms)
        print(f"{size}^3 cuBLAS {base:.1f}")
        for i, v in enumerate(VARIANTS):
            c = torch.full((size, size), float("nan"), device="cuda")
            module.run_variant(i, a, b, c)
            err = ((c.double() - ref).norm() / ref.norm()).item()
            ms = triton.testing.do_bench(lambda: module.run_variant(i, a, b, c),
                                         return_mode="median")
            t = tflops(size, size, size, ms)
            print(f"  {v}: {t:6.1f} ({t / base:.2f}x)  err {err:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
