"""Sweep tile shapes and feeding schemes of the warp-tiled SIMT kernel
(triton_gemm/cuda_ref/warp_tile.cuh) against cuBLAS SGEMM in one run: the measurement
behind the tiles of ladder steps 7 and 9.

    python3 perf/tune_simt.py            # needs a CUDA GPU and nvcc

Each variant is first checked against float64 on edge shapes (scalar and float4 paths,
alpha/beta, output poisoned with NaN), then timed at 4096^3 and 8192^3.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perf.bench import tflops  # noqa: E402
from triton_gemm.cuda_ref import SOURCE_DIR  # noqa: E402
from triton_gemm.tolerances import tolerance  # noqa: E402

# BM, BN, BK, WM, WN, WNITER, TM, TN, MIN_BLOCKS, ASYNC_STAGES[, GROUP[, PREFETCH]];
# threads = (BM/WM)*(BN/WN)*32. MIN_BLOCKS caps registers at 65536 / (threads * MIN_BLOCKS).
# ASYNC_STAGES 0: register-staged double buffer (warp_tile::launch, steps 6 and 7);
# n >= 2: cp.async through n shared-memory stages (warp_tile::launch_async, step 9), its
# blocks in groups of GROUP block-rows (default 1: raster order), PREFETCH (default 0) 1 for
# fragments double-buffered in registers across K steps and tiles.
# Dropped after measuring (H100, 4096^3, cuBLAS 51.5): 3 blocks per SM for the 128-thread
# tiles (a 168-register cap) spills, 20.8-27.5 TFLOPS. In a later run (cuBLAS 51.5, step 9
# 43.6): step 9's tiles at BK 16 through 2 stages 38.3; 8 warps of 64x32 warp tiles with 8x8
# per lane (CUTLASS's SIMT arrangement) through cp.async 39.1 (3 stages) and 39.5 (4); 8
# warps of 32x64 with 4x16 per lane 39.0. 8192^3 alike (39.7-40.2 against 42.8). In a third
# run (cuBLAS 51.5, step 9 43.4): step 9 with unchecked copies for tiles wholly inside the
# matrices (no per-copy bounds test or pointer select) 41.2-41.5 over 3-5 stages and
# groups of 8 (8192^3: 41.5-42.7 against 44.0).
# After copy coordinates were hoisted out of the K loop (cuBLAS 51.5 / 51.3-51.7 at 4096^3 /
# 8192^3), TFLOPS, 8x16 per lane: four 8x4 sub-tiles 47.1-47.3 / 47.6-47.7, with prefetch 47.1
# / 47.2; two 8x8 46.2 / 47.2, with prefetch 48.1 / 48.1 (step 9 now); 16x8 in 4x2 sub-tiles of
# 4x4 47.2 / 47.1, with prefetch 47.5 / 48.3 (2x4 sub-tiles before hoisting: 43.5 / 44.0);
# 3 stages 45.8-46.7; 5 stages 46.5-47.0; 3 blocks per SM (168 registers, no spills now)
# 46.9-47.6, with prefetch they spill; BK 16 at 3-4 stages 36.4-38.2 before hoisting,
# 45.1-46.8 after, with prefetch. Steps 6 and 7 with their load coordinates hoisted the same
# way (predicated float4 loads): step 7 41.9 / 41.9 (0.81x, as before), step 7's tiles at
# BK 8 37.8 / 40.0; the register-staged fetch is not what holds them back, so kept as taught.
VARIANTS = [
    (128, 128, 16, 64, 32, 2, 4, 4, 2, 0),    # step 7 as built: BK 16, 2 blocks/SM
    (128, 128, 8, 64, 32, 2, 4, 4, 2, 0),
    (128, 128, 8, 64, 64, 4, 8, 4, 2, 4),     # step 9's tiles before: four 8x4 sub-tiles
    (128, 128, 8, 64, 64, 4, 8, 4, 2, 4, 1, 1),  # + fragments prefetched in registers
    (128, 128, 8, 64, 64, 4, 8, 4, 2, 3, 1, 1),
    (128, 128, 8, 64, 64, 2, 8, 8, 2, 4, 1, 1),  # step 9 as built
    (128, 128, 8, 64, 64, 2, 4, 4, 2, 4, 1, 1),  # 16x8 per lane: 4x2 sub-tiles of 4x4
    (128, 128, 8, 64, 64, 4, 8, 4, 2, 5, 1, 1),
    (128, 128, 8, 64, 64, 2, 8, 8, 3, 4),     # 3 blocks per SM (168 registers)
    (128, 128, 16, 64, 64, 4, 8, 4, 2, 3, 1, 1),  # BK 16 (dynamic shared memory)
    (128, 128, 16, 64, 64, 4, 8, 4, 2, 4, 1, 1),
]
# (1100, 300, 40): 9 block rows, a full group of 8 and a partial one for a GROUP 8 variant.
EDGE_SHAPES = [(1, 1, 1), (129, 65, 33), (300, 20, 129), (130, 260, 36), (1100, 300, 40)]


def _source() -> str:
    lines = ['#include "ladder.cuh"', '#include "warp_tile.cuh"', ""]
    for i, (bm, bn, bk, wm, wn, wniter, tm, tn, min_blocks, stages, *extra) in \
            enumerate(VARIANTS):
        tiles = f"{bm}, {bn}, {bk}, {wm}, {wn}, {wniter}, {tm}, {tn}"
        group, prefetch = (list(extra) + [1, 0][len(extra):])[:2]
        launcher = (f"launch_async<{tiles}, {stages}, {min_blocks}, {group}, "
                    f"{'true' if prefetch else 'false'}>"
                    if stages
                    else f"launch<{tiles}, true, {min_blocks}>")
        lines.append(f"cudaError_t variant{i}(LADDER_ARGS) {{\n"
                     f"  return warp_tile::{launcher}(M, N, K, alpha, A, B, beta, C, vec, "
                     f"stream);\n}}")
    return "\n".join(lines)


_BINDING = """
#include <ATen/cuda/CUDAContext.h>
#include <torch/extension.h>
#include "ladder.cuh"
%s
void run_variant(int64_t i, torch::Tensor A, torch::Tensor B, torch::Tensor C, double alpha,
                 double beta, bool vec) {
    using Fn = cudaError_t (*)(LADDER_ARGS);
    static const Fn table[] = {%s};
    cudaError_t err = table[i](A.size(0), B.size(1), A.size(1), alpha, A.data_ptr<float>(),
                               B.data_ptr<float>(), beta, C.data_ptr<float>(), vec,
                               at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == cudaSuccess, cudaGetErrorString(err));
}
"""


def _build():
    from torch.utils.cpp_extension import load_inline
    n = len(VARIANTS)
    decls = "\n".join(f"cudaError_t variant{i}(LADDER_ARGS);" for i in range(n))
    table = ", ".join(f"variant{i}" for i in range(n))
    return load_inline(
        name="triton_gemm_tune_simt", cpp_sources=[_BINDING % (decls, table)],
        cuda_sources=[_source()], functions=["run_variant"],
        extra_include_paths=[str(SOURCE_DIR)], extra_cuda_cflags=["-O3"])


def _edge_error(module, i: int) -> float:
    """Worst relative error over EDGE_SHAPES, scalar and (where aligned) float4 paths."""
    worst = 0.0
    for m, n, k in EDGE_SHAPES:
        a, b = torch.randn(m, k, device="cuda"), torch.randn(k, n, device="cuda")
        c0 = torch.randn(m, n, device="cuda")
        ref = 2.0 * (a.double() @ b.double()) - 0.5 * c0.double()
        for vec in {False, k % 4 == 0 and n % 4 == 0}:
            c = c0.clone()
            module.run_variant(i, a, b, c, 2.0, -0.5, vec)
            worst = max(worst, ((c.double() - ref).norm() / ref.norm()).item())
            c.fill_(float("nan"))
            module.run_variant(i, a, b, c, 1.0, 0.0, vec)  # beta = 0 never reads C
            ref0 = a.double() @ b.double()
            worst = max(worst, ((c.double() - ref0).norm() / ref0.norm()).item())
    return worst


def main() -> int:
    import triton.testing

    module = _build()
    torch.backends.cuda.matmul.allow_tf32 = False
    tol = tolerance(torch.float32, "ieee")
    print(f"{torch.cuda.get_device_name()}: TFLOPS (ratio to cuBLAS SGEMM in this run)")
    passed = []
    for i, v in enumerate(VARIANTS):
        err = _edge_error(module, i)
        ok = math.isfinite(err) and err <= tol
        print(f"  {v}: edge shapes err {err:.1e} {'ok' if ok else 'FAIL'}")
        if ok:
            passed.append(i)
    for size in (4096, 8192):
        a = torch.randn(size, size, device="cuda")
        b = torch.randn(size, size, device="cuda")
        ref = a.double() @ b.double()
        cublas_ms = triton.testing.do_bench(lambda: a @ b, return_mode="median")
        base = tflops(size, size, size, cublas_ms)
        print(f"{size}^3 cuBLAS {base:.1f}")
        for i in passed:
            c = torch.full((size, size), float("nan"), device="cuda")
            module.run_variant(i, a, b, c, 1.0, 0.0, True)
            err = ((c.double() - ref).norm() / ref.norm()).item()
            ms = triton.testing.do_bench(lambda: module.run_variant(i, a, b, c, 1.0, 0.0, True),
                                         return_mode="median")
            t = tflops(size, size, size, ms)
            print(f"  {VARIANTS[i]}: {t:6.1f} ({t / base:.2f}x)  err {err:.1e}")
    return 0 if len(passed) == len(VARIANTS) else 1


if __name__ == "__main__":
    sys.exit(main())
