"""tf32 products with one MN-major operand, fed to wgmma from registers: the nn layout (a
row-major B, as `a @ b` gives it) and tt (a transposed A), without a K-major copy.

wgmma reads 32-bit operands from shared memory only K-major, but its first operand may
come from registers in any layout. So the MN-major operand X, stored (K, P) P-contiguous
(nn: B, P = N; tt: A^T, P = M), is that first operand, loaded from shared memory into
registers; the K-major one Y, stored (Q, K) K-contiguous (nn: A, Q = M; tt: B^T, Q = N),
is read by wgmma from shared memory. The accumulator is X^T Y^T: C^T for nn (stored
transposed), C for tt. A warp of its own issues both tiles' TMA loads into a ring of
STAGES slots (warp specialisation); the two wgmma warpgroups never stop for them.

ptxas before CUDA 13.3 may reuse a register-fed wgmma's input registers before it has read
them (triton-lang/triton#11781; triton 3.6 ships ptxas 12.8). Left to itself, ptxas 12.8
loaded the next K step's fragment into the registers the running wgmma reads. So two
fragments alternate (the loop runs two K steps a turn) and each is kept (_keep) until the
wait that retires its wgmma: the SASS then loads each fragment only after that wait
(perf/sass_audit.wgmma_register_hazards checks). With each wgmma waited for at once
instead, nothing is in flight to overwrite, but the tensor cores drain every step: 528.7
against 395.0 us at 4096^3 (perf/transpose_probe.py, H200, one run, before the TMA warp).

Written in Gluon (triton's explicit-layout dialect): triton's tl.dot on an N-major fp32
operand re-lays it in shared memory (686-888 us at 4096^3), and its pipeliner has its own
register-operand hazard (triton-lang/triton#9433). Hopper only; no interpreter.
"""

from __future__ import annotations

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from .common import INTERPRETER, hopper, needs_int64, record, run_kernel
from .persistent import _tma_ok, programs, tile_origin

# The tile: BP accumulator rows from X (two warpgroups of 64), BQ columns from Y, BK deep,
# STAGES ring slots (48 KB each). perf/transpose_probe.py (rsws: configs), H200, 4096^3 /
# 8192^3 nn, us, one run (cuBLAS tf32; the library's K-major copy plan): BQ 256 x BP 128
# GROUP_M 8 382.7 / 3209 (365.4 / 3188; 398.4 / 3321); GROUP_M 4 384.6 / 3252, 16 393.6 /
# 3300; BQ 128 x BP 256 486.3 / 3925. Another run: 3 stages 399.2 / 3324 against 4 386.0 /
# 3342.
BP, BQ, BK, STAGES, GROUP_M, WARPS = 128, 256, 32, 4, 8, 8
# One TMA warp, a warpgroup of registers: 24 each hands the rest to the wgmma warps
# (240 each; they need ~215).
LOADER_REGS = 24
MAX_REGISTERS = 65536 // (32 * (WARPS + 4)) // 8 * 8


@gluon.jit
def _grid(P, Q, K, BP: gl.constexpr, BQ: gl.constexpr, BK: gl.constexpr):
    """(tiles along P, tiles along Q, K steps): both partitions walk the same tiles and
    steps, the K steps rounded up to pairs (the wgmma loop runs two a turn)."""
    return gl.cdiv(P, BP), gl.cdiv(Q, BQ), gl.cdiv(gl.cdiv(K, BK), 2) * 2


@gluon.jit
def _keep(x):
    """A use of x's registers the compiler can neither drop nor move: ptxas 12.x takes a
    register-fed wgmma's inputs as dead once it is issued, not once it retires."""
    return gl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=gl.float32,
                                     is_pure=False, pack=1)


@gluon.jit
def _loader(x_desc, y_desc, x_ring, y_ring, ready, empty, P, Q, K, c_ptr, stride_c0,
            BP: gl.constexpr, BQ: gl.constexpr, BK: gl.constexpr, GROUP_M: gl.constexpr,
            OUT_T: gl.constexpr):
    """The TMA warp: each K step's X and Y tiles into the ring once the wgmma warps have
    handed the slot back. K steps are issued in pairs; past K, TMA fills zeros."""
    STAGES: gl.constexpr = x_ring.type.shape[0]
    nbytes: gl.constexpr = x_desc.block_type.nbytes + y_desc.block_type.nbytes
    num_pid_p, num_pid_q, k_steps = _grid(P, Q, K, BP, BQ, BK)
    step = 0
    for tile in range(gl.program_id(0), num_pid_p * num_pid_q, gl.num_programs(0)):
        off_q, off_p = tile_origin(tile, num_pid_q, num_pid_p, BQ, BP, GROUP_M)
        for i in range(k_steps):
            slot = step % STAGES
            mbarrier.wait(empty.index(slot), ((step // STAGES) & 1) ^ 1)
            mbarrier.expect(ready.index(slot), nbytes)
            tma.async_copy_global_to_shared(x_desc, [i * BK, off_p], ready.index(slot),
                                            x_ring.index(slot))
            tma.async_copy_global_to_shared(y_desc, [off_q, i * BK], ready.index(slot),
                                            y_ring.index(slot))
            step += 1


@gluon.jit
def _mma(x_desc, y_desc, x_ring, y_ring, ready, empty, P, Q, K, c_ptr, stride_c0,
         BP: gl.constexpr, BQ: gl.constexpr, BK: gl.constexpr, GROUP_M: gl.constexpr,
         OUT_T: gl.constexpr):
    """The wgmma warpgroups: one wgmma left in flight, its X fragment kept until the wait
    that retires it; a slot goes back to the TMA warp once both warpgroups' wgmmas on it
    have retired. The tile is stored from registers: C[q, p] (OUT_T) or C[p, q]."""
    STAGES: gl.constexpr = x_ring.type.shape[0]
    NW: gl.constexpr = gl.num_warps()
    mma_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[NW, 1], instr_shape=[16, BQ, 8])
    x_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma_layout,
                                                 k_width=1)
    rp = gl.arange(0, BP, layout=gl.SliceLayout(1, mma_layout))
    rq = gl.arange(0, BQ, layout=gl.SliceLayout(0, mma_layout))
    num_pid_p, num_pid_q, k_steps = _grid(P, Q, K, BP, BQ, BK)
    step = 0
    for tile in range(gl.program_id(0), num_pid_p * num_pid_q, gl.num_programs(0)):
        off_q, off_p = tile_origin(tile, num_pid_q, num_pid_p, BQ, BP, GROUP_M)
        mbarrier.wait(ready.index(step % STAGES), (step // STAGES) & 1)
        x = x_ring.index(step % STAGES).permute((1, 0)).load(x_layout)
        y = x
        acc = gl.zeros([BP, BQ], gl.float32, mma_layout)
        for i in range(0, k_steps, 2):
            slot = (step + i) % STAGES
            acc = warpgroup_mma(x, y_ring.index(slot).permute((1, 0)), acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc, ))  # retires step i - 1
            _keep(y)
            gl.thread_barrier()  # both warpgroups
            mbarrier.arrive(empty.index((slot + STAGES - 1) % STAGES), pred=i > 0)
            odd = (slot + 1) % STAGES
            mbarrier.wait(ready.index(odd), ((step + i + 1) // STAGES) & 1)
            y = x_ring.index(odd).permute((1, 0)).load(x_layout)
            acc = warpgroup_mma(y, y_ring.index(odd).permute((1, 0)), acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc, ))  # retires step i
            _keep(x)
            gl.thread_barrier()
            mbarrier.arrive(empty.index(slot))
            if i + 2 < k_steps:
                even = (slot + 2) % STAGES
                mbarrier.wait(ready.index(even), ((step + i + 2) // STAGES) & 1)
                x = x_ring.index(even).permute((1, 0)).load(x_layout)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
        _keep(y)
        gl.thread_barrier()
        step += k_steps
        mbarrier.arrive(empty.index((step + STAGES - 1) % STAGES))
        p = (off_p + rp).to(gl.int64)
        q = (off_q + rq).to(gl.int64)
        inside = (p[:, None] < P) & (q[None, :] < Q)
        if OUT_T:
            gl.store(c_ptr + q[None, :] * stride_c0 + p[:, None], acc, mask=inside)
        else:
            gl.store(c_ptr + p[:, None] * stride_c0 + q[None, :], acc, mask=inside)


@gluon.jit
def _register_fed_kernel(
    x_desc, y_desc, c_ptr, P, Q, K, stride_c0,
    BP: gl.constexpr, BQ: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr,
    GROUP_M: gl.constexpr, OUT_T: gl.constexpr, LOADER_REGS: gl.constexpr,
):
    """acc = X^T Y^T in tf32 over K for X (K, P) P-contiguous through x_desc ([BK, BP]
    boxes) and Y (Q, K) K-contiguous through y_desc ([BQ, BK]); C fp32 with unit column
    stride and row stride stride_c0: C (Q, P) = acc^T with OUT_T, else C (P, Q) = acc.
    Persistent: program i walks tiles i, i + grid, ... in grouped order."""
    x_ring = gl.allocate_shared_memory(gl.float32, [STAGES, BK, BP], x_desc.layout)
    y_ring = gl.allocate_shared_memory(gl.float32, [STAGES, BQ, BK], y_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)
    gl.warp_specialize([
        (_mma, (x_desc, y_desc, x_ring, y_ring, ready, empty, P, Q, K, c_ptr, stride_c0, BP,
                BQ, BK, GROUP_M, OUT_T)),
        (_loader, (x_desc, y_desc, x_ring, y_ring, ready, empty, P, Q, K, c_ptr, stride_c0, BP,
                   BQ, BK, GROUP_M, OUT_T)),
    ], [1], [LOADER_REGS])


def _operands(a: torch.Tensor, b: torch.Tensor):
    """(X, Y, OUT_T) for 2-D a (M, K), b (K, N) in the nn or tt layout, else None."""
    if a.stride(1) == 1 and b.stride(1) == 1 and b.stride(0) != 1:  # nn: C^T = B^T A^T
        return b, a, True
    if a.stride(0) == 1 and a.stride(1) != 1 and b.stride(0) == 1:  # tt: C = A B
        return a.T, b.T, False
    return None


def supports(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> bool:
    """Whether fp32 a (M, K) and b (K, N) in the nn or tt layout, both as TMA reads them
    (16-byte aligned base and row stride), and a fp32 out (M, N) with unit column stride
    can run here: on a Hopper GPU, outside the interpreter."""
    if INTERPRETER or not (a.dtype == b.dtype == out.dtype == torch.float32):
        return False
    if a.dim() != 2 or b.dim() != 2 or out.stride(1) != 1 or not hopper(a.device):
        return False
    ops = _operands(a, b)
    return (ops is not None and _tma_ok(ops[0], ops[0].stride(0))
            and _tma_ok(ops[1], ops[1].stride(0))
            and not needs_int64(out) and min(a.shape + b.shape) > 0)


def _descriptor(t: torch.Tensor, block: list) -> TensorDescriptor:
    layout = gl.NVMMASharedLayout.get_default_for(block, gl.float32)
    return TensorDescriptor(t, list(t.shape), list(t.stride()), block, layout)


def matmul_2d(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, sms: int) -> torch.Tensor:
    """out = a @ b in tf32 for operands supports() accepts; sms: the GPU's SM count (the
    grid as the persistent kernel's: persistent.programs). Returns out."""
    x, y, out_t = _operands(a, b)
    p, q = x.shape[1], y.shape[0]
    grid = programs(BP, BQ, p, q, sms, half_tail=False)
    run_kernel(_register_fed_kernel, (grid, ),
               (_descriptor(x, [BK, BP]), _descriptor(y, [BQ, BK]), out, p, q, a.shape[1],
                out.stride(0)),
               {"BP": BP, "BQ": BQ, "BK": BK, "STAGES": STAGES, "GROUP_M": GROUP_M,
                "OUT_T": out_t, "LOADER_REGS": LOADER_REGS, "num_warps": WARPS,
                "maxnreg": MAX_REGISTERS})
    record(triton.Config({"REGISTER_FED": True, "BM": BP, "BN": BQ, "BK": BK},
                         num_warps=WARPS, num_stages=STAGES), "tf32")
    return out
