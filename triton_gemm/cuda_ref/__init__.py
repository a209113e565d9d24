"""The classic CUDA SGEMM ladder, compiled at first use with torch's load_inline.

Each step computes C <- alpha * A @ B + beta * C on row-major float32 matrices (BLAS
semantics) and adds one technique over the previous step; the .cu files say which and why.

    from triton_gemm import cuda_ref
    c = cuda_ref.sgemm(a, b, kernel="double_buffer")
    for name, fn in cuda_ref.KERNELS.items(): fn(a, b)

All steps are built into one extension, once per process, for the running GPU's
architecture. The build directory is torch's extension cache (TORCH_EXTENSIONS_DIR,
default ~/.cache/torch_extensions/<python>_<cuda>/triton_gemm_cuda_ref), which torch
reuses across processes until a source changes. TRITON_GEMM_CUDA_VERBOSE=1 shows the build.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import torch

SOURCE_DIR = Path(__file__).resolve().parent

# (name, source file, what the step adds), in ladder order.
LADDER = (
    ("naive", "01_naive.cu", "one thread per output, operands from global memory"),
    ("smem_tiling", "02_smem_tiling.cu", "32x32 tiles staged in shared memory"),
    ("thread_tile_1d", "03_thread_tile_1d.cu", "8 outputs per thread in a column (64x64x8)"),
    ("thread_tile_2d", "04_thread_tile_2d.cu", "8x8 outputs per thread, outer products"),
    ("vectorized", "05_vectorized.cu", "float4 loads, transposed and padded A tile"),
    ("warp_tile", "06_warp_tile.cu", "64x32 warp tiles, 4x4 per lane in sub-tiles"),
    ("double_buffer", "07_double_buffer.cu", "two shared-memory stages at BK 16, one barrier per step"),
    ("wmma", "08_wmma.cu", "WMMA tensor cores, fp16 operands, fp32 accumulate"),
    ("best_simt", "09_best_simt.cu", "cp.async into 4 stages, 64x64 warps, 8x16 per lane"),
)
NAMES = tuple(name for name, _, _ in LADDER)
TENSOR_CORE_KERNELS = frozenset({"wmma"})  # fp16 operands: compare with cuBLAS fp16


def _cuda_toolkit_error() -> str | None:
    if torch.version.cuda is None:
        return (f"this torch build ({torch.__version__}) has no CUDA support; the CUDA ladder "
                f"needs a CUDA build of torch and the CUDA toolkit (nvcc)")
    from torch.utils import cpp_extension
    if cpp_extension.CUDA_HOME is None:
        return "no CUDA toolkit found: install nvcc or set CUDA_HOME"
    return None


@functools.lru_cache(maxsize=1)
def load():
    """Build (or reuse) the extension holding every step; returns the module."""
    problem = _cuda_toolkit_error()
    if problem:
        raise RuntimeError(f"cuda_ref: {problem}")
    from torch.utils.cpp_extension import load_inline
    cuda_sources = [(SOURCE_DIR / f).read_text() for _, f, _ in LADDER]
    module = load_inline(
        name="triton_gemm_cuda_ref",
        cpp_sources=[(SOURCE_DIR / "binding.cpp").read_text()],
        cuda_sources=cuda_sources,
        functions=["kernel_names", "sgemm_into"],
        extra_include_paths=[str(SOURCE_DIR)],
        extra_cuda_cflags=["-O3", "-lineinfo"],
        verbose=os.environ.get("TRITON_GEMM_CUDA_VERBOSE", "0") == "1",
    )
    if tuple(module.kernel_names()) != NAMES:
        raise RuntimeError(f"cuda_ref: binding lists {module.kernel_names()}, expected {NAMES}")
    return module


def _check(name: str, t, allow_none: bool = False) -> None:
    if t is None and allow_none:
        return
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"sgemm(): '{name}' must be a torch.Tensor, not {type(t).__name__}")
    if t.dtype != torch.float32:
        raise TypeError(f"sgemm(): '{name}' must be float32, got {t.dtype} "
                        f"(the ladder is SGEMM; convert with .float())")
    if t.device.type != "cuda":
        raise ValueError(f"sgemm(): '{name}' is on {t.device}; the CUDA ladder needs CUDA "
                         f"tensors (.cuda())")
    if t.dim() != 2:
        raise ValueError(f"sgemm(): '{name}' must be 2-D, got shape {tuple(t.shape)}")
    if not t.is_contiguous():
        raise ValueError(f"sgemm(): '{name}' must be contiguous (row-major); call "
                         f".contiguous() first")


def sgemm(a, b, c=None, *, alpha=1.0, beta=0.0, kernel="best_simt"):
    """alpha * a @ b + beta * c with one step of the ladder; returns a new tensor.

    c is read only when beta != 0 (then it must be given, shape (M, N)); it is not modified.
    """
    if kernel not in NAMES:
        raise ValueError(f"sgemm(): unknown kernel {kernel!r}; choose one of {NAMES}")
    _check("a", a)
    _check("b", b)
    _check("c", c, allow_none=True)
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"sgemm(): a and b shapes cannot be multiplied "
                         f"({a.shape[0]}x{a.shape[1]} and {b.shape[0]}x{b.shape[1]})")
    m, n, k = a.shape[0], b.shape[1], a.shape[1]
    if max(m, n, k) >= 2**31 or max(a.numel(), b.numel(), m * n) >= 2**31:
        raise ValueError("sgemm(): the CUDA ladder indexes with 32-bit sizes; every dimension "
                         "must be below 2^31 (use triton_gemm.matmul for larger problems)")
    if beta != 0 and c is None:
        raise ValueError("sgemm(): beta != 0 needs 'c' (the matrix beta scales)")
    if c is not None and tuple(c.shape) != (m, n):
        raise ValueError(f"sgemm(): 'c' must have shape ({m}, {n}), got {tuple(c.shape)}")
    devices = {t.device for t in (a, b, c) if t is not None}
    if len(devices) > 1:
        raise ValueError(f"sgemm(): tensors are on different devices {sorted(map(str, devices))}")
    out = c.clone() if c is not None and beta != 0 else torch.empty(m, n, device=a.device)
    if out.numel() == 0:
        return out
    # 16-byte loads need rows that start on 16-byte boundaries.
    vec = k % 4 == 0 and n % 4 == 0 and all(t.data_ptr() % 16 == 0 for t in (a, b, out))
    load().sgemm_into(kernel, a, b, out, float(alpha), float(beta), vec)
    return out


KERNELS = {name: functools.partial(sgemm, kernel=name) for name in NAMES}
