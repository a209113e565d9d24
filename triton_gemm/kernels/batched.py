"""Persistent TMA GEMM for batches of products on Hopper: C[i] = act(alpha * A[i] @ B[i] +
beta * D[i]) for 16-bit operands in any layout, and fp32 ones at tf32 with a row-major A
and a K-major B. A program per SM walks the tiles of every product of the batch, one
product after another, loading A and B through 3-D TMA descriptors (batch, rows, columns)
and storing C the same way.

Why: batched products ran on the plain kernel, a program per tile with pointer loads and
stores. Attention's scores (q @ k^T: a batch of square outputs over a short K of 64-128)
are bound by writing C, and the plain kernel's stores of one tile do not overlap the next
tile's loads: fp16 32 x 2048x2048x128 with a K-major B took 176.8 us against cuBLAS's 115.1
(0.65x; H100, CUDA-graph time after the L2 flush, forty-fifth session). A persistent
program pipelines the next tile's loads behind the current tile's store (the K loop
flattened into the tile loop), and the 3-D boxes keep every tile inside its own product
(TMA clips a box at each dimension's extent: a ragged last row of tiles neither reads nor
writes the next product's rows). WIDE has the measurements.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_wait
from triton.tools.tensor_descriptor import TensorDescriptor

from ..configs import wave_fill
from .common import (INTERPRETER, cdiv, dependent_meta, dot_precision, epilogue_input, hopper,
                     record, run_kernel)
from .epilogue import apply_activation, finish
from .persistent import TMA_ALIGN_BYTES, programs, tile_origin

# Tiles: (BM, BN, BK at 16 bits (fp32 operands take K steps of as many bytes), warps,
# stages, EPILOGUE_SUBTILE). perf/batched_probe.py, H100, CUDA-graph time after the L2
# flush, interleaved rounds, us, 128x256x64 8 warps 3 stages subtiled / 128x128x64 4 warps
# 4 stages (cuBLAS); other tiles in brackets after:
# fp16 32 x 2048x2048x128 nt 114.5 / 117.8 (115.1; 256x128 sub 116.1, 128x128 8 warps
# 120.3, 128x128 4 warps 5 stages 118.2, 3 stages 129.6, 128x256 4 stages 124.9);
# 8 x 4096x4096x128 nt 110.0 / 111.1 (111.9); 16 x 1024x1024x64 nt 16.8 / 16.0 (16.5);
# 8 x 2048^3 197.2 / 209.0 (195.4; 256x128 221.6); 4 x 4096^3 nt 822.7 / 853.9 (829.7);
# 32 x 1000^3 156.6 / 204.1 (127.9); 32 x 2048x128x2048 (N = 128: half of a 256-wide tile
# idle) 134.9 / 110.0 (113.8); bf16 as fp16 within 1%.
# tf32 32 x 2048x2048x128 nt 267.6 / 249.9 (230.1), 8 x 2048^3 nt 384.3 / 418.7 (423.6).
# tf32 over a short K on the narrow tile with C in halves / in halves and 5 stages / as
# is (forty-eighth session, same probe, us): 32 x 2048x2048x128 nt 247.8 / 259.6 / 251.0
# (229.4), 8 x 4096x4096x128 nt 233.8 / 223.6 / 235.0 (218.0), 16 x 1024x1024x64 nt 30.4 /
# 29.7 / 31.8 (32.0); 128x64 tiles 256.6-309.4, 8 warps 250.2: one run, not yet taken.
# Where 256-wide tiles cover more columns than 128-wide ones (an odd count of those) the
# narrow tile won: fp16 16 x 2048x384x2048 102.6 / 95.2 (79.7), 16 x 2048x640x2048 147.4 /
# 139.4 (127.3), 64 x 512x384x64 nt 16.8 / 14.1 (14.9).
# So the wide tile from WIDE_MIN_N columns where it covers no more of them, but not for tf32
# over a K shorter than WIDE_TF32_MIN_K (measured at 128 and 2048 only).
# Where the wide tile does not cover N, a tall 256x128x64 tile (8 warps, 4 stages, C in
# halves) beats the narrow one on long K (forty-seventh session, same probe, us, narrow /
# tall (cuBLAS)): fp16 16 x 2048x384xK, K = 512 31.7 / 30.0 (29.1), 1024 52.0 / 46.7
# (44.7), 2048 93.9 / 86.4 (80.7; nt 95.9 / 86.5, bf16 94.2 / 86.2); 8 x 4096x640x1024
# 75.2 / 72.2 (68.4); 16 x 2048x640x2048 140.0 / 139.5 (130.0). Not on a short K (K = 256
# 21.2 / 21.5; 64 x 512x384x64 nt 14.1 / 15.0), nor where it fills the SMs' waves worse or
# covers more rows: 8 x 2048x384x4096 92.8 / 98.8 (192 tall tiles: 1.45 waves of 132),
# 16 x 1000x384x2048 51.8 / 53.0, 32 x 384x384x2048 50.9 / 52.6, nor at N = 128 (32 x
# 2048x128x2048 109.8 / 114.6, 16 x 4096x128x4096 202.5 / 211.9), nor with an M-major A
# (8 x 2048x384x2048 tn 47.1 / 54.1, worse filled too). In 3 stages it lost (96.5 at
# 16 x 2048x384x2048); fp32 operands' tall stages pass the shared memory, and so does a
# matrix D beside the tall tile's (offline sm_90a: 262192 bytes by TMA, 233504 by pointers,
# which also spill 146 bytes; a bias row fits).
# Warp-specialised (TMA producer warps; the K loop then not flattened into the tile loop)
# lost at every shape (a probe, not kept, same timing, us, 128x256 unspecialised /
# specialised): fp16 8 x 2048^3 204.1 / 206.3,
# 32 x 2048x2048x128 nt 114.8 / 178.6 (the next tile's loads no longer overlap this one's
# store), 4 x 4096^3 nt 828.5 / 849.4; tf32 8 x 2048^3 nt 390.5 / 396.1.
# What costs 32 x 1000^3 its 13% (fifty-sixth session, H200, same probe, 128x256 tiles as
# WIDE, us (cuBLAS)): 1024^3 110.1 (109.3); M = 1000 109.9 (107.7); K = 1000 (A's rows 2000
# bytes) 114.5 (112.0); N = 1000 123.4 (114.1) nn but 111.9 (110.9) nt: B read N-major in
# rows of 2000 bytes (a box's 128-byte rows then straddle two 128-byte lines, the likely
# cost), not C's stores (C in halves or whole: 123.4 / 123.5); all three 134.6 (117.8), nt
# 128.2 (117.7).
# Other tiles at 1000^3 nn: 128x256 in 4 stages 144.1, 256x128 in 3 / 4 148.7 / 142.7,
# 128x128 on 8 warps 182.3, 128x256x32 in 6 165.5; kernels/pingpong.py 191.4.
WIDE = (128, 256, 64, 8, 3, True)
NARROW = (128, 128, 64, 4, 4, False)
TALL = (256, 128, 64, 8, 4, True)
# fp32 operands with a matrix D (read by pointers: D_TMA takes 16-bit D only) take the
# narrow tile with C stored in halves: the pointer loads of D stage a tile of it in shared
# memory where its columns are unit-strided, which the other tiles cannot hold. Offline
# sm_90a, tf32, B K-major, bytes of shared memory (the H100 has 232448): narrow 262176
# where D's row stride is not a multiple of 16 elements (229408 where it is), wide in
# halves 344088 either way; narrow in halves 229408. baddbmm of 2 x 160x4104x1025 fp32 (a
# matrix D of 4104 columns) failed to launch on the narrow tile (random calls on the GPU,
# TRITON_GEMM_TEST_SEED=1939956192). Not timed: a tf32 baddbmm with a matrix D.
NARROW_FP32_D = (128, 128, 64, 4, 4, True)
WIDE_MIN_N = 256
WIDE_TF32_MIN_K = 512
TALL_MIN_K = 512
GROUP_M = 8

# D_MODES: how the epilogue reads D (baddbmm's input). A tile of pointers (any strides)
# spills: 58 / 84 bytes on the wide / narrow tile at fp16 (offline sm_90a, ptxas -v), a bias
# row too, its zero strides being runtime values. So a D whose rows are all one row (a bias
# of N, or a row per product as BLOOM's ALiBi) is read as a vector (a 16-bit one before the
# K loop: 116.6 / 145.6 us below, against 118.3 / 156.1 read in the epilogue; an fp32 one
# held there spilled 624 / 192 bytes, so it is read in the epilogue),
# and a row-major 16-bit D on 16-byte rows by TMA, per product or one (M, N) for the whole
# batch (an fp32 box beside the fp32 stages passes the H100's shared memory: 279576 /
# 262184 bytes). perf/batched_probe.py --d, H100, fp16, wide tile, CUDA-graph time after the
# L2 flush, us, this mode / pointers [no D 114.6; cuBLAS's baddbmm]: 32 x 2048x2048x128 nt
# bias 116.6 / 141.4 [477.5] (a run before: 137.1), a row per product 145.6 / 161.7
# [534.3], a matrix per product 237.5 / 247.3 [448.4] (245.6), one (M, N) mask 175.5 / 176.1
# [486.6]; 8 x 2048^3 bias 203.0 / 208.3, rows 202.9 / 208.0, matrix 224.6 / 227.2, mask
# 218.5 / 220.6 [no D 195.4; cuBLAS 250.9-276.4]. Pointers on halves of the wide tile
# (no spills; a D load after each half's store) ran slower: 152.6 (bias), 259.7 (matrix),
# 180.4 (mask). The mask, in L2, still costs 61 us: each tile waits for its D block in the
# epilogue. Read before the K loop instead (held in registers over it) the block spilled
# 792 / 1740 bytes on the wide / narrow tile (offline sm_90a): not timed.
# A row per product costs more than one bias row (read from L2, not L1): in the TTGIR
# (offline sm_90a) its conversion to the dot's layout sits right after the read, before the
# tile's first TMA loads, so that step likely waits for it. Reading the next tile's row
# instead, carried across tiles, computed wrong rows on the GPU (rel error 1e-1; right in
# the interpreter), and an inline-asm copy before the use did not move the conversion.
# The narrow tile ran rows faster there (us, wide / narrow: 32 x 2048x2048xK nt, K = 64
# 127.9 / 108.5, K = 128 147.8 / 131.2), but not at K = 256 (16 x: 94.1 / 99.4), 512
# (135.6 / 145.5), 16 x 1024x1024x128 nt (22.2 / 23.7) nor 8 x 2048^3 (200.8 / 218.5): no
# rule found, so the tile rule does not look at a bias row.
D_POINTERS = tl.constexpr(0)
D_ROW = tl.constexpr(1)
D_TMA = tl.constexpr(2)


def tile_for(batch: int, m: int, n: int, k: int, dtype: torch.dtype, sms: int,
             m_major: bool = False, d_matrix: bool = False) -> tuple:
    """The tile of a batch of (M, N, K) products of this operand dtype on `sms` SMs, A
    stored M-major with m_major, the epilogue reading a matrix D with d_matrix (see WIDE,
    TALL and NARROW_FP32_D)."""
    if d_matrix and dtype == torch.float32:
        return NARROW_FP32_D
    short_tf32 = dtype == torch.float32 and k < WIDE_TF32_MIN_K
    if n >= WIDE_MIN_N and _covers(n, WIDE[1], NARROW[1]) and not short_tf32:
        return WIDE

    def fill(tile):
        return wave_fill(batch * cdiv(m, tile[0]) * cdiv(n, tile[1]), sms)
    if (n >= WIDE_MIN_N and k >= TALL_MIN_K and dtype != torch.float32 and not m_major
            and not d_matrix and _covers(m, TALL[0], NARROW[0])
            and fill(TALL) >= fill(NARROW)):
        return TALL
    return NARROW


def _covers(size: int, big: int, small: int) -> bool:
    """Tiles `big` long cover no more of size than tiles `small` long."""
    return cdiv(size, big) * big == cdiv(size, small) * small


@triton.jit
def _batched_kernel(a_desc, b_desc, c_desc, d_desc, c_ptr, d_ptr, BATCH, M, N, K,
                    stride_cb, stride_cm, stride_db, stride_dm, stride_dn, d_step, alpha, beta,
                    PRECISION: tl.constexpr, HAS_D: tl.constexpr, D_MODE: tl.constexpr,
                    ACTIVATION: tl.constexpr,
                    A_M_MAJOR: tl.constexpr, B_K_MAJOR: tl.constexpr, UPCAST: tl.constexpr,
                    C_TMA: tl.constexpr,
                    EPILOGUE_SUBTILE: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                    BK: tl.constexpr, GROUP_M: tl.constexpr, DEPENDENT: tl.constexpr):
    """C (BATCH, M, N) = act(alpha * A @ B + beta * D), product by product.

    a_desc: A as (BATCH, M, K) rows, or with A_M_MAJOR (16-bit only: wgmma reads 32-bit
    operands K-major) its (BATCH, K, M) transpose's; b_desc: B as (BATCH, K, N) rows, or
    with B_K_MAJOR its (BATCH, N, K) transpose's; c_desc: C (BATCH, M, N) when C_TMA,
    else C is stored by masked pointers through c_ptr (batch stride stride_cb, row stride
    stride_cm). D (see D_MODES): by pointers at any strides (0 to broadcast), a row read
    as a vector, or by TMA through d_desc (D's (batch, M, N), product `product * d_step`:
    d_step 0 broadcasts one (M, N) over the batch). Tiles are numbered product by product,
    grouped order within one (persistent.tile_origin); program pid takes tiles pid, pid +
    grid, ...
    EPILOGUE_SUBTILE stores C's tile as two BM x BN/2 halves (half the shared memory)."""
    if DEPENDENT:
        gdc_wait()  # launched with launch_pdl: the kernel before may still be draining
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    per_product = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BK)
    dtype = c_ptr.dtype.element_ty
    for tile in tl.range(tl.program_id(0), BATCH * per_product, tl.num_programs(0),
                         flatten=True):
        product = tile // per_product
        off_m, off_n = tile_origin(tile - product * per_product, num_pid_m, num_pid_n,
                                   BM, BN, GROUP_M)
        product64 = product.to(tl.int64)  # batch offsets of pointers pass 2^31 sooner
        offs_n = off_n + tl.arange(0, BN)
        # A 16-bit bias row is read before the K loop, off the epilogue's path (an fp32 one
        # held there spilled: see D_MODES).
        if HAS_D and D_MODE == D_ROW and d_ptr.dtype.element_ty.primitive_bitwidth == 16:
            d_row = _row(d_ptr, product64, stride_db, offs_n, stride_dn, N)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(k_tiles):
            k = ki * BK
            if A_M_MAJOR:
                a = tl.reshape(a_desc.load([product, k, off_m]), (BK, BM)).T
            else:
                a = tl.reshape(a_desc.load([product, off_m, k]), (BM, BK))
            if B_K_MAJOR:
                b = tl.reshape(b_desc.load([product, off_n, k]), (BN, BK)).T
            else:
                b = tl.reshape(b_desc.load([product, k, off_n]), (BK, BN))
            if UPCAST:
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
        acc = acc * alpha
        offs_m = off_m + tl.arange(0, BM)
        inside = (offs_m[:, None] < M) & (offs_n[None, :] < N)
        if HAS_D and D_MODE == D_ROW:
            if d_ptr.dtype.element_ty.primitive_bitwidth != 16:
                d_row = _row(d_ptr, product64, stride_db, offs_n, stride_dn, N)
            acc = apply_activation(acc + beta * d_row.to(tl.float32)[None, :], ACTIVATION)
        elif D_MODE == D_POINTERS:  # the activation alone without D
            acc = finish(acc, d_ptr + product64 * stride_db + offs_m[:, None] * stride_dm
                         + offs_n[None, :] * stride_dn, inside, beta, HAS_D, ACTIVATION)
        d_product = product * d_step
        if EPILOGUE_SUBTILE:
            halves = tl.permute(tl.reshape(acc, (BM, 2, BN // 2)), (0, 2, 1))
            left, right = tl.split(halves)
            if HAS_D and D_MODE == D_TMA:
                left = _add_d_block(left, d_desc, d_product, off_m, off_n, beta, ACTIVATION)
            c_desc.store([product, off_m, off_n],
                         tl.reshape(left.to(dtype), (1, BM, BN // 2)))
            if HAS_D and D_MODE == D_TMA:
                right = _add_d_block(right, d_desc, d_product, off_m, off_n + BN // 2, beta,
                                     ACTIVATION)
            c_desc.store([product, off_m, off_n + BN // 2],
                         tl.reshape(right.to(dtype), (1, BM, BN // 2)))
        else:
            if HAS_D and D_MODE == D_TMA:
                acc = _add_d_block(acc, d_desc, d_product, off_m, off_n, beta, ACTIVATION)
            if C_TMA:
                c_desc.store([product, off_m, off_n], tl.reshape(acc.to(dtype), (1, BM, BN)))
            else:
                tl.store(c_ptr + product64 * stride_cb + offs_m[:, None] * stride_cm
                         + offs_n[None, :], acc.to(dtype), mask=inside)


@triton.jit
def _row(d_ptr, product64, stride_db, offs_n, stride_dn, N):
    """D's row of product product64 at columns offs_n (D_ROW), zero past N."""
    return tl.load(d_ptr + product64 * stride_db + offs_n * stride_dn, mask=offs_n < N,
                   other=0.0)


@triton.jit
def _add_d_block(acc, d_desc, d_product, off_m, off_n, beta, ACTIVATION: tl.constexpr):
    """act(acc + beta * D) for the fp32 block acc of C at (off_m, off_n), D's block read by
    TMA from product d_product of d_desc (D_TMA)."""
    d = d_desc.load([d_product, off_m, off_n])
    d = tl.reshape(d, (acc.shape[0], acc.shape[1])).to(tl.float32)
    return apply_activation(acc + beta * d, ACTIVATION)


def _tma_ok(t: torch.Tensor, last: int, zero_batch: bool = False) -> bool:
    """t (3-D) is contiguous along dim `last` (1 or 2) with its other two strides nonzero
    multiples of 16 bytes and its base 16-byte aligned: what a 3-D TMA descriptor of it
    needs (a stride of 0, a broadcast batch, is not a TMA stride; zero_batch lets the
    batch's be 0, for a descriptor of one product: _d_descriptor)."""
    size = t.element_size()
    others = [s for d, s in enumerate(t.stride()) if d != last]
    return (t.stride(last) == 1 and t.data_ptr() % TMA_ALIGN_BYTES == 0
            and all((s > 0 or zero_batch and d == 0) and (s * size) % TMA_ALIGN_BYTES == 0
                    for d, s in enumerate(others)))


def a_m_major(a: torch.Tensor) -> bool:
    """(batch, M, K) A is stored M-contiguous (a transposed row-major (K, M) per product)."""
    return a.stride(1) == 1 and a.stride(2) != 1


def b_k_major(b: torch.Tensor) -> bool:
    """(batch, K, N) B is stored K-contiguous (a transposed row-major (N, K) per product)."""
    return b.stride(1) == 1 and b.stride(2) != 1


def reads(a: torch.Tensor, b: torch.Tensor, precision: str) -> bool:
    """Whether the kernel reads (batch, M, K) a and (batch, K, N) b as they are: 16-bit, or
    fp32 at tf32 with A row-major and B K-major (wgmma reads 32-bit operands K-major); A
    row-major or M-major, B row-major or K-major, each a valid 3-D TMA descriptor."""
    half = a.dtype in (torch.float16, torch.bfloat16)
    if a.dim() != 3 or not (half or a.dtype == torch.float32 and precision == "tf32"
                            and b_k_major(b) and not a_m_major(a)):
        return False
    return _tma_ok(a, 1 if a_m_major(a) else 2) and _tma_ok(b, 1 if b_k_major(b) else 2)


def _product_span(t: torch.Tensor) -> int:
    """Elements from one product's first element to its last, plus one, of (batch, R, C) t."""
    return 1 + sum((size - 1) * abs(stride) for size, stride in zip(t.shape[1:], t.stride()[1:]))


def supports(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, precision: str,
             d: torch.Tensor | None = None) -> bool:
    """Whether a, b and (batch, M, N) out run here with epilogue input d (None, or
    broadcast to out): Hopper (or the interpreter), operands as reads() takes them, out
    row-major (an unaligned one is stored by pointers), and out's and d's products each
    within 2^31 elements (the epilogue's pointer offsets within a product are 32-bit; the
    batch's offset is 64-bit)."""
    small = all(_product_span(t) < 2**31 for t in (out, d) if t is not None)
    return ((INTERPRETER or hopper(a.device)) and out.stride(2) == 1 and small
            and reads(a, b, precision))


def _descriptor(t: torch.Tensor, block: list) -> TensorDescriptor:
    """A 3-D descriptor of row-major (batch, R, C) t."""
    return TensorDescriptor(t, list(t.shape), list(t.stride()), block)


def _d_mode(has_d: bool, d: torch.Tensor) -> tl.constexpr:
    """The epilogue's D_MODES entry for d (as epilogue_input gives it, (batch, M, N))."""
    if has_d and d.stride(1) == 0:
        return D_ROW
    if has_d and d.element_size() == 2 and _tma_ok(d, 2, zero_batch=True):
        return D_TMA
    return D_POINTERS


def _d_descriptor(d: torch.Tensor, block: list) -> TensorDescriptor:
    """A 3-D descriptor of D_TMA's d: its products, or with a batch stride of 0 (one D for
    every product, a stride TMA does not take) the first alone."""
    _, m, n = d.shape
    if d.stride(0) == 0:
        return TensorDescriptor(d, [1, m, n], [m * d.stride(1), d.stride(1), 1], block)
    return _descriptor(d, block)


def matmul_3d(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor,
              d: torch.Tensor | None = None, *, alpha: float = 1.0, beta: float = 0.0,
              precision: str = "tf32", activation: int = 0, sms: int,
              tile: tuple | None = None, d_mode: tl.constexpr | None = None) -> torch.Tensor:
    """out = act(alpha * a @ b + beta * d) for operands supports() accepts, d None or
    broadcastable to out by strides, in as few programs as take as many waves of sms
    programs as the tiles need (persistent.programs). tile: (BM, BN, BK, warps, stages,
    EPILOGUE_SUBTILE), BK at 16 bits; None: tile_for's. d_mode: how D is read (D_MODES;
    None: _d_mode's). Returns out."""
    batch, m, k = a.shape
    n = b.shape[2]
    if out.numel() == 0:
        return out
    has_d, d = epilogue_input(d, beta, out)
    d_mode = _d_mode(has_d, d) if d_mode is None else d_mode
    m_major, k_major = a_m_major(a), b_k_major(b)
    bm, bn, bk16, warps, stages, subtile = tile or tile_for(
        batch, m, n, k, a.dtype, sms, m_major, has_d and d_mode != D_ROW)
    bk = bk16 * 2 // a.element_size()
    c_tma = _tma_ok(out, 2)
    a_desc = (_descriptor(a.transpose(1, 2), [1, bk, bm]) if m_major
              else _descriptor(a, [1, bm, bk]))
    b_desc = (_descriptor(b.transpose(1, 2), [1, bn, bk]) if k_major
              else _descriptor(b, [1, bk, bn]))
    c_box = [1, bm, bn // 2 if subtile and c_tma else bn]
    c_desc = _descriptor(out, c_box) if c_tma else None
    d_desc = _d_descriptor(d, c_box) if d_mode == D_TMA else None
    grid = programs(bm, bn, batch * cdiv(m, bm) * bm, n, sms, half_tail=False)
    run_kernel(_batched_kernel, (grid,),
               (a_desc, b_desc, c_desc, d_desc, out, d, batch, m, n, k, out.stride(0),
                out.stride(1), d.stride(0), d.stride(1), d.stride(2), int(d.stride(0) != 0),
                float(alpha), float(beta)),
               {"PRECISION": dot_precision(a.dtype, precision), "HAS_D": has_d,
                "D_MODE": d_mode.value,
                "ACTIVATION": activation, "A_M_MAJOR": m_major, "B_K_MAJOR": k_major,
                "UPCAST": INTERPRETER and a.dtype == torch.bfloat16, "C_TMA": c_tma,
                "EPILOGUE_SUBTILE": subtile and c_tma, "BM": bm, "BN": bn, "BK": bk,
                "GROUP_M": GROUP_M, "num_warps": warps, "num_stages": stages,
                **dependent_meta(a.device)})
    record(triton.Config({"BATCHED": True, "BM": bm, "BN": bn, "BK": bk},
                         num_warps=warps, num_stages=stages), "batched")
    return out
