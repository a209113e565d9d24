"""GEMV-style fp32 FMA kernel for skinny products: C = A @ B with few rows (dispatch sends
up to dispatch.GEMV_MAX_M; it takes any), both operands K-contiguous (A row-major, B a
K-major weight: a linear layer's x @ W^T).

Each program owns BN output columns and a block of up to MAX_BM rows and walks the whole
K, one launch with no partials. Its accumulator is a (BK, BN, BM) register tensor: K across
the lanes and warps (BK = 32 lanes x num_warps), the BN columns and BM rows in every
thread's registers. A
K step is one scalar load of B per column and of A per row per thread, coalesced across
the lanes, and BN x BM FMAs on them: every A value is reused BN times and every B value BM
times straight from registers. The lanes' partial sums meet once, at the end (tl.sum over
K). tl.dot's FMA path instead converts both operands through shared memory every K step;
on the split-K kernel's best skinny tile it ran 16x8192x8192 in 224 us against 142.5 here
(cuBLAS SGEMM 154.9; perf/tile_probe.py, H100, L2 flushed).

The layout comes from how triton lays out loads: it vectorises along the dimension it
can prove contiguous and puts the lanes there. The K strides are not specialised
(do_not_specialize), so no dimension is provably contiguous and the loads keep one element
per thread along dimension 0, K, where lanes then go first (with 4-element vectors along K
each thread held 4 K positions per row and column, 4x the registers for the same reuse).
A and B get the same layout, so their product needs no conversion.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .. import configs
from .common import (AUTOTUNE, INTERPRETER, cdiv, epilogue_input, launch, make_tuners,
                     needs_int64, tuning_args)
from .epilogue import finish

# Rows one program holds in registers: a BM x BN accumulator per thread (BM = M rounded up
# to a power of two, at most this) takes 128 registers at BM = 16, BN = 8; the 8-column
# tiles took 253 in all there (no spills). More rows take several row blocks per column
# block, each reading the same B columns (from L2 when they run together).
MAX_BM = 16


@triton.jit(do_not_specialize=["stride_ak", "stride_bk"])
def _gemv_kernel(
    a_ptr, b_ptr, c_ptr, d_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn,
    stride_cm, stride_cn, stride_dm, stride_dn,
    alpha, beta,
    M_BUCKET, N_BUCKET, K_BUCKET, LAYOUT,
    HAS_D: tl.constexpr, ACTIVATION: tl.constexpr, EVEN_K: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, UNROLL: tl.constexpr,
):
    """C[:, n0:n0 + BN] = act(alpha * A @ B[:, n0:n0 + BN] + beta * D) for program n0 / BN.

    A (M, K), B (K, N), C (M, N), D broadcast to C (any stride may be 0); any strides, fast
    when A and B are K-contiguous. BK must be 32 x num_warps (one K position per
    thread); EVEN_K: K is a multiple of BK * UNROLL (no K mask). Grid: (ceil(N / BN) *
    ceil(M / BM),).
    M_BUCKET..LAYOUT are only read by the autotuner's key."""
    # Row blocks fastest: the programs of one column block run together and share its B
    # columns in L2.
    m_blocks = tl.cdiv(M, BM)
    offs_n = (tl.program_id(0) // m_blocks) * BN + tl.arange(0, BN)
    offs_m = (tl.program_id(0) % m_blocks) * BM + tl.arange(0, BM)
    offs_k = tl.arange(0, BK)
    # (BK, BN, BM) index tensors; the loads broadcast A over the columns, B over the rows.
    n3 = offs_n[None, :, None]
    m3 = offs_m[None, None, :]
    a_ptrs = a_ptr + m3 * stride_am + offs_k[:, None, None] * stride_ak
    b_ptrs = b_ptr + n3 * stride_bn + offs_k[:, None, None] * stride_bk
    acc = tl.zeros((BK, BN, BM), dtype=tl.float32)
    for k in range(0, K, BK * UNROLL):
        # UNROLL steps per iteration put UNROLL loads of each row and column in flight
        # before their FMAs (no software pipelining of these scalar loads).
        for u in tl.static_range(UNROLL):
            step = k + u * BK
            if EVEN_K:
                a = tl.load(a_ptrs + step * stride_ak, mask=m3 < M, other=0.0)
                b = tl.load(b_ptrs + step * stride_bk, mask=n3 < N, other=0.0)
            else:
                k3 = step + offs_k[:, None, None]
                a = tl.load(a_ptrs + step * stride_ak, mask=(m3 < M) & (k3 < K), other=0.0)
                b = tl.load(b_ptrs + step * stride_bk, mask=(n3 < N) & (k3 < K), other=0.0)
            acc += a.to(tl.float32) * b.to(tl.float32)
    c = tl.sum(acc, axis=0) * alpha  # (BN, BM)
    n2 = offs_n[:, None]
    m2 = offs_m[None, :]
    inside = (n2 < N) & (m2 < M)
    c = finish(c, d_ptr + m2 * stride_dm + n2 * stride_dn, inside, beta, HAS_D, ACTIVATION)
    tl.store(c_ptr + m2 * stride_cm + n2 * stride_cn, c.to(c_ptr.dtype.element_ty),
             mask=inside)


_TUNED = make_tuners(_gemv_kernel, "gemv", {"simt": configs.gemv_configs()},
                     configs.gemv_prune)["simt"]


def supports(a, b, out, d=None) -> bool:
    """Whether operands can run here: fp32, element offsets below 2^31 (computed in
    int32)."""
    return (a.dtype == b.dtype == torch.float32
            and not needs_int64(a, b, out, *(() if d is None else (d,))))


def matmul_2d(a, b, out, d=None, *, alpha=1.0, beta=0.0, activation=0, config=None):
    """out = act(alpha * a @ b + beta * d) in fp32 FMA (precision "ieee") for 2-D a (M, K),
    b (K, N), out (M, N), any strides, that supports() accepts; d None or broadcastable to
    out by strides. config pins a triton.Config of configs.gemv_configs (tests). Returns
    out."""
    m, k = a.shape
    n = b.shape[1]
    if not supports(a, b, out, d):
        raise ValueError(f"the GEMV kernel takes float32 operands below 2^31 elements, not "
                         f"{a.dtype} {tuple(a.shape)} @ {b.dtype} {tuple(b.shape)}; use "
                         f"dispatch.run")
    if out.numel() == 0:
        return out
    has_d, d = epilogue_input(d, beta, out)
    rows = max(triton.next_power_of_2(m), 1)
    bm = min(rows, MAX_BM)
    if config is None and (INTERPRETER or not AUTOTUNE):
        config = configs.gemv_default_config(m)
    # Keyed on M rounded up to a power of two, not the usual bucket (at least 16): the best
    # column count per program falls as rows grow (configs.GEMV_TILES).
    tuning = (rows, *tuning_args(m, n, k, a, b)[1:])
    args = (a, b, out, d, m, n, k, *a.stride(), *b.stride(), *out.stride(), *d.stride(),
            float(alpha), float(beta), *tuning)
    # EVEN_K must hold for every config the tuner may try: BK * UNROLL divides the
    # largest step any of them takes.
    even_k = k % configs.GEMV_MAX_STEP == 0
    meta = dict(HAS_D=has_d, ACTIVATION=activation, EVEN_K=even_k, BM=bm)

    def grid(meta_):
        return (cdiv(n, meta_["BN"]) * cdiv(m, bm),)

    key = (*tuning, has_d, activation, even_k, a.dtype, b.dtype)
    launch(_gemv_kernel, _TUNED, grid, args, meta, config, "simt", key)
    return out
