"""Ping-pong: fp16 / bf16 products (and tf32 ones with both operands K-major) whose tile
epilogue runs while the tensor cores work on the next tile. Hopper only, in Gluon (no
interpreter).

The library's 16-bit kernels (persistent, batched, register_fed's nt path) run a tile's K
loop and then its epilogue (accumulator to 16 bits, through shared memory, TMA store) in the
same warps: the tensor cores idle for the epilogue of every tile. Over a short K that is a
large share of the time (32 x 1000^3 fp16: 16 K steps a 128x256 tile, 156.6 us against
cuBLAS's 127.9; kernels/batched.py). Here two wgmma warpgroups each own a whole BM x BN tile
(alternate tiles of the program's walk) and take turns at the tensor cores: one runs its K
loop while the other stores its previous tile, the schedule CUTLASS calls ping-pong. One TMA
warp fills a ring of STAGES slots for both, in walk order.

Turns: warpgroup w's t-th K loop waits on turn[w] until the other has issued every wgmma of
its K loop before (an mbarrier each, one arrival a K loop). Besides keeping the two K loops
from interleaving, the turns keep the ring's phase parities sound: a warpgroup waits on a
slot's ready barrier only once the slot's previous load (the other warpgroup's or its own)
has been waited on, so a wait never runs two phases ahead of the slot.

16-bit operands in any layout: A (M, K) K-major or M-major, B (K, N) N-major or K-major;
wgmma reads 16-bit operands from shared memory in either major order (32-bit ones K-major
only: tf32 takes nt, TF32_TILE). Batches walk every product's tiles through 3-D
descriptors, as kernels/register_fed.py's bmm does. The epilogue takes alpha, beta, a D
whose rows are all one row (a bias; a row per product) and the fused activations (linear,
addmm, baddbmm with a bias); dispatch.PINGPONG says where it runs and has the
measurements.
"""

from __future__ import annotations

import torch
import triton
from triton.runtime.jit import constexpr_function
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)

from .batched import _tma_ok as _batched_tma_ok
from .common import INTERPRETER, cdiv, hopper, needs_int64, record, run_kernel
from .epilogue import apply_activation
from .persistent import _tma_ok, programs
from .register_fed import (_descriptor, _load, _ring_layout, _store_chunk, _tile_origin,
                           claim_slot, max_registers, ring_barriers)

# (BM, BN, BK, STAGES, CHUNKS): a warpgroup's tile (its accumulator 128 fp32 registers a
# thread at 128x128), the ring (32 KB a slot at 128x128x64), and the epilogue's chunks
# (each warpgroup's two buffers hold a BM x BN / CHUNKS chunk each). perf/pingpong_probe.py,
# H100, fp16, CUDA-graph us after the L2 flush, this tile / others (forty-ninth session):
# in 8 chunks 4096x4096x1024 nt 51.2 / 56.1, 8192x4096x512 55.4 / 63.1, 4096x8192x1024 tn
# 101.6 / 121.1, 16 x 1024^2 x 512 33.2 / 35.6 (32 x 1024^3 nn 108.0 / 108.3, 64 x 512^3
# 38.1 / 38.0, 132 x 256x384x512 40.7 / 40.6; 8 x 4096^2 x 512 nt 228.0 / 224.5, its
# rounds spread 217-246); in 2 chunks and 4 stages 32 x 1024^3 nn 108.0 / 116.4, 8 x 2048^3 201.0 /
# 205.7; 6 stages (8 chunks) 8 x 2048^3 230.8 against 5's 206.7, 16 x 2048x384x2048 92.5 /
# 85.9; a 64x256 tile a warpgroup (4 stages) 4096^3 nt 208.4 against 192.0, 16 x
# 2048x384x2048 187.8 against 85.9.
TILE = (128, 128, 64, 5, 4)
# tf32 (fp32 operands, both K-major: wgmma reads 32-bit operands from shared memory only
# so): K steps of the same 128 bytes, C in fp32 chunks (229656 bytes of shared memory,
# offline sm_90a).
TF32_TILE = (128, 128, 32, 5, 4)
GROUP_M = 8
WARPS = 4  # a warpgroup each; the kernel has two and a TMA warp
LOADER_REGS = 24
# Two wgmma warpgroups and the TMA warp's (a warpgroup of registers): 240 each for the
# wgmma warpgroups.
MMA_REGS = 240
MAX_REGISTERS = max_registers(2 * WARPS)


@gluon.jit
def _walk(M, N, K, BATCH, BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr):
    """(first tile, tile step, tiles in this program's walk, tile columns, K steps): program
    i walks tiles i, i + grid, ..., the products one after another."""
    columns = gl.cdiv(N, BN)
    first = gl.program_id(0)
    walkers = gl.num_programs(0)
    tiles = BATCH * gl.cdiv(M, BM) * columns
    return (first, walkers, gl.cdiv(gl.maximum(tiles - first, 0), walkers), columns,
            gl.cdiv(K, BK))


@gluon.jit
def _origin(j, first, walkers, M, columns, BM: gl.constexpr, BN: gl.constexpr,
            GROUP_M: gl.constexpr):
    """(product, off_m, off_n) of the j-th tile of this program's walk: register_fed's
    batched walk with one CTA a cluster (its Q, rows of BQ, is M here; its P, N)."""
    return _tile_origin(first + j * walkers, M, columns, 0, 1, BN, BM, GROUP_M)


@gluon.jit
def _loader(a_desc, b_desc, a_ring, b_ring, ready, empty, M, N, K, BATCH,
            BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, GROUP_M: gl.constexpr,
            A_T: gl.constexpr, B_T: gl.constexpr, BATCHED: gl.constexpr):
    """The TMA warp: every tile's K steps of A and B into the ring, in walk order, each
    slot once its consumer has handed it back. Past K (and M, N) TMA fills zeros."""
    nbytes: gl.constexpr = a_desc.block_type.nbytes + b_desc.block_type.nbytes
    first, walkers, mine, columns, k_steps = _walk(M, N, K, BATCH, BM, BN, BK)
    step = 0
    for j in range(mine):
        product, off_m, off_n = _origin(j, first, walkers, M, columns, BM, BN, GROUP_M)
        for i in range(k_steps):
            slot = claim_slot(ready, empty, step, nbytes)
            if A_T:
                a_at = [i * BK, off_m]
            else:
                a_at = [off_m, i * BK]
            if B_T:
                b_at = [off_n, i * BK]
            else:
                b_at = [i * BK, off_n]
            _load(a_desc, a_at, ready.index(slot), a_ring.index(slot), product, BATCHED)
            _load(b_desc, b_at, ready.index(slot), b_ring.index(slot), product, BATCHED)
            step += 1


@gluon.jit
def _consumer(a_desc, b_desc, a_ring, b_ring, ready, empty, turn, c_desc, epi, M, N, K, BATCH,
              d_ptr, stride_db, stride_dn, alpha, beta,
              BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, GROUP_M: gl.constexpr,
              A_T: gl.constexpr, B_T: gl.constexpr, BATCHED: gl.constexpr,
              HAS_D: gl.constexpr, ACTIVATION: gl.constexpr, WHO: gl.constexpr):
    """Wgmma warpgroup WHO (0 or 1): tiles WHO, WHO + 2, ... of the walk, each K loop in
    its turn (one wgmma left in flight, a slot handed back once the wgmma reading it
    retires), then the tile, through the epilogue (_finish), out by its own epilogue
    buffers (epi) while the other warpgroup's K loop runs."""
    STAGES: gl.constexpr = a_ring.type.shape[0]
    mma_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[gl.num_warps(), 1],
        instr_shape=[16, BN, 256 // a_desc.dtype.primitive_bitwidth])  # K: 32 bytes
    first, walkers, mine, columns, k_steps = _walk(M, N, K, BATCH, BM, BN, BK)
    for j in range(WHO, mine, 2):
        product, off_m, off_n = _origin(j, first, walkers, M, columns, BM, BN, GROUP_M)
        # Turn j // 2: warpgroup 0 waits for that many of warpgroup 1's K loops (none at
        # first: parity 1 passes a fresh barrier), warpgroup 1 for one more of 0's.
        mbarrier.wait(turn.index(WHO), ((j // 2) & 1) ^ (1 - WHO))
        step = j * k_steps
        acc = gl.zeros([BM, BN], gl.float32, mma_layout)
        for i in range(k_steps):
            slot = (step + i) % STAGES
            mbarrier.wait(ready.index(slot), ((step + i) // STAGES) & 1)
            a = a_ring.index(slot)
            if A_T:
                a = a.permute((1, 0))
            b = b_ring.index(slot)
            if B_T:
                b = b.permute((1, 0))
            acc = warpgroup_mma(a, b, acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc, ))  # retires step i - 1
            gl.thread_barrier()  # every warp past that wait
            mbarrier.arrive(empty.index((slot + STAGES - 1) % STAGES), pred=i > 0)
        gl.thread_barrier()  # every warp has issued its last wgmma
        mbarrier.arrive(turn.index(1 - WHO))
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
        gl.thread_barrier()
        mbarrier.arrive(empty.index((step + k_steps - 1) % STAGES))
        _store_chunks(acc, c_desc, epi, product, off_m, off_n, N, d_ptr, stride_db, stride_dn,
                      alpha, beta, BM, BN, BATCHED, HAS_D, ACTIVATION)
    tma.store_wait(0)


@gluon.jit
def _finish(chunk, j, product, off_n, N, d_ptr, stride_db, stride_dn, alpha, beta,
            HAS_D: gl.constexpr, ACTIVATION: gl.constexpr):
    """act(alpha * chunk + beta * D) for chunk j ([BM, EPI] columns off_n + EPI j ..) of
    product `product`, D's rows all one row (a bias of N; a row per product, stride_db
    apart), read as a vector in the chunk's column layout; the activation is the other
    kernels' (epilogue.apply_activation)."""
    EPI: gl.constexpr = chunk.type.shape[1]
    chunk = chunk * alpha
    if HAS_D:
        column_layout: gl.constexpr = gl.SliceLayout(0, chunk.type.layout)
        columns = off_n + EPI * j + gl.arange(0, EPI, layout=column_layout)
        row = gl.load(d_ptr + product * stride_db + columns * stride_dn, mask=columns < N,
                      other=0.0)
        chunk = chunk + beta * gl.expand_dims(row.to(gl.float32), 0)
    return apply_activation(chunk, ACTIVATION)


@gluon.jit
def _store_chunks(acc, c_desc, epi, product, off_m, off_n, N, d_ptr, stride_db, stride_dn,
                  alpha, beta, BM: gl.constexpr, BN: gl.constexpr, BATCHED: gl.constexpr,
                  HAS_D: gl.constexpr, ACTIVATION: gl.constexpr):
    """The [BM, BN] accumulator through the epilogue (_finish) to C in BN / EPI chunks of
    EPI columns (epi's), each staged in shared memory and stored by TMA
    (register_fed._store_chunk); the chunks split out of the accumulator's registers (no
    data moves). Two or four chunks (pingpong.TILE)."""
    EPI: gl.constexpr = epi.type.shape[2]
    gl.static_assert(EPI * 2 == BN or EPI * 4 == BN, "pingpong: the epilogue in 2 or 4 chunks")
    if EPI * 2 == BN:
        c0, c1 = gl.split(gl.permute(acc.reshape([BM, 2, EPI]), (0, 2, 1)))
        chunks = (c0, c1)
    else:
        t = gl.permute(acc.reshape([BM, 4, EPI]), (0, 2, 1))  # [BM, EPI, chunk c]
        even, odd = gl.split(t.reshape([BM, EPI, 2, 2]))  # c = 2a + b
        c0, c2 = gl.split(even)
        c1, c3 = gl.split(odd)
        chunks = (c0, c1, c2, c3)
    for j in gl.static_range(BN // EPI):
        chunk = _finish(chunks[j], j, product, off_n, N, d_ptr, stride_db, stride_dn, alpha,
                        beta, HAS_D, ACTIVATION)
        _store_chunk(chunk, j, c_desc, epi, product, off_m, off_n, False, BATCHED)


@gluon.jit
def _pingpong_kernel(a_desc, b_desc, c_desc, d_ptr, M, N, K, BATCH, stride_db, stride_dn,
                     alpha, beta,
                     BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr,
                     STAGES: gl.constexpr, GROUP_M: gl.constexpr, A_T: gl.constexpr,
                     B_T: gl.constexpr, BATCHED: gl.constexpr, HAS_D: gl.constexpr,
                     ACTIVATION: gl.constexpr, LOADER_REGS: gl.constexpr,
                     MMA_REGS: gl.constexpr):
    """C = act(alpha * A @ B + beta * D), 16-bit operands, fp32 accumulation: A through
    a_desc ([BM, BK] boxes of (M, K), with A_T [BK, BM] of A^T (K, M)), B through b_desc
    ([BK, BN] of (K, N), with B_T [BN, BK] of B^T (N, K)), C (M, N) through c_desc ([BM,
    BN / CHUNKS] boxes); with HAS_D, D's rows all one row: element n of product p at d_ptr
    + p stride_db + n stride_dn. BATCHED: BATCH products, each descriptor 3-D with boxes
    one product deep."""
    a_ring = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + _ring_layout_shape(a_desc),
                                       _ring_layout(a_desc))
    b_ring = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + _ring_layout_shape(b_desc),
                                       _ring_layout(b_desc))
    # Each warpgroup's two buffers of one epilogue chunk (_store_chunks).
    chunk: gl.constexpr = _ring_layout_shape(c_desc)
    epi0 = gl.allocate_shared_memory(c_desc.dtype, [2] + chunk, _ring_layout(c_desc))
    epi1 = gl.allocate_shared_memory(c_desc.dtype, [2] + chunk, _ring_layout(c_desc))
    ready, empty = ring_barriers(STAGES)
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for w in gl.static_range(2):
        mbarrier.init(turn.index(w), count=1)
    gl.warp_specialize([
        (_consumer, (a_desc, b_desc, a_ring, b_ring, ready, empty, turn, c_desc, epi0, M, N,
                     K, BATCH, d_ptr, stride_db, stride_dn, alpha, beta, BM, BN, BK, GROUP_M,
                     A_T, B_T, BATCHED, HAS_D, ACTIVATION, 0)),
        (_consumer, (a_desc, b_desc, a_ring, b_ring, ready, empty, turn, c_desc, epi1, M, N,
                     K, BATCH, d_ptr, stride_db, stride_dn, alpha, beta, BM, BN, BK, GROUP_M,
                     A_T, B_T, BATCHED, HAS_D, ACTIVATION, 1)),
        (_loader, (a_desc, b_desc, a_ring, b_ring, ready, empty, M, N, K, BATCH, BM, BN, BK,
                   GROUP_M, A_T, B_T, BATCHED)),
    ], [gl.num_warps(), 1], [MMA_REGS, LOADER_REGS])


@constexpr_function
def _ring_layout_shape(desc):
    """desc's box as a 2-D ring slot (a 3-D box without its product dimension of 1)."""
    block = [int(getattr(d, "value", d)) for d in desc.block_type.shape]
    return block[-2:]


def _transposed(t: torch.Tensor) -> bool | None:
    """Whether t's last two dims are stored transposed (contiguous along the second last,
    not the last); None where contiguous along neither."""
    if t.stride(-1) == 1:
        return False
    return True if t.stride(-2) == 1 else None


def _layout(a: torch.Tensor, b: torch.Tensor):
    """(A_T, B_T): A stored M-major, B stored K-major (strides of the last two dims); None
    where either operand is contiguous along neither."""
    a_t, b_t = _transposed(a), _transposed(b)
    return None if a_t is None or b_t is None else (a_t, b_t)


def rows_aligned(t: torch.Tensor) -> bool:
    """Every stride of 16-bit t (2-D, or 3-D with the batch first) but its unit one a
    multiple of 128 bytes (the batch's only where there is more than one product), so that
    TMA's 128-byte box rows each lie in one L2 line (dispatch.PINGPONG: rows of 2000 bytes
    ran 1.4x slower)."""
    strides = [s for d, s in enumerate(t.stride()) if t.shape[d] > 1 and s != 1]
    return all(s * t.element_size() % 128 == 0 for s in strides)


def tile_for(dtype: torch.dtype) -> tuple:
    """The tile for operands of dtype: TILE at 16 bits, TF32_TILE for fp32."""
    return TF32_TILE if dtype == torch.float32 else TILE


def supports(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> bool:
    """Whether fp16 / bf16 a (M, K), b (K, N) in any layout, or fp32 ones (run at tf32)
    both K-major (a row-major A, a transposed B: nt), and a row-major out (M, N) of their
    dtype, or batches of them (3-D, no broadcast batch), run here: on a Hopper GPU,
    outside the interpreter, each operand as TMA reads it (16-byte aligned base and
    strides)."""
    if INTERPRETER or not (a.dtype == b.dtype == out.dtype
                           and a.dtype in (torch.float16, torch.bfloat16, torch.float32)):
        return False
    if not (a.dim() == b.dim() == out.dim() and a.dim() in (2, 3)) or not hopper(a.device):
        return False
    layout = _layout(a, b)
    if layout is None or out.stride(-1) != 1 or min(a.shape + b.shape) == 0:
        return False
    a_t, b_t = layout
    if a.dtype == torch.float32 and (a_t or not b_t):
        return False  # wgmma reads 32-bit operands K-major only
    if a.dim() == 3:
        return (_batched_tma_ok(a, 1 if a_t else 2) and _batched_tma_ok(b, 1 if b_t else 2)
                and _batched_tma_ok(out, 2))
    return (_tma_ok(a, a.stride(1) if a_t else a.stride(0))
            and _tma_ok(b, b.stride(1) if b_t else b.stride(0)) and _tma_ok(out, out.stride(0)))


def bias_rows(d: torch.Tensor | None) -> bool:
    """Whether d, an epilogue input expanded to the output's shape, is the epilogue's kind:
    none, or rows all one row (a bias of N, or a row per product) in a storage of fewer
    than 2^31 elements (the epilogue's offsets are int32)."""
    return d is None or d.stride(-2) == 0 and not needs_int64(d)


def matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, sms: int,
           tile: tuple | None = None, d: torch.Tensor | None = None, *, alpha: float = 1.0,
           beta: float = 0.0, activation: int = 0) -> torch.Tensor:
    """out = act(alpha * a @ b + beta * d) (2-D, or 3-D: product by product) for operands
    supports() accepts, d None or expanded to out's shape with rows all one row
    (bias_rows), in one persistent launch of at most `sms` programs; activation: an
    epilogue.ACTIVATIONS code; tile: (BM, BN, BK, STAGES, CHUNKS), default tile_for's
    (fp32 operands run at tf32). Returns out."""
    if not bias_rows(d):
        raise ValueError("pingpong.matmul: d must have rows all one row (a bias) in fewer "
                         f"than 2^31 elements, stride {d.stride()}; run other inputs through "
                         "dispatch")
    bm, bn, bk, stages, chunks = tile or tile_for(a.dtype)
    a_t, b_t = _layout(a, b)
    m, k = a.shape[-2:]
    n = b.shape[-1]
    batch = a.shape[0] if a.dim() == 3 else 1
    a_op = a.mT if a_t else a
    b_op = b.mT if b_t else b
    args = (_descriptor(a_op, [bk, bm] if a_t else [bm, bk]),
            _descriptor(b_op, [bn, bk] if b_t else [bk, bn]),
            _descriptor(out, [bm, bn // chunks]), d, m, n, k, batch,
            0 if d is None or d.dim() == 2 else d.stride(0), 0 if d is None else d.stride(-1),
            alpha, beta)
    constexprs = {"BM": bm, "BN": bn, "BK": bk, "STAGES": stages, "GROUP_M": GROUP_M,
                  "A_T": a_t, "B_T": b_t, "BATCHED": a.dim() == 3, "HAS_D": d is not None,
                  "ACTIVATION": activation,
                  "LOADER_REGS": LOADER_REGS, "MMA_REGS": MMA_REGS,
                  "num_warps": WARPS, "maxnreg": MAX_REGISTERS}
    tiles = batch * cdiv(m, bm) * cdiv(n, bn)
    # Two tiles a program at a time: as many programs as SMs, fewer where there are fewer
    # tiles than that.
    grid = programs(bm, bn, batch * cdiv(m, bm) * bm, n, sms, half_tail=False)
    grid = min(grid, tiles)
    run_kernel(_pingpong_kernel, (grid, ), args, constexprs)
    record(triton.Config({"PINGPONG": True, "BM": bm, "BN": bn, "BK": bk,
                          "PRODUCTS": a.dim() == 3}, num_warps=2 * WARPS, num_stages=stages),
           "tf32" if a.dtype == torch.float32 else "half")
    return out
