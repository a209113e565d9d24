"""3xTF32 (`precision="tf32x3"`) products with one operand split in registers, read as
given: no staged copy of that operand in any layout.

The staged split path (dispatch.SPLIT_TF32) writes each operand's tf32 halves to memory
first: 12 bytes an element for a split operand, 8 for one read as given (dispatch.raw_side),
452 us of 10.2 ms at 8192^3 on the H100. Here one operand X is register_fed.py's register
operand: each fragment is rounded to tf32 and its remainder taken in registers, so X is
read once, as given. X is an MN-major operand, stored (K, P) P-contiguous (nn and tn: B,
P = N; tt: A^T, P = M), or for nt, both operands K-major, the one with more rows, stored
(P, K) K-contiguous (X_K_MAJOR). The other, Y, stored (Q, K) K-contiguous, goes to wgmma
from shared memory as given, the tensor core dropping its low 13 bits (its hi half), beside
Y's remainder (copy.remainder_job, the only copy: 8 bytes an element of Y); for tn, where Y
(A) is M-major, both its halves are staged K-major (copy.split_job, 12 bytes an element).

Per K step: hi x hi into hi_acc, X lo x Y hi and X hi x Y lo into lo_acc (lo x lo dropped,
as the staged kernel does; X's remainder has either sign, so the dropped term is unbiased).
hi_acc joins an IEEE accumulator every HI_FLUSH_K (persistent.hi_flush_k: the tensor core
truncates its adds), starting over through wgmma's scale-d. Three accumulators of [BP, BQ]
and two steps' fragments of X in flight (register_fed's hazard rule: each kept until the
wait that retires its wgmmas) fit 240 registers at 128 x 128 tiles 16 deep.

The epilogue takes alpha and beta * D (addmm, a linear layer's bias), not activations.
Hopper only; no interpreter; no clusters.
"""

from __future__ import annotations

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)

from .common import INTERPRETER, epilogue_input, hopper, needs_int64, record, run_kernel
from .persistent import _tma_ok, hi_flush_k, programs, tile_origin
from .register_fed import (_descriptor, _keep, _release, _store_tile, claim_slot,
                           max_registers, ring_barriers)

BP, BQ, BK, STAGES, GROUP_M, WARPS = 128, 128, 16, 8, 8, 8
LOADER_REGS = 24
MAX_REGISTERS = max_registers(WARPS)


@gluon.jit
def _walk(P, Q, K, BP: gl.constexpr, BQ: gl.constexpr, BK: gl.constexpr,
          PERIOD: gl.constexpr):
    """(first tile, tile step, tiles, tile columns, K steps) of this program's walk, the same
    in both partitions; K steps rounded up to whole flush periods of PERIOD steps (TMA reads
    zeros past K)."""
    columns = gl.cdiv(P, BP)
    return (gl.program_id(0), gl.num_programs(0), columns * gl.cdiv(Q, BQ), columns,
            gl.cdiv(gl.cdiv(K, BK), PERIOD) * PERIOD)


@gluon.jit
def _loader(x_desc, y_desc, ylo_desc, x_ring, y_ring, ylo_ring, ready, empty, P, Q, K,
            c_desc, epi, BP: gl.constexpr, BQ: gl.constexpr, BK: gl.constexpr,
            GROUP_M: gl.constexpr, OUT_T: gl.constexpr, PERIOD: gl.constexpr,
            X_K_MAJOR: gl.constexpr):
    """The TMA warp: each K step's X, Y and Y-remainder tiles into the ring once the wgmma
    warps have handed the slot back."""
    nbytes: gl.constexpr = x_desc.block_type.nbytes + 2 * y_desc.block_type.nbytes
    first, walkers, tiles, columns, k_steps = _walk(P, Q, K, BP, BQ, BK, PERIOD)
    step = 0
    for tile in range(first, tiles, walkers):
        off_q, off_p = tile_origin(tile, gl.cdiv(Q, BQ), columns, BQ, BP, GROUP_M)
        for i in range(k_steps):
            slot = claim_slot(ready, empty, step, nbytes)
            if X_K_MAJOR:
                x_at = [off_p, i * BK]
            else:
                x_at = [i * BK, off_p]
            tma.async_copy_global_to_shared(x_desc, x_at, ready.index(slot),
                                            x_ring.index(slot))
            tma.async_copy_global_to_shared(y_desc, [off_q, i * BK], ready.index(slot),
                                            y_ring.index(slot))
            tma.async_copy_global_to_shared(ylo_desc, [off_q, i * BK], ready.index(slot),
                                            ylo_ring.index(slot))
            step += 1


@gluon.jit
def _split(x):
    """(hi, lo) of fp32 x: hi rounded to tf32 (half away from zero, as copy.split_job),
    lo = x - hi; a non-finite x is its own hi, with a zero lo."""
    bits = x.to(gl.uint32, bitcast=True)
    finite = (bits & 0x7F800000) != 0x7F800000
    hi = gl.where(finite, ((bits + 0x1000) & 0xFFFFE000).to(gl.float32, bitcast=True), x)
    return hi, gl.where(finite, x - hi, 0.0)


@gluon.jit
def _fragment(x_ring, slot, x_layout: gl.constexpr, X_K_MAJOR: gl.constexpr):
    """(hi, lo) of X's [BP, BK] tile in ring slot `slot`, in registers as wgmma's first
    operand: X stored [BK, BP] (MN-major) or with X_K_MAJOR [BP, BK]."""
    if X_K_MAJOR:
        x = x_ring.index(slot).load(x_layout)
    else:
        x = x_ring.index(slot).permute((1, 0)).load(x_layout)
    return _split(x)


@gluon.jit
def _epilogue(acc, d_ptr, stride_dm, stride_dn, beta, off_p, off_q, P, Q,
              OUT_T: gl.constexpr, HAS_D: gl.constexpr):
    """acc + beta * D over the tile at (off_p, off_q) of acc = X^T Y^T: D[q, p] with OUT_T
    (acc is C^T's tile), else D[p, q]; D read by pointer, any strides (0: broadcast)."""
    if HAS_D:
        layout: gl.constexpr = acc.type.layout
        p = off_p + gl.arange(0, acc.shape[0], layout=gl.SliceLayout(1, layout))[:, None]
        q = off_q + gl.arange(0, acc.shape[1], layout=gl.SliceLayout(0, layout))[None, :]
        if OUT_T:
            offsets = q * stride_dm + p * stride_dn
        else:
            offsets = p * stride_dm + q * stride_dn
        acc += beta * gl.load(d_ptr + offsets, mask=(p < P) & (q < Q), other=0.0)
    return acc


@gluon.jit
def _step(xh, xl, y, ylo, hi_acc, lo_acc, fresh):
    """One K step's three wgmmas (async, three commit groups); fresh: hi_acc starts over
    (the wgmma's scale-d off: no other instruction may write an accumulator between
    wgmmas, or ptxas serialises them all)."""
    hi_acc = warpgroup_mma(xh, y, hi_acc, use_acc=not fresh, is_async=True)
    lo_acc = warpgroup_mma(xl, y, lo_acc, is_async=True)
    lo_acc = warpgroup_mma(xh, ylo, lo_acc, is_async=True)
    return hi_acc, lo_acc


@gluon.jit
def _mma(x_desc, y_desc, ylo_desc, x_ring, y_ring, ylo_ring, ready, empty, P, Q, K, c_desc,
         epi, d_ptr, stride_dm, stride_dn, alpha, beta, BP: gl.constexpr, BQ: gl.constexpr,
         BK: gl.constexpr, GROUP_M: gl.constexpr, OUT_T: gl.constexpr, PERIOD: gl.constexpr,
         X_K_MAJOR: gl.constexpr, HAS_D: gl.constexpr):
    """The wgmma warpgroups: one K step's wgmmas left in flight, its X fragments kept until
    the wait that retires them; a loop turn is one flush period of PERIOD steps (even), at
    whose end hi_acc joins acc. The tile goes out through shared memory by TMA
    (register_fed._store_tile)."""
    STAGES: gl.constexpr = x_ring.type.shape[0]
    NW: gl.constexpr = gl.num_warps()
    THREADS: gl.constexpr = 32 * NW
    mma_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[NW, 1], instr_shape=[16, BQ, 8])
    x_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma_layout,
                                                 k_width=1)
    first, walkers, tiles, columns, k_steps = _walk(P, Q, K, BP, BQ, BK, PERIOD)
    step = 0
    for tile in range(first, tiles, walkers):
        off_q, off_p = tile_origin(tile, gl.cdiv(Q, BQ), columns, BQ, BP, GROUP_M)
        mbarrier.wait(ready.index(step % STAGES), (step // STAGES) & 1)
        xh, xl = _fragment(x_ring, step % STAGES, x_layout, X_K_MAJOR)
        yh = xh
        yl = xl
        acc = gl.zeros([BP, BQ], gl.float32, mma_layout)
        hi_acc = gl.zeros([BP, BQ], gl.float32, mma_layout)
        lo_acc = gl.zeros([BP, BQ], gl.float32, mma_layout)
        for i0 in range(0, k_steps, PERIOD):
            for j in gl.static_range(0, PERIOD, 2):
                i = i0 + j
                slot = (step + i) % STAGES
                hi_acc, lo_acc = _step(xh, xl, y_ring.index(slot).permute((1, 0)),
                                       ylo_ring.index(slot).permute((1, 0)), hi_acc, lo_acc,
                                       j == 0)
                hi_acc, lo_acc = warpgroup_mma_wait(num_outstanding=3,
                                                    deps=(hi_acc, lo_acc))
                _keep(yh)  # step i - 1 retired
                _keep(yl)
                _release(empty, (slot + STAGES - 1) % STAGES, 0, i > 0, 1, THREADS)
                odd = (slot + 1) % STAGES
                mbarrier.wait(ready.index(odd), ((step + i + 1) // STAGES) & 1)
                yh, yl = _fragment(x_ring, odd, x_layout, X_K_MAJOR)
                hi_acc, lo_acc = _step(yh, yl, y_ring.index(odd).permute((1, 0)),
                                       ylo_ring.index(odd).permute((1, 0)), hi_acc, lo_acc,
                                       False)
                if j + 2 == PERIOD:
                    hi_acc, lo_acc = warpgroup_mma_wait(num_outstanding=0,
                                                        deps=(hi_acc, lo_acc))
                    acc += hi_acc
                else:
                    hi_acc, lo_acc = warpgroup_mma_wait(num_outstanding=3,
                                                        deps=(hi_acc, lo_acc))
                _keep(xh)  # step i retired
                _keep(xl)
                _release(empty, slot, 0, True, 1, THREADS)
                if i + 2 < k_steps:
                    even = (slot + 2) % STAGES
                    mbarrier.wait(ready.index(even), ((step + i + 2) // STAGES) & 1)
                    xh, xl = _fragment(x_ring, even, x_layout, X_K_MAJOR)
        _keep(yh)  # the last step retired at its period's end
        _keep(yl)
        step += k_steps
        _release(empty, (step + STAGES - 1) % STAGES, 0, True, 1, THREADS)
        # As the staged kernel: a non-finite remainder sum (inf x 0 = NaN) is dropped; the
        # hi products carry every infinity of the true product.
        acc += gl.where(gl.abs(lo_acc) < float("inf"), lo_acc, 0.0)
        acc = _epilogue(acc * alpha, d_ptr, stride_dm, stride_dn, beta, off_p, off_q, P, Q,
                        OUT_T, HAS_D)
        _store_tile(acc, c_desc, epi, 0, off_p, off_q, OUT_T, BP, BQ, False)
    tma.store_wait(0)


@gluon.jit
def _split_fed_kernel(x_desc, y_desc, ylo_desc, c_desc, P, Q, K, d_ptr, stride_dm,
                      stride_dn, alpha, beta,
                      BP: gl.constexpr, BQ: gl.constexpr, BK: gl.constexpr,
                      STAGES: gl.constexpr, GROUP_M: gl.constexpr, OUT_T: gl.constexpr,
                      LOADER_REGS: gl.constexpr, PERIOD: gl.constexpr,
                      X_K_MAJOR: gl.constexpr = False, HAS_D: gl.constexpr = False):
    """acc = X^T Y^T in 3xTF32 over K for X (K, P) P-contiguous through x_desc ([BK, BP]
    boxes; with X_K_MAJOR (P, K) K-contiguous, [BP, BK]), Y and its remainder (Q, K)
    K-contiguous through y_desc and ylo_desc ([BQ, BK]); C fp32 through c_desc ([BQ / 8, BP]
    boxes of C (Q, P) = acc^T with OUT_T, else [BP, BQ / 8] of C (P, Q) = acc), as
    alpha * acc + beta * D with HAS_D (D (Q, P) with OUT_T, else (P, Q), strides stride_dm,
    stride_dn), else alpha * acc. Persistent, tiles in grouped order."""
    if X_K_MAJOR:
        x_ring = gl.allocate_shared_memory(gl.float32, [STAGES, BP, BK], x_desc.layout)
    else:
        x_ring = gl.allocate_shared_memory(gl.float32, [STAGES, BK, BP], x_desc.layout)
    y_ring = gl.allocate_shared_memory(gl.float32, [STAGES, BQ, BK], y_desc.layout)
    ylo_ring = gl.allocate_shared_memory(gl.float32, [STAGES, BQ, BK], ylo_desc.layout)
    epi = gl.allocate_shared_memory(gl.float32, [2] + c_desc.block_type.shape, c_desc.layout)
    ready, empty = ring_barriers(STAGES)
    gl.warp_specialize([
        (_mma, (x_desc, y_desc, ylo_desc, x_ring, y_ring, ylo_ring, ready, empty, P, Q, K,
                c_desc, epi, d_ptr, stride_dm, stride_dn, alpha, beta, BP, BQ, BK, GROUP_M,
                OUT_T, PERIOD, X_K_MAJOR, HAS_D)),
        (_loader, (x_desc, y_desc, ylo_desc, x_ring, y_ring, ylo_ring, ready, empty, P, Q,
                   K, c_desc, epi, BP, BQ, BK, GROUP_M, OUT_T, PERIOD, X_K_MAJOR)),
    ], [1], [LOADER_REGS])


def operands(a: torch.Tensor, b: torch.Tensor):
    """(X, Y, OUT_T, X_K_MAJOR) for 2-D a (M, K), b (K, N), else None: X (K, P)
    P-contiguous or with X_K_MAJOR (P, K) K-contiguous, read as given; Y (Q, K), K-contiguous
    as given except for tn (then staged: y_staged); acc = X^T Y^T is C^T with OUT_T. nt
    takes the operand with fewer rows as Y, whose remainder is copied."""
    if b.stride(1) == 1 and b.stride(0) != 1:  # nn, tn: C^T = B^T A^T
        return b, a, True, False
    if a.stride(0) == 1 and a.stride(1) != 1 and b.stride(0) == 1:  # tt: C = A B
        return a.T, b.T, False, False
    if a.stride(1) == 1 and b.stride(0) == 1 and b.stride(1) != 1:  # nt
        return (a, b.T, False, True) if a.shape[0] >= b.shape[1] else (b.T, a, True, True)
    return None


def y_staged(y: torch.Tensor) -> bool:
    """Whether operands()' Y needs a K-major copy of its halves (tn), not just its
    remainder: it is not K-contiguous in rows TMA can read."""
    return not (y.stride(1) == 1 and _tma_ok(y, y.stride(0)))


def supports(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor,
             d: torch.Tensor | None = None) -> bool:
    """Whether fp32 a (M, K), b (K, N), a fp32 out (M, N) with unit column stride and the
    epilogue's d (None, or broadcast to out's shape) can run here: on a Hopper GPU, outside
    the interpreter, X (operands()) and out as TMA reads and writes them (Y may be staged:
    y_staged), d's element offsets within int32 (the epilogue computes them so)."""
    if INTERPRETER or not (a.dtype == b.dtype == out.dtype == torch.float32):
        return False
    if d is not None and (d.dtype != torch.float32 or needs_int64(d)):
        return False
    if a.dim() != 2 or b.dim() != 2 or out.stride(1) != 1 or min(a.shape + b.shape) == 0:
        return False
    ops = operands(a, b)
    return (ops is not None and hopper(a.device) and _tma_ok(ops[0], ops[0].stride(0))
            and _tma_ok(out, out.stride(0)))


def kernel_constexprs(out_t: bool, x_k_major: bool, has_d: bool, k: int) -> dict:
    """_split_fed_kernel's constexpr arguments for a product K deep (and for the offline
    compiles of the tests): C^T stored with out_t, X K-major with x_k_major, D read with
    has_d."""
    return {"BP": BP, "BQ": BQ, "BK": BK, "STAGES": STAGES, "GROUP_M": GROUP_M,
            "OUT_T": out_t, "LOADER_REGS": LOADER_REGS, "X_K_MAJOR": x_k_major,
            "HAS_D": has_d, "PERIOD": hi_flush_k(k) // BK}


def matmul_2d(a: torch.Tensor, b: torch.Tensor, y_hi: torch.Tensor, y_lo: torch.Tensor,
              out: torch.Tensor, sms: int, d: torch.Tensor | None = None, *,
              alpha: float = 1.0, beta: float = 0.0) -> torch.Tensor:
    """out = alpha * a @ b + beta * d in 3xTF32 for operands supports() accepts (d None:
    out = alpha * a @ b; beta == 0: d ignored, NaN included); y_hi, y_lo: operands()' Y (a
    for nn and tn, b^T for tt, the one with fewer rows for nt) as wgmma reads its hi half (Y
    itself, or for tn its rounded half as copy.split_job writes it) and its remainder
    (copy.remainder_job, or split_job's), (Q, >= K) K-contiguous; sms: the GPU's SM count.
    Returns out."""
    x, _, out_t, x_k_major = operands(a, b)
    p, q, k = x.shape[0 if x_k_major else 1], y_hi.shape[0], a.shape[1]
    has_d, d = epilogue_input(d, beta, out)
    args = (_descriptor(x, [BP, BK] if x_k_major else [BK, BP]),
            _descriptor(y_hi[:, :k], [BQ, BK]), _descriptor(y_lo[:, :k], [BQ, BK]),
            _descriptor(out, [BQ // 8, BP] if out_t else [BP, BQ // 8]), p, q, k,
            d, d.stride(0), d.stride(1), float(alpha), float(beta))
    constexprs = {**kernel_constexprs(out_t, x_k_major, has_d, k), "num_warps": WARPS,
                  "maxnreg": MAX_REGISTERS}
    grid = programs(BP, BQ, p, q, sms, half_tail=False)
    run_kernel(_split_fed_kernel, (grid, ), args, constexprs)
    record(triton.Config({"SPLIT_FED": True, "BM": BP, "BN": BQ, "BK": BK},
                         num_warps=WARPS, num_stages=STAGES), "split")
    return out
