"""The tiled GEMM kernel: C = alpha * A @ B + beta * D, batched, any strides, any sizes."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_wait

from .. import configs
from .common import (AUTOTUNE, INTERPRETER, VECTOR_BYTES, cdiv, dependent_meta, dot_precision,
                     epilogue_input, launch, make_tuners, needs_int64, tuning_args)
from .epilogue import finish


@triton.jit
def _matmul_kernel(
    a_ptr, b_ptr, c_ptr, d_ptr,
    M, N, K, MA, NB,
    stride_ab, stride_am, stride_ak,
    stride_bb, stride_bk, stride_bn,
    stride_cb, stride_cm, stride_cn,
    stride_db, stride_dm, stride_dn,
    alpha, beta,
    M_BUCKET, N_BUCKET, K_BUCKET, LAYOUT,
    PRECISION: tl.constexpr, HAS_D: tl.constexpr, UPCAST: tl.constexpr, INT64: tl.constexpr,
    ACTIVATION: tl.constexpr, VEC: tl.constexpr, A_M_MAJOR: tl.constexpr,
    B_K_MAJOR: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
    DEPENDENT: tl.constexpr, BESIDE: tl.constexpr,
):
    """One BM x BN tile of C[batch] = alpha * A[batch] @ B[batch] (+ beta * D[batch]).

    A: (batch, MA, K) of which the first M rows are used, B: (batch, K, NB) of which the
    first N columns are used (MA > M, NB > N when an operand is a zero-padded copy: edge
    tiles then read the padding, not wrapped rows or columns, so offsets along a
    contiguous M or N keep their alignment), C: (batch, M, N), D broadcast to C's shape
    (any stride may be 0); all with arbitrary element strides. Grid: (batch * ceil(M/BM) *
    ceil(N/BN),). Accumulates in fp32; PRECISION is tl.dot's input_precision ("ieee",
    "tf32", "tf32x3"; ignored for 16-bit operands). UPCAST converts bf16 operands to
    fp32 before the dot (Triton's interpreter returns garbage for a bf16 dot). INT64
    computes element offsets in int64 for operands beyond 2^31 elements. ACTIVATION: an
    epilogue.ACTIVATIONS code, applied after the beta * D term. M_BUCKET..LAYOUT are only
    read by the autotuner's key. VEC > 0 promises 16-byte rows that triton's own
    specialisation (multiples of 16 elements) cannot see: A K-contiguous or M-contiguous
    (A_M_MAJOR: stride_am is 1), B K-contiguous (B_K_MAJOR: stride_bk is 1) or
    N-contiguous (stride_bn is 1), their other strides, K, (A M-contiguous) MA and (B
    N-contiguous) NB multiples of VEC elements (16 bytes), so the loads stay 16 bytes wide
    (fp16 K = 1000).
    DEPENDENT: see common.dependent_launch. BESIDE (with DEPENDENT): launched after a kernel
    that lets it start early (persistent's TRIGGER) and that neither reads what it writes
    nor writes what it reads, so it runs beside that kernel and waits for it only at its
    end (dispatch.STRIP_BESIDE).
    """
    tl.static_assert(DEPENDENT or not BESIDE)
    if DEPENDENT and not BESIDE:
        gdc_wait()  # launched with launch_pdl: the kernel before may still be draining
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    tiles_per_batch = num_pid_m * num_pid_n
    batch = pid // tiles_per_batch
    tile = pid % tiles_per_batch

    # Grouped ordering: GROUP_M rows of tiles are walked column by column, so programs
    # running together reuse the same B tiles (and A rows) from L2.
    tiles_per_group = GROUP_M * num_pid_n
    first_m = (tile // tiles_per_group) * GROUP_M
    group_rows = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (tile % tiles_per_group) % group_rows
    pid_n = (tile % tiles_per_group) // group_rows

    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    if INT64:
        offs_m = offs_m.to(tl.int64)
        offs_n = offs_n.to(tl.int64)
        offs_k = offs_k.to(tl.int64)
    # Rows/columns past the edge read a valid row/column instead (wrapped), so only K needs
    # a load mask; their results are never stored.
    rows_a = offs_m % MA
    cols_b = offs_n % NB
    batch64 = batch.to(tl.int64)
    # Offsets of A's rows and of B's rows (N-contiguous) or columns (K-major); VEC: each a
    # multiple of VEC, B's columns in aligned runs of VEC (see the docstring).
    a_rows = batch64 * stride_ab + rows_a * stride_am
    a_cols = offs_k * stride_ak
    b_k_rows = batch64 * stride_bb + offs_k * stride_bk
    b_cols = cols_b * stride_bn
    if VEC == 0:
        # B's columns run in order within a tile but for the wrap at the edge, which triton
        # cannot see through `%` by an NB it does not know to be a multiple of 16: without
        # the hint an unaligned N-contiguous B is loaded with the warp's lanes along K, 32
        # cache lines per load. Loads stay as wide as the alignment triton sees allows.
        b_cols = tl.max_contiguous(cols_b, 16) * stride_bn
    else:
        if A_M_MAJOR:  # rows in runs of VEC (wrapped at MA, a multiple of VEC)
            a_rows = tl.max_contiguous(tl.multiple_of(a_rows, VEC), VEC)
            a_cols = tl.multiple_of(a_cols, VEC)
        else:
            a_rows = tl.multiple_of(a_rows, VEC)
        if B_K_MAJOR:
            b_k_rows = offs_k
            b_cols = tl.multiple_of(batch64 * stride_bb + cols_b * stride_bn, VEC)
        else:
            b_k_rows = tl.multiple_of(b_k_rows, VEC)
            b_cols = tl.max_contiguous(tl.multiple_of(cols_b, VEC), VEC)
    a_ptrs = a_ptr + a_rows[:, None] + a_cols[None, :]
    b_ptrs = b_ptr + b_k_rows[:, None] + b_cols[None, :]

    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        k_left = K - k * BK
        a_mask = offs_k[None, :] < k_left
        b_mask = offs_k[:, None] < k_left
        if VEC > 0:  # K is a multiple of VEC: the masks hold in runs of VEC along K
            a_mask = tl.max_constancy(a_mask, [1, VEC])
            b_mask = tl.max_constancy(b_mask, [VEC, 1])
        a = tl.load(a_ptrs, mask=a_mask, other=0.0)
        b = tl.load(b_ptrs, mask=b_mask, other=0.0)
        if UPCAST:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk

    acc = acc * alpha
    c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    d_ptrs = d_ptr + batch64 * stride_db + offs_m[:, None] * stride_dm + offs_n[None, :] * stride_dn
    acc = finish(acc, d_ptrs, c_mask, beta, HAS_D, ACTIVATION)
    c_ptrs = (c_ptr + batch64 * stride_cb + offs_m[:, None] * stride_cm
              + offs_n[None, :] * stride_cn)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)
    if BESIDE:
        gdc_wait()


_TUNED = make_tuners(_matmul_kernel, "matmul",
                     {family: configs.configs(family) for family in configs.FAMILIES},
                     configs.plain_prune)


# The kernel's VEC hint restores 16-byte loads (cp.async instead of 2-byte loads in the
# sm_90 PTX at fp16 K = 1000). H100, CUDA-graph replay after an L2 flush, best of five
# tiles, us, hinted against not (cuBLAS): 8x1000x1000 fp16 10.7 vs 37.0 (8.1); 8 x
# 48x1000x1000 13.6 vs 39.6 (12.0); 1000^3 15.8 vs 46.0 (11.4); bf16 the same within 0.2 us.
# Dispatch pads such operands from 64 rows and columns, and on Hopper runs single products
# on the TMA kernel instead (1000^3 bf16 15.1 us there, perf/plans.py): the hint serves the
# plain kernel's other launches (fewer rows, batches of them). On an M-major A (a skinny
# product against a row-major weight, run transposed): 8x4104x4104 nn fp16 21.2 against
# 34.9 unhinted (cuBLAS 18.1; probes, twenty-fourth session, same harness).


def vector_width(a: torch.Tensor, b: torch.Tensor, k: int,
                 nb: int) -> tuple[int, bool, bool]:
    """The kernel's (VEC, A_M_MAJOR, B_K_MAJOR) for (B, MA, K) a and (B, K, NB) b: VEC,
    elements per 16 bytes, where A is K-contiguous or else M-contiguous (A_M_MAJOR), B
    N-contiguous or else K-contiguous (B_K_MAJOR), their bases 16-byte aligned and their
    other strides, K, (A M-contiguous) MA and (B N-contiguous) NB multiples of it, but not
    all multiples of 16 elements (which triton specialises on by itself); else (0, False,
    False)."""
    vec = VECTOR_BYTES // a.element_size()
    sa, sb = a.stride(), b.stride()
    a_m_major = sa[2] != 1
    b_k_major = sb[2] != 1
    if not a_m_major:
        a_rows = (sa[1],)
    elif sa[1] == 1:
        a_rows = (sa[2], a.shape[1])
    else:
        return 0, False, False
    if not b_k_major:
        b_rows = (sb[1], nb)
    elif sb[1] == 1:
        b_rows = (sb[2],)
    else:
        return 0, False, False
    counts = (sa[0], *a_rows, sb[0], k, *b_rows)
    if (a.data_ptr() % VECTOR_BYTES or b.data_ptr() % VECTOR_BYTES
            or any(c % vec for c in counts) or all(c % 16 == 0 for c in counts)):
        return 0, False, False
    return vec, a_m_major, b_k_major


def matmul_3d(a, b, out, d=None, *, alpha=1.0, beta=0.0, precision="ieee", activation=0,
              config=None, beside=False):
    """Launch on 3-D operands: out[i] = alpha * a[i, :M] @ b[i, :, :N] + beta * d[i].

    a: (B, MA, K), b: (B, K, NB), out: (B, M, N) with MA >= M, NB >= N, on one device,
    same dtype; d None or broadcastable to out by strides (expanded views, stride 0
    allowed). precision is a resolved name ("ieee", "tf32", "tf32x3"; any for 16-bit
    operands). activation: an epilogue.ACTIVATIONS code applied to the result. config pins
    a triton.Config instead of autotuning (tests pin every config this way). beside: run
    beside the kernel launched before (BESIDE, where launches are dependent:
    common.dependent_launch), on configs.plain_beside_config unless config is given; that
    kernel must have been launched with its TRIGGER, must not write a, b or d and must not
    touch out. Returns out.
    """
    batch, ma, k = a.shape
    m, n, nb = out.shape[1], out.shape[2], b.shape[2]
    if out.numel() == 0:
        return out
    has_d, d = epilogue_input(d, beta, out)
    dot_prec = dot_precision(a.dtype, precision)
    int64 = needs_int64(a, b, out, d)
    tuning = tuning_args(m, n, k, a, b)
    args = (
        a, b, out, d, m, n, k, ma, nb,
        *a.stride(), *b.stride(), *out.stride(), *d.stride(),
        float(alpha), float(beta), *tuning,
    )
    vec, a_m_major, b_k_major = vector_width(a, b, k, nb)
    meta = dict(PRECISION=dot_prec, HAS_D=has_d, INT64=int64, ACTIVATION=activation,
                UPCAST=INTERPRETER and a.dtype == torch.bfloat16, VEC=vec,
                A_M_MAJOR=a_m_major, B_K_MAJOR=b_k_major, **dependent_meta(a.device))
    meta["BESIDE"] = beside and meta["DEPENDENT"]

    def grid(meta_):
        return (batch * cdiv(m, meta_["BM"]) * cdiv(n, meta_["BN"]),)

    family = configs.family_for(a.dtype, precision)
    if config is None and meta["BESIDE"]:
        config = configs.plain_beside_config(family)
    if config is None and INTERPRETER:
        config = configs.interpreter_config()
    elif config is None and not AUTOTUNE:
        config = configs.default_config(family, n)
    key = (*tuning, dot_prec, has_d, a.dtype, b.dtype, out.dtype, d.dtype)
    launch(_matmul_kernel, _TUNED[family], grid, args, meta, config, family, key)
    return out
