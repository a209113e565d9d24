"""Persistent TMA GEMM for Hopper: at most one program per SM (as few as take as many
waves: BALANCED_WAVES) walks output tiles in grouped order, loading A and B tiles with
tensor descriptors (the bulk copy engine) and storing C the same way. C = alpha * A @ B +
beta * D on 2-D operands, tensor-core precisions only.

Why: the plain kernel relaunches a program per tile and computes addresses per element; a
program per SM keeps the pipeline full across tile boundaries, and TMA loads need no
address arithmetic or masks (out-of-range rows and columns read as zero, stores are
clipped). Measured on the H100 at 4096^3 fp16: 701 TFLOPS against 664 for the plain
kernel (a probe on the lent H100 before this kernel was written).
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
from triton.tools.tensor_descriptor import TensorDescriptor

from .. import configs
from .common import (AUTOTUNE, INTERPRETER, capability, dependent_meta, dot_precision,
                     epilogue_input, hopper, launch, make_tuners, needs_int64, shares_storage,
                     tuning_args)
from .epilogue import finish

# TMA requires 16-byte aligned base addresses and row strides, and a box that starts a
# multiple of 16 bytes into its row: an fp32 box loaded from column 1 or 2 stopped the
# kernel with an illegal instruction, from column 4 it loaded (H100, triton 3.6; a probe,
# not kept, eighteenth session). So an A with 4097-element rows cannot be read through four
# descriptors of every fourth row (aligned rows, each phase's base moved back to an aligned
# address): each phase would start its K steps at column 1, 2 or 3. It is copied instead.
# Nor does reading it by masked pointer loads beside B's TMA tiles pay: at 4097^3 tf32, on
# the staged K-major B's 4096-column core, the kernel took 441.9 us with A by pointer
# against 392.9 on A's padded copy, more than that copy saves (B's copy, as many bytes,
# took 46.6 and 47.3 us in its two undisturbed rounds of four), and its 128x256x32 tile
# then needed 278 KB of shared memory (H100, autotuned, L2 flushed, medians of 4 rounds;
# cuBLAS 1213 for the whole product; a probe, not kept, twentieth session).
TMA_ALIGN_BYTES = 16


def tma_descriptors(a, b, out, c_tma: bool, lo=None, half_tail: bool = False,
                    planes: int = 1) -> tuple:
    """Host TMA descriptors (A, B, C or None without c_tma, A lo, B lo or None without lo,
    then B and C again for the half-width tail tiles, or None without half_tail) for the
    kernel's leading arguments. Their block shapes depend on the config and are set by
    set_block_shapes before each launch. planes = 2 (a_planes): A and C as (2, M / 2, K)
    and (2, M / 2, N), their even rows then their odd rows.

    Why host descriptors: built in the kernel (tl.make_tensor_descriptor), each program
    first writes its descriptors to global memory and fences them, ~3 us at the start of
    every launch. A probe kernel on the H100 (fp16, the same tile both ways, CUDA-graph
    time, us; device-built -> host): 1000^3 128x128x64 12.0 -> 10.3 (cuBLAS 8.5), 1024^3
    128x64x64 9.9 -> 6.2 (5.7), 2048^3 128x256x64 29.0 -> 27.3 (25.8), 4096^3 217 -> 216.
    Prefetching the host descriptors (prefetch.param.tensormap before gdc_wait) changed
    nothing (a probe, not kept, thirty-third session; H100, CUDA-graph time after an L2
    flush, medians of five rounds, us, without -> with): 1000^3 fp16 13.28 -> 13.28,
    1024^3 12.06 -> 12.10, 2048^3 28.83 -> 28.83, 4096^3 191.0 -> 190.9, 128x4096x4096 nt
    18.46 -> 18.43, 1000^3 nt tf32 17.98 -> 17.92."""
    def desc(t, rows_by_cols):
        return TensorDescriptor(t, list(rows_by_cols), [t.stride(0), 1], _PLACEHOLDER_BLOCK)

    def planes_desc(t, cols):  # (parity, row pair, column)
        return TensorDescriptor(t, [2, t.shape[0] // 2, cols], [t.stride(0), 2 * t.stride(0), 1],
                                [1, *_PLACEHOLDER_BLOCK])
    m, k = a.shape
    n = b.shape[1]
    k_major = _b_k_major(b)
    # An M-major A goes as its (K, M) row-major transpose.
    a_desc = (planes_desc(a, k) if planes == 2 else desc(a.T, (k, m)) if _a_m_major(a)
              else desc(a, (m, k)))

    def b_desc():  # a K-major B goes as its (N, K) row-major transpose
        return desc(b.T, (n, k)) if k_major else desc(b, (k, n))

    def c_desc():
        return None if not c_tma else planes_desc(out, n) if planes == 2 else desc(out, (m, n))
    lo_descs = ((None, None) if lo is None
                else (desc(lo[0], (m, k)), desc(lo[1].T, (n, k))))
    tail = (b_desc(), c_desc()) if half_tail else (None, None)
    return (a_desc, b_desc(), c_desc(), *lo_descs, *tail)


# Any valid block shape: the real one is set before each launch (set_block_shapes).
_PLACEHOLDER_BLOCK = [16, 16]


def set_block_shapes(args: tuple, kwargs: dict) -> None:
    """Give the descriptors among a launch's leading arguments (tma_descriptors' order) the
    block shapes of its config (kwargs: BM, BN, BK, A_M_MAJOR, B_K_MAJOR, EPILOGUE_SUBTILE,
    and HALF_TAIL where the tail's B and C are arguments 5 and 6, A_PLANES): triton compiles
    a kernel for the block shape of each descriptor argument."""
    bm, bn, bk = kwargs["BM"], kwargs["BN"], kwargs["BK"]
    plane = [1] if kwargs.get("A_PLANES", 1) == 2 else []  # one row of a plane

    def shape(b_desc, c_desc, width):
        b_desc.block_shape = [width, bk] if kwargs["B_K_MAJOR"] else [bk, width]
        if c_desc is not None:
            c_desc.block_shape = plane + ([bm, width // 2] if kwargs["EPILOGUE_SUBTILE"]
                                          else [bm, width])
    args[0].block_shape = [bk, bm] if kwargs["A_M_MAJOR"] else plane + [bm, bk]
    shape(args[1], args[2], bn)
    for lo_desc in args[3:5]:  # the 3xTF32 remainders, (M, K) and (N, K) like A and B
        if isinstance(lo_desc, TensorDescriptor):
            lo_desc.block_shape = [bm if lo_desc is args[3] else bn, bk]
    if kwargs.get("HALF_TAIL"):
        shape(args[5], args[6], bn // 2)


@triton.jit
def tile_origin(tile, num_pid_m, num_pid_n, BM: tl.constexpr, BN: tl.constexpr,
                GROUP_M: tl.constexpr):
    """(row, column) of tile `tile`'s first element in grouped order: the rows of tiles in
    groups of at most GROUP_M, each group walked a column of tiles at a time, so tiles
    running together share their A and B tiles in L2. The groups are as tall as one
    another (the last at most a few rows shorter): a last group of one or two rows of
    tiles reads all of B again for them (configs.persistent_group_m)."""
    height = tl.cdiv(num_pid_m, tl.cdiv(num_pid_m, GROUP_M))
    tiles_per_group = height * num_pid_n
    first_m = (tile // tiles_per_group) * height
    group_rows = tl.minimum(num_pid_m - first_m, height)
    off_m = (first_m + (tile % tiles_per_group) % group_rows) * BM
    off_n = ((tile % tiles_per_group) // group_rows) * BN
    return off_m, off_n


@triton.jit
def store_tile(acc, c_ptr, c_desc, d_ptr, off_m, off_n, M, N, stride_cm, stride_dm, stride_dn,
               alpha, beta, HAS_D: tl.constexpr, D_ROW: tl.constexpr, ACTIVATION: tl.constexpr,
               C_TMA: tl.constexpr, EPILOGUE_SUBTILE: tl.constexpr, BM: tl.constexpr,
               BN: tl.constexpr, plane=0, A_PLANES: tl.constexpr = 1,
               INT64: tl.constexpr = False):
    """The epilogue of one fp32 tile: alpha, beta * D and the activation, then C stored by
    TMA (in two BN/2 halves with EPILOGUE_SUBTILE) or, without C_TMA, by masked pointers.
    D_ROW: D's rows are all one row (stride_dm == 0, a bias), read once as a BN vector.
    A_PLANES = 2: the tile holds rows plane, plane + 2, ... from row 2 * off_m + plane, and
    c_desc is C's (parity, row pair, column) descriptor. INT64: D's and C's element offsets
    in int64 (a C or D of 2^31 elements or more: common.needs_int64)."""
    dtype = c_ptr.dtype.element_ty
    acc = acc * alpha
    offs_m = A_PLANES * (off_m + tl.arange(0, BM)) + plane
    offs_n = off_n + tl.arange(0, BN)
    inside = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    if INT64:
        offs_m = offs_m.to(tl.int64)
        offs_n = offs_n.to(tl.int64)
    if D_ROW:
        # A BM x BN tile of pointers held 255 registers and spilled 36-112 bytes on the 8-warp
        # 128x256, 4-warp 128x128 and 3xTF32 tiles (ptxas -v for sm_90, triton 3.6;
        # docs/design.md); the vector spills on none, and the pipeliner stages no D tile in
        # shared memory.
        acc = finish(acc, d_ptr + offs_n * stride_dn, offs_n < N, beta, HAS_D, ACTIVATION)
    else:
        acc = finish(acc, d_ptr + offs_m[:, None] * stride_dm + offs_n[None, :] * stride_dn,
                     inside, beta, HAS_D, ACTIVATION)
    if not C_TMA:
        c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :]
        tl.store(c_ptrs, acc.to(dtype), mask=inside)
    elif EPILOGUE_SUBTILE:
        halves = tl.permute(tl.reshape(acc, (BM, 2, BN // 2)), (0, 2, 1))
        left, right = tl.split(halves)
        store_block(c_desc, off_m, off_n, left.to(dtype), plane, A_PLANES)
        store_block(c_desc, off_m, off_n + BN // 2, right.to(dtype), plane, A_PLANES)
    else:
        store_block(c_desc, off_m, off_n, acc.to(dtype), plane, A_PLANES)


@triton.jit
def store_block(c_desc, off_m, off_n, block, plane, A_PLANES: tl.constexpr):
    """A TMA store of block at (off_m, off_n), of plane `plane` where A_PLANES = 2."""
    if A_PLANES == 2:
        c_desc.store([plane, off_m, off_n],
                     tl.reshape(block, (1, block.shape[0], block.shape[1])))
    else:
        c_desc.store([off_m, off_n], block)


@triton.jit
def k_steps(a_desc, b_desc, off_m, off_n, k_first, k_last, PRECISION: tl.constexpr,
            A_M_MAJOR: tl.constexpr, B_K_MAJOR: tl.constexpr, UPCAST: tl.constexpr,
            BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """The fp32 product of one tile over K steps k_first .. k_last - 1."""
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for ki in range(k_first, k_last):
        a, b = load_step(a_desc, b_desc, off_m, off_n, ki, A_M_MAJOR, B_K_MAJOR, UPCAST, BK)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    return acc


@triton.jit
def load_step(a_desc, b_desc, off_m, off_n, ki, A_M_MAJOR: tl.constexpr,
              B_K_MAJOR: tl.constexpr, UPCAST: tl.constexpr, BK: tl.constexpr, plane=0,
              k_shift=0, A_PLANES: tl.constexpr = 1):
    """(A, B) tiles of K step ki from column ki * BK - k_shift, A as (BM, BK) and B as
    (BK, BN) whatever their layouts; fp32 with UPCAST (the interpreter's dot takes no bf16).
    A_PLANES = 2: A's tile from plane `plane` of its (parity, row pair, K) descriptor."""
    k = ki * BK - k_shift
    if A_PLANES == 2:
        a = a_desc.load([plane, off_m, k])
        a = tl.reshape(a, (a.shape[1], a.shape[2]))
    elif A_M_MAJOR:
        a = a_desc.load([k, off_m]).T
    else:
        a = a_desc.load([off_m, k])
    if B_K_MAJOR:
        b = b_desc.load([off_n, k]).T
    else:
        b = b_desc.load([k, off_n])
    if UPCAST:
        a = a.to(tl.float32)
        b = b.to(tl.float32)
    return a, b


@triton.jit
def _persistent_kernel(
    a_desc, b_desc, c_desc, alo_desc, blo_desc, bt_desc, ct_desc, c_ptr, d_ptr,
    M, N, K,
    stride_cm, stride_dm, stride_dn,
    alpha, beta,
    M_BUCKET, N_BUCKET, K_BUCKET, LAYOUT,
    PRECISION: tl.constexpr, HAS_D: tl.constexpr, D_ROW: tl.constexpr, A_M_MAJOR: tl.constexpr,
    B_K_MAJOR: tl.constexpr,
    UPCAST: tl.constexpr, NUM_SMS: tl.constexpr, ACTIVATION: tl.constexpr, C_TMA: tl.constexpr,
    SPLIT: tl.constexpr, HI_FLUSH_K: tl.constexpr, HALF_TAIL: tl.constexpr,
    A_PLANES: tl.constexpr, K_SHIFT: tl.constexpr, INT64: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
    EPILOGUE_SUBTILE: tl.constexpr, WARP_SPECIALIZE: tl.constexpr, DEPENDENT: tl.constexpr,
    TRIGGER: tl.constexpr, CLAMP: tl.constexpr,
):
    """C (M, N, row stride stride_cm) = alpha * A (M, K) @ B (+ beta * D).

    Operands as host TMA descriptors (tma_descriptors): A (M, K), or its (K, M) rows when
    A_M_MAJOR (16-bit only: wgmma reads 32-bit operands K-major); B (K, N), or its (N, K)
    rows when B_K_MAJOR. C: c_desc when C_TMA, else masked pointer stores through c_ptr
    (any row stride, e.g. 4097); c_ptr is C either way (its dtype). D: any strides (0 to
    broadcast); D_ROW when stride_dm is 0 (store_tile). Grid: (programs(),), at most
    NUM_SMS programs, each walking whole tiles pid, pid + grid, ... (BALANCED_WAVES).
    EPILOGUE_SUBTILE stores a TMA C as two BM x BN/2 halves. ACTIVATION:
    epilogue.ACTIVATIONS code, applied after beta * D. INT64: see store_tile.
    SPLIT (3xTF32 from staged halves): A and B hold float32 operands rounded to tf32 and
    alo_desc, blo_desc their remainders (B's K-major); or one of A and B is the operand as
    given, which wgmma reads with its low 13 bits dropped, and its remainder that dropped
    part (copy.remainder_job, dispatch.raw_side); the product is three tf32
    dots, hi x hi + lo x hi + hi x lo, and PRECISION is ignored. The hi x hi products join
    acc by an IEEE add every HI_FLUSH_K elements of K (a multiple of 2 * BK; see
    hi_flush_k).
    HALF_TAIL (not with SPLIT; tiles HALF_TAIL_MIN_BN wide and up): the tiles past the last
    whole wave, when at most half a wave, run as twice as many BM x BN/2 tiles (bt_desc,
    ct_desc: B and C with those blocks), so that last wave takes about half as long
    (half_tail_tiles).
    A_PLANES = 2 (a_planes; not with SPLIT, HALF_TAIL or A_M_MAJOR): a_desc and c_desc
    hold A's and C's even rows, then their odd rows; each tile takes rows of one parity,
    and an odd tile's K steps start K_SHIFT columns early (the columns before 0 read as
    zero, in A and B alike), where its rows' boxes start on a 32-byte sector.
    DEPENDENT: see common.dependent_launch. TRIGGER (with DEPENDENT): once the kernel before
    has finished, let the kernel launched after this one start beside it (a fringe strip
    run beside the core, dispatch.STRIP_BESIDE).
    CLAMP (not with A_M_MAJOR, nor where C and D share memory): the last row of tiles
    (of each plane with A_PLANES = 2) starts BM rows before its end (clamped_row), never
    past it.
    """
    tl.static_assert(not (SPLIT and HALF_TAIL))
    tl.static_assert(DEPENDENT or not TRIGGER)
    tl.static_assert(A_PLANES == 1 or not (SPLIT or HALF_TAIL or A_M_MAJOR))
    tl.static_assert(not (CLAMP and A_M_MAJOR))
    if SPLIT:
        # At one K step per flush the compiler folds `acc += dot(a, b, 0)` into
        # dot(a, b, acc): every add in the tensor core again.
        tl.static_assert(HI_FLUSH_K % (2 * BK) == 0)
    if DEPENDENT:
        gdc_wait()  # launched with launch_pdl: the kernel before may still be draining
    if TRIGGER:
        gdc_launch_dependents()

    plane_tiles = tl.cdiv(tl.cdiv(M, A_PLANES), BM)  # rows of tiles per plane
    num_pid_m = A_PLANES * plane_tiles
    num_pid_n = tl.cdiv(N, BN)
    # One trip count for every tile: a loop-invariant one lets the compiler flatten the
    # loops (a count per parity made it run each tile's pipeline apart).
    k_tiles = tl.cdiv(K + K_SHIFT, BK)
    num_tiles = num_pid_m * num_pid_n
    tail = 0
    if HALF_TAIL and BN >= HALF_TAIL_MIN_BN:
        tail = half_tail_tiles(num_tiles, NUM_SMS)
    # flatten=True lets the compiler pipeline loads of the next tile's first K steps
    # behind the current tile's epilogue. WARP_SPECIALIZE: producer warps issue the TMA
    # loads, consumer warpgroups the dots and epilogue (not with flatten on sm_90). Where
    # each program has one tile it neither helps nor costs: flattened / not, CUDA-graph
    # time after the flush, H100 fp16, us (a probe, forty-fifth session): 128x4096x4096 nt
    # on 64x64x128 18.3 / 18.5, 128x11008x4096 nt 38.5 / 38.5, 1024^3 on 128x64x128 10.2 /
    # 10.1, 2048^3 on 128x256x64 28.7 / 28.9; with several, it gains (4096^3 187.1 / 189.1).
    for tile in tl.range(tl.program_id(0), num_tiles - tail, tl.num_programs(0),
                         flatten=not WARP_SPECIALIZE,
                         warp_specialize=WARP_SPECIALIZE):
        off_m, off_n = tile_origin(tile, num_pid_m, num_pid_n, BM, BN, GROUP_M)
        plane = 0
        if A_PLANES == 2:
            # Planes one after the other: as fast as alternating them by rows of tiles,
            # or faster (probes, docs/design.md "TMA rows off a sector").
            plane = off_m // BM // plane_tiles
            off_m -= plane * plane_tiles * BM
        if CLAMP:
            off_m = clamped_row(off_m, tl.cdiv(M, A_PLANES), BM)  # inside its plane
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        if SPLIT:
            hi_acc = tl.zeros((BM, BN), dtype=tl.float32)
            lo_acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(k_tiles):
            a, b = load_step(a_desc, b_desc, off_m, off_n, ki, A_M_MAJOR, B_K_MAJOR, UPCAST,
                             BK, plane, plane * K_SHIFT, A_PLANES)
            if SPLIT:
                # The tensor core truncates each add into its accumulator: over a whole K
                # loop of hi x hi products that bias grew to 9.6e-6 relative error at
                # 4096^3 (cuBLAS SGEMM 1.1e-6), H100. So hi x hi accumulates there for
                # HI_FLUSH_K elements of K only, then joins acc by an IEEE add. The
                # remainder products are 2^-11 of the result: their accumulator's bias
                # stays below fp32 rounding over any K. Dropped: lo x lo, below fp32
                # rounding (each lo is within 2^-11 of its operand).
                a_lo = alo_desc.load([off_m, ki * BK])
                b_lo = blo_desc.load([off_n, ki * BK]).T
                hi_acc = tl.dot(a, b, hi_acc, input_precision="tf32")
                lo_acc = tl.dot(a_lo, b, lo_acc, input_precision="tf32")
                lo_acc = tl.dot(a, b_lo, lo_acc, input_precision="tf32")
                if ki % (HI_FLUSH_K // BK) == HI_FLUSH_K // BK - 1:
                    acc += hi_acc
                    hi_acc = tl.zeros((BM, BN), dtype=tl.float32)
            else:
                acc = tl.dot(a, b, acc, input_precision=PRECISION)

        if SPLIT:
            # An infinite operand against a zero remainder makes inf x 0 = NaN there, and
            # against a remainder of the other sign -inf where hi x hi has inf; the hi
            # products carry every infinity of the true product, and a finite remainder sum
            # is 2^-11 of theirs, so a non-finite one is dropped.
            acc += hi_acc + tl.where(tl.abs(lo_acc) < float("inf"), lo_acc, 0.0)
        store_tile(acc, c_ptr, c_desc, d_ptr, off_m, off_n, M, N, stride_cm, stride_dm,
                   stride_dn, alpha, beta, HAS_D, D_ROW, ACTIVATION, C_TMA, EPILOGUE_SUBTILE,
                   BM, BN, plane, A_PLANES, INT64)

    if HALF_TAIL and BN >= HALF_TAIL_MIN_BN:
        # The tail's halves, one per program at most (2 * tail <= NUM_SMS).
        for half in range(tl.program_id(0), 2 * tail, NUM_SMS):
            off_m, off_n = tile_origin(num_tiles - tail + half // 2, num_pid_m, num_pid_n,
                                       BM, BN, GROUP_M)
            off_n += (half % 2) * (BN // 2)
            if CLAMP:
                off_m = clamped_row(off_m, M, BM)
            acc = k_steps(a_desc, bt_desc, off_m, off_n, 0, k_tiles, PRECISION, A_M_MAJOR,
                          B_K_MAJOR, UPCAST, BM, BN // 2, BK)
            store_tile(acc, c_ptr, ct_desc, d_ptr, off_m, off_n, M, N, stride_cm, stride_dm,
                       stride_dn, alpha, beta, HAS_D, D_ROW, ACTIVATION, C_TMA,
                       EPILOGUE_SUBTILE, BM, BN // 2, 0, 1, INT64)


# Whether each plane's last row of tiles is moved back as well (CLAMP with A_PLANES = 2):
# 1000^3 fp16 splits A into planes of 500 rows, whose last 128-row tiles read 12 rows of
# zeros past each plane on every K step. Off until measured (perf/clamp_probe.py compares
# both); the interpreter's plane tests run it on.
CLAMP_PLANES = False


@triton.jit
def clamped_row(off_m, M, BM: tl.constexpr):
    """A tile's first row moved back so that its BM rows end inside M (not before row 0): a
    last row of tiles that M leaves part empty then overlaps the one before it, whose rows
    it computes again and stores with the same values. Why: TMA boxes of A that reach past
    its rows slow every K step of the tile (zero-filled rows are not free), while stores
    past C's rows cost nothing. perf/rows_probe.py, H100, fp16 nt, the persistent kernel's
    mid tiles (pm_64x64x128_s6), us, CUDA graph warm / after the L2 flush (cuBLAS):
    96x4096x4096 17.2 / 21.2 (9.4 / 17.5); A padded to 128 rows 9.6 / 17.7; A's boxes past
    its 96 rows, C's inside 17.6 / 20.9; C's past its rows, A's inside 9.7 / 17.8. 80 rows
    20.1 / 24.3 against 9.7 / 18.0 on A padded (8.8 / 17.5); moved back, 10.0 / 18.3 at 80
    rows and 10.0 / 18.2 at 96. Rows only: moved to N - BN, a box's first column (B's and
    C's innermost coordinate) lands off the 128-byte boundaries the boxes keep (N = 1000,
    BN = 64: 1872 bytes in), and a first form moving rows and columns stopped on an
    illegal instruction at 1000^3 fp16 (nn, while tuning), which this form runs."""
    return tl.minimum(off_m, tl.maximum(M - BM, 0))


@triton.jit
def half_tail_tiles(num_tiles, NUM_SMS: tl.constexpr):
    """Tiles past the last whole wave of NUM_SMS that the kernel runs as halves: all of
    them when at most half a wave (each program then takes one half at most), else none."""
    tail = num_tiles % NUM_SMS
    return tl.where(2 * tail <= NUM_SMS, tail, 0)


# Where the split kernel flushes its hi x hi accumulator (HI_FLUSH_K), against its error.
# tile_probe.py, H100, ps_128x128x32_sub_ws, L2 flushed, 4096^3 (8192^3 nt), relative error:
# every 64 K 1265 us 2.5e-7 (10062 us 2.9e-7); 128: 1201 us 3.6e-7 (9952, 3.7e-7); 256: 1070
# us 6.4e-7 (9817, 6.5e-7); before, three fresh products every K step: 1453 us 2.4e-7. The
# error is set by the interval, not by K. cuBLAS SGEMM's depends on K and on its own kernel
# choice: 5.7e-7 at 1000^3 and 1024^3 (report), 4.9-5.2e-7 at 2560^3-3072^3 and 5.7e-7 at
# 3072x3072x4096, 8.1e-7 at 2048^3, 1.1e-6 at 4096^3, 1.6e-6 at 8192^3 (perf/plans.py, a
# GPU test). 256 lost to cuBLAS at 3072x3072x4096 (6.4e-7 against 5.7e-7), so 128 from
# K = 2048 (3.6e-7 against cuBLAS's lowest there, 4.9e-7) and 64 below (2.1-2.5e-7 against
# 5.7e-7; dispatch.SPLIT_TF32_MIN_K keeps K < 1024 off this kernel).
# Those figures are N(0,1) data, where the truncations' errors cancel. On U(0,1) data (every
# product positive) they add up, and the interval matters more (perf/accuracy.py --flush,
# H100; cuBLAS SGEMM on the same inputs in brackets): 64 / 128 / 256 K 3072x3072x4096 2.8e-7 /
# 6.2e-7 / 1.4e-6 (2.2e-7), 3072x3072x8192 3.0e-7 / 6.2e-7 / 1.4e-6 (2.7e-7), 4096^3 2.8e-7 /
# 6.2e-7 / 1.4e-6 (8.4e-7). 64 from K = 2048 would halve that error for a cost in speed
# that measured 3-5% at 4096^3 (perf/accuracy.py --time, one run: 1.379 / 1.410 ms against
# 1.337 / 1.336), and a report run of the split-kernel rows at 64 read 3-14% slower than the
# committed 128-K rows of an earlier run (8192x28672x8192 nt 38.8 ms against 34.1; 4096^3
# 1.97x SGEMM against 2.01x; 8192^3 1.88x both); it still lost to SGEMM on one-signed data
# (2.8e-7 against 2.2e-7). So 128 stays; README "Which precision" has both.
def hi_flush_k(k: int) -> int:
    return 128 if k >= 2048 else 64


# "split": 3xTF32 from staged halves (SPLIT), twice the operand tiles per K step;
# "half_mid", "tf32_mid": small tiles for products with fewer tiles than SMs
# (configs.persistent_family).
PERSISTENT_FAMILIES = ("tf32", "tf32_mid", "half", "half_mid", "split")
# The families whose launches run a last part-wave of tiles as halves (HALF_TAIL), and the
# narrowest tile it halves. A probe of pinned configs (bench.gpu_median_ms, L2 flushed, best
# of two rounds, each timing whole tiles first, then halves), H100, us, whole -> halves
# (cuBLAS), 128x256 tile / its warp-specialised twin: 2048x11008x4096 nt (688 tiles: 5
# waves and 28) fp16 267.7 -> 262.8 / 275.8 -> 269.3 (249.2), bf16 259.1 -> 254.1 / 268.5
# -> 262.4 (242.1), tf32 524.7 -> 504.3 / 540.7 -> 521.5 (479.9); 8192x11008x4096 nt (10
# waves and 56) mixed: fp16 1098.7 -> 1110.7 / 1140.8 -> 1106.8, bf16 1057.3 -> 1047.8 /
# 1073.6 -> 1096.6, tf32 2045.5 -> 2073.4 / 2038.4 -> 2111.3. Shapes with no halves to run
# (tail over half a wave) moved by -4..+3% between the two timings: that is the noise. A
# part-wave costs less than a whole one already (fewer SMs share power and memory), so
# halves save ~2-4%, not the 8% of half a wave in six. Halving 128x128 tiles to 128x64
# lost: p_128x128x64 2048x11008x4096 fp16 277.0 -> 282.2, 4096^3 (no halves: noise) 213.4
# -> 225.5.
HALF_TAIL_FAMILIES = ("tf32", "half")
HALF_TAIL_MIN_BN = tl.constexpr(256)


def _tail_tiles(bm: int, bn: int, m: int, n: int, sms: int) -> int:
    """The tiles a launch with HALF_TAIL runs as halves for an m x n output in bm x bn
    tiles (0: none): the host side of half_tail_tiles."""
    tail = (-(-m // bm) * -(-n // bn)) % sms
    return tail if bn >= HALF_TAIL_MIN_BN.value and 2 * tail <= sms else 0


def _halves_run(config, m: int, n: int, sms: int) -> bool:
    """Whether the kernel runs tail halves for an m x n output with this config."""
    return _tail_tiles(config.kwargs["BM"], config.kwargs["BN"], m, n, sms) > 0


# Whole tiles go to as few programs as take the same number of waves (ceil(tiles / sms)
# tiles each at most): 4096^3 in 128x256 tiles (512) runs 128 programs of four tiles,
# not 132 of which 16 run three. The makespan in tiles is the same; the H100 runs its
# tensor cores at a power limit, and an even load over the whole run takes less power for
# the same work than 132 SMs then 116. Probe (thirty-fourth session, H100, pinned
# p_128x256x64_sub / its warp-specialised twin, CUDA-graph time after an L2 flush, median of
# 6 interleaved rounds, us, 132 -> 128 programs (cuBLAS)): 8192^3 fp16 1686.6 -> 1587.5 /
# 1639.4 -> 1591.4 (1701.9), bf16 1599.8 -> 1572.7 / 1582.1 -> 1558.6 (1584.8); 4096^3
# fp16 190.0 -> 190.6 / 193.5 -> 191.5 (187.7), bf16 184.8 -> 183.1 / 186.4 -> 186.2
# (182.4); 124 programs (a fifth wave) 214.6 at 4096^3 fp16. Through the library, A/B in
# alternating processes, eight shapes 0.6-3.7% faster in GPU time (docs/design.md,
# "Balanced waves").
BALANCED_WAVES = True


def programs(bm: int, bn: int, m: int, n: int, sms: int, half_tail: bool,
             planes: int = 1) -> int:
    """The launch's grid: a program per whole tile up to sms, or one per tail half where
    there are more of those; with no tail halves, as few programs as take as many waves
    (BALANCED_WAVES). No idle programs: with HALF_TAIL on for the tuner's 128x256
    tiles, the 64 tiles of p_128x128x64_w4 at 1000^3 fp16 ran in 128 programs, half of them
    with no tile, at 15.4 us of CUDA-graph time against 13.8 in 64 (H100, a probe, not
    kept, nineteenth session; cuBLAS 12.1). planes: A_PLANES, whose tiles cover each plane's
    m / planes rows apart."""
    plane_rows = -(-m // planes)
    tiles = planes * -(-plane_rows // bm) * -(-n // bn)
    tail = _tail_tiles(bm, bn, m, n, sms) if half_tail else 0
    if tail:
        return max(min(sms, tiles - tail), 2 * tail)
    if BALANCED_WAVES:
        return -(-tiles // max(1, -(-tiles // sms)))
    return min(sms, tiles)


_TILE_HEIGHTS = sorted({t[1] for family in PERSISTENT_FAMILIES
                        for t in configs.persistent_tiles(family)})
_TUNED = make_tuners(_persistent_kernel, "persistent",
                     {family: configs.persistent_configs(family)
                      for family in PERSISTENT_FAMILIES},
                     configs.persistent_prune, prepare=set_block_shapes)


@functools.lru_cache(maxsize=None)
def _num_sms(device_index: int) -> int:
    if INTERPRETER:
        return 2  # a few programs, each walking several tiles
    return torch.cuda.get_device_properties(device_index).multi_processor_count


@functools.lru_cache(maxsize=None)
def dram_gbps(device: torch.device) -> float | None:
    """The device's declared DRAM bandwidth, GB/s (triton.testing.get_dram_gbps: memory
    clock x bus width; 4814 read on the lent H200, an H100 SXM's 2619 MHz x 5120 bits make
    3352); None off CUDA and in the interpreter."""
    if INTERPRETER or capability(device) is None:
        return None
    import triton.testing  # only here: the library needs nothing else of it
    index = device.index if device.index is not None else torch.cuda.current_device()
    return triton.testing.get_dram_gbps(index)


@functools.lru_cache(maxsize=None)
def gpu_sms(device: torch.device) -> tuple[int | None, bool]:
    """(SM count, whether TMA runs there: Hopper or newer, compute capability 9); (None,
    False) off CUDA and in the interpreter."""
    if capability(device) is None:
        return None, False
    index = device.index if device.index is not None else torch.cuda.current_device()
    return _num_sms(index), hopper(device)


# TMA boxes whose rows start 16 bytes into a 32-byte sector (SECTOR_BYTES, also what
# dispatch._off_sector pads for) load slowly (dispatch's PITCH_PAD_MIN_MN has the
# figures). In a row-major A whose row pitch is an odd multiple of 16 bytes that is every
# odd row, at any column that is a multiple of 32 bytes. Read as two
# planes, even rows and odd rows (A_PLANES), the odd rows' K steps can start 16 bytes early
# (K_SHIFT), on a sector; B's K steps move with them, and the columns before 0 read as zero
# in both. Kernel alone, H100, CUDA-graph time after an L2 flush, medians of three
# interleaved rounds, us, A as given -> planes -> A copied to a 128-byte pitch (cuBLAS;
# probes, thirtieth session): 1000^3 fp16 p_128x128x64_w4 14.0 -> 13.2 -> 12.9 (12.1),
# p_128x128x128 14.5 -> 13.9 -> 13.7; bf16 14.1 -> 13.5 -> 13.0 (12.5); 1024x4104x4104 fp16
# p_128x128x64_w4 94.4 -> 81.9 -> 80.6 (64.1). The planes alone, odd boxes unshifted, were
# slower than A as given (1000^3 fp16 14.9): one wave of tiles waits on its slowest, and
# every odd tile then has all its rows off a sector. Alternating planes by rows of tiles
# instead of one after the other: 13.3 / 14.4 / 13.5 / 82.7. Where A's rows are its only
# rows off a sector and tiles are 128x256 it lost (4104^3 fp16 with B copied to a 128-byte
# pitch, planes alternating, no half-tile tail: 236.7 -> 243.1 us); 4104 rows make two
# planes of more tiles anyway (_plane_rows_fit), so 4104^3 runs A as one plane beside a
# K-major copy of B (dispatch.PITCH_PAD_MIN_MN).
SECTOR_BYTES = 32
PLANE_SHIFT_BYTES = 16


def a_planes(a: torch.Tensor, split: bool = False, d_matrix: bool = False,
             b: torch.Tensor | None = None) -> int:
    """A_PLANES for (M, K) A: 2 where A is row-major with a row pitch 16 bytes off a
    sector, M even (each plane M / 2 rows) and the planes take no more rows of tiles than
    M does at any tile height (_plane_rows_fit); else 1, and always 1 for the 3xTF32 split
    kernel, with a matrix D (d_matrix: its tile of pointers, already spilling on one
    plane, spilled 4-6x more bytes on two: 392 -> 2398 on p_128x256x64_sub, sm_90a,
    perf/sass_audit.py) and beside a K-major (K, N) b whose rows are on sectors
    (_shift_misaligns)."""
    m = a.shape[0]
    pitch_bytes = a.stride(0) * a.element_size()
    off_sector = pitch_bytes % SECTOR_BYTES == PLANE_SHIFT_BYTES
    return 2 if (off_sector and a.stride(1) == 1 and m % 2 == 0 and _plane_rows_fit(m)
                 and not (split or d_matrix or _shift_misaligns(b))) else 1


# An odd tile's K steps start PLANE_SHIFT_BYTES early in B too, which moves a K-major B's
# boxes off a sector where its rows were on one (a staged K-major copy). Library plans,
# H100, CUDA-graph time after an L2 flush, us, B staged K-major, planes -> one plane
# (padded plan; cuBLAS), a probe, thirty-first session: fp16 4096x4104x4104 281.1 -> 240.7
# (249.2; 234.8); tf32 4096x4096x4100 504.5 -> 430.7 (456.0; 393.9), 2000x2000x2004 71.9
# -> 61.8 (68.3; 56.9), 2048x8192x2052 269.0 -> 252.5 (252.5; 250.8); only 1024x1024x1028
# tf32 lost, 22.4 -> 23.5 (21.6; 20.4).
def _shift_misaligns(b: torch.Tensor | None) -> bool:
    return (b is not None and _b_k_major(b)
            and (b.stride(1) * b.element_size()) % SECTOR_BYTES == 0)


# Where two planes of M / 2 rows need a row of tiles more than M rows do, the tiles can
# spill into another wave: 520x3000x1000 fp16 nn (120 tiles of 128x128 on one plane, 144 on
# two) took 24.1 us as planes against 17.7 on one (bf16 23.9 / 17.7; library, H100,
# CUDA-graph time after an L2 flush, probe, thirtieth session). Where the count is the
# same, planes gained there: 1000^3 fp16 nn 13.8 -> 13.2 (cuBLAS 12.0), bf16 13.7 -> 13.1
# (11.7), 2000x1000x1000 fp16 17.7 -> 16.2 (14.8), bf16 17.4 -> 16.1 (14.6),
# 1024x4104x4104 fp16 79.7 -> 69.5 (62.9), bf16 79.1 -> 68.5 (62.9).
def _plane_rows_fit(m: int) -> bool:
    """Whether two planes of m / 2 rows take as many rows of tiles as m rows for every
    tile height (BM) of the persistent configs."""
    return m > 0 and all(2 * -(-(m // 2) // bm) == -(-m // bm) for bm in _TILE_HEIGHTS)


def _tma_ok(t: torch.Tensor, row_stride: int) -> bool:
    nbytes = t.element_size()
    return t.data_ptr() % TMA_ALIGN_BYTES == 0 and (row_stride * nbytes) % TMA_ALIGN_BYTES == 0


def _a_m_major(a: torch.Tensor) -> bool:
    """A (M, K) is stored M-contiguous (a transposed row-major (K, M) matrix)."""
    return a.stride(1) != 1 and a.stride(0) == 1


def _d_row(has_d: bool, d: torch.Tensor) -> bool:
    """D_ROW: the epilogue's D (as epilogue_input gives it) is one row broadcast, a bias."""
    return has_d and d.stride(0) == 0


def _b_k_major(b: torch.Tensor) -> bool:
    """B (K, N) is stored K-contiguous (a transposed row-major (N, K) matrix)."""
    return b.stride(1) != 1 and b.stride(0) == 1


def supports(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, precision: str) -> bool:
    """Whether (M, K) A, (K, N) B and (M, N) out can run here: tensor-core precision, A
    row-major or M-major and B row-major or K-major, both TMA-aligned, out row-major (any
    row stride: an unaligned one is stored without TMA); fp32 operands only with A and B
    K-major (wgmma reads 32-bit operands K-major)."""
    half = a.dtype in (torch.float16, torch.bfloat16)
    if not half and precision not in ("tf32", "tf32x3"):
        return False
    if a.dim() != 2 or out.stride(1) != 1:
        return False
    if a.stride(1) == 1:
        a_row = a.stride(0)
    elif _a_m_major(a) and half:
        a_row = a.stride(1)
    else:
        return False
    if _b_k_major(b):
        b_row = b.stride(1)
    elif b.stride(1) == 1 and half:
        b_row = b.stride(0)
    else:
        return False
    return _tma_ok(a, a_row) and _tma_ok(b, b_row)


def matmul_2d(a, b, out, d=None, *, alpha=1.0, beta=0.0, precision="tf32", activation=0,
              config=None, lo=None, trigger=False, mid_tiles=False):
    """out = alpha * a @ b + beta * d on 2-D operands that supports() accepts.

    d: None or broadcastable to out by strides. config pins a triton.Config (tests).
    trigger: the next kernel on the stream may start beside this one (TRIGGER; where
    launches are dependent, common.dependent_launch): it must neither read what this one
    writes nor write what this one reads.
    lo: (a_lo, b_lo) for 3xTF32 from staged halves (copy.split_job): a and b then hold the
    tf32-rounded operands, B K-major, and each lo its remainder with the same strides; or
    one of a and b is the operand itself, its lo from copy.remainder_job (GPUs in
    dispatch.RAW_HI_CAPABILITIES only).
    mid_tiles: tune over the mid-M tiles ("half_mid" / "tf32_mid") whatever the rows (not
    with lo; dispatch.SMALL_WAVE); else configs.persistent_family decides."""
    split = lo is not None
    if split and not (a.stride(1) == 1 and _b_k_major(b) and all(
            t.dtype == torch.float32 and t.stride() == h.stride() and t.shape == h.shape
            for t, h in zip(lo, (a, b)))):
        raise ValueError("3xTF32 halves: float32, A row-major, B K-major, each remainder "
                         "shaped and strided like its operand")
    m, k = a.shape
    n = b.shape[1]
    if out.numel() == 0:
        return out
    has_d, d = epilogue_input(d, beta, out)
    b_k_major = _b_k_major(b)
    num_sms = _num_sms(a.device.index or 0)
    tuning = tuning_args(m, n, k, a, b)
    c_tma = _tma_ok(out, out.stride(0))
    family = configs.persistent_family(a.dtype, split, m, n, num_sms)
    if mid_tiles and not split:
        family = "tf32_mid" if a.dtype == torch.float32 else "half_mid"
    if config is None and (INTERPRETER or not AUTOTUNE):
        config = configs.persistent_default_config(family)
    planes = a_planes(a, split, has_d and not _d_row(has_d, d), b)
    # The tail's descriptors only where some config the launch may run has halves to run.
    half_tail = planes == 1 and family in HALF_TAIL_FAMILIES and any(
        _halves_run(c, m, n, num_sms)
        for c in ([config] if config is not None else _TUNED[family].configs))
    args = (*tma_descriptors(a, b, out, c_tma, lo, half_tail, planes), out, d, m, n, k,
            out.stride(0), d.stride(0), d.stride(1), float(alpha), float(beta), *tuning)
    meta = dict(PRECISION=dot_precision(a.dtype, precision), HAS_D=has_d,
                D_ROW=_d_row(has_d, d), A_M_MAJOR=_a_m_major(a), B_K_MAJOR=b_k_major,
                UPCAST=INTERPRETER and a.dtype == torch.bfloat16, NUM_SMS=num_sms,
                ACTIVATION=activation, C_TMA=c_tma, SPLIT=split,
                HI_FLUSH_K=hi_flush_k(k) if split else 0, HALF_TAIL=half_tail,
                A_PLANES=planes, INT64=needs_int64(out, d),
                CLAMP=((planes == 1 or CLAMP_PLANES) and not _a_m_major(a)
                       and not (has_d and shares_storage(out, d))),
                K_SHIFT=PLANE_SHIFT_BYTES // a.element_size() if planes == 2 else 0,
                **dependent_meta(a.device))
    meta["TRIGGER"] = trigger and meta["DEPENDENT"]

    def grid(meta_):
        return (programs(meta_["BM"], meta_["BN"], m, n, num_sms, half_tail, planes),)

    key = (*tuning, meta["PRECISION"], has_d, meta["D_ROW"], meta["C_TMA"], meta["HI_FLUSH_K"],
           planes, meta["INT64"], meta["CLAMP"], a.dtype, b.dtype, out.dtype, d.dtype)
    launch(_persistent_kernel, _TUNED[family], grid, args, meta, config, family, key,
           prepare=set_block_shapes)
    return out
