"""Autotune config tables, the one pruner, and the tuning key (all tuning choices live here).

Three families, one per way the K loop's dot is executed:

* ``simt``: float32 operands, ``precision="ieee"``; the dot is plain fp32 FMA.
* ``tf32``: float32 operands on tensor cores (``"tf32"`` and ``"tf32x3"``); 4-byte operands
  halve the K depth that fits in shared memory.
* ``half``: float16 / bfloat16 operands on tensor cores with fp32 accumulation.

Each family holds the tiles of the classic SGEMM ladder write-ups (see ``SEED_TILES``)
and the larger tiles Hopper's wgmma wants.  The seeds use BK=8; ``tl.dot`` needs K >= 16 on
NVIDIA GPUs (Triton's ``min_dot_size``), so the seed tiles here use BK=16.
"""

from __future__ import annotations

import fractions
import functools

import torch
import triton

# (name, BM, BN, BK, num_warps, num_stages): the write-ups' tiles, translated to Triton.
# Threads per program = 32 * num_warps, so outputs per thread = BM*BN / (32*num_warps).
SEED_TILES = (
    # 64x64 block, 8x1 outputs per thread -> 512 threads; single-stage (no prefetch).
    ("seed_1d_thread_tile", 64, 64, 16, 16, 1),
    # 128x128 block, 8x8 outputs per thread -> 256 threads; single-stage.
    ("seed_2d_thread_tile", 128, 128, 16, 8, 1),
    # 128x128 block split into 2x4 warp tiles of 64x32, double-buffered (two smem stages);
    # on tensor-core families this is also the WMMA kernel's 128x128x16 tile.
    ("seed_warp_tile_double_buffer", 128, 128, 16, 8, 2),
)

# Hopper tiles.  128x256 / 256x128 with 8 warps (two consumer warpgroups) feed wgmma best;
# a plain tutorial kernel with these reached 664 TFLOPS fp16 at 4096^3 on the H100
# (cuBLAS 701).  Depth: 3-5 stages, as many as shared memory allows.
_HALF_TILES = (
    ("h_128x256x64", 128, 256, 64, 8, 3),
    ("h_256x128x64", 256, 128, 64, 8, 3),
    ("h_128x128x64", 128, 128, 64, 8, 4),
    ("h_128x128x64_w4", 128, 128, 64, 4, 4),
    ("h_64x256x32", 64, 256, 32, 4, 4),
    ("h_128x64x64", 128, 64, 64, 4, 4),
    ("h_64x128x64", 64, 128, 64, 4, 4),
    ("h_64x64x64", 64, 64, 64, 4, 5),
    # Small M (decode-style 1..32 rows): a tall BM wastes the tensor core on padding rows.
    ("h_16x128x128", 16, 128, 128, 4, 4),
    ("h_32x128x64", 32, 128, 64, 4, 4),
)

# 4-byte operands: the same output tiles with half the K depth, so the stages still fit.
_TF32_TILES = (
    ("t_128x256x32", 128, 256, 32, 8, 3),
    ("t_256x128x32", 256, 128, 32, 8, 3),
    ("t_128x128x32", 128, 128, 32, 8, 4),
    ("t_128x128x32_w4", 128, 128, 32, 4, 4),
    ("t_64x256x32", 64, 256, 32, 4, 4),
    ("t_128x64x32", 128, 64, 32, 4, 4),
    ("t_64x128x32", 64, 128, 32, 4, 4),
    ("t_64x64x32", 64, 64, 32, 4, 5),
    ("t_16x128x64", 16, 128, 64, 4, 4),
    ("t_32x128x32", 32, 128, 32, 4, 4),
    # Small products with a row-major B, run as given: mma.sync reads B as laid out (see
    # _SPLITK_MMA_TILES). perf/tile_probe.py --graph, H100, 512^3 tf32 nn, us: 9.9, against
    # 12.6 for the library's K-major copy and t_16x128x64 (cuBLAS 10.7).
    ("t_32x64x32_w2", 32, 64, 32, 2, 4),
)

# SIMT fp32: no tensor cores, so big register tiles and shallow K; 128x128 with 8 warps is
# the seeds' 8x8-per-thread kernel.
_SIMT_TILES = (
    ("s_128x128x32", 128, 128, 32, 8, 3),
    ("s_128x128x16", 128, 128, 16, 8, 4),
    ("s_128x256x16", 128, 256, 16, 8, 3),
    ("s_128x64x32", 128, 64, 32, 4, 3),
    ("s_64x128x32", 64, 128, 32, 4, 3),
    ("s_64x64x32", 64, 64, 32, 4, 3),
    ("s_32x64x32", 32, 64, 32, 4, 3),
)

# Thin outputs (at most THIN_N columns): a skinny product run transposed (dispatch: C^T =
# B^T A^T, the weight as A) streams the weight through tall narrow tiles, full K per program,
# one launch. tile_probe.py, H100, fp16 nt (operands as the transposed product sees them), L2
# flushed, us (cuBLAS on the same operands): 8192x16x8192 64x16x128 s6 59.7 (60.2), s4 60.3;
# 8192x32x8192 64x32x128 s6 60.1 (60.3); 8192x64x8192 64x64x128 60.7 (60.0); 28672x16x8192
# 128x16x128 170.0 (179.0); 4096x16x4096 32x16x256 21.4 (23.2). tf32, BK halved: 8192x16x8192
# 64x16x64 s6 103.2 (117.4); 8192x64x8192 64x64x64 104.6 (111.1). Only the 8192 shapes'
# tf32 tiles were measured; the rest mirror the fp16 ones. Pruned away for wider outputs,
# where they never win and only lengthen tuning (without_thin). Deeper rings, fortieth
# session (tile_probe.py --transposed --rounds 3, H100, fp16 nt, eager after an L2 flush,
# us, cuBLAS in the same run): 64x16x128 s8 against s6 1x8192x8192 49.4 / 50.1 (49.7),
# 16x8192x8192 49.2 / 49.4 (49.9), 16x4096x11008 37.5 / 38.4 (38.4), 16x4096x4096 17.6 /
# 17.6 (18.9), 16x28672x8192 161.0 / 161.0 (163.4); s10 and 8 warps no better. 64x64x128
# s6 against s4 at 64x8192x8192 50.9 / 51.5 (50.6), bf16 51.5 / 52.1 (51.1); s6 is 192 KB,
# past an A100's shared memory, so s4 stays (the untuned default, _DEFAULT_THIN_TILE).
# H200, bf16 nt (tile_probe.py --transposed --graph --rounds 3, fifty-third session, us,
# cuBLAS 36.5 / 36.2): 1x8192x8192 64x16x128 s8 38.1, 128x16x64 s8 39.5, 64x16x64 s12 40.4,
# 32x16x128 s8 46.0, 32x16x256 47.9; split-K C^T 128x16x64 s2 38.2; 32x8192x8192 64x32x128
# s6 36.8, all others 45.9 or more. No tile closes the gap to cuBLAS at one row.
THIN_N = 64
_THIN_HALF_TILES = (
    ("h_64x16x128", 64, 16, 128, 4, 8),
    ("h_32x16x256", 32, 16, 256, 4, 4),
    ("h_128x16x128", 128, 16, 128, 4, 4),
    ("h_64x32x128", 64, 32, 128, 4, 6),
    ("h_64x64x128", 64, 64, 128, 4, 4),
    ("h_64x64x128_s6", 64, 64, 128, 4, 6),
)
# A row-major weight in 16-byte runs off ALIGN (fp16 4104; dispatch.TRANSPOSED_RUNS_MAX_M)
# becomes an M-major A of 128-byte rows per K step here: shallow K steps in many stages, in
# as few programs as 64-row tiles make (cuBLAS's kernel there, one launch too, is
# nvjet_sm90_hsh_64x8_64x16: 64 x 8 tiles, 64 deep, 16 stages). perf/tile_probe.py
# --transposed --graph --rounds 3, H100, fp16 nn, us (cuBLAS), thirty-ninth session:
# 8x4104x4104 64x16x32 s16 18.1-18.2, s12 18.5, s20 18.6, s24 19.1, 64x16x64 s8 / s12 / s16
# 20.2 / 21.3 / 21.7, 64x16x128 s8 21.5, 64x16x16 s24 24.6, 32x16x32 s16 20.4, 128x16x32
# s16 25.9, 8 warps 26.9, 2 warps (mma.sync) 24.4 (18.0); 16x4104x4104 18.7 (20.6); 8x8200x8200
# 52.7, s12 52.2 (55.0). Against a K-major weight (nt) it gained nothing: 8x4104x4104 20.3
# (18.5), 16x8192x8184 60.3 against 59.3 on split-K as given (51.8).
_THIN_RUNS_TILES = (("h_64x16x32_s16", 64, 16, 32, 4, 16),)
_THIN_TILES = {
    "half": _THIN_HALF_TILES + _THIN_RUNS_TILES,
    "tf32": tuple((f"t_{bm}x{bn}x{bk // 2}{name[len(f'h_{bm}x{bn}x{bk}'):]}", bm, bn,
                   bk // 2, w, st) for name, bm, bn, bk, w, st in _THIN_HALF_TILES),
}

FAMILIES = ("simt", "tf32", "half")

# The persistent TMA kernel (kernels/persistent.py), tensor-core families only:
# (name, BM, BN, BK, num_warps, num_stages, EPILOGUE_SUBTILE[, WARP_SPECIALIZE]). A probe
# persistent kernel
# with 128x256x64, 8 warps, 3 stages, grouped order reached 701 TFLOPS fp16 at 4096^3 on the
# H100 (0.96x cuBLAS in the same run) and 1.10x at 8192^3. EPILOGUE_SUBTILE stores C in two
# halves, halving the epilogue's shared memory; with a fused D the pipeliner stages D too,
# so fp16 128x256x64 x3 needs 213 KB split and 246 KB unsplit (limit 227 KB; sizes from
# triton.compile for sm_90, perf/sass_audit.py, table PERSISTENT_SMEM below).
_PERSISTENT_TILES = {
    "half": (
        ("p_128x256x64_sub", 128, 256, 64, 8, 3, True),
        ("p_256x128x64_sub", 256, 128, 64, 8, 3, True),
        ("p_128x256x64_s2", 128, 256, 64, 8, 2, False),
        ("p_128x128x64", 128, 128, 64, 8, 4, False),
        # 1000^3 fp16's tile (64 tiles). Its neighbours ran no faster there (tile_probe.py
        # --graph --rounds 4, H100, us; this tile 13.9, cuBLAS 12.4): s3 / s5 / s6 15.2 /
        # 14.1 / 14.4, BK 128 s2 / s3 19.6 / 14.1, BK 32 s6 / s8 16.2 / 16.4, 8 warps s3 /
        # s5 15.3 / 14.4, subtiled 13.9 (nineteenth session).
        ("p_128x128x64_w4", 128, 128, 64, 4, 4, False),
        # Mid-M products with more 128x128 tiles than SMs (a wide weight): deep K steps,
        # so a program streams the weight through fewer, larger loads. tile_probe.py, H100,
        # L2 flushed, 128x28672x8192 nt, us, two runs each: fp16 170.6 / 171.3 against
        # p_128x256x64_sub 175.2 / 175.2 (cuBLAS 170.2), bf16 170.4 / 171.1 against 174.9
        # (170.1); the report's llm run then read 1.01x cuBLAS at both against 0.96x / 0.98x.
        # At 8192x28672x8192 fp16 it lost (6719 against 5024), where wide_when_a_wave does
        # not tune it.
        ("p_128x128x128", 128, 128, 128, 8, 3, False),
        # Warp-specialised (WARP_SPECIALIZE: TMA producer warps apart from the dot warps),
        # tile_probe.py, H100, fp16, L2 flushed: 8192^3 1603 us against 1737 for the same
        # tile unspecialised (cuBLAS 1675); 4096^3 208 against 206 (cuBLAS 185).
        ("p_128x256x64_sub_ws", 128, 256, 64, 8, 3, True, True),
    ),
    # Mid-M products (65..MID_M_MAX rows against a weight, fewer 128x128 tiles than SMs):
    # reading the weight once dominates, so small tiles spread it over more SMs through deep
    # pipelines. tile_probe.py, H100, fp16 nt, L2 flushed, us (plain kernel as tuned, cuBLAS):
    # 128x4096x4096 64x64x128 26.0 (30.1, 22.3); 128x4096x11008 64x64x128 52.6 (62.5, 48.3);
    # 128x8192x28672 128x64x128 184.5 (192.2, 190.2); 128x11008x4096 128x128x64 w4 s6 49.9
    # (50.0, 47.1); 256x4096x4096 128x64x64 s8 29.0 (32.4, 26.4). Dropped: 128x64x128
    # warp-specialised (28.7 there) computed wrong results on a ragged 300x270x200 product
    # (relative error 3e-2, H100, triton 3.6). 64x64x128 in 6 stages, not 5 (forty-first
    # session; tile_probe.py --rounds 3, H100, fp16 nt, eager after the flush, us, s5 / s6
    # (cuBLAS)): 128x4096x4096 18.3 / 17.7 (17.4), 128x4096x11008 40.4 / 39.5 (39.5),
    # 128x11008x4096 40.3 / 38.9 (38.9); 192 KB, Hopper only as the family.
    "half_mid": (
        ("pm_64x64x128_s6", 64, 64, 128, 4, 6, False),
        ("pm_128x64x128", 128, 64, 128, 4, 4, False),
        ("pm_128x128x64_s6", 128, 128, 64, 4, 6, False),
        ("pm_128x64x64_s8", 128, 64, 64, 4, 8, False),
        # 64x128: one warpgroup's m64n128 wgmma, the weight's 128-row box read by two
        # programs (one from L2). tile_probe.py --graph --rounds 3, H200, nt, us, fifty-second
        # session (cuBLAS): bf16 128x8192x28672 124.3 against pm_128x64x128 132.7, the tuned
        # choice (126.1); 64x64x128 s6 139.7, 128x64x64 s8 135.6, 128x128x64 s6 149.9; the
        # same tiles on the stream-K kernel 135.0-164.4.
        ("pm_64x128x128", 64, 128, 128, 4, 4, False),
    ),
    # Tried for tf32 and not added (tile_probe.py, H100, nt, L2 flushed, us, one after
    # another: two passes at 4096^3, one at 8192^3; cuBLAS 341.5 / 3156.0):
    # pt_128x256x32_sub 369.4-373.0 / 2967.2 against 256x128x32 s3 sub 388.5-390.6 /
    # 3101.5, 128x256x16 s5 sub 375.6-379.0 / 2991.6, s6 364.7-385.0 / 3205.2, 256x128x16
    # s5 440.3-440.6 / 3987.8, 128x128x32 s5 sub 441.1-452.5 / 3590.7, s6 493.1-497.7 /
    # 4013.6, s4 sub ws 415.9-419.3 / 3400.3. Four stages of the 128x256 and 256x128 ws
    # tiles need 262 KB (eighteenth session).
    "tf32": (
        ("pt_128x256x32_sub", 128, 256, 32, 8, 3, True),
        ("pt_128x128x32_sub", 128, 128, 32, 8, 4, True),
        ("pt_128x128x32", 128, 128, 32, 8, 3, False),
        ("pt_128x128x32_w4", 128, 128, 32, 4, 3, False),
        ("pt_128x64x32", 128, 64, 32, 4, 4, False),
        # tile_probe.py, H100, tf32 nt, L2 flushed: 8192^3 2968 us against 3172 for the same
        # tile unspecialised (cuBLAS 3208); 4096^3 386 against 381 (cuBLAS 344).
        ("pt_128x256x32_sub_ws", 128, 256, 32, 8, 3, True, True),
    ),
    # tf32 mid-M products (as half_mid, B K-major: a linear layer's weight). tile_probe.py,
    # H100, tf32 nt, L2 flushed, us (plain kernel as tuned, cuBLAS tf32): 128x4096x4096
    # 64x64x64 s5 31.5, 128x64x32 s8 36.1, 128x32x32 s8 37.0 (38.6, 30.8); 128x4096x11008
    # 64x64x64 s5 78.0, 128x64x32 s8 87.0, 128x32x32 s8 88.3 (97.0, 84.7); 128x128x32 tiles
    # 50-127 us. 64x64x64 in 6 stages, not 5 (forty-first session, as half_mid's, tf32,
    # s5 / s6 (cuBLAS)): 128x4096x4096 31.1 / 30.8 (31.0), 128x11008x4096 77.2 / 74.4 (72.0;
    # 128x64x32 s8 75.5), 128x4096x11008 79.1 / 78.7 (84.7).
    "tf32_mid": (
        ("pmt_64x64x64_s6", 64, 64, 64, 4, 6, False),
        ("pmt_128x64x32_s8", 128, 64, 32, 4, 8, False),
        # As pm_64x128x128 (same probe, tf32 128x11008x4096, us): 61.5 against the tuned
        # pmt_64x64x64_s6 71.7 (cuBLAS 57.2); pmt_128x64x32_s8 70.7, 128x64x64 s4 68.0; on
        # the stream-K kernel 66.6-97.8.
        ("pmt_64x128x64", 64, 128, 64, 4, 4, False),
    ),
    # 3xTF32 from staged halves: four fp32 tiles per K step (A, B and their remainders),
    # so half the K depth of the tf32 tiles buys the same stages, and three accumulators
    # (kernels/persistent.py), so no 128x256 tile. tile_probe.py, H100, L2 flushed,
    # 4096^3 with the hi accumulator flushed every 128 K (8192^3 nt): 128x128x32 sub ws 1201
    # us (9952), unspecialised 1286 (10631); 128x128x16 w8 s4 ws 1531 (12765). 128x256x16
    # (two accumulators then) ran 1820-1883 us.
    "split": (
        ("ps_128x128x32_sub_ws", 128, 128, 32, 8, 3, True, True),
        ("ps_128x128x32_sub", 128, 128, 32, 8, 3, True),
        ("ps_128x64x32", 128, 64, 32, 4, 3, False),
        ("ps_128x64x16", 128, 64, 16, 4, 4, False),
    ),
}
# Run when tuning is off: fits shared memory with the addmm/bias epilogue too.
_PERSISTENT_DEFAULT = {"half": "p_128x128x64", "half_mid": "pm_64x64x128_s6",
                       "tf32": "pt_128x64x32", "tf32_mid": "pmt_64x64x64_s6",
                       "split": "ps_128x64x16"}

# Rows up to which a product with fewer 128x128 tiles than SMs takes the mid-M tiles.
MID_M_MAX = 256


def persistent_family(dtype: torch.dtype, split: bool, m: int, n: int, sms: int) -> str:
    """The persistent config family of a product: "split" for staged tf32 halves, else
    "tf32_mid" / "half_mid" (fp32 / 16-bit operands) with at most MID_M_MAX rows and fewer
    128x128 tiles than SMs, else "tf32" / "half". Measured on dispatch's mid-M products
    (weights of 4096^2 and up).

    Not extended to larger 16-bit products with so few tiles (1000^3 fp16 reaches the
    kernel unpadded on 16-byte rows: 64 tiles of 128x128 on 132 SMs). Both rules in one
    process on the H100 (bench.time_ms eager, L2 flushed / CUDA graph, us; cuBLAS 12.3 / 8.3):
    fp16 mid tiles (pm_128x64x64_s8) 14.3 / 11.4 against this rule's p_128x128x64_w4 15.0 /
    11.1; bf16 (pm_128x64x128) 14.0 / 10.7 against p_128x128x64 16.3 / 11.2; two report
    runs of the mid tiles read 11.2-13.2 us of GPU time. No consistent gain, and four more
    configs to tune. This rule's tiles then still ran in twice the programs they needed
    (persistent.programs); without the idle ones the report reads 13.1 / 9.7 (fp16) and
    14.0 / 10.3 (bf16) against cuBLAS 12.0 / 8.2 and 11.5 / 8.3 (nineteenth session)."""
    if split:
        return "split"
    tiles = -(-m // 128) * -(-n // 128)
    if dtype not in (torch.float16, torch.bfloat16):
        return "tf32_mid" if m <= MID_M_MAX and tiles < sms else "tf32"
    mid = tiles < sms and (m <= MID_M_MAX or SMALL_WAVE_MIN_TILES <= tiles <= sms // 2)
    return "half_mid" if mid else "half"


# 16-bit products of more than MID_M_MAX rows whose 128x128 tiles, SMALL_WAVE_MIN_TILES or
# more (1024^3: 64), fill at most half the SMs tune over the mid tiles too, whose 128x64
# tiles then fill one wave (dispatch.SMALL_WAVE sends the aligned ones to the persistent
# kernel). perf/tile_probe.py --graph --rounds 3, H100, fp16,
# CUDA-graph time after the flush, us, the plain kernel as the library tuned it
# (h_64x128x64) / persistent 128x64x128 4 warps 4 stages (pm_128x64x128) / 128x128x64 4
# warps (the "half" family's p_128x128x64_w4) (cuBLAS): 1024^3 10.5 / 10.1 / 12.1 (9.6),
# nt 11.4 / 10.2 / 12.0 (9.8), 1024x1024x2048 15.2 / 14.0 / 16.8 (13.0). With more tiles
# the mid family lost: 2000x1000x1000 (128 tiles) tuned to pm_128x128x64_s6, 16.8 against
# 16.2 on p_128x128x64_w4 (the library, same timing; cuBLAS 15.0).
# Nor did cuBLAS's recipe here (64x128 tiles in 2-CTA clusters sharing one operand's tile
# by TMA multicast) pay on kernels/register_fed.py's nt mode, which has that multicast
# (fifty-eighth session, perf/fed_rows_probe.py, H200, fp16 nt, CUDA-graph us after the
# flush, three interleaved rounds, tiles of the weight's x A's rows, one CTA / clusters of
# two (the library; cuBLAS)): 1024^3 64x128 11.3 / 12.4, 128x64 10.5 / -, 128x128 12.3 /
# 13.4 (9.8; 9.4); 1000^3 64x128 13.7 / 12.9, 128x128 13.7 / 14.4 (12.0; 10.5); 2048^3
# 128x128 29.5 / 31.4, 128x256 - / 29.7 (28.5; 28.2).
SMALL_WAVE_MIN_TILES = 64


# The split-K kernel (kernels/splitk.py): (name, BM, BN, BK, SPLIT, num_warps, num_stages).
# Skinny products (M <= 64) stream B once, so BM 16..32 wastes least of the tensor core on
# padding rows; huge-K products (small M and N) take 64x64, 128x64 and 128x128 tiles with
# 8..64 slices so that slices x tiles fill the 132 SMs. 4-byte operands halve BK.
# perf/tile_probe.py, H100, L2 flushed, us (cuBLAS): 64x64x65536 fp16 s32 19.0, s64 17.0
# (17.2); 128x128x65536 tf32 64x64 s32 58.6, 128x64 s64 45.4 (43.0); 128x128x16384 fp16
# 64x64 s32 16.5, 128x64 s32 14.0 (12.5). A 64x64 output needs 128 slices of a 32x64 tile
# to fill the SMs: 64x64x65536 tf32 32x64 s128 20.8, 64x64 s128 23.3, 64x64 s64 34.7 (24.9);
# ieee (FMA, BK 32) 32x64 s128 26.1, 64x64 s64 57.6 (cuBLAS SGEMM 31.6).
# tf32 with a row-major B (nn) tuned to the 16- and 32-row tiles before _SPLITK_MMA_TILES
# (below): wgmma reads fp32 operands K-major only, so larger tiles of four warps re-lay B in
# shared memory, while 16 or 32 rows are too few for wgmma (64 a warpgroup) and run mma.sync
# on B as laid out. 256x256x32768 tf32 nn: 16x128x64 s8 56.7, 128x64x64 s32 67.1, 128x128x32
# s32 68.3, 64x64x64 s16 105.1 (cuBLAS 37.0, an sm80 mma.sync kernel); 128x128x32 s32 on a
# K-major B (nt) 36.2, CUDA-graph time (cuBLAS 37.8). A probe running a 64-row tile as four
# batched 16-row dots (mma.sync) took 69.4 there: not kept.
_SPLITK_HALF_TILES = (
    ("k_16x128x128_s4", 16, 128, 128, 4, 4, 4),
    ("k_16x128x128_s8", 16, 128, 128, 8, 4, 4),
    ("k_16x64x256_s4", 16, 64, 256, 4, 4, 3),
    ("k_32x128x128_s4", 32, 128, 128, 4, 4, 4),
    ("k_64x64x128_s8", 64, 64, 128, 8, 4, 4),
    ("k_64x64x128_s16", 64, 64, 128, 16, 4, 4),
    ("k_64x64x128_s32", 64, 64, 128, 32, 4, 4),
    ("k_64x64x128_s64", 64, 64, 128, 64, 4, 4),
    ("k_128x64x128_s32", 128, 64, 128, 32, 4, 4),
    ("k_128x64x128_s64", 128, 64, 128, 64, 4, 4),
    ("k_64x128x64_s8", 64, 128, 64, 8, 4, 4),
    # 256x256x32768: 8 tiles x 16 slices, one program per SM, half the partials of 128x128
    # s32. H100, CUDA-graph time after an L2 flush, us (a probe of pinned configs, not kept;
    # these two, then k_128x128x64_s32, the tuner's choice before them; cuBLAS): fp16 21.0,
    # 21.0, 24.1 (19.7); bf16 21.0, 21.1, 23.1 (20.2); tf32 nt (BK halved) 33.2, 32.4, 36.2
    # (39.1). As tuned after (perf/tile_probe.py --graph): fp16 k_128x64x64_s16 20.7 (19.7),
    # tf32 nt k_64x128x128_s16 32.6 (39.0); the report's splitk row 0.85x -> 0.99x eager.
    ("k_64x128x128_s16", 64, 128, 128, 16, 4, 4),
    ("k_128x64x64_s16", 128, 64, 64, 16, 4, 6),
    ("k_128x128x64_s16", 128, 128, 64, 16, 8, 4),
    ("k_128x128x64_s32", 128, 128, 64, 32, 8, 4),
    ("k_32x64x128_s128", 32, 64, 128, 128, 4, 3),
)
_SPLITK_WORD_TILES = tuple((name, bm, bn, bk // 2, split, w, st)
                           for name, bm, bn, bk, split, w, st in _SPLITK_HALF_TILES)
# tf32 and tf32x3 with a row-major B (nn): two warps per program. triton takes wgmma only
# for warps in fours, so these 32- and 64-row tiles run mma.sync, which reads B as laid out,
# with 2-4x fewer re-reads of B than the 16-row tiles. Named by their fp32 BK (the word
# tiles above keep their 16-bit originals' names). perf/tile_probe.py --graph, H100, nn, L2
# flushed, us, these against the tuner's choice before them (cuBLAS): tf32 256x256x32768
# 64x64 s32 37.2 vs 55.6 (37.8); 128x128x65536 64x64 s64 31.6, 32x64 s64 31.8 vs 38.5
# (34.0); 128x128x16384 32x64 s64 14.9 vs 18.0 (14.9). tf32x3 (split in the K loop; cuBLAS
# SGEMM): 256x256x32768 32x64 s32 91.8 vs 109.8 (98.4); 128x128x65536 32x64 s64 47.9 vs 64.1
# (66.8); 128x128x16384 32x64 s64 19.8 vs 25.8 (24.7). Not kept: 64x64x64 s16 three stages
# (tf32 36.7 at 256x256x32768, but tf32x3 300.9), 64x128 and 128x64 (49.6, 50.4), split 16
# (37.4, tf32x3 119.9). 64x64x65536 keeps k_32x64x128_s128 (tf32 19.1 against 21.2).
_SPLITK_MMA_TILES = (
    ("k_64x64x32_s32_w2", 64, 64, 32, 32, 2, 4),
    ("k_64x64x32_s64_w2", 64, 64, 32, 64, 2, 4),
    ("k_32x64x32_s32_w2", 32, 64, 32, 32, 2, 4),
    ("k_32x64x32_s64_w2", 32, 64, 32, 64, 2, 4),
)
# fp32 FMA (simt) adds the tiles of transposed skinny and mid-M products against a weight
# (dispatch.FMA_TRANSPOSED: the weight's N rows as BM, the product's few M rows as BN),
# BK 32 (and the huge-K 32x64 tile at that BK, above). perf/tile_probe.py --transposed,
# H100, ieee, L2 flushed, kernel us (cuBLAS SGEMM): 16x8192x8192 128x16 s8 118.0 (149.6);
# 16x11008x4096 64x16 s8 86.8 (102.9); 32x8192x8192 128x32 s8 129.9 (205.4); 64x8192x8192
# 64x64 s4 219.2, 128x64 w8 s4 221.6 (207.1); 64x4096x4096 64x64 s8 65.2 (67.2);
# 128x4096x4096 64x64 s4 118.7 (103.8); 256x4096x4096 64x64 s2 225.8 (184.2);
# 128x28672x8192 64x64 s2 1435.6 (1325.7). 8 warps lost elsewhere (128x16 s4 360 against
# 237 us at 8 rows), as did BK 16 (64x64 s4 226.9 against 215.3 at 32 rows). More outputs
# per thread did not help either (--transposed --rounds 3, H100, kernel us on A^T staged
# before; cuBLAS SGEMM; a twentieth-session run): 64x8192x8192 64x64 s4 217.3, 128x64 s4
# 221.1, 128x64 s4 w8 220.0, 256x64 s4 w8 218.4, 128x64x16 s4 226.9 (207.1);
# 128x4096x4096 64x64 s4 117.7, 64x128 s4 124.5, 128x128 s4 w8 120.6 (103.2);
# 128x11008x4096 64x64 s4 311.1, 64x128 s4 335.5, 128x128 s4 w8 345.7 (246.4); split 2
# took 1.5-3.7x as long. tl.dot's FMA path holds these at 36-40 TFLOPS whatever the tile.
_SPLITK_FMA_TILES = (
    ("k_128x16x32_s8", 128, 16, 32, 8, 4, 3),
    ("k_64x16x32_s8", 64, 16, 32, 8, 4, 3),
    ("k_128x32x32_s8", 128, 32, 32, 8, 4, 3),
    ("k_64x64x32_s2", 64, 64, 32, 2, 4, 3),
    ("k_64x64x32_s4", 64, 64, 32, 4, 4, 3),
    ("k_64x64x32_s8", 64, 64, 32, 8, 4, 3),
    ("k_128x64x32_s4_w8", 128, 64, 32, 4, 8, 3),
    ("k_32x64x32_s128", 32, 64, 32, 128, 4, 3),
)
# The GEMV kernel (kernels/gemv.py), fp32 FMA skinny products (dispatch.GEMV_MAX_M rows, in blocks
# of up to 16) against a K-major weight: (name, BN columns per program, num_warps, UNROLL K steps
# per iteration); BK = 32 lanes x num_warps. Few rows want narrow programs with many warps; 8 and 16
# rows want 1-4 warps, 4-8 columns, and 2-8 steps in flight. Timings swing by up to 20% between
# neighbouring tiles and with K's mask (the same tile launched directly with and without it:
# 8x8192x8192 BN 4 w1 u4 109.6 vs 122.4 us, 16x8192x8192 BN 8 w1 u2 151.7 vs 142.7), so the tuner
# picks among these. perf/tile_probe.py --only gemv, H100, K-major weight, L2 flushed, us (cuBLAS
# SGEMM): 1x8192x8192 g_2_w8_u4 100.8 (122.7); 4x8192x8192 g_2_w8_u4 110.8 (174.0); 8x8192x8192
# g_8_w4_u4 122.5 (174.3); 16x8192x8192 g_8_w1_u2 142.0, g_8_w2_u2 147.6, g_4_w1_u8 148.3 (154.9);
# 16x11008x4096 g_4_w1_u8 112.7, g_8_w2_u2 118.3 (111.6).
GEMV_TILES = (
    ("g_2_w8_u4", 2, 8, 4),
    ("g_4_w1_u4", 4, 1, 4),
    ("g_4_w2_u4", 4, 2, 4),
    ("g_4_w1_u8", 4, 1, 8),
    ("g_8_w1_u2", 8, 1, 2),
    ("g_8_w2_u2", 8, 2, 2),
    ("g_8_w4_u4", 8, 4, 4),
)
# The longest K run of one loop iteration among them: K a multiple of it needs no K mask.
GEMV_MAX_STEP = max(32 * w * u for _, _, w, u in GEMV_TILES)
# The 16-bit GEMV kernel (kernels/gemv16.py; dispatch.GEMV_MAX_M["half"] rows against a
# K-major weight): (name, BN weight rows per program, BK elements per run, num_warps, K steps
# in flight). Probes (fifty-fourth session), H200, one row, K-major weight, eager after an L2
# flush, us, fp16 / bf16 (cuBLAS; triton_gemm before it, the thin tiles transposed):
# 8192x8192 gh_8x1024_w4_s3 34.9 / 35.6, gh_8x1024_w8_s3 35.4 / 35.2-36.0, gh_16x1024_w8_s3
# 35.8 / 35.3, gh_4x512_w4_s4 35.8 / 36.0 (39.1-40.4 / 34.8-36.2; 37.1-46.1 / 36.5-39.5);
# 4096x4096 gh_4x512_w4_s4 12.1 / 12.1 (15.6 / 15.6; 14.7-14.9 / 14.9-17.1); 11008x4096
# gh_4x512_w4_s4 25.8 / 25.6 (27.3-27.9 / 27.1-27.4; 28.9-29.4 / 28.0-28.5); 28672x8192
# gh_8x1024_w8_s3 106.9 / 106.9 (109.9 / 108.7-109.3; 110.6-111.2 / 110.3-111.4); 4096x11008
# (K masked) gh_8x1024_w4_s3 25.2 / 25.3-26.0, gh_4x256_w4_s6 26.1-26.7 / 26.0-27.5 (28.1 /
# 28.0-28.2). BN 1-2 with 4096-element runs, 8 warps at BN 4 x 2048, and BN 8 x 512 in 4
# warps were slower (36.4-41.7 at 8192x8192 fp16). The tuner picks among these five.
GEMV16_TILES = (
    ("gh_4x512_w4_s4", 4, 512, 4, 4),
    ("gh_8x1024_w4_s3", 8, 1024, 4, 3),
    ("gh_8x1024_w8_s3", 8, 1024, 8, 3),
    ("gh_16x1024_w8_s3", 16, 1024, 8, 3),
    ("gh_4x256_w4_s6", 4, 256, 4, 6),
)
# The longest run among them: K a multiple of it needs no K mask.
GEMV16_MAX_BK = max(t[2] for t in GEMV16_TILES)

# Programs along M in one group: 8 rows of tiles share their B tiles in L2 (the Triton
# tutorials' value). Measured on the persistent kernel's p_128x256x64_sub, H100, L2 flushed,
# five interleaved rounds, median us for GROUP_M 1 / 4 / 8 / 16 / 32 (cuBLAS): 4096^3 fp16
# 197.5 / 193.2 / 192.8 / 191.8 / 193.8 (190.0), bf16 190.3 / 184.3 / 184.3 / 184.8 / 187.1
# (182.8); 8192^3 fp16 1806 / 1692 / 1671 / 1660 / 1684 (1678); 2048x11008x4096 nt fp16
# 320.9 / 290.8 / 274.2 / 271.2 / 271.9 (269.3). 8 to 32 agree within the rounds' spread
# (a probe, not kept, nineteenth session); the plain kernel's grouping was not re-measured.
# The plain kernel groups by this; the persistent kernel by persistent_group_m below.
GROUP_M = 8
# The persistent kernel's groups (persistent.tile_origin): as even as can be, at most
# persistent_group_m rows of tiles. A wave of 132 tiles of BM x BN, r rows of tiles tall,
# loads r * BM + 132 / r * BN rows of A and B per K step: fewest at r = sqrt(132 * BN / BM),
# 16 for 128x256 tiles, 8 for 256x128. Even groups: 1152 / 1280 / 1664 x 11008 x 4096 fp16
# nt have 9 / 10 / 13 rows of 128x256 tiles, which groups of 8 cut as 8 + 1, 8 + 2, 8 + 5,
# the last group reading all of B again. perf/tile_probe.py, p_128x256x64_sub, H100, L2
# flushed, three interleaved rounds, median us (cuBLAS), groups of 8 as before against one
# group (16): 147.6 / 181.3 / 223.4 against 139.6 / 171.7 / 220.1 (145.7 / 160.1 / 212.3);
# in another run even groups of 8 (5 + 5, 7 + 6) against one group: 1280 176.9 vs 173.4
# (160.4), 1664 223.7 vs 220.8 (214.5); 2176x8192x4096 nt (17 rows) 6 + 6 + 5 vs 9 + 8
# 222.1 vs 219.5 (219.0). Larger products moved within the run's noise (4096^3 tf32 nt
# 371.6 vs 366.5, 8192^3 bf16 1634.9 vs 1576.4, 8192x28672x8192 nt fp16 5854 vs 5479,
# 2048x28672x8192 nt fp16 1440 vs 1526, their rounds 5-15% apart; twenty-ninth session),
# as did 16 against 8 in the nineteenth (see GROUP_M). Other tiles keep 8 (128x128 3xTF32
# at 4096^3 1553 us in groups of 8 against 1613 in 16, rounds overlapping).
def persistent_group_m(bm: int, bn: int) -> int:
    return 16 if bn >= 2 * bm else GROUP_M

# The fixed config the Triton interpreter runs (no timing there): small, so a CPU
# test of a 128^3 product takes seconds.
INTERPRETER_TILE = ("interpreter", 32, 32, 16, 4, 1)


# Shared memory per persistent config, read from triton.compile for sm_90 by
# perf/sass_audit.py --table, which CI checks against this table (Triton 3.6; the worse of
# tf32/tf32x3 and, 16-bit, of fp16 and bf16 and of a row-major and an M-major A; "split"
# tiles with SPLIT on):
# ((TMA-stored C: bytes without a D epilogue, with one, with a one-row D), (pointer-stored
# C: the same three)).
# With a TMA-stored C a D costs a tile more because the pipeliner stages D's loads too; a
# one-row D (a bias: D_ROW, read as a vector) costs at most 1 KB, so pt_128x256x32_sub and
# p_256x128x64_sub run with a bias. A pointer-stored C (unaligned output) needs a
# layout-conversion buffer instead, which does not fit for pt_128x256x32_sub.
PERSISTENT_SMEM = {
    "p_128x256x64_sub": ((180280, 213048, 180792), (180280, 180280, 180280)),
    "p_256x128x64_sub": ((180280, 245816, 180280), (213048, 213048, 213048)),
    "p_128x256x64_s2": ((163872, 196640, 164384), (131104, 131104, 131104)),
    "p_128x128x64": ((163904, 196672, 163904), (163904, 163904, 163904)),
    "p_128x128x64_w4": ((163904, 172096, 164160), (139328, 139328, 139328)),
    "p_128x128x128": ((229432, 262200, 229432), (229432, 229432, 229432)),
    "p_128x256x64_sub_ws": ((180280, 180280, 180280), (147512, 147512, 147512)),
    "pm_64x64x128_s6": ((204896, 213088, 204896), (204896, 204896, 204896)),
    "pm_128x64x128": ((213056, 229440, 213056), (213056, 213056, 213056)),
    "pm_128x128x64_s6": ((229472, 237664, 229728), (204896, 204896, 204896)),
    "pm_128x64x64_s8": ((213120, 229504, 213120), (213120, 213120, 213120)),
    "pm_64x128x128": ((213056, 221248, 213312), (204864, 204864, 204864)),
    "pt_128x256x32_sub": ((229408, 344088, 229408), (278552, 278552, 278552)),
    "pt_128x128x32_sub": ((163896, 229408, 163896), (196640, 196640, 196640)),
    "pt_128x128x32": ((163872, 229400, 163872), (163864, 163864, 163864)),
    "pt_128x128x32_w4": ((163872, 229400, 164376), (163864, 163864, 163864)),
    "pt_128x64x32": ((131104, 163872, 131104), (131104, 131104, 131104)),
    "pt_128x256x32_sub_ws": ((229408, 229408, 229408), (163872, 163872, 163872)),
    "pmt_64x64x64_s6": ((213040, 229424, 213040), (213040, 213040, 213040)),
    "pmt_128x64x32_s8": ((229440, 262208, 229440), (229440, 229440, 229440)),
    "pmt_64x128x64": ((229408, 262176, 229920), (229408, 229408, 229408)),
    "ps_128x128x32_sub_ws": ((229432, 229432, 229432), (196664, 196664, 196664)),
    "ps_128x128x32_sub": ((229432, 294968, 229432), (262200, 262200, 262200)),
    "ps_128x64x32": ((180280, 213048, 180280), (180280, 180280, 180280)),
    "ps_128x64x16": ((131136, 163904, 131136), (131136, 131136, 131136)),
}


def family_for(dtype: torch.dtype, precision: str) -> str:
    """Config family for an operand dtype and a resolved precision."""
    if dtype in (torch.float16, torch.bfloat16):
        return "half"
    return "simt" if precision == "ieee" else "tf32"


def _config(tile) -> triton.Config:
    _, bm, bn, bk, warps, stages = tile
    return triton.Config({"BM": bm, "BN": bn, "BK": bk, "GROUP_M": GROUP_M},
                         num_warps=warps, num_stages=stages)


def tiles(family: str) -> tuple:
    """All named tiles of a family, seeds first."""
    if family not in FAMILIES:
        raise ValueError(f"unknown config family {family!r}; expected one of {FAMILIES}")
    extra = {"simt": _SIMT_TILES, "tf32": _TF32_TILES, "half": _HALF_TILES}[family]
    return SEED_TILES + extra + _THIN_TILES.get(family, ())


def configs(family: str) -> list[triton.Config]:
    """The autotune config list of a family."""
    return [_config(t) for t in tiles(family)]


def persistent_tiles(family: str) -> tuple:
    if family not in _PERSISTENT_TILES:
        raise ValueError(f"no persistent tiles for family {family!r}; expected one of "
                         f"{tuple(_PERSISTENT_TILES)}")
    return _PERSISTENT_TILES[family]


def persistent_default_config(family: str) -> triton.Config:
    names = [t[0] for t in persistent_tiles(family)]
    return persistent_configs(family)[names.index(_PERSISTENT_DEFAULT[family])]


def persistent_configs(family: str) -> list[triton.Config]:
    return [persistent_config(*t[1:]) for t in persistent_tiles(family)]


# Families the stream-K kernel records its configs under: "streamk_" + persistent family.
STREAMK_PREFIX = "streamk_"


def streamk_configs(family: str) -> list[triton.Config]:
    """The stream-K kernel's configs: the persistent family's, without warp specialisation
    (kernels/streamk.py waits on flags between tiles; not combined with it)."""
    return [persistent_config(*t[1:]) for t in persistent_tiles(family)
            if not (len(t) > 7 and t[7])]


def persistent_config(bm, bn, bk, warps, stages, subtile, warp_specialize=False):
    group_m = persistent_group_m(bm, bn)
    return triton.Config({"BM": bm, "BN": bn, "BK": bk, "GROUP_M": group_m,
                          "EPILOGUE_SUBTILE": subtile, "WARP_SPECIALIZE": warp_specialize},
                         num_warps=warps, num_stages=stages)


# Operands the split-K kernel loads less than 16 bytes wide (rows not whole 16-byte runs:
# fp16 N = 4097 or 4100 as given) take these tiles only (splitk_prune, NARROW_LOADS). Rows
# off 8 bytes too (4097) are loaded one element at a time: not pipelined (cp.async moves 4
# bytes and up), a 64-bit address each per thread, so the 128-deep tiles spill (16x128x128:
# 255 registers and 884 bytes of spills for sm_90a). BK 32, the tf32 family's halved as
# elsewhere; fp32 FMA keeps 32. Rows of 8-byte runs (fp16 4100, fp32 4098) are loaded 8
# bytes wide under the kernel's hints (splitk.run_elements), on these tiles too: they beat
# the others there but on one shape. A probe (not kept; same session, CUDA-graph time, us;
# unhinted on these tiles, hinted on these, hinted on the others; cuBLAS): 8x4100x4100 nn
# fp16 28.3, 20.8, 21.7 (25.4); 8x4098x4098 nn tf32 30.0, 29.5, 32.4 (41.1), ieee 37.5,
# 31.5, 41.5 (SGEMM 71.8), nt tf32 38.1, 37.0, 35.6 (40.3).
# perf/tile_probe.py --graph --rounds 3, H100, operands as given, L2 flushed, us
# (16x128x128 s4, the tuned tile before these; the plan that padded both operands; cuBLAS),
# twenty-fourth session: 8x4097x4097 nn fp16 16x128x32 s8 27.9, 16x64x32 s32 28.0,
# 16x128x32 s16 28.9 (888.9; 38.7; 40.3); bf16 28.1 (39.0; 35.1); tf32 16x128x16 s16 32.4
# (75.9; 40.3); tf32x3 16x128x16 s8 33.6 (77.6; SGEMM 72.3); ieee 16x128x32 s8 37.6 (78.1;
# 72.6); nt fp16 16x128x32 s8 28.4 (39.3; 29.9), tf32 38.3 (77.8; 40.6); 32x4097x4097 fp16
# 32x64x32 s16 30.8, 32x128x32 s8 31.4 (40.5; 41.4); 64x4097x4097 fp16 64x128x32 s8 w8
# 34.3 (43.6; 41.7), tf32 39.6 (83.4; 45.2); 8x8192x8191 fp16 (A alone by element)
# 16x128x32 s8 52.0 (146.6; 129.7). Deeper tiles lost: 16x128x64 w8 s8 35.7 and 64x64x64
# w8 s16 66.0 (64 rows).
_SPLITK_NARROW_TILES = (
    ("k_16x128x32_s8", 16, 128, 32, 8, 4, 3),
    ("k_16x128x32_s16", 16, 128, 32, 16, 4, 3),
    ("k_16x64x32_s32", 16, 64, 32, 32, 4, 3),
    ("k_32x64x32_s16", 32, 64, 32, 16, 4, 3),
    ("k_32x128x32_s8", 32, 128, 32, 8, 4, 3),
    ("k_64x128x32_s8_w8", 64, 128, 32, 8, 8, 3),
    # Huge K, few output tiles (dispatch.SPLITK_AS_GIVEN_MAX_MN): enough slices to fill the
    # SMs. perf/tile_probe.py --graph --rounds 3, H100, fp16 as given, us (the plan that
    # padded; cuBLAS), twenty-fifth session: 128x128x65535 (A by element) 32x64x32 s128
    # 30.2, 64x64x32 s64 40.0 (38.3; 39.6); 100x100x50000 (B by element) 64x64x32 s64
    # 19.6, 32x64x32 s128 24.1 (26.8; 24.3); 127x129x16384 64x64x32 s64 17.8 (17.8; 22.8).
    # 16-row and 64x128 tiles took 2-4x as long there.
    ("k_32x64x32_s128", 32, 64, 32, 128, 4, 3),
    ("k_64x64x32_s64", 64, 64, 32, 64, 4, 3),
)
# A row-major weight in 16-byte runs off ALIGN as an M-major first operand of few columns
# (C^T = W A^T, dispatch.TRANSPOSED_SPLIT_K; fast memory): 128-row tiles in 4 K slices of
# shallow steps, tuned only there (splitk_prune). dispatch.TRANSPOSED_RUNS_SPLIT_K has the
# probe (H200, 8x4104x4104 fp16 16.6 us against 18.3 on the plain kernel; cuBLAS 17.4).
_SPLITK_RUNS_TILES = (("k_128x16x32_s4_st8", 128, 16, 32, 4, 4, 8),)
_SPLITK_RUNS_SHAPES = frozenset(t[1:] for t in _SPLITK_RUNS_TILES)
# 16-bit A read in planes of rows (splitk.row_planes: rows off 16-byte runs; 128x128x65535
# takes 8 planes of 16 rows), tiles at most a plane tall (splitk_prune). perf/tile_probe.py
# --graph --rounds 3, H200, 128x128x65535, us, fp16 / bf16 (cuBLAS 38.4 / 38.4), fifty-third
# session: 16x128x128 s32 25.6 / 25.8, s16 28.5 / 28.6, s64 28.4 / 28.4; 16x128x64 s64 27.3
# / 27.4, s32 w4 st6 29.5 / 29.2; 16x128x256 s16 28.4 / 28.4; 16x64x128 s32 33.6 / 33.7;
# 16x256x64 s32 45.6 / 45.5. Not in planes, A by element, the best tile 30.4 (fp16 32x64x32
# s128, the narrow tiles' choice), 16x128x128 s32 30.4.
_SPLITK_PLANES_TILES = (("k_16x128x128_s32", 16, 128, 128, 32, 4, 4),)
# fp32 A loaded 4 bytes wide (rows off 16-byte runs: fp32 K = 65535) also takes these mma.sync
# tiles of _SPLITK_MMA_TILES (narrow_or_wide): perf/tile_probe.py --graph --rounds 3, H200,
# 128x128x65535, us (the narrow tiles' choice k_32x64x32_s128; cuBLAS), fifty-third session:
# tf32 64x64x32 s64 33.7 (43.7; 36.1); tf32x3 32x64x32 s64 58.7 (72.2; SGEMM 62.1), its
# 64x64x32 s64 126.7. Read in planes of rows instead (splitk.row_planes), fp32 lost: tf32
# 32x64x32 s64 35.5, 64x64x32 s64 62.0 against 33.7 by element. fp32 FMA (ieee) there
# keeps its tiles: 64x64x32 s64 68.0 (the tuner's), s128 66.8, 64x64x64 s64 75.8, 32x64x32
# s128 75.2 (SGEMM 62.2).
_SPLITK_NARROW_MMA_TILES = tuple(t for t in _SPLITK_MMA_TILES if t[4] == 64)
# 16-bit B read in planes of its rows (splitk.col_planes: rows off 16-byte runs, fp16 N =
# 4097, 8 planes), tuned only there (col_planes_tiles): each plane is already a K slice, so
# few SPLITs, whose partials times the planes stay affordable. perf/tile_probe.py --graph
# --rounds 3 --planes-off, H200, 8x4097x4097 fp16, us, in planes / by element (cuBLAS
# 40.8), fifty-third session: 16x128x64 s2 19.7 / 60.5, 16x128x128 s1 20.9 / 2492.6,
# 16x64x64 s2 21.7 / 49.0, 16x256x64 s1 22.1 / 4845.7, and the narrow tiles' choice
# 16x64x32 s32 46.8 / 25.9 (32 slices of 8 planes: 256 partials).
_SPLITK_COL_PLANES_TILES = (
    ("k_16x128x64_s2", 16, 128, 64, 2, 4, 4),
    ("k_16x256x64_s1", 16, 256, 64, 1, 4, 4),
    ("k_16x128x128_s1", 16, 128, 128, 1, 4, 4),
    ("k_16x64x64_s2", 16, 64, 64, 2, 4, 4),
)
_SPLITK_COL_PLANES_SHAPES = frozenset(t[1:] for t in _SPLITK_COL_PLANES_TILES)
# Outputs at most one of those tiles wide (its BN): the only ones measured.
SPLITK_RUNS_MAX_N = 16
_SPLITK_NARROW_WORD_TILES = tuple((name, bm, bn, bk // 2, split, w, st) for
                                  name, bm, bn, bk, split, w, st in _SPLITK_NARROW_TILES)


def splitk_narrow_tiles(family: str) -> tuple:
    """The split-K tiles for operands loaded less than 16 bytes wide
    (_SPLITK_NARROW_TILES), which no other operands take."""
    return _SPLITK_NARROW_WORD_TILES if family == "tf32" else _SPLITK_NARROW_TILES


def splitk_narrow_shapes(family: str) -> frozenset:
    """The shapes (_splitk_shape) of every split-K tile operands loaded less than 16 bytes
    wide take: the narrow tiles, and the tf32 family's _SPLITK_NARROW_MMA_TILES."""
    extra = _SPLITK_NARROW_MMA_TILES if family == "tf32" else ()
    return frozenset(t[1:] for t in splitk_narrow_tiles(family) + extra)


def splitk_tiles(family: str) -> tuple:
    if family not in FAMILIES:
        raise ValueError(f"unknown config family {family!r}; expected one of {FAMILIES}")
    if family == "simt":
        vector = _SPLITK_WORD_TILES + _SPLITK_FMA_TILES
    elif family == "half":
        vector = (_SPLITK_HALF_TILES + _SPLITK_RUNS_TILES + _SPLITK_PLANES_TILES
                  + _SPLITK_COL_PLANES_TILES)
    else:
        vector = _SPLITK_WORD_TILES + _SPLITK_MMA_TILES
    return vector + splitk_narrow_tiles(family)


# The plain kernel's tile of a fringe strip run beside the persistent core
# (dispatch.STRIP_BESIDE): one core program holds 176 KB of an SM's 228 KB of shared memory
# (p_128x256x64_sub), so the strip's programs must fit in what is left; 16x32x128 in three
# stages takes 36 KB. One launch with the epilogue, no partials and no reduce after the
# core. Probe (thirty-second session, H100, the library eager after an L2 flush,
# interleaved rounds, two runs, us; 4104^3 fp16 / bf16 / 2048x4104x4104 fp16): this tile
# 234.2, 232.4 / 225.1, 225.2 / 125.7, 126.0; four stages 234.1 / 225.1 / 125.5; 16x32x64
# four 234.2 / 226.3 / 125.6; 16x16x128 three 236.1 / 228.1 / 126.0; 16x64x128 two 243.1 /
# 232.0 / 139.0; 16x64x64 two 250.2 / 237.8 / 147.9; 16x128x64 two 266.5 / 253.8 / 162.9
# (few programs, each a long K loop). On the split-K kernel beside the core (16x64x64, 4
# slices, 20 KB, then its reduce after the core) 233.9, 235.8 / 227.5, 228.3 / 127.5, 127.7;
# the strip after the core 241.4, 246.5 / 235.3, 237.4 / 132.0, 132.1.
PLAIN_BESIDE_TILES = {"half": (16, 32, 128, 4, 3)}


def plain_beside_config(family: str) -> triton.Config:
    """The plain kernel's config of a strip run beside the persistent core
    (PLAIN_BESIDE_TILES)."""
    if family not in PLAIN_BESIDE_TILES:
        raise ValueError(f"no plain-kernel tile runs beside the core for family "
                         f"{family!r}; measured for {tuple(PLAIN_BESIDE_TILES)}")
    return _config(("", *PLAIN_BESIDE_TILES[family]))


def _splitk_config(bm, bn, bk, split, warps, stages) -> triton.Config:
    return triton.Config({"BM": bm, "BN": bn, "BK": bk, "SPLIT": split},
                         num_warps=warps, num_stages=stages)


def splitk_configs(family: str) -> list[triton.Config]:
    return [_splitk_config(*t[1:]) for t in splitk_tiles(family)]


def _gemv_config(bn, warps, unroll) -> triton.Config:
    return triton.Config({"BN": bn, "BK": 32 * warps, "UNROLL": unroll}, num_warps=warps,
                         num_stages=1)


def gemv_configs() -> list[triton.Config]:
    return [_gemv_config(*t[1:]) for t in GEMV_TILES]


def gemv_default_config(m: int) -> triton.Config:
    """The GEMV config run when tuning is off: one of the probe's best for m rows."""
    name = "g_2_w8_u4" if m <= 4 else "g_8_w2_u2"
    return _gemv_config(*next(t[1:] for t in GEMV_TILES if t[0] == name))


def _gemv16_config(bn, bk, warps, stages) -> triton.Config:
    return triton.Config({"GEMV16": True, "BN": bn, "BK": bk, "STAGES": stages},
                         num_warps=warps, num_stages=stages)


def gemv16_configs() -> list[triton.Config]:
    return [_gemv16_config(*t[1:]) for t in GEMV16_TILES]


def gemv16_default_config() -> triton.Config:
    """The 16-bit GEMV config run when tuning is off: the probe's best over most shapes."""
    return _gemv16_config(*GEMV16_TILES[0][1:])


def gemv16_prune(configs_in, named_args, **kwargs):
    """early_config_prune of the 16-bit GEMV kernel: programs at most as wide as the output
    and runs at most as long as K (keeping the narrowest, shortest at worst)."""
    n, k = named_args["N"], named_args["K"]
    fitting = [c for c in configs_in
               if c.kwargs["BN"] <= max(n, 4) and c.kwargs["BK"] <= max(k, 256)]
    return fitting or [min(configs_in, key=lambda c: (c.kwargs["BK"], c.kwargs["BN"]))]


def gemv_prune(configs_in, named_args, **kwargs):
    """early_config_prune of the GEMV kernel: programs at most as wide as the output."""
    n = named_args["N"]
    fitting = [c for c in configs_in if c.kwargs["BN"] <= max(n, 2)]
    return fitting or list(configs_in)


# Programs the untuned split-K config aims at: two per SM of a 132-SM H100, so one slow
# program does not leave an SM idle at the end.
SPLITK_TARGET_PROGRAMS = 264


def splitk_default_config(family: str, m: int, n: int, k: int,
                          narrow: bool = False) -> triton.Config:
    """The split-K config run when tuning is off: the smallest BM that covers M (16..64),
    BN 64, and the power-of-two SPLIT that brings slices x tiles nearest to
    SPLITK_TARGET_PROGRAMS while every slice keeps two K steps; BK as the narrow tiles'
    where an operand is loaded less than 16 bytes wide (narrow)."""
    bm = min(max(bucket(m), 16), 64)
    bn = 64
    bk = 128 if family == "half" else 64
    if narrow:
        bk = 16 if family == "tf32" else 32
    tiles = -(-m // bm) * -(-n // bn)
    split = 1
    while split * 2 * tiles <= SPLITK_TARGET_PROGRAMS and split * 2 * 2 * bk <= k:
        split *= 2
    return _splitk_config(bm, bn, bk, split, 4, 3)


# The split-K partials (SPLIT x M x N fp32, written once and read once) may hold at most a
# 1/SPLITK_WORK_SHARE of the operands' bytes, or SPLITK_WORK_FREE bytes (a sixth of the
# H100's L2, where small products' partials stay): their traffic competes with the
# operands'. perf/tile_probe.py, H100, fp16, us: 256x256x32768 128x128 tiles s32 34.9
# (partials a quarter of the operands), s64 37.8 (a half).
SPLITK_WORK_SHARE = 4
SPLITK_WORK_FREE = 8 << 20


def splitk_affordable(configs_in, m: int, n: int, k: int, elem_bytes: int,
                      b_planes: int = 0) -> list:
    """The split-K configs whose partials (SPLIT of them, times b_planes where given: B read
    in planes, splitk.col_planes) fit their budget (SPLITK_WORK_SHARE, at least
    SPLITK_WORK_FREE), judged on the tuning key's buckets so every shape of a key gets the
    same answer (the workspace is sized by it before the tuned config is known); the
    smallest SPLIT when none fits."""
    bm, bn, bk = bucket(m), bucket(n), bucket(k)
    budget = max((bm * bk + bk * bn) * elem_bytes // SPLITK_WORK_SHARE, SPLITK_WORK_FREE)
    parts = max(b_planes, 1)
    fits = [c for c in configs_in if c.kwargs["SPLIT"] * parts * bm * bn * 4 <= budget]
    if fits:
        return fits
    least = min(c.kwargs["SPLIT"] for c in configs_in)
    return [c for c in configs_in if c.kwargs["SPLIT"] == least]


# A split-K LAYOUT key bit (beside kernels/common's contiguity bits): an operand the
# kernel loads less than 16 bytes wide, which takes the narrow tiles and only them.
NARROW_LOADS = 4
# Another: an M-major A in 16-byte runs triton cannot see (the kernel's vector hints) and an
# output at most SPLITK_RUNS_MAX_N columns wide, which takes _SPLITK_RUNS_TILES and only them.
M_RUNS = 8


def _splitk_shape(config) -> tuple:
    """(BM, BN, BK, SPLIT, warps, stages) of a split-K config."""
    kw = config.kwargs
    return kw["BM"], kw["BN"], kw["BK"], kw["SPLIT"], config.num_warps, config.num_stages


def _splitk_among(configs_in, shapes, inside: bool) -> list:
    """The split-K configs_in whose shapes are among shapes if inside, else the others (all
    of configs_in if none is)."""
    return [c for c in configs_in
            if (_splitk_shape(c) in shapes) == inside] or list(configs_in)


def narrow_or_wide(configs_in, narrow: bool, family: str) -> list:
    """The split-K configs_in among splitk_narrow_shapes if narrow, else those not among
    the narrow tiles (all of configs_in if none is)."""
    if narrow:
        return _splitk_among(configs_in, splitk_narrow_shapes(family), True)
    return _splitk_among(configs_in, {t[1:] for t in splitk_narrow_tiles(family)}, False)


def planes_tiles(configs_in, m: int, planes: int) -> list:
    """The split-K configs_in at most a plane of m rows tall (16 at least) where A is read
    in that many planes of rows (splitk.row_planes), and _SPLITK_PLANES_TILES only there;
    all of configs_in if none is."""
    shapes = {t[1:] for t in _SPLITK_PLANES_TILES}
    if not planes:
        return _splitk_among(configs_in, shapes, False)
    tall = max(16, triton.next_power_of_2(-(-m // planes)))
    return [c for c in configs_in if c.kwargs["BM"] <= tall] or list(configs_in)


def splitk_runs_tiles(configs_in, runs: bool) -> list:
    """The split-K configs_in among _SPLITK_RUNS_TILES if runs (M_RUNS), else the others
    (all of configs_in if none is)."""
    return _splitk_among(configs_in, _SPLITK_RUNS_SHAPES, runs)


def col_planes_tiles(configs_in, b_planes: int) -> list:
    """The split-K configs_in among _SPLITK_COL_PLANES_TILES if B is read in b_planes
    planes of rows (splitk.col_planes), else the others (all of configs_in if none is)."""
    return _splitk_among(configs_in, _SPLITK_COL_PLANES_SHAPES, bool(b_planes))


def col_planes_default_config() -> triton.Config:
    """The split-K config run on B's planes when tuning is off."""
    return _splitk_config(*_SPLITK_COL_PLANES_TILES[0][1:])


def splitk_prune(configs_in, named_args, family: str, **kwargs):
    """early_config_prune of the split-K kernel: on B's planes (the B_PLANES constexpr)
    their tiles (col_planes_tiles); else the narrow tiles or the others (NARROW_LOADS), the
    runs tiles or the others (M_RUNS), tiles a plane tall (planes_tiles: the A_PLANES
    constexpr); then select(),
    affordable partials and slices of at least two K steps each."""
    m, n, k = named_args["M"], named_args["N"], named_args["K"]
    narrow = bool(named_args["LAYOUT"] & NARROW_LOADS)
    runs = bool(named_args["LAYOUT"] & M_RUNS)
    planes = kwargs.get("A_PLANES", 0)
    b_planes = kwargs.get("B_PLANES", 0)
    if b_planes:  # its own tiles, whatever the operands' other bits
        pool = col_planes_tiles(configs_in, b_planes)
    else:
        pool = planes_tiles(splitk_runs_tiles(narrow_or_wide(
            col_planes_tiles(configs_in, 0), narrow, family), runs), m, planes)
    pool = splitk_affordable(pool, m, n, k, named_args["a_ptr"].element_size(), b_planes)
    parts = max(b_planes, 1)  # K slices per SPLIT
    deep = [c for c in pool if c.kwargs["SPLIT"] * parts * 2 * c.kwargs["BK"] <= k]
    if not deep:
        deep = [min(pool, key=lambda c: c.kwargs["SPLIT"] * c.kwargs["BK"])]
    return prune(deep, named_args, **kwargs)


def interpreter_config() -> triton.Config:
    return _config(INTERPRETER_TILE)


# Per family, the config run when tuning is off: a mid-size tile that fits every shape.
_DEFAULT_TILE = {"simt": "s_64x64x32", "tf32": "t_128x128x32_w4", "half": "h_128x128x64_w4"}


# For thin outputs (at most THIN_N columns): one tile as wide as the widest thin output.
_DEFAULT_THIN_TILE = {"tf32": "t_64x64x64", "half": "h_64x64x128"}


def default_config(family: str, n: int | None = None) -> triton.Config:
    """The untuned config of a family, for an output n columns wide (None: any width)."""
    thin = n is not None and bucket(n) <= THIN_N and family in _DEFAULT_THIN_TILE
    name = (_DEFAULT_THIN_TILE if thin else _DEFAULT_TILE)[family]
    return _config(next(t for t in tiles(family) if t[0] == name))


def config_name(config: triton.Config, family: str) -> str:
    """The table name of a config, e.g. 'h_128x256x64'."""
    kw = config.kwargs
    if kw.get("REGISTER_FED"):  # kernels/register_fed.py: one fixed tile
        # "gs": both operands read by wgmma from shared memory (its X_SMEM mode); "gst": so,
        # C^T computed (its rows_2d: BM the weight's rows, BN A's, a ring of num_stages);
        # "rfb": a batch of products (its bmm); a cluster's CTA count follows as "_c2".
        prefix = ("gs" if kw.get("X_SMEM") else "rf") + ("t" if kw.get("OUT_T") else "") + (
            "b" if kw.get("PRODUCTS") else "")
        cluster = f"_c{kw['CTAS']}" if kw.get("CTAS", 1) > 1 else ""
        stages = f"_s{config.num_stages}" if kw.get("OUT_T") else ""
        return f"{prefix}_{kw['BM']}x{kw['BN']}x{kw['BK']}{stages}{cluster}"
    if kw.get("PINGPONG"):  # kernels/pingpong.py: its tile, a warpgroup's; "ppb": a batch
        return f"pp{'b' if kw.get('PRODUCTS') else ''}_{kw['BM']}x{kw['BN']}x{kw['BK']}"
    if kw.get("SIMT_TMA"):  # kernels/simt_tma.py: one fixed tile (its K-major A path: "stk_",
        # its K slices after "_s")
        if kw.get("A_K_MAJOR"):
            return f"stk_{kw['BM']}x{kw['BN']}x{kw['BK']}_s{kw['SPLIT']}"
        return f"st_{kw['BM']}x{kw['BN']}x{kw['BK']}"
    if kw.get("BATCHED"):  # kernels/batched.py: its tile for the shape
        return f"b_{kw['BM']}x{kw['BN']}x{kw['BK']}_w{config.num_warps}"
    if kw.get("WIDE"):  # kernels/wide.py: one fixed tile, 128x192
        return f"w_{kw['BM']}x{kw['BN']}x{kw['BK']}"
    if kw.get("TALL"):  # kernels/tall.py: 80- to 192-row tiles, warps and stages after,
        # then its K slices where more than one
        split = f"_k{kw['SPLIT']}" if kw.get("SPLIT", 1) > 1 else ""
        return (f"t_{kw['BM']}x{kw['BN']}x{kw['BK']}_w{config.num_warps}"
                f"_s{config.num_stages}{split}")
    if kw.get("SLICED"):  # kernels/sliced.py: one fixed tile, its K slices after "_s"
        return f"ks_{kw['BM']}x{kw['BN']}x{kw['BK']}_s{kw['SPLIT']}"
    if kw.get("SPLIT_FED"):  # kernels/split_fed.py: one fixed tile
        return f"sf_{kw['BM']}x{kw['BN']}x{kw['BK']}"
    if family.startswith(STREAMK_PREFIX):  # a persistent tile run by the stream-K kernel
        return "sk_" + config_name(config, family[len(STREAMK_PREFIX):])
    if kw.get("GEMV16"):  # kernels/gemv16.py
        return f"gh_{kw['BN']}x{kw['BK']}_w{config.num_warps}_s{kw['STAGES']}"
    if "UNROLL" in kw:
        for name, bn, warps, unroll in GEMV_TILES:
            if (bn, warps, unroll) == (kw["BN"], config.num_warps, kw["UNROLL"]):
                return name
        return f"g_{kw['BN']}_w{config.num_warps}_u{kw['UNROLL']}"
    if "SPLIT" in kw:
        for tile in splitk_tiles(family):
            if (tile[1:5] == (kw["BM"], kw["BN"], kw["BK"], kw["SPLIT"])
                    and tile[5:] == (config.num_warps, config.num_stages)):
                return tile[0]
        return (f"k_{kw['BM']}x{kw['BN']}x{kw['BK']}_s{kw['SPLIT']}_w{config.num_warps}"
                f"_st{config.num_stages}")
    if "EPILOGUE_SUBTILE" in kw:
        for tile in persistent_tiles(family):
            if (tile[1:4] == (kw["BM"], kw["BN"], kw["BK"]) and tile[4] == config.num_warps
                    and tile[5] == config.num_stages and tile[6] == kw["EPILOGUE_SUBTILE"]
                    and bool(tile[7:8] and tile[7]) == kw.get("WARP_SPECIALIZE", False)):
                return tile[0]
    for tile in tiles(family):
        if (tile[1:4] == (kw["BM"], kw["BN"], kw["BK"]) and tile[4] == config.num_warps
                and tile[5] == config.num_stages):
            return tile[0]
    return f"BM{kw['BM']}_BN{kw['BN']}_BK{kw['BK']}_w{config.num_warps}_s{config.num_stages}"


# Above this, buckets step by an eighth of the next power of two (four per octave): a
# tile's wave count on the GPU changes within an octave. perf/tile_probe.py --precision
# ieee (SIMT tiles on the library's M-major copy of A), H100, padded strides, us:
# s_128x256x16 best at 4096^3 (2837), but 1689 at 3000^3 against 1153 for s_64x64x32
# (288 tiles of 128x256: 2.2 waves of one per SM), and 3000 shared 4096's key and choice.
BUCKET_FINE_FROM = 1024


def bucket(n: int) -> int:
    """Tuning-key bucket of a dimension: the next power of two, at least 16; above
    BUCKET_FINE_FROM the next multiple of an eighth of that power (3000 -> 3072).

    Sizes in one bucket share a tuned config, so a new batch size or a ragged M does not
    force a re-tune."""
    n = int(n)  # pure Python: this is per call
    if n <= 16:
        return 16
    top = 1 << (n - 1).bit_length()
    if top <= BUCKET_FINE_FROM:
        return top
    step = top // 8
    return -(-n // step) * step


@functools.lru_cache(maxsize=None)
def _shared_memory_limit(device_index: int) -> int:
    props = torch.cuda.get_device_properties(device_index)
    return int(getattr(props, "shared_memory_per_block_optin", 0) or 48 * 1024)


def shared_memory_bytes(bm: int, bn: int, bk: int, stages: int, elem_bytes: int) -> int:
    """Shared memory the pipelined K loop holds: one A and one B tile per stage."""
    return stages * (bm * bk + bk * bn) * elem_bytes


def select(configs_in, m: int, n: int, k: int, elem_bytes: int, smem_limit: int) -> list:
    """Configs that fit in shared memory and are not far larger than an (m, n, k) problem.

    Always returns at least one config (the smallest tile that fits)."""
    fits = [c for c in configs_in
            if shared_memory_bytes(c.kwargs["BM"], c.kwargs["BN"], c.kwargs["BK"],
                                   max(c.num_stages, 1), elem_bytes) <= smem_limit]
    # A tile beyond the problem's bucket only adds masked-out work.
    sized = [c for c in fits
             if c.kwargs["BM"] <= bucket(m) and c.kwargs["BN"] <= bucket(n)
             and c.kwargs["BK"] <= bucket(k)]
    if sized:
        return sized
    pool = fits or list(configs_in)
    return [min(pool, key=lambda c: (c.kwargs["BM"] * c.kwargs["BN"], c.kwargs["BK"]))]


def prune(configs_in, named_args, **kwargs):
    """The autotuner's early_config_prune: select() with the device's shared-memory limit."""
    a = named_args["a_ptr"]
    limit = _shared_memory_limit(a.device.index if a.device.index is not None else 0)
    return select(configs_in, named_args["M"], named_args["N"], named_args["K"],
                  a.element_size(), limit)


def _tile_shape(config) -> tuple:
    """(BM, BN, BK, warps, stages) of a plain config."""
    kw = config.kwargs
    return kw["BM"], kw["BN"], kw["BK"], config.num_warps, config.num_stages


# The thin tiles' shapes; no other tile of the plain kernel has one.
_THIN_SHAPES = frozenset((bm, bn, bk, w, st) for tiles_ in _THIN_TILES.values()
                         for _, bm, bn, bk, w, st in tiles_)


def without_thin(configs_in, n: int) -> list:
    """configs_in less the thin tiles when an output n columns wide is wider than THIN_N
    (all of them if nothing else is left)."""
    if bucket(n) <= THIN_N:
        return list(configs_in)
    return [c for c in configs_in if _tile_shape(c) not in _THIN_SHAPES] or list(configs_in)


# The tiles for M-major rows in 16-byte runs off ALIGN, tuned only there: on aligned
# K-major weights the tuner took them and the report then read less (H200, fp16, against
# cuBLAS: 16x8192x8192 nt 0.89x, where h_64x16x128 reads 1.00x).
_THIN_RUNS_SHAPES = frozenset(t[1:] for t in _THIN_RUNS_TILES)


def without_runs_tiles(configs_in, runs: bool) -> list:
    """configs_in less _THIN_RUNS_TILES unless runs (all of them if nothing else is
    left)."""
    if runs:
        return list(configs_in)
    return ([c for c in configs_in if _tile_shape(c) not in _THIN_RUNS_SHAPES]
            or list(configs_in))


def plain_prune(configs_in, named_args, **kwargs):
    """early_config_prune of the plain kernel: prune() of without_thin() and
    without_runs_tiles() (runs: an M-major A under the kernel's VEC hint)."""
    runs = bool(kwargs.get("VEC")) and bool(kwargs.get("A_M_MAJOR"))
    return prune(without_runs_tiles(without_thin(configs_in, named_args["N"]), runs),
                 named_args, **kwargs)


def persistent_fits(config, family: str, has_d: bool, smem_limit: int,
                    c_tma: bool = True, d_row: bool = False) -> bool:
    """Whether config fits smem_limit with its epilogue: no D, a D, or (d_row) a D of one
    row broadcast (the persistent kernels' D_ROW)."""
    epilogue = 0 if not has_d else 2 if d_row else 1
    return PERSISTENT_SMEM[config_name(config, family)][int(not c_tma)][epilogue] <= smem_limit


def persistent_prune(configs_in, named_args, family: str, **kwargs):
    """early_config_prune of the persistent kernel's family tuner: shared memory (with its
    epilogue) and tile size against the problem."""
    a = named_args["a_desc"].base  # A's host TMA descriptor
    limit = _shared_memory_limit(a.device.index if a.device.index is not None else 0)
    fitting = [c for c in configs_in
               if persistent_fits(c, family, bool(kwargs.get("HAS_D")), limit,
                                  bool(kwargs.get("C_TMA", True)), bool(kwargs.get("D_ROW")))]
    m, n = named_args["M"], named_args["N"]
    chosen = select(fitting or list(configs_in), m, n, named_args["K"], a.element_size(),
                    limit)
    sms = kwargs.get("NUM_SMS")
    return wide_when_a_wave(busy_enough(chosen, m, n, sms), m, n, sms, family)


# A persistent tile that leaves most SMs idle loses to a smaller one that fills them, but
# the autotuner's short timings of ~10 us kernels do not always see it: at 1000^3 fp16 it
# chose 128x256 tiles (32 tiles on 132 SMs, 18.2 us in the report, H100, L2 flushed) where
# 128x128 (64 tiles) ran 13.8 us (tile_probe.py, same session). So configs whose SM
# occupancy (tiles per SM-wave slot over their waves) is under this share of the best
# config's are not tuned. 2048^3 and up: every tile of the families keeps >= 0.97.
# Compared exactly: at 128x11008 on 132 SMs the 128x128 tiles sit on the share (86 tiles,
# 86/132, against 344 of 64x64 over three waves, 344/396: three quarters of it), where
# floats dropped them, and they were the faster tile there (next to _PERSISTENT_TILES).
MIN_OCCUPANCY_SHARE = fractions.Fraction(3, 4)


def wave_fill(tiles: int, sms: int) -> fractions.Fraction:
    """The share of the SM slots of its waves that a launch of `tiles` tiles fills (0 for
    none)."""
    return fractions.Fraction(tiles, max(1, -(-tiles // sms)) * sms)


def busy_enough(configs_in, m: int, n: int, sms: int | None) -> list:
    """configs_in less those that keep far fewer SMs busy than the best of them."""
    if not sms:
        return list(configs_in)

    def occupancy(c) -> fractions.Fraction:
        return wave_fill(-(-m // c.kwargs["BM"]) * -(-n // c.kwargs["BN"]), sms)
    best = max(occupancy(c) for c in configs_in)
    return [c for c in configs_in if occupancy(c) >= MIN_OCCUPANCY_SHARE * best]


# With at least a wave of 128x256 tiles, the 16-bit family's 128x128 tiles lost to its
# 128x256 ones in every probe of pinned configs (H100, L2 flushed, fp16 / bf16, us, best
# 128x256 against p_128x128x64): 2048x11008x4096 nt 267.7 vs 277.0 / 259.1 vs 273.1,
# 8192x11008x4096 nt 1098.7 vs 1205.2 / 1057.3 vs 1189.2, 8192^3 1533.8 vs 1795.1 / 1506.5
# vs 1605.6, 4096^3 190.6 vs 213.4 / 183.9 vs 208.0, 2048x28672x8192 nt 1433.3 vs 1607.6 /
# 1387.2 vs 1503.1. Yet the autotuner, timing each config once, chose p_128x128x64_w4 at
# 2048x11008x4096 fp16 (279.3 us) and 8192^3 bf16 (1665.0) in the same session. So there
# they are not tuned. tf32's tiles: not measured this way.
# Nor is the tall 256x128 tile where it pads the output no less than 128x256: it lost on
# every shape probed (tile_probe.py --graph --rounds 3, H100, fp16, thirty-fourth session,
# us, 128x256 / 256x128, subtiled, then both warp-specialised): 4096^3 189.2 / 212.1,
# 192.6 / 207.6; 8192^3 1607.6 / 1832.3, 1648.0 / 1696.8; 2048x28672x8192 nt 1376.2 /
# 1460.1, 1422.9 / 1482.2; 8192x4096x11008 nt 1088.2 / 1122.9, 1068.8 / 1155.9;
# 8192x28672x8192 nt 5364.8 / 5876.1, 5490.5 / 7009.8; 8192x8192x28672 nt 5375.9 / 5800.0
# (bf16 5260.4 / 5612.1). Yet the report's tuner chose it at 8192x8192x28672 (fp16 0.96x,
# bf16 0.95x cuBLAS in that run).
# Only where those 128x256 tiles fill at least WIDE_MIN_FILL of their waves' SM slots (every
# shape above fills 0.87 or more): 512x11008x4096 nt makes 172 of them, a wave and 40 (0.65),
# and there the 128x128 tiles run faster. A probe (fifty-fourth session), H200, fp16,
# CUDA-graph time after an L2 flush, us (cuBLAS 63.3): p_128x256x64_sub 83.9, p_128x128x64_w4
# 75.8, p_128x128x64 77.3; the tuner had only the first.
WIDE_TILE = 128 * 256
WIDE_FAMILIES = ("half",)
WIDE_MIN_FILL = fractions.Fraction(3, 4)


def wide_tiles_filled(m: int, n: int, sms: int) -> bool:
    """Whether an m x n output's 128x256 tiles fill at least WIDE_MIN_FILL of their waves'
    SM slots on sms SMs."""
    return wave_fill(-(-m // 128) * -(-n // 256), sms) >= WIDE_MIN_FILL


def wide_when_a_wave(configs_in, m: int, n: int, sms: int | None, family: str) -> list:
    """configs_in less the tiles smaller than WIDE_TILE where 128x256 tiles fill at least
    one wave of sms and WIDE_MIN_FILL of their waves (WIDE_FAMILIES only; all of them if
    nothing else is left), and less the tall ones (BM > BN) unless they pad the m x n output
    less than every other wide tile."""
    if (family not in WIDE_FAMILIES or not sms or -(-m // 128) * -(-n // 256) < sms
            or not wide_tiles_filled(m, n, sms)):
        return list(configs_in)
    wide = [c for c in configs_in if c.kwargs["BM"] * c.kwargs["BN"] >= WIDE_TILE]

    def padded(c) -> int:
        bm, bn = c.kwargs["BM"], c.kwargs["BN"]
        return -(-m // bm) * bm * -(-n // bn) * bn
    flat = [padded(c) for c in wide if c.kwargs["BM"] <= c.kwargs["BN"]]
    if flat:
        wide = [c for c in wide
                if c.kwargs["BM"] <= c.kwargs["BN"] or padded(c) < min(flat)]
    return wide or list(configs_in)


# Kernel arguments the tuned config is keyed on (plus the dtypes of the tensor arguments,
# which Triton's autotuner always appends: of A and B, or of C and D where A and B go as TMA
# descriptors; the persistent kernels' C has A's dtype). HAS_D: a D epilogue changes which
# persistent tiles fit in shared memory (PERSISTENT_SMEM), so a config tuned without D must
# not run with one; D_ROW (persistent kernels: D one row broadcast, a bias, read as a vector)
# needs less of it.
# C_TMA (persistent kernel): a TMA or a pointer store of C, tuned apart. HI_FLUSH_K (the
# persistent split kernel's accumulator flush) changes within a K bucket. A_PLANES (the
# persistent kernel reading A as even and odd rows) walks other tiles. INT64 (persistent
# kernels: 64-bit epilogue offsets) holds more registers.
TUNING_KEY = ["M_BUCKET", "N_BUCKET", "K_BUCKET", "LAYOUT", "PRECISION", "HAS_D", "D_ROW",
              "C_TMA", "HI_FLUSH_K", "A_PLANES", "B_PLANES", "INT64"]
