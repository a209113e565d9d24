"""16-bit GEMV: single rows of activations against a K-major weight (a linear layer's
x @ W^T at batch 1), the weight read in long runs of each of its rows.

Each program owns BN output columns (BN rows of the weight) of one output row and walks the
whole K in steps of BK: a (BN, BK) block of the weight, 16 bytes per thread, and the row's
BK activations beside it, pipelined over the K loop (tl.range's num_stages) as a plain
streaming read is. Products accumulate elementwise in an fp32 (BN, BK) register tile that
is summed over K once, at the end: no tensor cores, no shared-memory operand tiles for a
dot, no partial sums in memory, one launch.

Why: a skinny product is a read of its weight, and the tensor-core kernels' thin tiles read
each weight row in runs of BK = 128 elements (256 bytes), the split-K kernel's in 32-128.
Summing the same weight in whole rows reads it faster (README, "How fast a skinny product
can go": H100, 8192x8192 fp16, 256-byte runs 49.9 us, whole rows 47.8). Here a run is
BK = 512-1024 elements. Measured in configs.GEMV16_TILES. The sm_90a build (offline, K-major
operands, strides divisible by 16) reads the weight by 16-byte cp.async
(LDGSTS.E.BYPASS.128; the activation row 4-8 bytes a thread), staged in 12.8-69.6 KB of
shared memory, 32-150 registers, no spills, over the five configs.

More rows than one are right but slow: each reads the weight again (the grid's row axis,
rows of one column block launched together). H200, eager after an L2 flush, us, best
config against the tensor-core plans (cuBLAS): 2x8192x8192 fp16 43.7 vs 36.4-37.6
(40.2-41.2), 4 rows 65.5 vs 36.4-37.2 (40.9). A (rows, BN, BK) register tile instead was
slower too (dispatch.GEMV_MAX_M), and one (BN, BK) accumulator per row (a probe, not kept)
no faster: 2x8192x8192 fp16 / bf16 36.2 / 37.3 against 36.5 / 36.5 (cuBLAS 39.7-41.2 /
35.5-37.0), 4 rows 40.8 / 42.5 against 35.6-36.4 / 36.3. So the dispatcher sends one row
only.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .. import configs
from .common import (AUTOTUNE, INTERPRETER, cdiv, epilogue_input, launch, make_tuners,
                     needs_int64, tuning_args)
from .epilogue import finish


@triton.jit
def _gemv16_kernel(
    a_ptr, b_ptr, c_ptr, d_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn,
    stride_cm, stride_cn, stride_dm, stride_dn,
    alpha, beta,
    M_BUCKET, N_BUCKET, K_BUCKET, LAYOUT,
    HAS_D: tl.constexpr, ACTIVATION: tl.constexpr, EVEN_K: tl.constexpr,
    GEMV16: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, STAGES: tl.constexpr,
):
    """C[m, n0:n0 + BN] = act(alpha * A[m] @ B[:, n0:n0 + BN] + beta * D[m, n0:n0 + BN]).

    A (M, K), B (K, N), C (M, N), D broadcast to C (any stride may be 0); any strides, fast
    when A and B are K-contiguous with 16-byte rows. EVEN_K: K is a multiple of BK (no K
    mask); STAGES: K steps in flight. Grid: (M * ceil(N / BN),), rows fastest (the
    programs of one column block share its weight rows in L2). The argument list is the
    GEMV kernel's (kernels/gemv.py) but for the tile's constexprs; GEMV16 only marks the
    config family; M_BUCKET..LAYOUT are only read by the autotuner's key."""
    pid = tl.program_id(0)
    row = pid % M
    offs_n = (pid // M) * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + row * stride_am + offs_k * stride_ak
    b_ptrs = b_ptr + offs_n[:, None] * stride_bn + offs_k[None, :] * stride_bk
    in_n = offs_n[:, None] < N
    acc = tl.zeros((BN, BK), dtype=tl.float32)
    for k in tl.range(0, K, BK, num_stages=STAGES):
        if EVEN_K:
            a = tl.load(a_ptrs + k * stride_ak)
            b = tl.load(b_ptrs + k * stride_bk, mask=in_n, other=0.0)
        else:
            in_k = k + offs_k < K
            a = tl.load(a_ptrs + k * stride_ak, mask=in_k, other=0.0)
            b = tl.load(b_ptrs + k * stride_bk, mask=in_n & in_k[None, :], other=0.0)
        acc += a.to(tl.float32)[None, :] * b.to(tl.float32)
    c = tl.sum(acc, axis=1) * alpha  # (BN,)
    inside = offs_n < N
    c = finish(c, d_ptr + row * stride_dm + offs_n * stride_dn, inside, beta, HAS_D,
               ACTIVATION)
    tl.store(c_ptr + row * stride_cm + offs_n * stride_cn, c.to(c_ptr.dtype.element_ty),
             mask=inside)


_TUNED = make_tuners(_gemv16_kernel, "gemv16", {"half": configs.gemv16_configs()},
                     configs.gemv16_prune)["half"]


def supports(a, b, out, d=None) -> bool:
    """Whether operands can run here: fp16 or bf16, element offsets below 2^31 (computed
    in int32)."""
    return (a.dtype == b.dtype and a.dtype in (torch.float16, torch.bfloat16)
            and not needs_int64(a, b, out, *(() if d is None else (d,))))


def matmul_2d(a, b, out, d=None, *, alpha=1.0, beta=0.0, activation=0, config=None):
    """out = act(alpha * a @ b + beta * d) with fp32 accumulation for 2-D a (M, K), b (K, N),
    out (M, N), any strides, that supports() accepts; d None or broadcastable to out by
    strides. config pins a triton.Config of configs.gemv16_configs (tests). Returns out."""
    m, k = a.shape
    n = b.shape[1]
    if not supports(a, b, out, d):
        raise ValueError(f"the 16-bit GEMV kernel takes float16 or bfloat16 operands of one "
                         f"dtype below 2^31 elements, not {a.dtype} {tuple(a.shape)} @ "
                         f"{b.dtype} {tuple(b.shape)}; use dispatch.run")
    if out.numel() == 0:
        return out
    has_d, d = epilogue_input(d, beta, out)
    if config is None and (INTERPRETER or not AUTOTUNE):
        config = configs.gemv16_default_config()
    tuning = tuning_args(m, n, k, a, b)
    args = (a, b, out, d, m, n, k, *a.stride(), *b.stride(), *out.stride(), *d.stride(),
            float(alpha), float(beta), *tuning)
    # EVEN_K must hold for every config the tuner may try.
    even_k = k % configs.GEMV16_MAX_BK == 0
    meta = dict(HAS_D=has_d, ACTIVATION=activation, EVEN_K=even_k)

    def grid(meta_):
        return (m * cdiv(n, meta_["BN"]),)

    key = (*tuning, has_d, activation, even_k, a.dtype, b.dtype)
    launch(_gemv16_kernel, _TUNED, grid, args, meta, config, "half", key)
    return out
