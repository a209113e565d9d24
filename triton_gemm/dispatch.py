"""Which operands the kernel runs on: as given, or staged into copies it runs faster on.

Two facts measured on the H100 (4096^3, tutorial-style Triton kernel) decide this:

* Unaligned sizes: at 4097^3 fp16 the kernel ran 28 TFLOPS on the operands as given, where
  cuBLAS gives 135 and 664 is reached at 4096^3. Triton vectorises a load only when the
  leading stride and the masked extent are multiples of 16 elements, so an unaligned
  operand is loaded element by element. A zero-padded copy (K and N rounded up to 16)
  restores 16-byte loads; the zero padding adds nothing to the product.
* fp32 operands on tensor cores (tf32, tf32x3): wgmma reads 32-bit operands only in
  K-major layout; with row-major B, tf32 ran 142 TFLOPS against 308 for K-major B
  (tf32x3: 56 against 96). A K-major copy of B costs one read and write of B. Only
  wgmma's first operand may come in another layout, from registers: acc^T = B^T A^T with
  B^T in registers. Through triton's tl.dot that is not safe (its pipeliner can overwrite
  those registers while a wgmma still reads them, triton-lang/triton#9433; a probe ran
  241-301 TFLOPS at 4096^3 where correct, wrong on 128x256x32 tiles). Written in Gluon
  with the pipeline by hand, kernels/register_fed.py is right and faster than the copy:
  REGISTER_FED below. A kernel that stores B's tiles K-major into shared memory itself
  did not beat the copy (perf/transpose_probe.py, H200: 0.66x cuBLAS at 4096^3 against
  0.88x for the copy).
* fp32 FMA (ieee) wants the opposite: an M-major A and a row-major B (outer products).
  With a K-major B it ran 0.48x cuBLAS SGEMM at 4096^3 against 0.84x row-major, and an
  M-major A took row-major B from 0.84x to 0.93x (FMA_STAGE_A_MIN). An unaligned row-major
  B is read as given below FMA_PAD_B_MIN_M rows: element by element, but with the warp's
  lanes along N (the kernels' max_contiguous hint), which costs less than its copy there.
  On Hopper the large ones then run on kernels/simt_tma.py, whose TMA warp feeds FFMA
  warps (SIMT_TMA_MIN: 1.01-1.02x SGEMM at 4096^3 and 8192^3 with the copy).

Each copy costs about 2 * bytes / 3 TB/s; the thresholds below keep copies to problems
large enough to repay them. TMA needs only 16-byte rows, not 16 elements: on Hopper a single
product whose operands have them (fp16 K = 1000) runs on the persistent kernel unpadded.
perf/plans.py, H100, bf16, GPU time with L2 flushed: 1000^3 unpadded 29-40 us, plain 45,
padded 88 (cuBLAS 11.7); 8192x50257x768 (the vocabulary projection) unpadded 1.17 ms,
padded 1.23-1.40 (cuBLAS 6.52). From PITCH_PAD_MIN_MN rows and columns, rows 16 bytes off
a 32-byte sector are mostly copied: at 16 bits a B off a sector is staged K-major alone (a
row-major A as given beside it) and an A off one alone is read as planes of rows; tf32
stages B K-major anyway and runs A as given; the rest pads both.

3xTF32 (tf32x3) on the persistent kernel stages each operand as two tf32 halves (hi + exact
remainder; kernels/copy.py; on the H100 one operand goes as given, its own hi half, raw_side)
so the kernel runs three plain tf32 dots from TMA tiles instead of splitting both operands in
its K loop. perf/plans.py, H100, ms with copies, against the
in-loop split: 4096^3 1.275 vs 1.784 and 2048x11008x4096 nt 1.684 vs 2.254 (with the split
kernel's hi accumulator flushed every 256 K; at the current 128 the report has 4096^3 at
1.341), 3000^3 padded rows 0.587 vs 0.816. Not where the output rows are unaligned (4097^3:
60.9 vs 67.1 TFLOPS padded, in-loop split, with an earlier split kernel), K is short
(SPLIT_TF32_MIN_K), tiles are too few per SM (SPLIT_TF32_MIN_TILES_PER_SM), or copying the
halves costs more than the faster kernel saves (_halves_pay). Before either, single products
of K >= SPLIT_TF32_MIN_K with a wave of tiles go to kernels/split_fed.py (SPLIT_FED): it
splits one operand in registers, and only the other operand's remainder is copied (for tn,
both MN-major, its two halves); the plan made without it runs the calls it cannot take.

A thin fringe of output columns (or rows, B K-major) that would cost the persistent kernel a
whole wave of tiles (4097^3: 561 tiles of 128x256, five waves on 132 SMs; 528 without the last
column) runs apart as a skinny product: on the split-K kernel, or inside the copy of A where
the plan makes one (Plan.core, _fringe_core); a 16-bit column strip of an A read as given
runs beside the persistent core, on the plain kernel (STRIP_BESIDE). Where the last wave of
128x256 tiles is at most half full after few waves (2208^3: a wave and 30 tiles) and B is
at most 8192 columns wide, the rows of the whole waves run first and the rest as a second
launch on its own tile (Plan.wave_rows, _wave_rows).

Single (unbatched) products with at most one 64x64 output tile per two SMs and a long
K run on the split-K kernel (kernels/splitk.py): skinny M = 1..64 rows against a large
weight, and huge-K products with small M and N, where tiles alone leave SMs idle; there
operands off 16-byte runs load narrower, on the kernel's narrow tiles, or 16 bytes wide in
planes of rows where 16-bit (splitk.row_planes, splitk.col_planes) (huge-K outputs up to
SPLITK_AS_GIVEN_MAX_MN; larger ones pad them; on Hopper, ieee ones of a row-major A and B
large enough (K_MAJOR_AS_GIVEN_MIN_MN, K_MAJOR_AS_GIVEN_MIN_MNK) on kernels/simt_tma.py's
K-major path, as are mid-size ones of K_MAJOR_MID_MIN_K and more, a K-major B copied
row-major among them, K_MAJOR_COPIED_B). Skinny products
against a wide K-major weight (or an aligned row-major one, 16-bit and tf32; or a 16-bit
row-major one in 16-byte runs, TRANSPOSED_RUNS_MAX_M) run
transposed instead (C^T = B^T A^T, TRANSPOSED): the plain kernel's thin tiles stream the
weight in one launch (the row-major weight in 16-byte runs, on fast memory: the split-K
kernel's, TRANSPOSED_SPLIT_K); at fp32 FMA (ieee) up to 8
rows run on the GEMV kernel (kernels/gemv.py, GEMV), per-lane partial sums along K, and
9..256 rows transposed on the split-K kernel with a row-major copy of A^T (FMA_TRANSPOSED;
on Hopper from K_MAJOR_FMA_MIN_N rows on kernels/simt_tma.py's K-major path); a 16-bit
single row against an aligned K-major weight (GEMV16_MIN_N columns or more) runs on
kernels/gemv16.py (GEMV too), which reads each weight row in long runs and sums in fp32
registers. On Hopper, single products with at least one 128x128 tile per SM run on the
persistent TMA kernel (kernels/persistent.py) when its alignment rules hold after staging,
as do 16-bit mid-M products (65..256 rows against a large weight), and tf32 ones against a K-major
weight, on its small tiles, as do aligned 16-bit and tf32 products of 64 tiles up to half
the SMs (SMALL_WAVE), and 16-bit ones whose output fills waves of 128x192 tiles
better than of the persistent tiles on kernels/wide.py (WIDE), and 16-bit ones of 65-96 and
129-192 rows whose 128-column strips fill the SMs on kernels/tall.py (TALL), and 16-bit
and tf32 ones of up to 128 rows against a wide K-major weight as C^T = W A^T on
kernels/register_fed.py's rows_2d (FED_ROWS); 16-bit, tf32
and tf32x3 single products of fewer tiles over a long K run in K slices of 128x128 TMA
tiles (kernels/sliced.py, SLICED); batches of 16-bit and tf32 products run on the batched
persistent TMA kernel (kernels/batched.py, BATCHED); the rest run on the plain tiled kernel
(kernels/matmul.py).
"""

from __future__ import annotations

import fractions
from typing import NamedTuple

import torch

from . import configs
from .kernels import batched as _batched
from .kernels import gemv as _gemv
from .kernels import gemv16 as _gemv16
from .kernels import matmul as _kernel
from .kernels import persistent as _persistent
from .kernels import pingpong as _pingpong
from .kernels import register_fed as _register_fed
from .kernels import simt_tma as _simt_tma
from .kernels import sliced as _sliced
from .kernels import split_fed as _split_fed
from .kernels import splitk as _splitk
from .kernels import tall as _tall
from .kernels import wide as _wide
from .kernels.common import INTERPRETER, capability, epilogue_input
from .kernels.copy import TILE as COPY_TILE
from .kernels.copy import copy_jobs, padded_job, remainder_job, split_job

# Elements a leading stride and a masked extent must be multiples of for 16-byte vector
# loads of every dtype (Triton specialises integer arguments divisible by 16).
ALIGN = 16

# Pad only when both M and N reach this: below it the GEMM is memory-bound and the copy of
# the other operand would cost about as much as the product (reasoned, not measured).
# Skinny products on the split-K kernel (M <= SKINNY_M) never pad: it reads operands that
# lack 16-byte runs narrower (8 bytes, or an element at a time) on its narrow tiles
# (configs._SPLITK_NARROW_TILES, which has the figures: 8x4097x4097 fp16 nn 27.9 us as given
# against 38.7 padded, cuBLAS 40.3; 64 rows 34.3 against 43.6, 41.7; a 16-bit B's rows now
# in planes, configs._SPLITK_COL_PLANES_TILES: H200 19.7 us, cuBLAS 40.8), nor do its few-tile
# plans up to SPLITK_AS_GIVEN_MAX_MN outputs. Its other plans pad at any size an operand it
# cannot load 16 bytes wide.
PAD_MIN_MN = 64
# Split-K plans of at most this many outputs (per precision) run operands off 16-byte runs
# as given, on the narrow tiles (configs._SPLITK_NARROW_TILES); larger ones pad them (fp32
# tensor-core operands K-major). perf/plans.py, H100, CUDA-graph time after an L2 flush,
# us, as given against padded (cuBLAS), twenty-fifth session:
#   fp16    128x128x65535 30.5 / 38.2 (39.4), 100x100x50000 19.1 / 26.5 (23.7),
#           127x129x16384 17.7 / 17.8 (22.4), 192x192x40001 48.2 / 37.5 (47.7),
#           256x256x32767 59.2 / 39.8 (45.6); bf16 the first two 30.9 / 38.4, 19.4 / 26.7
#   tf32    the five 44.1 / 76.1, 25.5 / 52.4, 19.6 / 25.4, 72.2 / 77.5, 72.2 / 79.3
#   tf32x3  72.9 / 92.2, 44.9 / 68.2, 43.1 / 36.9 (a loss kept for the rule's sake: SGEMM
#           37.0), 117.7 / 116.4, 134.3 / 108.8
#   ieee    70.9 / 106.8, 58.1 / 81.5, 31.2 / 47.2, 101.6 / 143.0, 128.1 / 154.7
# and, rows of A off 16 bytes: 128x128x16383 fp16 16.3 / 16.5 (22.2), tf32x3 25.8 / 28.9
# (SGEMM 25.4); 128x128x32767 20.8 / 22.0 (27.3), 41.0 / 48.5 (39.9); 96x96x20001 14.8 /
# 16.9 (21.7), 23.9 / 30.8 (31.6); 112x112x8191 12.7 / 13.2 (16.4), 17.6 / 19.2 (17.8).
# Past 256 x 256 (up to few_tiles' 66 tiles of 64 x 64) unmeasured: padded as before.
# Re-measured with 16-bit A read in planes of rows and fp32's narrow mma.sync tiles
# (splitk.row_planes, configs._SPLITK_NARROW_MMA_TILES): perf/plans.py, H200, fifty-third
# session, GPU us as given / padded (cuBLAS): fp16 256x256x32767 41.3 / 34.9 (45.1),
# 192x192x40001 47.8 / 33.9 (47.6); tf32x3 256x256x32767 114.8 / 98.1 (97.6), 192x192x40001
# 89.7 / 104.1 (90.9). Padding still wins past 128 x 128 but for that one tf32x3 shape:
# the rule stays.
SPLITK_AS_GIVEN_MAX_MN = {"half": 128 * 128, "tf32x3": 128 * 128, "tf32": 256 * 256,
                          "ieee": 256 * 256}

# Stage a K-major copy of an fp32 tensor-core operand when the other side reaches this
# many rows/columns: break-even of the copy (KN * 8 bytes at 3 TB/s) against the time
# saved (2MNK * (1/142 - 1/308) / 1e12 s) is M ~ 350.
STAGE_MIN = 512
# Nor below STAGE_MIN_MNK multiply-adds, where the copy's launch outweighs what it saves:
# there the plain kernel's two-warp tile (configs "t_32x64x32_w2") runs mma.sync on B as
# laid out. perf/plans.py, H100, nn, CUDA-graph time after an L2 flush, us, as given
# against K-major copy (cuBLAS): 512^3 tf32 10.4 vs 12.3 (11.0), tf32x3 14.7 vs 18.2 (17.6);
# 768^3 tf32 17.0 vs 17.4 (13.3), tf32x3 35.4 vs 34.8 (37.9); 1024^3 tf32 23.9 vs 20.7
# (17.6), tf32x3 46.9 vs 43.8 (63.7); 512x2048x2048 tf32 41.2 vs 36.8 (25.8). An M-major A
# (tn, tt) likewise, GPU time as a ratio to cuBLAS, as given against both operands copied
# K-major: 512^3 tn tf32 1.06x vs 0.85x, tf32x3 1.20x vs 0.94x; tt 1.09x vs 0.90x, 1.24x vs
# 0.99x; 640^3 tn 1.45x vs 1.22x, 1.77x vs 1.38x.
STAGE_MIN_MNK = 768 ** 3

# tf32 products with one MN-major operand and the other K-major (nn: a row-major B; tt: a
# transposed A) run on kernels/register_fed.py, the MN-major operand fed to wgmma from
# registers, instead of a K-major copy of it and the persistent kernel, where that plan
# would run with no fringe and no waves of rows, the product plain (no epilogue: run()
# keeps the copy for addmm's alpha, beta and D and for activations) and TMA can read both
# operands as given. perf/transpose_probe.py, H200, eager after an L2 flush, us (cuBLAS tf32;
# the copy plan): 4096^3 nn 382.7 (365.4; 398.4), 8192^3 nn 3209 (3188; 3321). The H100
# report (thirty-sixth session; eager ratio to cuBLAS, the copy plan's in the run before):
# 2048^3 nn 1.03x (0.85x), 4096^3 nn 1.07x (0.89x), 6144^3 1.00x (1.03x), 8192^3 0.97x
# (0.93x), tt 4096^3 0.99x (0.89x), 8192^3 0.99x (0.99x); thirty-seventh session, with its
# TMA epilogue and 8192^3 in clusters of two (register_fed.CLUSTER_CTAS), two runs: 2048^3
# nn 1.01x / 1.04x, 4096^3 1.03x / 1.01x, 6144^3 1.00x / 0.99x, 8192^3 0.99x / 0.98x, tt
# 4096^3 0.99x / 1.00x, 8192^3 1.06x / 1.04x. Products with fewer
# PERSISTENT_TILE tiles than SMs (1024^3) stay on the plain kernel; between those and 2048^3
# the kernel takes them unmeasured.
REGISTER_FED = True
# 16-bit and tf32 products of a few rows (FED_ROWS_MIN_M .. register_fed.ROWS_BQ) against a
# K-major weight (nt, `linear`'s) wide enough for FED_ROWS_MIN_TILES_PER_SM tiles of
# register_fed.BP columns an SM run on kernels/register_fed.py's rows_2d (C^T = W A^T, the
# weight's rows read by wgmma from shared memory, A's rows one 128-row tile, six 32 KB
# stages), a plain product only (run() keeps the plan made otherwise for addmm's alpha,
# beta and bias and for activations). perf/fed_rows_probe.py, H200, CUDA-graph us after
# the flush, three interleaved rounds, rows_2d / the plan before (cuBLAS): tf32
# 128x11008x4096 52.4 / 61.9 (55.6), 128x28672x8192 247.3 / 263.6 (251.6), 128x16384x4096
# 73.7 / 75.1 (74.4), 128x14336x4096 66.9 / 69.2 (64.4), 96x11008x4096 62.1 / 66.4 (62.1);
# it lost at 64 tiles (128x8192x8192 86.1 / 73.7 (73.2)) and at 80 rows (80x28672x8192
# 272.6 / 257.6 (239.8)). fp16 128x28672x8192 126.6 / 133.5 (131.2), bf16 127.4 / 131.4
# (130.5), fp16 112x28672x8192 128.1 / 130.9 (122.8); under a wave of tiles no better
# (fp16 128x16384x4096 41.0 / 40.6 (40.2), 128x14336x4096 38.1 / 38.0 (35.7),
# 128x11008x4096 29.9 / 29.5 (28.4), bf16 29.1 / 29.3 (27.3)) and at 96 rows worse (fp16
# 96x28672x8192 133.7 / 123.5 (123.5)). Fifty-seventh session.
FED_ROWS = True
FED_ROWS_MIN_M = {"half": 112, "tf32": 96}
FED_ROWS_MIN_TILES_PER_SM = {"half": 1.0, "tf32": 0.65}
# Single tf32x3 products of K >= SPLIT_TF32_MIN_K (its accuracy floor, as the staged split
# kernel's) with at least a wave of PERSISTENT_TILE tiles run on kernels/split_fed.py where
# run() finds it can take the call (no activation, TMA-aligned as given), else on the plan
# made without it: one operand split in registers, only the other one's remainder copied
# (8 bytes an element of it, against 20 for both operands' staged halves), or for tn (both
# operands MN-major) its two halves (12 bytes an element, against 24).
# perf/split_fed_probe.py, H100, eager after an L2 flush, three interleaved rounds, us
# (ratio to cuBLAS SGEMM in the same run), with the copy, against the staged plan: 8192^3 nn
# 9929 (2.17x) vs 10476 (2.05x), tt 9831 (2.22x) vs 10778 (2.03x); 4096^3 nn, the kernel
# alone 1249 against 1325 for the whole staged plan (fortieth session). Same error (3.6e-7
# at 4096^3, 3.8e-7 at 8192^3: the same flush interval and the same dropped term). With the
# epilogue's bias (linear, nt, H100, eager, us, median of six interleaved rounds [range]):
# 8192^3 10105 [9582-11027] against 10361 [10222-11299] staged, without it 10123 against
# 10543; 4096^3 (three rounds) 1278 against 1286. Activations keep the other plans.
# Below the staged plan's sizes (SPLIT_TF32_MIN_TILES_PER_SM, _halves_pay) it beats the
# in-loop split those run on (same probe, nt, the kernel with its copy, or alone where the
# probe's unreplayed host work showed, against the library's plan then): 2048^3 159 vs 215,
# 2048x2048x8192 645 vs 839, 1024x4096x4096 301 vs 423; 1536^3 (144 tiles, 1.09 waves)
# alone 114 vs 163.
# Skinny products (M up to SKINNY_M) keep their own plans (split-K, GEMV), which read the
# weight once: a wave of 128-row tiles there comes from N alone (16x28672x8192 nt: 224
# tiles) and computes up to 8x the rows. perf/split_fed_probe.py, H200, nt, eager after the
# flush, three interleaved rounds, us, split-K plan / split_fed with its copy (SGEMM):
# 16x28672x8192 237.1 / 591.9 (516.1), 64x28672x8192 456.1 / 553.9 (755.9).
SPLIT_FED = True

# fp32 FMA dots (ieee, the plain kernel) run fastest on an M-contiguous A and an
# N-contiguous B: each K step is an outer product of a column of A and a row of B, which
# the dot then reads from shared memory as vectors. A row-major A (a K-major B) is read
# across its rows. A copy of A costs 8 * M * K bytes at ~2.7 TB/s, and A is re-read by
# every column of tiles. H100, dispatch.run with forced plans timed as perf/plans.py times
# them (its a_m_major/b_n_major paths), L2 flushed, ieee, us (cuBLAS SGEMM in the same
# run), operands as given against staged (copies included; best tile for 1000^3 and
# 3000^3, see configs.bucket):
#   A: 4096^3 nn 3133 -> 2872 (2667), 8192^3 24190 -> 22495 (21133), 6144^3 10150 -> 9513
#   (9078), 2048^3 404.5 -> 375.3 (343.7); 1024^3 60.6 against 94.5 staged (63.9): so at
#   FMA_STAGE_A_MIN rows and columns and up. A padded copy is made M-major at any size
#   (4097^3 3488 -> 3172, cuBLAS 3113; 4096^3 with padded strides 3232 -> 2923, 2905;
#   1000^3 best tile 62.9 -> 55.0, 63.2; 3000^3 padded strides 1261 -> 1153, 1240).
#   B, K-major (a linear layer's weight): 128x4096x4096 nt 370.9 -> 179.3 (104.4),
#   128x11008x4096 786.6 -> 442.1 (243.5), 512x4096x4096 781.6 -> 453.2 (349.5), both
#   staged 2048x11008x4096 7830 -> 3946 (4036), 8192x4096x4096 11151 -> 5776 (5408). The
#   copy of B costs 8 * K * N bytes against 2 * M * N * K FLOPs at 24.7 TFLOPS instead of 45:
#   break-even near 75 rows, so from FMA_STAGE_B_MIN_M (fewer rows and K >= 1024 run on
#   split-K or GEMV, which read B as given).
FMA_STAGE_A_MIN = 2048
# fp32 FMA products with an M-major A (the copy above, or as given) and a row-major B, at
# least SIMT_TMA_MIN rows and columns, single and without an epilogue, run on Hopper on
# kernels/simt_tma.py (a TMA warp feeding FFMA warps; its docstring has the tile's figures):
# perf/simt_gluon_probe.py, H100, on a staged A^T, TFLOPS against cuBLAS SGEMM 51.5 / 51.7
# at 4096^3 / 8192^3: 50.8 / 52.8, where the plain kernel's SIMT tiles ran 47.6 / 48.9 with
# the copy (thirty-ninth session). Only where its tiles fill the waves
# (simt_tma.WAVE_FILL) and C's rows are 16-byte runs: 4093x4091x4099 (padded copies, 512
# tiles, rows of 4091) ran 3.18 ms there against 2.85 on the plain kernel (cuBLAS 2.91).
SIMT_TMA_MIN = 2048
FMA_STAGE_B_MIN_M = 128
# An unaligned B (rows not 16-byte multiples) is padded for the FMA dots only from
# FMA_PAD_B_MIN_M rows; fewer rows read a row-major B as given, element by element (A still
# gets its M-major padded copy): the copy of B costs more than the narrower loads there.
# perf/plans.py, H100, ieee, CUDA-graph time after an L2 flush, us, B as given against
# padded, both with A's M-major copy (cuBLAS SGEMM): 127x8191x509 37.6 vs 42.0 (34.1),
# 255x8191x1023 107.7 vs 119.7 (97.5), 511x8191x1023 200.1 vs 223.9 (174.6); from 767 rows
# padding won: 767x8191x1023 310.6 vs 300.4 (301.5), 767^3 47.4 vs 44.3 (37.1), 1000^3
# 65.4 vs 61.4 (61.3), 1023^3 76.2 vs 71.1 (63.3), 2047^3 409.6 vs 384.6 (343.5), 3000^3
# (pad layout) 1321 vs 1192 (1232), 4097^3 3444 vs 3105 (3091); though not at every shape
# (1023x8191x1023 394.8 vs 421.8, 2047x4095x2047 773.4 vs 808.2, the tuner's tile choices).
FMA_PAD_B_MIN_M = 512

# DRAM bandwidth (GB/s, persistent.dram_gbps) from which the fast-memory rules hold
# (PINGPONG_FAST_MEMORY_BATCHED_MIN_K, TRANSPOSED_RUNS_SPLIT_K): measured on the H200 (4814)
# against the H100 (3352); the threshold sits between the two devices measured.
FAST_MEMORY_GBPS = 4000

# The persistent kernel keeps every SM busy only with at least one tile per SM; below that
# the plain kernel's grid is no smaller and skips the tile loop.
PERSISTENT_TILE = 128
# Except for 16-bit mid-M products (SKINNY_M < M <= configs.MID_M_MAX) against a weight of
# at least MID_MIN_WEIGHT elements, and tf32 ones against a K-major weight (wgmma's layout
# for fp32 operands; too few rows to repay a K-major copy): the persistent kernel's small
# deep-pipelined tiles (configs "half_mid", "tf32_mid", where the tf32 figures are) read
# the weight faster than the plain kernel's. tile_probe.py, H100,
# fp16 nt, L2 flushed, best mid tile against the plain kernel as tuned (cuBLAS):
# 128x4096x4096 26.0 vs 30.1 us (22.3), 128x4096x11008 52.6 vs 62.5 (48.3), 128x8192x28672
# 184.5 vs 192.2 (190.2), 256x4096x4096 28.7 vs 32.4 (26.4); 1024^3 (not mid-M) 12.3 vs 11.1.
# These run at the memory floor: 128x11008x4096 nt fp16 39.0 us, torch.sum over as many
# bytes 39.5, cuBLAS 39.1; split-K on 128-row tiles (fewer re-reads of A from L2) took
# 57.2-77.3 over seven tiles, 128x64 to 128x256 in 2-8 slices (tile_probe.py, H100, eager
# after an L2 flush, three interleaved rounds; a probe, thirty-third session).
MID_MIN_WEIGHT = 4096 * 4096

# Split K when the product has at most half as many SPLITK_TILE x SPLITK_TILE output tiles as
# SMs and K is at least SPLITK_MIN_K (8 steps of the split-K kernel's BK = 128, unmeasured).
# GPU time on the H100, fp16, K-major B (split-K vs the tuned plain kernel, cuBLAS): 128 tiles
# 128x4096x4096 26.5 vs 15.6 us (10.1) and 128x4096x11008 57.3 vs 49.4 (39.4): plain; 64
# tiles 128x2048x8192 21.9 vs 32.9 (13.3) and 64x4096x4096 17.1 vs 17.8 (8.4): split;
# 4 tiles 128x128x16384 6.6 vs 46.5 (6.5), 16 tiles 256x256x32768 19.8 vs 97.8 (13.6).
SPLITK_TILE = 64
SPLITK_MIN_K = 1024
# 16-bit, tf32 and tf32x3 products with too many tiles for split-K and too few for the
# persistent kernel (fewer 128x128 tiles than SMs, not mid-M) run on kernels/sliced.py where
# one wave holds two or more K slices of sliced.MIN_SLICE_K or deeper (sliced.slices):
# 128x128 TMA tiles in K slices, summed by splitk.reduce; fp32 operands K-major (as given,
# or the copies STAGE_MIN_MNK makes). They ran on the plain kernel's tiles; the module
# docstring has the probe's figures (1024x1024x8192 fp16 41.2 -> 32.5 us, cuBLAS 29.1).
SLICED = True
# 16-bit persistent products (no fringe cut, no wave split, not mid-M, operands as given) whose
# output fills the SMs' waves with kernels/wide.py's 128x192 tiles at least WIDE_MIN_GAIN
# times better than with the best of the persistent kernel's 128x128 and 128x256 tiles
# (_wide_fills: tiles over the slots of the waves they take, times the share of a tile's
# columns inside N: at N = 384 a 128x256 tile computes 512). The module docstring has the
# probe (perf/wide_tile_probe.py, H100, fp16, graph us, persistent / 128x192, gain):
# 1536x1536x4096 45.6 / 36.7 (1.33: 96 of 132 slots against 72 or 144 of 264), 1536x1536x8192
# 82.0 / 65.7 (1.33), 1664x1536x4096 39.5 / 37.5 (1.33); 3072x3072x4096 113.7 / 111.1 (1.11;
# its plan splits the waves, wave_rows); losing where the gain is under 1: 1536x4608x4096
# 89.5 / 104.0 (0.89), 1024x1536x4096 27.5 / 35.6 (0.66), 2048x4096x4096 nt 94.2 / 109.4
# (0.92). Per unit of area the 128x192 tile ran ~3% slower than 128x256 there
# (2048x4096x4096: 3 waves of 36.5 us against 2 of 47.0).
# The columns' share came in the fifty-sixth session (a probe of kernels/wide.py against the
# library as tuned, H200, fp16, CUDA-graph us after the L2 flush (cuBLAS)): 8192x384x4096 nn
# 39.5 against 54.1 on p_128x256x64_sub (39.0), nt 39.4 against 65.8 (39.0), gain 1.33
# (one wave of 128x192 tiles, each full, against one of 128x256 tiles a quarter empty or two
# of 128x128). Gains of 1 there: 16384x384x2048 nt 42.0 against 52.3 on p_256x128x64_sub
# (39.8), 8192x640x2048 nn 40.4 / 41.8 (34.2), 4096x1152x4096 nt 68.4 / 72.4 (54.2); under
# 1: 8192x896x4096 nt (0.89) 105.2 / 93.2 (92.4), 2048x384x8192 nn (0.67) 63.3 / 29.8 (24.8).
WIDE = True
WIDE_MIN_GAIN = 1.2
# Mid-M products (MID_M_MAX rows or fewer) with a wave of 128x128 tiles or more take the
# rule too: there the persistent kernel runs the large-product family (the mid tiles only
# take fewer tiles than SMs), whose 128x256 tiles leave a third of the SMs idle at N = 11008
# (43 columns of tiles). A probe (fifty-fourth session), H200, fp16 nt, CUDA-graph time
# after an L2 flush, us, 128x192 / the library's p_128x256x64_sub before (cuBLAS):
# 256x11008x4096 39.3 / 46.1 (35.5), 192x11008x4096 39.5 / 45.9 (31.2), 256x11008x2048
# 23.3 / 27.3 (21.7).
# But rows that pad 128-row tiles by a third or more (128 < M <= MID_SHORT_MAX_M) run the
# mid tiles (Plan.mid_tiles: 64 rows fit them) where the 128x256 tiles fill under
# configs.WIDE_MIN_FILL of their waves. Same probe, forced plans, us, mid tiles / 128x192
# / large tiles (cuBLAS): 192x11008x4096 fp16 34.1-34.5 / 39.6 / 46.3 (31.1-31.4), bf16
# 34.5 / 39.4 / 46.0-46.3 (31.0); 160x11008x4096 37.5 / 47.9 / 46.4 (32.4); 176x11008x2048
# 20.5 / 23.5 / 27.4 (18.6). Where the 128x256 tiles fill their waves the large tiles
# beat these: 144x16384x4096 (128 tiles, one wave) 68.1 / 71.1 / 55.0 (40.1); 192x28672x8192
# (224, 0.85) 183.5 / 210 / 186.9 (148-154); both now run kernels/tall.py (TALL).
MID_SHORT_MAX_M = 192
# Before that rule: 16-bit rows of a short prefill (65-96 and 129-192: tall.parts) run
# kernels/tall.py's tiles (all the rows, 128 columns: the weight read once; with fewer tiles
# than SMs, in K slices, tall.slices) where those tiles and slices fill half a wave of SMs
# or more, and where their lower part is 64 rows tall, TALL_MIN_FILL of their waves.
# perf/tall_probe.py, H200, fp16 nt, CUDA-graph time after an L2 flush, us, the tall tiles /
# the plan before (cuBLAS): 144x16384x4096 41.4 / 54.8 large (40.0),
# 136x28672x8192 144.4 / 191.7 large (121.2), 192x28672x8192 162.5 / 187.6 large (152.7),
# 144x11008x4096 37.4 / 44.5 mid (30.3), 160x11008x4096 36.2 / 37.4 mid (31.8). Losing: the
# 64-row lower part where its 86 tiles fill 0.65 of a wave, 192x11008x4096 37.9 / 34.6 mid
# (31.7), 176x11008x2048 22.8 / 20.7 (18.8); 32 tiles, 160x4096x4096 35.4 / 20.1 (22.0). In
# K slices (same probe, the mid tiles before): 144x8192x28672 137.4 / 203.0 (132.0),
# 160x8192x28672 141.7 / 193.8 (133.1), 192x8192x28672 158.4 / 194.4 (151.6),
# 144x4096x11008 33.8 / 43.2 (34.8), 192x4096x11008 37.3 / 39.9 (50.0). 65-96 rows (64 + 16
# or 32: the plan before it ran 64- or 128-row mid tiles), same probe, one process, tall /
# before (cuBLAS): 72x11008x4096 30.0 / 42.4 (27.9), 80x11008x4096 30.2 / 35.7 (27.6),
# 96x11008x4096 30.5 / 34.8 (27.6), 88x16384x4096 39.6 / 44.1 (37.4), 96x16384x4096 40.9 /
# 43.8 (38.8), 96x28672x8192 123.6 / 131.6 (122.2), 96x8192x28672 122.7 / 133.2 (129.7),
# 96x4096x11008 32.3 / 44.7 (31.9); 144x8192x4096 (2 slices) 29.1 / 34.1 (25.8). Under half a
# wave (4096x4096 weights: 32 tiles in 2 slices of 2048), where the rule keeps the mid
# tiles, the tall ones lost at 96-192 rows: 96 21.2 / 20.7 (19.6), 144 25.3 / 19.9 (17.8),
# 160 25.8 / 19.6 (22.2), 192 26.8 / 19.2 (20.4); they won at 72 rows, 20.6 / 24.7 (15.8),
# left so (one shape). On the H100 too (sixty-third session, same probe, us; the mid tiles
# then read A past its rows, before persistent.clamped_row): 96x4096x4096 tall 22.0-25.2
# over 64 or 128 columns in 1-4 slices / mid 21.0 (17.8); 144x4096x4096 23.2-26.6 / 21.4
# (18.2). With clamped_row the mid tiles take 18.2 and 20.3 (perf/rows_probe.py).
TALL = True
TALL_MIN_FILL = configs.WIDE_MIN_FILL


def _tall_fills(m: int, n: int, k: int, sms: int) -> bool:
    """Whether an (m, n, k) product takes kernels/tall.py's tiles (see TALL)."""
    parts = _tall.parts(m)
    if parts is None:
        return False
    items = _tall.tiles(m, n) * _tall.slices(m, n, k, sms)
    return 2 * items >= sms and (parts[1] < _tall.LOWER_HEIGHTS[-1]
                                 or configs.wave_fill(items, sms) >= TALL_MIN_FILL)


def _wide_fills(m: int, n: int, sms: int) -> bool:
    """Whether an m x n output fills waves of sms with 128x192 tiles WIDE_MIN_GAIN times
    better than with 128x128 or 128x256 ones: the slots' share its tiles take
    (configs.wave_fill) times the share of their columns inside n."""
    def useful(tiles: int, bn: int) -> fractions.Fraction:
        return configs.wave_fill(tiles, sms) * fractions.Fraction(n, -(-n // bn) * bn)
    best = max(useful(-(-m // 128) * -(-n // bn), bn) for bn in (128, 256))
    return useful(_wide.tiles(m, n), _wide.WIDTH) >= WIDE_MIN_GAIN * best


# Aligned 16-bit products of configs.SMALL_WAVE_MIN_TILES to half the SMs' count of 128x128
# tiles, too shallow for K slices (sliced.slices), run on the persistent kernel's mid tiles
# (configs.persistent_family: 128x64 tiles then fill one wave) instead of the plain
# kernel's. The library, H100, fp16, CUDA-graph time after the flush, three interleaved
# rounds, us, plain -> persistent (cuBLAS): 1024^3 11.1 -> 10.5 (9.6), 1024x1024x2048 15.3
# -> 13.8 (12.6); bf16 1024^3 11.0 -> 10.1 (9.4), nt 11.6 -> 10.3 (9.7), 1024x1024x2048 15.0
# -> 13.6 (12.7); 1000^3 (persistent before, on the 128x128 tiles) 13.5 -> 13.0 (12.4).
# Not past half the SMs, where the persistent kernel runs 128x128 tiles: mixed (96 to 128
# tiles, same probe: 1536x1024x2048 nt 19.9 -> 17.8, 1280x1280x2048 17.1 -> 18.0,
# 1024x1536x1024 12.4 -> 12.4, 1024x2048x1024 13.0 -> 12.9). tf32 products too, K-major
# (B staged K-major for nn, as the plain kernel had it), on the tf32_mid tiles, which the
# plan asks for (Plan.mid_tiles): same probe, us, plain -> persistent on the tf32_mid tiles
# / on the tf32 tiles (cuBLAS tf32): 1024^3 nn 20.9 -> 19.7 / 19.4 (17.9), nt 16.7 -> 15.0 /
# 16.6 (17.1), 1024x1024x2048 30.9 -> 28.5 / 28.9 (26.0), 768x1408x2048 nt 25.9 -> 23.3 /
# 27.0 (27.9). Not 1000^3 tf32 (a direct plan on the tf32 tiles' pt_128x64x32, 19.9 against
# 23.6 on the tf32_mid ones; cuBLAS 19.6): configs.persistent_family keeps fp32 products of
# more than MID_M_MAX rows on the tf32 tiles unless the plan asks.
SMALL_WAVE = True
# Batches of products on Hopper, 16-bit in any layout or tf32 (A row-major and B K-major,
# as given or staged), with at
# least BATCHED_MIN_MN rows and columns each, run on kernels/batched.py (a persistent TMA
# kernel over 3-D descriptors) instead of the plain kernel. perf/batched_probe.py, H100,
# fp16, CUDA-graph time after the L2 flush, us, plain kernel / batched (cuBLAS):
# 32 x 2048x2048x128 nt (attention's q @ k^T) 176.9 / 115.2 (115.5); 8 x 4096x4096x128 nt
# 165.7 / 110.0 (111.9); 32 x 2048x128x2048 (attn @ V) 113.1 / 110.0 (113.8); 16 x
# 1024x1024x64 nt 21.8 / 16.0 (16.5); 8 x 2048^3 213.6 / 197.2 (195.4); 4 x 4096^3 nt
# 1018.0 / 822.7 (829.7); 32 x 1000^3 215.8 / 156.4 (127.9); tf32 32 x 2048x2048x128 nt
# 299.3 / 249.9 (230.1), 8 x 2048^3 nt 453.5 / 384.3 (423.6), 32 x 2048x128x2048 (V staged
# K-major) 268.9 / 244.9 (225.8); fp16 with an M-major A (attention's dV = P^T dO) 32 x
# 2048x128x2048 tn 106.1 / 103.7 (107.8), 32 x 2048x2048x128 tt 172.7 / 114.7 (116.1), 8 x
# 2048^3 tn 217.7 / 200.0 (198.6). Small products are level with the plain kernel: fp16
# 64 x 256x256x64 nt 9.7 / 9.8 (9.1), 128 x 128x128x64 nt 8.5 / 8.6 (8.4), 16 x 512^3 15.0 /
# 14.8 (14.0); tf32 64 x 256x256x64 nt 14.3 / 13.1 (15.3); so the kernel takes them from
# BATCHED_MIN_MN (one 128-row tile), below which its tiles would be mostly idle (unmeasured).
# ieee and tf32x3 batches stay on the plain kernel (same probe, against cuBLAS SGEMM): ieee
# 32 x 2048x2048x128 nt 859.3 (856.8), 8 x 2048^3 2945.2 (2695.9); tf32x3 588.1 (851.6),
# 1826.7 (2629.2).
BATCHED = True
BATCHED_MIN_MN = 128
# Batches of tf32 products with one operand MN-major (nn: a row-major B; tt: a transposed
# A) run on kernels/register_fed.py's batched launch (bmm), as single ones do
# (REGISTER_FED), instead of a K-major copy of that operand (or, with rows off ALIGN,
# padded copies of both) and kernels/batched.py; the copies stay in the plan for calls
# with an epilogue and operands 3-D TMA cannot read. perf/batched_probe.py --dtype tf32,
# H100, CUDA-graph time after the L2 flush, three rounds, us, register-fed / the copy plan
# (cuBLAS tf32): 8 x 2048^3 387.0 / 464.8 (417.6), tt 389.5 / 465.8 (383.4); 32 x 1000^3
# 215.6 / 413.2 (280.0), tt 216.5 / 411.5 (232.2); 16 x 2048x384x2048 163.1 / 236.8
# (181.9); 16 x 2048x640x2048 257.7 / 361.4 (279.4); 32 x 2048x128x2048 224.9 / 245.3
# (228.3); 32 x 2048x2048x128 nn 260.5 / 274.4 (229.4); 8 x 1024^3 56.2 / 87.4 (67.8);
# 4 x 4096^3 1601.2 / 1657.8 (1750.3). Smaller products (under STAGE_MIN_MNK) stay on the
# plain kernel as before (16 x 1024x1024x64 nn: 45.9, cuBLAS 34.3; not tried here).
# nt batches (both operands K-major, read by wgmma from shared memory) keep the batched
# kernel as given, ahead of the register-fed launch (same probe, batched kernel /
# register-fed (cuBLAS)): tf32 8 x 2048^3 383.6 / 395.5 (413.6), 32 x 2048x2048x128 250.4
# / 261.8 (230.4), 8 x 4096x4096x128 233.3 / 242.2 (219.1), 16 x 2048x384x2048 194.8 /
# 199.5 (186.6); fp16 32 x 1000^3 148.2 / 163.5 (124.1), 8 x 2048^3 198.8 / 206.7 (199.7),
# 16 x 2048x384x2048 86.5 / 102.8 (80.4). But where rows off ALIGN would have both
# copied and padded: tf32 32 x 1000^3 nt 410.8 with the copies / 213.9 register-fed
# (218.4); a run after: 413.3 / 213.0 (215.9), the batched kernel on them as given 238.9
# (128x256) and 258.7 (128x128).
REGISTER_FED_BATCHED = True
# 16-bit products (and tf32 ones with both operands K-major, nt) over a K of
# PINGPONG_MIN_K (batches: PINGPONG_BATCHED_MIN_K, on fast memory
# PINGPONG_FAST_MEMORY_BATCHED_MIN_K)..PINGPONG_MAX_K with at least
# PINGPONG_MIN_TILES_PER_SM 128x128 tiles an SM (on fast memory also from
# PINGPONG_FAST_MEMORY_MIN_K, with the PINGPONG_SHORT_K limits, and batches the batched
# kernel would run on 128-column tiles up to PINGPONG_FAST_MEMORY_NARROW_BATCHED_MAX_K),
# every row on 128 bytes, run on
# kernels/pingpong.py (two wgmma warpgroups taking turns: each tile's epilogue behind the
# other's K loop) where run() finds an epilogue it takes (none, or a bias row: any alpha,
# beta and activation; pingpong.bias_rows).
# perf/pingpong_probe.py, H100, fp16, CUDA-graph time after the L2 flush, three interleaved
# rounds, us, ping-pong / the library before (cuBLAS): 4096x4096x1024 nt 52.2 / 54.4
# (54.2); 2048x2048x1024 nn 18.5 / 18.8 (18.4); 16 x 1024x1024x512 nn 33.3 / 35.9 (34.2);
# 64 x 512^3 nn 37.9 / 40.5 (39.3); 32 x 1024^3 nn 108.0 / 115.4 (108.3), nt 107.5 / 115.8
# (108.5); 8 x 2048x2048x1024 nn 101.1 / 107.1 (104.0). Over a longer K its 128x128 tiles
# read more of L2 per product than the 128x256 ones and lose: 8 x 2048^3 nn 201.0 / 200.3
# (199.1), 16 x 2048x384x2048 nn 85.9 / 86.0 (79.5; eight chunks), 2048x4096x4096 nt 95.8 /
# 95.1 (93.2), 4096^3 nt 200.6 / 190.4 (192.7), 4 x 4096^3 nt 848.2 / 813.9 (835.7). Rows
# off 128 bytes (1000 fp16) lose at any K: 32 x 1000^3 nn 220.9 / 156.4 (127.9), 32 x
# 1024x1024x1000 nn (A's rows 2000 bytes) 137.9 / 118.6 (109.9). With a bias (--bias: addmm
# / baddbmm, cuBLAS's beside): 8192x4096x512 nt 56.1 / 65.0 (64.6), 4096x4096x1024 nt 51.4
# / 55.1 (56.5), 16 x 1024^2 x 512 33.4 / 37.1 (76.4). tf32 nt (--dtype tf32; the
# persistent or batched kernel before; cuBLAS tf32): 4096x4096x1024 101.0 / 105.1 (94.9),
# 8192^2 x 1024 412.0 / 424.9 (408.4), 8192x4096x512 110.1 / 128.9 (104.3), 16 x 1024^2 x
# 512 63.1 / 68.5 (64.1), 8 x 1024^3 55.7 / 58.9 (64.8), 8 x 4096^2 x 512 433.9 / 517.9
# (429.5).
PINGPONG = True
# The window reached down to 512 first; the fiftieth session measured below it (same probe,
# H100, graph us after the flush, three interleaved rounds, ping-pong / the library before
# (cuBLAS)). Single products win from K = 128: fp16 8192^2 x 128 nt 54.9 / 58.4 (58.0),
# 8192^2 x 192 nt 58.1 / 76.2 (61.6), 8192^2 x 256 nn 67.0 / 86.2 (69.8), 4096^2 x 256 nn
# 20.4 / 23.6 (23.2), 8192x4096x256 tt 37.0 / 42.2 (40.0), 4096^2 x 384 tn 26.0 / 29.0
# (28.9); bf16 8192^2 x 256 nt 66.3 / 85.8 (69.3); tf32 8192^2 x 128 nt 115.4 / 140.0
# (122.7), 4096^2 x 256 nt 36.4 / 46.5 (39.9), 8192^2 x 256 nt 152.7 / 178.6 (138.6).
# Batches from K = 256: fp16 8 x 2048^2 x 256 nn 39.2 / 45.3 (39.3), 32 x 1024^2 x 256 nt
# 42.6 / 47.0 (42.6); bf16 8 x 2048^2 x 256 nt 39.4 / 44.8 (39.7); tf32 32 x 1024^2 x 256 nt
# 82.2 / 101.9 (84.2), 16 x 2048^2 x 384 nt 184.2 / 233.0 (178.5); at K = 128 the batched
# kernel's store-bound stream ran faster: fp16 32 x 2048^2 x 128 nt 119.6 / 114.7 (115.3),
# 8 x 4096^2 x 128 nt 115.1 / 111.6 (112.1), tf32 32 x 2048^2 x 128 nt 253.3 / 249.2
# (230.4). (fp16 16 x 1024^2 x 64 nt 16.6 / 16.9 (16.6): level.) Tall single products over
# K = 128, where C's store is most of the work, gain less or lose a little: fp16
# 65536x2048x128 nt 114.3 / 116.3 (111.5), 32768x4096x128 nt 113.8 / 113.4 (109.3); tf32
# 65536x2048x128 nt 236.7 / 230.2 (221.4). Those fp16 2-D shapes, as stand-ins for the
# batches (one B for all products), ran 5% faster than the 3-D batches (120.3 and 114.7 us),
# but not for the descriptors: batches walked as one 2-D product (A and C 2-D, B's products
# stacked; tried, not kept) ran as the 3-D ones (same probe, 2-D / 3-D: 8 x 2048^2 x 1024
# nn 102.7 / 102.3, x 256 39.1 / 39.2, 16 x 1024^2 x 512 33.2 / 33.2, 32 x 1024^2 x 256 nt
# 42.8 / 42.9).
PINGPONG_MIN_K = 128
PINGPONG_BATCHED_MIN_K = 256
# On faster memory the batches' store-bound K = 128 goes to ping-pong as well: there the
# batched kernel, its stores behind its own K loop, falls short of the memory while
# ping-pong keeps it busy. Same probe, H200 (4814 GB/s declared), fifty-first session,
# ping-pong / the batched kernel (cuBLAS): fp16 32 x 2048^2 x 128 nt 89.1 / 104.4 (89.7),
# 8 x 4096^2 x 128 nt 87.9 / 104.4 (91.4); tf32 32 x 2048^2 x 128 nt 181.5 / 226.8
# (181.1); through the library after this rule, 89.3 against 105.0 without it (88.2). On
# the H100 (3352 GB/s) it lost by 3-4% (figures above).
PINGPONG_FAST_MEMORY_BATCHED_MIN_K = 128
# On fast memory, K = 64 too (one K step: the store is all but the whole tile), single
# products and batches, where C has PINGPONG_SHORT_K_MIN_TILES_PER_SM 128x128 tiles an SM
# and at most PINGPONG_SHORT_K_MAX_C_BYTES. Same probe, H200, fifty-sixth session, us,
# ping-pong / the persistent or batched kernel (cuBLAS): fp16 nt 4096^2 x 64 15.1 / 15.7
# (15.4), 8192^2 x 64 41.4 / 43.7 (44.6), 16384x4096x64 42.1 / 42.9 (44.4), nn 4096^2 x 64
# 14.8 / 15.6 (15.0), tn 8192^2 x 64 41.1 / 44.0 (44.2); bf16 nt 8192^2 x 64 41.4 / 44.4
# (44.5); tf32 nt 4096^2 x 64 23.8 / 26.7 (27.4); batches, fp16 nt 16 x 1024^2 x 64 15.1 /
# 16.2 (15.1) (nn 15.0 / 16.4, tt 15.0 / 16.5, bf16 15.2 / 16.1), 8 x 2048^2 x 64 23.6 /
# 25.6 (23.8), 4 x 4096^2 x 64 42.9 / 45.0 (43.7), 32 x 1024^2 x 64 25.2 / 25.8 (24.2),
# 128 x 512^2 x 64 25.9 / 26.0 (26.0); tf32 16 x 1024^2 x 64 24.3 / 28.0 (27.1). Lost with
# a C past 128 MB: fp16 65536x2048x64 83.2 / 80.2 (81.3), 32 x 2048^2 x 64 86.0 / 84.2
# (84.1), tf32 32 x 2048^2 x 64 179.6 / 169.4 (160.2) (level: fp16 8 x 4096^2 x 64 83.6 /
# 84.4 (83.7), tf32 8192^2 x 64 84.6 / 86.3 (91.8)); and on fewer tiles an SM: 2048^2 x 64
# (1.9) 8.9 / 8.4 (8.3), 64 x 512x384x64 (5.8) 13.7 / 13.2 (13.5). The H100 not measured
# at K = 64 but for fp16 16 x 1024^2 x 64 nt, level (above), so slower memory keeps its
# plans.
PINGPONG_FAST_MEMORY_MIN_K = 64
PINGPONG_SHORT_K_MIN_TILES_PER_SM = 7
PINGPONG_SHORT_K_MAX_C_BYTES = 128 << 20
# On fast memory, 16-bit batches past PINGPONG_MAX_K too, up to
# PINGPONG_FAST_MEMORY_NARROW_BATCHED_MAX_K, where the batched kernel would run them on its
# 128-column tiles (N that 256-wide ones do not cover: batched.tile_for). Same probe, H200,
# fifty-sixth session, us, ping-pong / the batched kernel (cuBLAS): fp16 16 x 2048x384x2048
# nn 80.2 / 85.0 (77.4; bf16 76.8 / 80.6 (74.6)), 16 x 2048x384x4096 nn 166.4 / 171.3
# (157.6), 8 x 4096x640x2048 nn 131.7 / 141.0 (129.1), 16 x 2048x640x2048 nn 133.0 / 141.7
# (129.9), 32 x 1024x384x2048 nn 82.5 / 84.9 (79.3), 8 x 2048x384x4096 nt 78.2 / 84.8
# (75.6). Where the 256-wide tile runs them it lost (8 x 2048^3 nn 202.9 / 197.9 (199.1)),
# and on the H100 it was level (16 x 2048x384x2048 nn 85.9 / 86.0 (79.5), above). The
# report after it (H200, eager against cuBLAS, before -> after): 16 x 2048x384x2048 fp16 /
# bf16 0.93x / 0.93x -> 0.99x / 0.98x, and attention's attn @ V, 32 x 2048x128x2048 (N =
# 128: the narrow tile), 0.99x / 0.98x -> 1.02x / 1.03x.
PINGPONG_FAST_MEMORY_NARROW_BATCHED_MAX_K = 4096
# Past 1024 (fiftieth session, same probe): level or a little ahead at 4096^2 (fp16 nt
# K = 1536 73.2 / 75.0 (74.8), 2048 96.4 / 97.5 (97.3); tf32 nt 1536 146.2 / 147.6 (148.6)),
# level at 8192^2 x 1536 nt (302.3 / 301.5) and 8 x 2048^2 x 1536 (150.9 / 150.2), behind at
# 8192^2 x 2048 nt (421.8 / 400.6 (416.7)): not worth a rule.
PINGPONG_MAX_K = 1024
# Tiles an SM: 2 at first; 256 tiles on 132 SMs (1.94 an SM, all but 8 SMs taking two)
# gained too, 192 (1.45) lost (fiftieth session, same probe, us, ping-pong / the library
# (cuBLAS)): fp16 2048^2 x 512 nn 13.5 / 13.9 (13.5), 2048^2 x 256 nn 10.8 / 11.1 (11.1),
# 2048^2 x 1024 nn 18.5 / 18.8 (18.4, forty-ninth), tf32 2048^2 x 512 nt 19.7 / 21.3
# (20.8); 192 tiles: fp16 1536x2048x1024 nt 18.0 / 15.9 (15.5), 2048x1536x512 nt 13.1 /
# 12.1 (11.6). Between the two, not measured.
PINGPONG_MIN_TILES_PER_SM = 1.9
# Skinny products (M up to SKINNY_M rows) take the split-K kernel's 16/32-row tiles at any
# N: the persistent kernel's 128-row tiles ran 16x28672x8192 fp16 at 231 us against
# cuBLAS 176 us (memory floor ~157 us), reading B once but computing 8x the rows.
SKINNY_M = 64
# Except where the weight is K-major (a linear layer's) and has at least THIN_MIN_N columns:
# there the product runs transposed, C^T = B^T A^T, on the plain kernel's thin tiles
# (configs.THIN_N): the weight becomes a row-major A streamed by tall tiles over the full K,
# with no partials, no reduction and one launch. tile_probe.py, H100, fp16 nt, L2 flushed,
# us, best thin tile against split-K as tuned (cuBLAS): 16x8192x8192 59.7 vs 63.1 (60.2);
# 64x8192x8192 60.7 vs 74.7 (60.0); 16x28672x8192 170.0 vs 179.6 (179.0); 16x4096x4096 21.4
# vs 23.9 (23.2); tf32 64x8192x8192 104.6 vs 124.2 (111.1). At N = 4096 the 32-row tile
# makes 128 programs, about one per SM; narrower weights (fewer programs) keep split-K.
# fp32 FMA (ieee) products of at most GEMV_MAX_M rows against such a weight run on the
# GEMV kernel instead (kernels/gemv.py; GEMV): per-lane partial sums along K, registers
# reused across rows and columns, one launch. tile_probe.py, H100, L2 flushed, us, as tuned
# (cuBLAS SGEMM): 16x8192x8192 142.5 (154.9), 1x8192x8192 101.4 (122.7), 16x11008x4096
# 112.9 (111.6); split-K transposed on A^T as given, the best before it, 224.5 at
# 16x8192x8192. Past 16 rows it runs row blocks of 16: 32x8192x8192 246.0 against split-K
# as given 380.5 (212.1), 64x8192x8192 442.0 against 441.3 (213.2); past 8 rows
# FMA_TRANSPOSED (below) beat it. It needs no alignment (scalar loads). tf32x3 products of
# up to 2 rows take it too: exact fp32 FMA, no less accurate, and faster there than tf32x3
# on split-K (report, H100, eager, us: 1 and 2 rows x 8192 x 8192 101.8 and 102.0 against
# 113.5 and 112.3; 4 rows 111.7 against 112.8, 8 rows 120.8 against 113.7).
# 16-bit and tf32 skinny products against a row-major weight (x @ W, W (K, N)) run
# transposed too, where both operands are ALIGN elements apart: the weight becomes an
# M-major A, read 16 bytes wide along its N rows. A probe (not kept; twenty-fourth session),
# H100, nn fp16, CUDA-graph time after an L2 flush, us, transposed against split-K (cuBLAS):
# 1x8192x8192 50.4 vs 53.5 (49.6); 8x8192x8192 49.0 vs 52.4 (49.0); 16x8192x8192 49.0 vs
# 51.9 (48.9); 32x8192x8192 49.5 vs 55.5 (49.6); 64x8192x8192 49.4 vs 61.6 (49.7);
# 8x4096x4096 16.7 vs 18.7 (16.7); 32x4096x4096 17.2 vs 19.5 (17.3); 64x4096x4096 17.2 vs
# 21.4 (17.5); 16x11008x4096 35.3 vs 38.9 (36.6); 16x4096x11008 35.0 vs 36.6 (37.2). Rows in
# 16-byte runs that are not ALIGN elements (fp16 4104) stay on split-K: transposed under the
# plain kernel's M-major VEC hint 8x4104x4104 21.2 vs 20.2 (18.1), 16 rows 20.7 vs 20.6
# (20.4), 32 rows 22.3 vs 22.1 (18.1), 64 rows 25.3 vs 24.1 (22.3). tf32 (same probe,
# another run): 8x4096x4096 28.4 vs 29.6 (31.6), 16x8192x8192 96.0 vs 97.3 (96.6),
# 64x8192x8192 104.8 vs 142.9 (104.8), 16x11008x4096 69.5 vs 69.4 (71.1). Nor on the
# persistent kernel, its TMA reading the weight as an M-major A (a probe, not kept,
# thirty-third session; H100, fp16, eager after an L2 flush, us; split-K as tuned 20.1,
# cuBLAS 18.4): 8x4104x4104 on 64x16 tiles, BK 128 s6 / 256 s4 / 64 s10, 19.5 / 19.4 /
# 21.7 for the kernel alone into a (N, M) scratch, 22.8 / 22.9 / 25.8 with the copy of C^T
# out of it (that kernel stores row-major C only); 128x16 tiles 21.7.
THIN_MIN_N = 4096
# Most rows the GEMV kernel takes, per precision (above; ieee: FMA_TRANSPOSED past them).
# 16-bit ("half") single rows against a K-major weight of at least GEMV16_MIN_N columns
# with 16-byte aligned rows (A's and B's strides and K multiples of ALIGN) run on the 16-bit
# GEMV kernel (kernels/gemv16.py): it reads each weight row in runs of 256-1024 elements
# where the thin tiles read 128 and the split-K tiles 128 too. Probes (fifty-fourth session;
# configs.GEMV16_TILES has the rest), H200, eager after an L2 flush, us, best config against
# triton_gemm before it (cuBLAS): 1x8192x8192 fp16 34.9 vs 37.1-38.4 (39.1-40.4), bf16 35.2
# vs 36.5-39.5 (34.8-37.2); 1x4096x4096 12.1 vs 14.7-17.1 (15.6); narrower weights, on
# split-K before (fp16): 1x2048x8192 13.2 vs 15.0-15.7 (15.7), 1x1024x8192 9.4-10.4 vs 12.0
# (10.8-12.0), 1x1024x16384 14.0 vs 15.8 (16.5), 1x2048x4096 9.2 vs 11.3-11.6 (11.8),
# 1x512x8192 8.8-9.2 vs 11.2-11.4 (10.4); bf16 alike. Narrower than 512 (fewer than 128
# programs of 4 columns) unmeasured: split-K. From 2 rows a (rows, BN, BK) register tile was
# slower than the tensor-core plans: 2x8192x8192 fp16 37.3 vs 35.2-36.1 (39.7), bf16 38.3 vs
# 35.0-36.1 (35.5-36.3); 4 rows 41.0 vs 35.7 (40.4). Not measured on the H100.
GEMV_MAX_M = {"ieee": 8, "tf32x3": 2, "half": 1}
GEMV16_MIN_N = 512
# fp32 FMA (ieee) products of GEMV_MAX_M + 1 .. FMA_TRANSPOSED_MAX_M rows against a K-major
# weight (aligned, at least THIN_MIN_N columns, K >= SPLITK_MIN_K) run transposed on the
# split-K kernel, C^T = W A^T, with A^T staged row-major (FMA_TRANSPOSED): both FMA operands
# then come in the layouts the dot reads as vectors (the weight a row-major first operand,
# A^T an N-contiguous second one), for a copy of A (M x K) instead of the weight.
# perf/tile_probe.py --transposed, H100, L2 flushed, us with the copy, best split-K tile
# (previous plan, as the library ran it; cuBLAS SGEMM): 16x8192x8192 137.7 (GEMV 132.7;
# 149.6); 32x8192x8192 134.9 (GEMV 238.1; 205.4); 64x8192x8192 225.2 (split-K as given
# 509.0; 207.1); 16x11008x4096 91.2 (GEMV 107.8; 102.9); 64x4096x4096 71.7 (115.7; 67.2);
# 128x4096x4096 141.2 (B copied row-major, plain kernel 175.0; 103.8); 128x28672x8192
# 1443.8 (2049.3; 1325.7); 256x4096x4096 247.1 (263.4; 184.2); 512x4096x4096 447.6 (447.1;
# 349.2), so not past MID_M_MAX rows. 8 rows stay on the GEMV kernel: 8x8192x8192 243.5
# against 139.1.
FMA_TRANSPOSED_MAX_M = configs.MID_M_MAX
# On Hopper such products of at least K_MAJOR_FMA_MIN_N rows (C^T's columns) run on
# kernels/simt_tma.py's K-major path instead (split_matmul: a TMA warp feeding FFMA warps, the
# weight read as given, in K slices summed by splitk.reduce with the epilogue).
# perf/simt_gluon_probe.py --k-major --graph, H100, us, split-K as before / K-major (cuBLAS
# SGEMM): 64x8192x8192 222.0 / 197.6 (205.5); 128x4096x4096 121.6 / 108.1 (102.8);
# 128x11008x4096 308.5 / 265.1 (243.9); 128x4096x11008 288.6 / 264.9 (238.4); 128x28672x8192
# 1447.3 / 1324.4 (1317.2); 256x4096x4096 230.4 / 203.3 (185.5); 128x8192x28672 1454.0 /
# 1311.2 (1208.1). Fewer rows keep split-K, which leads cuBLAS there (report: 32x8192x8192
# 1.53x, 16 rows 1.27x; 33-63 rows not measured on the K-major path).
K_MAJOR_FMA_MIN_N = 64
# Split-K ieee products as given (few output tiles, long K) of a row-major A and B, at least
# K_MAJOR_AS_GIVEN_MIN_MN rows and columns and K_MAJOR_AS_GIVEN_MIN_MNK multiply-adds, run
# there too, A as the K-major operand (C = A B, no copy). perf/simt_gluon_probe.py
# --as-given --graph, H200, three interleaved rounds, us, split-K kernel / K-major path
# (cuBLAS SGEMM): 256x256x32768 112.1 / 102.0 (98.5), 512x512x16384 206.9 / 189.3 (181.2),
# 128x128x65536 64.3 / 57.5 (66.6), 192x192x16384 56.7 / 45.3 (47.0), 512x512x4096 59.4 /
# 56.0 (57.3), 256x256x8192 36.3 / 35.5 (37.2); below 2^29 multiply-adds the K slices grow
# too short or too few: 128x128x16384 24.0 / 23.8 (25.2), 256x256x4096 23.0 / 24.1 (27.2),
# 128x128x8192 17.0 / 21.8 (18.4), 128x128x4096 15.6 / 21.0 (15.1). Fewer rows or columns
# waste most of a 128-wide tile; 64x64x65536 stays on split-K (1.31x cuBLAS, the report).
# The same probe on the H100: 256x256x32768 111.6 / 101.8 (98.0), 128x128x65536 64.3 / 57.6
# (66.8), 512x512x4096 58.9 / 56.2 (57.3). An M-major A (tn, a weight gradient's X^T)
# stays on split-K too: the M-major tile in K slices (a probe, not kept, H100, graph time,
# us, split-K / sliced (cuBLAS)) ran 512x512x16384 189.7 / 192.6 (176.3), 256x256x32768
# 104.4 / 105.7 (97.4), 128x128x65536 64.5 / 102.8 (61.5), 512x512x4096 56.2 / 61.5 (56.5).
K_MAJOR_AS_GIVEN_MIN_MN = 128
K_MAJOR_AS_GIVEN_MIN_MNK = 1 << 29
# So do plain (uncopied) ieee products of that kind too large for split-K, too small for
# simt_tma's M-major tile (fewer than FMA_STAGE_A_MIN rows or columns: A is not copied), from
# this K: they ran on the plain kernel's SIMT tiles. perf/simt_gluon_probe.py --as-given
# --graph, H100, two rounds, us, plain kernel / K-major path (cuBLAS SGEMM): K 16384:
# 768x768 857.3 / 417.9 (390.4), 1024x1024 862.2 / 724.8 (664.7); K 8192: 1024x1024 433.0 /
# 367.7 (364.4), 1024x2048 799.8 / 724.4 (727.7), 1536x1536 1023.8 / 862.0 (818.2), 4096x256
# 433.7 / 368.3 (348.2); K 4096: 768x768 220.0 / 122.2 (116.5), 1024x1024 220.8 / 190.2
# (183.2), 1536x1536 518.9 / 466.6 (397.4), 4096x1024 798.9 / 732.4 (671.6), 8192x512 801.5 /
# 733.8 (678.4); K 2048: 1024x1024 114.0 / 101.4 (101.1), 1536x1536 262.0 / 256.5 (248.6),
# 512x512 35.1 / 34.9 (38.0). Shorter K is mixed: K 1024 1024x1024 60.7 / 56.9 (63.6),
# 768x768 60.3 / 42.0 (44.3), but 1000x1000 61.6 / 68.4 (62.1), 1536x1536 135.3 / 146.3
# (129.0); K 512 1024x1024 34.0 / 34.6 (33.5). 2048^3 (the M-major tile, A copied) 376.3 /
# 377.5 (344.0) stays there.
K_MAJOR_MID_MIN_K = 2048
# Such products against a K-major B (nt, a linear layer's weight; more than
# FMA_TRANSPOSED_MAX_M rows, fewer than FMA_STAGE_A_MIN rows or columns) run there too, on
# the row-major copy of B the plan makes for the FMA dots (b_n_major, its only copy); A is
# read as given either way. perf/simt_gluon_probe.py --as-given M,N,K,nt --graph, H200,
# three interleaved rounds, us, the library with / without this rule, the copy in both
# (cuBLAS SGEMM): 8192x384x4096 561.8 / 616.9 (551.8), 8192x512x4096 736.7 / 812.7
# (682.7), 16384x384x2048 564.6 / 609.1 (621.8), 4096x1024x4096 739.9 / 807.7 (682.0),
# 1024x4096x4096 763.2 / 831.1 (690.2), 1024x1024x4096 197.9 / 228.9 (186.3),
# 1536x1536x2048 261.6 / 270.3 (218.4), 1024x1024x2048 106.2 / 129.3 (102.5), 768x768x2048
# 77.4 / 100.0 (66.1) (fifty-seventh session).
K_MAJOR_COPIED_B = True
# 16-bit skinny products of up to TRANSPOSED_RUNS_MAX_M rows against a row-major weight of
# at least THIN_MIN_N columns whose rows are whole 16-byte runs but not ALIGN elements (fp16
# 4104) run transposed too, the plain kernel loading the M-major weight 16 bytes wide under
# its vector hints, on a thin tile of shallow K steps in many stages
# (configs._THIN_RUNS_TILES, which has the figures; cuBLAS runs one such kernel there). H100,
# fp16 nn, CUDA-graph time after an L2 flush, us, transposed (64x16x32 s16) against split-K
# as given (cuBLAS): 8x4104x4104 18.1 vs 20.4 (18.0); 16 rows 18.7 vs 21.0 (20.6); 32 rows
# 23.6-25.4 vs 21.9 (18.0): not past 16. Transposed on the split-K kernel instead (C^T = W
# A^T, 128x16x32 in 4 slices, 10 stages): 19.1-19.5 at 8 rows, 20.5 at 16 (a probe, not
# kept). K-major weights in such rows keep split-K (configs._THIN_RUNS_TILES).
TRANSPOSED_RUNS_MAX_M = 16
# On fast memory (FAST_MEMORY_GBPS) that split-K form wins instead (TRANSPOSED_SPLIT_K: C^T
# = W A^T on the split-K kernel, its tile configs._SPLITK_RUNS_TILES): the plain kernel's
# 65 programs of 64 rows leave half the SMs idle, which the H200's faster memory exposes.
# perf/tile_probe.py --transposed --graph --rounds 3, H200, nn, us, split-K 128x16x32 in 4
# slices, 8 stages / the plain kernel's 64x16x32 s16 (cuBLAS), fifty-second session:
# 8x4104x4104 fp16 16.6 / 18.3 (17.4), bf16 16.4 / 17.9 (16.6); 16x4104x4104 fp16 16.9 /
# 18.3 (18.0), bf16 16.9 / 17.9 (16.8). 10 / 14 stages 16.6-17.2 / 17.1-17.9, 2 / 8 slices
# 18.2-19.1 / 17.3-18.3, 8 warps 17.0-17.7, 128x16x64 s6 16.9-17.4, 64x16x32 in 4 slices
# 17.9-18.6. On the H100 the 10-stage form ran 19.1-19.5 against 18.1 (above).
TRANSPOSED_RUNS_SPLIT_K = True


class Plan(NamedTuple):
    pad: bool                 # copy A and B into zero-padded buffers (K, N rounded up)
    a_k_major: bool           # stage A K-contiguous
    b_k_major: bool           # stage B K-contiguous
    persistent: bool = False  # run the persistent TMA kernel (when alignment allows)
    split_k: bool = False     # run the split-K kernel
    split_tf32: bool = False  # stage tf32 halves of A (row-major) and B (K-major): 3xTF32
                              # on the persistent kernel as three plain tf32 dots
    core: tuple | None = None  # (rows, columns) the tiled kernel covers; the thin fringe
                               # of rows and columns past them runs on the split-K kernel
    transposed: bool = False  # run C^T = B^T A^T (a skinny product) by the rest of the plan
                              # (the plain kernel when that is all): its copies and kernel
                              # are the transposed product's
    gemv: bool = False        # run the GEMV kernel (fp32 FMA, few rows; 16-bit: gemv16)
    a_m_major: bool = False   # stage A M-contiguous (column-major) for fp32 FMA dots
    b_n_major: bool = False   # stage B N-contiguous (row-major) for fp32 FMA dots
    wave_rows: int | None = None  # persistent plans: the first launch takes these rows
                                  # (whole waves of tiles), a second the rest (_wave_rows)
    register_fed: bool = False  # tf32 nn / tt: the register-fed kernel (tf32x3:
                                # kernels/split_fed.py), where run() finds it can take
                                # the call; else the rest of the plan
    sliced: bool = False  # 16-bit, tf32 or tf32x3, few tiles, long K: kernels/sliced.py
                          # (K slices of 128x128 TMA tiles), where it can take the call;
                          # else the plain kernel
    wide: bool = False  # 16-bit persistent: kernels/wide.py's 128x192 tiles (WIDE), where
                        # it can take the call; else the persistent kernel
    tall: bool = False  # 16-bit persistent: kernels/tall.py's 80- to 192-row tiles (TALL),
                        # where it can take the call; else the persistent kernel
    mid_tiles: bool = False  # persistent: tune over the mid-M tiles whatever the rows
                             # (SMALL_WAVE)
    batched: bool = False  # a batch of products on kernels/batched.py (BATCHED), where it
                           # can take the call; else the plain kernel
    pingpong: bool = False  # 16-bit, tf32 nt: kernels/pingpong.py (PINGPONG), where run()
                            # finds it can take the call; else the rest of the plan
    fed_rows: bool = False  # 16-bit, tf32 nt, few rows: kernels/register_fed.py's rows_2d
                            # (FED_ROWS), where run() finds it can take the call; else the
                            # rest of the plan

    @property
    def copies(self) -> bool:
        return (self.pad or self.a_k_major or self.b_k_major or self.a_m_major
                or self.b_n_major or self.split_tf32)


PLAIN = Plan(False, False, False)
SPLIT_TF32 = Plan(False, True, True, persistent=True, split_tf32=True)
SPLIT_FED_PLAN = SPLIT_TF32._replace(register_fed=True)
TRANSPOSED = Plan(False, False, False, transposed=True)
GEMV = Plan(False, False, False, gemv=True)
FMA_TRANSPOSED = Plan(False, False, False, split_k=True, transposed=True, b_n_major=True)
TRANSPOSED_SPLIT_K = Plan(False, False, False, split_k=True, transposed=True)
SLICED_PLAN = Plan(False, False, False, sliced=True)  # 16-bit, or fp32 K-major as given


def _aligned(strides: tuple, contiguous_dim: int, extent: int) -> bool:
    """A 3-D operand with these strides is contiguous along contiguous_dim (1 or 2) with
    the other matrix stride, the batch stride and that dimension's extent all multiples
    of ALIGN."""
    return (strides[contiguous_dim] == 1 and strides[3 - contiguous_dim] % ALIGN == 0
            and strides[0] % ALIGN == 0 and extent % ALIGN == 0)


def _tma_rows(t: torch.Tensor, contiguous_dim: int) -> bool:
    """A single (1, R, C) operand is contiguous along contiguous_dim with its other stride
    and base address 16-byte aligned: what TMA needs, even where ALIGN elements fail."""
    strides = t.stride()
    return strides[contiguous_dim] == 1 and _persistent._tma_ok(t, strides[3 - contiguous_dim])


def _fast_memory(dram_gbps: float | None) -> bool:
    """Whether a device of dram_gbps (None: unknown, taken as slow) has FAST_MEMORY_GBPS."""
    return dram_gbps is not None and dram_gbps >= FAST_MEMORY_GBPS


def _pingpong_fits(a: torch.Tensor, b: torch.Tensor, sms: int, precision: str,
                   dram_gbps: float | None) -> bool:
    """A (B, M, K) a and (B, K, N) b that kernels/pingpong.py runs faster at this precision
    (16-bit; tf32 with both operands K-major as given) on a device of dram_gbps (None:
    unknown, taken as slow): see PINGPONG."""
    batch, m, k = a.shape
    n = b.shape[2]
    if not (precision == "half"
            or precision == "tf32" and a.stride(2) == 1 and b.stride(1) == 1):
        return False
    tiles = batch * -(-m // _pingpong.TILE[0]) * -(-n // _pingpong.TILE[1])
    fast_memory = _fast_memory(dram_gbps)
    min_k = (PINGPONG_MIN_K if batch == 1 else PINGPONG_FAST_MEMORY_BATCHED_MIN_K
             if fast_memory else PINGPONG_BATCHED_MIN_K)
    if fast_memory and PINGPONG_FAST_MEMORY_MIN_K <= k < min_k:
        in_window = (tiles >= PINGPONG_SHORT_K_MIN_TILES_PER_SM * sms
                     and batch * m * n * a.element_size() <= PINGPONG_SHORT_K_MAX_C_BYTES)
    elif (fast_memory and batch > 1 and precision == "half"
          and PINGPONG_MAX_K < k <= PINGPONG_FAST_MEMORY_NARROW_BATCHED_MAX_K):
        in_window = (_batched.tile_for(batch, m, n, k, a.dtype, sms) != _batched.WIDE
                     and tiles >= PINGPONG_MIN_TILES_PER_SM * sms)
    else:
        in_window = (min_k <= k <= PINGPONG_MAX_K
                     and tiles >= PINGPONG_MIN_TILES_PER_SM * sms)
    return (PINGPONG and in_window and _pingpong.rows_aligned(a)
            and _pingpong.rows_aligned(b))


def plan(a: torch.Tensor, b: torch.Tensor, precision: str, sms: int | None = None,
         tma: bool | None = None, dram_gbps: float | None = None) -> Plan:
    """The path for (B, M, K) A and (B, K, N) B at a resolved precision; sms: the GPU's SM
    count (None: plain kernel only); tma: whether the persistent TMA kernel can run there
    (Hopper; default: whenever sms is given); dram_gbps: its memory's bandwidth (GB/s;
    None: unknown, the slower device's rules)."""
    if a.shape[2] == 0:
        # No product (K = 0, as ops.gemm_into runs alpha = 0): the plain kernel writes beta
        # * D and the activation alone. TMA takes no empty dimension (a descriptor of K = 0
        # fails to build), and no copy or split has anything to do.
        return Plan(pad=False, a_k_major=False, b_k_major=False)
    tma = sms is not None if tma is None else tma
    p = _base_plan(a, b, precision, sms, tma, dram_gbps)
    batch, m, k = a.shape
    n = b.shape[2]
    if (SPLIT_FED and precision == "tf32x3" and tma and sms is not None and batch == 1
            and m > SKINNY_M and k >= SPLIT_TF32_MIN_K
            and (n * 4) % _persistent.TMA_ALIGN_BYTES == 0
            and -(-m // PERSISTENT_TILE) * -(-n // PERSISTENT_TILE) >= sms):
        # kernels/split_fed.py first (SPLIT_FED); the plan otherwise made stays for the
        # calls it cannot take (run()).
        return p._replace(register_fed=True)
    if (FED_ROWS and precision in FED_ROWS_MIN_M and tma and sms is not None and batch == 1
            and FED_ROWS_MIN_M[precision] <= m <= _register_fed.ROWS_BQ
            and a.stride(2) == 1 and b.stride(1) == 1
            and -(-n // _register_fed.BP) >= FED_ROWS_MIN_TILES_PER_SM[precision] * sms):
        # kernels/register_fed.py's rows_2d first (FED_ROWS); the plan otherwise made stays
        # for the calls it cannot take (run()).
        return p._replace(fed_rows=True)
    return p


def _base_plan(a: torch.Tensor, b: torch.Tensor, precision: str, sms: int | None,
               tma: bool, dram_gbps: float | None = None) -> Plan:
    """plan() less split_fed's claim on tf32x3 products."""
    batch, m, k = a.shape
    n = b.shape[2]
    sa, sb = a.stride(), b.stride()
    a_ok = _aligned(sa, 2, k) or _aligned(sa, 1, m)
    b_ok = _aligned(sb, 2, n) or _aligned(sb, 1, k)
    few_tiles = 2 * -(-m // SPLITK_TILE) * -(-n // SPLITK_TILE) <= (sms or 0)
    split_k = (sms is not None and batch == 1 and k >= SPLITK_MIN_K
               and (m <= SKINNY_M or few_tiles))
    # Skinny and small split-K plans never pad (PAD_MIN_MN, SPLITK_AS_GIVEN_MAX_MN).
    split_k_as_given = split_k and (m <= SKINNY_M
                                    or m * n <= SPLITK_AS_GIVEN_MAX_MN.get(precision, 0))
    pad = (not (a_ok and b_ok) and m >= PAD_MIN_MN and n >= PAD_MIN_MN
           and not split_k_as_given)
    fp32_tensor_core = precision in ("tf32", "tf32x3")
    stage_k_major = fp32_tensor_core and m * n * k >= STAGE_MIN_MNK
    a_k_major = stage_k_major and sa[2] != 1 and n >= STAGE_MIN
    b_k_major = stage_k_major and sb[1] != 1 and m >= STAGE_MIN
    if pad and fp32_tensor_core:
        a_k_major = b_k_major = True
    # Operands the split-K kernel (and the fringe strips on it) load 16 bytes wide as given.
    a_runs = batch == 1 and (_splitk.whole_runs(a[0], 1) or _splitk.whole_runs(a[0], 0))
    b_runs = batch == 1 and (_splitk.whole_runs(b[0], 1) or _splitk.whole_runs(b[0], 0))
    k_major = split_k and sa[2] == 1 and sb[1] == 1
    k_major_weight = k_major and n >= THIN_MIN_N
    # A K-major or row-major weight (see THIN_MIN_N for both).
    thin_weight = k_major_weight or (split_k and n >= THIN_MIN_N and sa[2] == 1
                                     and sb[2] == 1)
    if m <= GEMV_MAX_M.get(precision, 0) and (
            k_major and n >= GEMV16_MIN_N and a_ok and b_ok if precision == "half"
            else k_major_weight):
        return GEMV
    if (precision == "ieee" and sms is not None and batch == 1 and _aligned(sb, 1, k)
            and GEMV_MAX_M["ieee"] < m <= FMA_TRANSPOSED_MAX_M and n >= THIN_MIN_N
            and k >= SPLITK_MIN_K):
        return FMA_TRANSPOSED
    if thin_weight and m <= SKINNY_M and precision in ("half", "tf32") and a_ok and b_ok:
        return TRANSPOSED
    if (thin_weight and m <= TRANSPOSED_RUNS_MAX_M and precision == "half" and sb[2] == 1
            and a_runs and b_runs):
        return (TRANSPOSED_SPLIT_K if TRANSPOSED_RUNS_SPLIT_K and _fast_memory(dram_gbps)
                else TRANSPOSED)
    if (BATCHED and tma and sms is not None and batch > 1 and min(m, n) >= BATCHED_MIN_MN
            and (sa[2] == 1 or a_k_major or precision == "half" and sa[1] == 1)
            and (precision == "half" or precision == "tf32" and (sb[1] == 1 or b_k_major))):
        # Rows TMA reads as given (16-byte strides: fp16 K = 1000) need no padded copy;
        # K-major copies are padded anyway.
        as_given = not (a_k_major or b_k_major) and _batched.reads(a, b, precision)
        # tf32 with one operand MN-major, read as given (even where the copies behind
        # it pad: TMA needs only 16-byte strides, run() checks), and nt where the copies
        # would pad: see REGISTER_FED_BATCHED.
        fed_layout = _register_fed._operands(a, b)  # (..., X_SMEM: nt) or None
        fed = (REGISTER_FED_BATCHED and precision == "tf32" and fed_layout is not None
               and (pad or not fed_layout[3]))
        return Plan(pad and not as_given, a_k_major, b_k_major, batched=True,
                    register_fed=fed, pingpong=_pingpong_fits(a, b, sms, precision, dram_gbps))
    tiles = -(-m // PERSISTENT_TILE) * -(-n // PERSISTENT_TILE)
    tma_kernel = (tma and sms is not None and batch == 1 and not split_k
                  and (precision == "half" or fp32_tensor_core))
    direct = _tma_direct(a, b, fp32_tensor_core) if pad and tma_kernel else None
    if direct is not None and min(m, n) >= PITCH_PAD_MIN_MN:
        # Rows off a sector: see PITCH_PAD_MIN_MN.
        a_off, b_off = _off_sector(a, direct[0]), _off_sector(b, direct[1])
        if b_off and precision == "half" and a.stride(2) == 1:
            direct = (direct[0], True)  # B staged K-major at the padded pitch, A as given
        elif b_off or (a_off and not _a_planes(a, b, precision)
                       and not (precision == "tf32" and direct[1])):
            direct = None  # padded copies instead
    mid_m = ((precision == "half" or (precision == "tf32" and sb[1] == 1))
             and SKINNY_M < m <= configs.MID_M_MAX and n * k >= MID_MIN_WEIGHT)
    # fp32 tensor-core operands K-major, as given or by the copies above.
    k_major_ready = (sa[2] == 1 or a_k_major) and (sb[1] == 1 or b_k_major)
    k_slices = _sliced.slices(m, n, k, sms) if sms is not None else 1
    small_wave = (SMALL_WAVE and not pad and sms is not None
                  and (precision == "half" or precision == "tf32" and k_major_ready)
                  and configs.SMALL_WAVE_MIN_TILES <= tiles <= sms // 2 and k_slices == 1)
    persistent = tma_kernel and (tiles >= sms or mid_m or small_wave)
    mid = mid_m or small_wave  # the persistent kernel's mid tiles (configs.persistent_family)
    if (SLICED and tma_kernel and not persistent and not pad
            and (precision == "half" or k_major_ready) and k_slices > 1):
        # fp32 operands (tf32, tf32x3) K-major as given or by the K-major copies above.
        return SLICED_PLAN._replace(a_k_major=a_k_major, b_k_major=b_k_major)
    # The row strip streams B, the column strip A: cut only where the strip loads them 16
    # bytes wide (copies always; see FRINGE_TILE).
    cut_rows = pad or b_k_major or b_runs
    cut_cols = pad or a_k_major or a_runs
    if direct is not None:
        cut_rows, cut_cols = direct[1] or b_runs, direct[0] or a_runs
    core = (_fringe_core(m, n, sms, cut_rows, cut_cols) if persistent and not mid
            else None)
    wave_rows = (_wave_rows(m, n, sms) if persistent and not mid and core is None
                 and precision in ("half", "tf32") else None)
    if (precision == "tf32x3" and persistent and (n * 4) % _persistent.TMA_ALIGN_BYTES == 0
            and k >= SPLIT_TF32_MIN_K and tiles >= SPLIT_TF32_MIN_TILES_PER_SM * sms
            and _halves_pay(m, n, k, pad * (m + n) * k + a_k_major * m * k
                            + b_k_major * k * n)):
        # The halves are fresh copies whatever the layout: they replace padding and K-major
        # staging alike. Only where the (new, row-major) output takes a TMA store: a pointer
        # store's conversion buffer leaves the split tiles short of shared memory.
        return SPLIT_TF32
    if (REGISTER_FED and precision == "tf32" and persistent and not pad and direct is None
            and core is None and wave_rows is None and not mid and a_k_major != b_k_major):
        # One operand MN-major, the other K-major: see REGISTER_FED. The copy stays in the
        # plan for the calls the kernel does not take (an epilogue, unaligned rows).
        return Plan(False, a_k_major, b_k_major, persistent=True, register_fed=True)
    if (persistent and not pad and direct is None and not mid
            and _pingpong_fits(a, b, sms, precision, dram_gbps)):
        return Plan(False, False, False, persistent=True, pingpong=True)
    # Mid-M rows padding 128-row tiles on the mid tiles (see MID_SHORT_MAX_M).
    mid_short = (mid_m and precision == "half" and tiles >= sms
                 and PERSISTENT_TILE < m <= MID_SHORT_MAX_M
                 and not configs.wide_tiles_filled(m, n, sms))
    if (TALL and precision == "half" and persistent and not pad and direct is None
            and _tall_fills(m, n, k, sms)):
        # The persistent kernel's tiles where kernels/tall.py refuses the call (run()).
        return Plan(False, False, False, persistent=True, tall=True, mid_tiles=mid_short)
    # Products the persistent kernel runs on its mid tiles: asked for by the plan
    # (Plan.mid_tiles), or mid-M ones of fewer tiles than SMs (configs.persistent_family).
    on_mid_tiles = small_wave or mid_short or (mid_m and tiles < sms)
    if (WIDE and precision == "half" and persistent and not pad and direct is None
            and not on_mid_tiles and core is None and wave_rows is None
            and _wide_fills(m, n, sms)):
        return Plan(False, False, False, persistent=True, wide=True)
    if direct is not None:
        # 16-byte rows that are not ALIGN elements (fp16 K = 1000): the TMA kernel reads them
        # as they are, at any tile count, instead of padded copies; fp32 operands TMA cannot
        # take as given get their (unpadded) K-major copies.
        return Plan(False, *direct, persistent=True, core=core, wave_rows=wave_rows)
    # Other split-K plans pad at any size what the kernel cannot load 16 bytes wide
    # (PAD_MIN_MN).
    pad = pad or (split_k and not split_k_as_given and not (a_runs and b_runs))
    fma_plain = precision == "ieee" and not split_k
    a_m_major = fma_plain and (pad or (sa[1] != 1 and min(m, n) >= FMA_STAGE_A_MIN))
    b_as_given = fma_plain and pad and m < FMA_PAD_B_MIN_M
    pad = pad and not b_as_given
    # A K-major B is still copied row-major (unpadded rows are no worse than K-major ones).
    b_n_major = (fma_plain and not pad and sb[2] != 1
                 and (m >= FMA_STAGE_B_MIN_M or b_as_given))
    return Plan(pad, a_k_major, b_k_major, persistent, split_k, core=core,
                a_m_major=a_m_major, b_n_major=b_n_major, wave_rows=wave_rows,
                mid_tiles=small_wave or mid_short)


# The persistent kernel's tiles are whole multiples of FRINGE_TILE rows and columns; on large
# products both tensor-core families tune to 128x256 tiles, with grid = SMs, so it runs in
# waves of one tile per SM. At 4097^3 the one row and column past 4096 make 33 x 17 = 561
# tiles, five waves instead of four, all at full cost. A fringe of at most SKINNY_M rows or
# columns is a skinny product, memory-bound on the split-K kernel: cut off, it costs one read
# of the other operand instead of a wave. perf/plans.py, H100, 4097^3, L2 flushed, ms
# (cuBLAS 1.025 fp16, 1.171 tf32): fp16 uncut 0.306, columns cut 0.283, rows 0.374, both
# 0.387; tf32 0.573, 0.534, 0.584, 0.534. Cutting rows saves no wave of 128x256 tiles there
# (32 x 17 = 544). (Masking the split-K kernel's edges instead of wrapping them, offs % N,
# measured no different on aligned N: perf/timeline.py, fp16 nn, partial kernel
# 16x8192x8192 55.9 us against 56.2, 64x8192x8192 60.1 vs 60.4, 256x256x32768 19.9 vs 19.9.)
# A strip is cut only where the split-K kernel loads the operand it streams (the row strip
# B, the column strip A) 16 bytes wide: a copy, or rows of whole 16-byte runs
# (splitk.vector_hints). Else it loads them one element at a time: cutting the row strip
# of 4104^3 fp16 from B's padded copy, read 4104 columns wide before the split-K kernel
# read a padded copy whole, took the plan from 282 to 1108 us. H100, CUDA-graph time after
# an L2 flush, us (probes, twenty-third session): the hints took the 8-column strip of
# 4104^3 fp16 from A as given from 78.1 to 21.1, and a row-major B streams at copy speed
# (8x4096x4160 18.5, cuBLAS 17.2). perf/plans.py, fp16, padded plan uncut against both
# strips cut (cuBLAS): 2056^3 58.4 vs 53.3 (32.1; 153 tiles of 128x256 against 128),
# 2056x4104x4104 168.9 vs 156.4 (103.4).
# Where the plan copies A anyway, the copy computes the column strip's partial products as
# it reads A (copy.copy_jobs with a strip) instead of a second read on the split-K kernel.
# perf/timeline.py, 4097^3, us: fp16 split-K strip 18.3 + reduce 1.8, copy of A 27.8 alone;
# fused copy 30.2-30.7 (16-bit tensor-core dot) + reduce 2.3; tf32 strip 34.0 + 2.6, copy
# 48.1 alone, fused 70.2 (fp32 FMA dot) + 2.4. 8193^3 (65 x 33 tiles, 17 waves; 16 cut),
# perf/plans.py, ms: fp16 1.846 uncut, 1.780 cut; tf32 3.583, 3.499 (cuBLAS 7.127, 8.168).
# A direct plan (no copy of A) leaves the column strip to the split-K kernel on A as given.
# Before the kernel's vector hints, rows not ALIGN elements apart loaded slowly there
# (perf/timeline.py, H100, fp16: the strip's partial kernel 60.1 us at 2048x4104x4104 and
# 78.1 at 4104^3, against 131.4 and 266.1 for the core), so such strips were not cut.
FRINGE_TILE = 128
# The copy of A writes one fp32 partial per strip column and 64-column tile of A: F / 16 bytes
# per element of A, so up to 8 columns keep that below half the copy's own fp16 write (the
# 4097 products measured have one). Its reduction sums one partial per tile in a single
# register tile (splitk.reduce), 256 x 32 values at most, so K up to 256 tiles (16384).
# Wider strips and longer K run on the split-K kernel. Reasoned, not measured.
STRIP_IN_COPY_MAX_COLS = 8
STRIP_IN_COPY_MAX_TILES = 256
# A 16-bit column strip that would run on the split-K kernel after a persistent core (no
# copy of A) runs beside the core instead, on the plain kernel: the core lets the next
# launch start once it has started (persistent's TRIGGER), and the strip's programs, small
# enough to share an SM with a core program (configs.plain_beside_config), wait for the
# core only at their end (matmul's BESIDE), so the strip's reads of A overlap the core's
# compute-bound run, and no reduce is left after the core. Probe (thirty-second session,
# H100, the library eager after an L2 flush, interleaved rounds, us, after -> beside
# (cuBLAS)): 4104^3 fp16 246.5 -> 232.4 (212.5-225.6 across runs), bf16 237.4 -> 225.2
# (205.0-211.6), 2048x4104x4104 132.1 -> 126.0 (119.2); on the split-K kernel beside (an
# earlier form of this) 4096x4104x4104 244.1 -> 236.4 (236.8), 2056^3 49.4 -> 47.4 (32.5),
# 8200^3 1849 -> 1836 (1708). The strip after the core costs ~19 us at 4104^3
# (perf/timeline.py, fp16: partials 16.4, reduce 2.7). Other fringes (a row strip, any
# fp32 strip) still run after the core on the split-K kernel. Every strip program waits
# for the core at its end, holding its slot; only program 0 waiting (enough for the order)
# changed nothing (probe, thirty-fourth session, H100, eager after the flush, two A/B runs,
# us, all -> program 0): 4104^3 fp16 231.4, 232.4 -> 233.7, 232.0 (cuBLAS 207.3-208.1),
# bf16 223.7, 223.7 -> 223.0, 224.2; 2048x4104x4104 127.7, 128.1 -> 127.6, 127.3.
STRIP_BESIDE = True


def _waves(m: int, n: int, sms: int) -> int:
    """Waves of 128x256 tiles that an m x n output takes on sms SMs."""
    return -(-(-(-m // 128) * -(-n // 256)) // sms)


def _fringe_core(m: int, n: int, sms: int, cut_rows: bool,
                 cut_cols: bool = True) -> tuple | None:
    """(rows, columns) for the persistent kernel when cutting a fringe of at most SKINNY_M
    columns where cut_cols, or rows where cut_rows, off the output saves a wave; None when
    nothing does."""
    def cuts(x: int, allowed: bool = True) -> tuple:
        thin = allowed and 0 < x % FRINGE_TILE <= SKINNY_M < x
        return (x, x - x % FRINGE_TILE) if thin else (x,)
    # Fewest waves; among equals, the least cut off (fewest and smallest fringe launches).
    best = min((_waves(r, c, sms), (m - r) + (n - c), (r, c))
               for r in cuts(m, cut_rows) for c in cuts(n, cut_cols))
    return None if best[2] == (m, n) else best[2]


# A last wave of 128x256 tiles at most WAVE_CUT_MAX_FILL full leaves most SMs idle for a
# whole tile's time. Where the output has fewer than WAVE_CUT_MAX_WAVES whole waves that is
# a large share of the call, so the persistent kernel runs the rows of whole waves first and
# the rest as a second product with its own tuned tile (smaller tiles, spread over the SMs).
# perf/plans.py, H100, fp16, GPU time after an L2 flush, us, cut against one launch (cuBLAS;
# twenty-seventh session): 2208^3 45.2 vs 51.2 (36.1), 2400^3 49.4 vs 54.0 (49.8), 3008^3
# 86.4 vs 92.7 (77.4), 3200^3 96.6 vs 104.4 (91.1), 2304x4096x4096 114.8 vs 128.2 (106.1),
# 1280x8192x4096 124.8 vs 133.3 (117.2), 2560x4096x2048 65.9 vs 68.5 (62.6), 3712^3 (three
# waves and 39 tiles) 152.7 vs 157.5 (157.1); on padded
# copies 3000^3 112.1 vs 117.6 (82.4), 2200^3 56.5 vs 63.0 (38.7); bf16 alike (4-10%). tf32
# (path auto_wave_cut against auto, cuBLAS tf32): 2208^3 95.4 vs 106.7 (94.8), 2400^3 107.0
# vs 116.9 (94.5), 3008^3 192.2 vs 205.5 (204.8), 3200^3 215.0 vs 227.4 (215.1),
# 2304x4096x4096 nt 219.4 vs 246.9 (208.7), 1280x8192x4096 nt 255.3 vs 259.1 (227.2).
# Where the last wave is fuller, the cut lost or changed nothing (a probe of the same cut,
# not kept): 2560^3 (a wave and 68 tiles) 62.4 vs 59.6, 2816^3 68.5 vs 66.1, 4608^3 (four
# waves and 120) 275.6 vs 274.8. The stream-K kernel, meant for these, was slower still
# (kernels/streamk.py).
# Four whole waves gain too (twenty-eighth session, fp16 unless said): 4224^3 (four waves
# and 33 tiles) 216.7 vs 234.4 (215.9), bf16 212.5 vs 227.0 (211.2), tf32 472.1 vs 501.2
# (510.9); 4352^3 228.9 vs 244.4 (223.0), bf16 226.5 vs 234.2 (217.2); 4480x4096x4096
# 209.5 vs 225.3 (213.5), 4608x4096x4096 221.0 vs 228.9 (214.8), 4736x4096x4096 (a last
# wave 48% full) 221.0 vs 229.2 (232.8); 2176x8192x4096 nt 220.0 vs 229.5 (212.3). Five
# waves were mixed (5376 / 5504 / 5632 x 4096 x 4096 256.1 / 269.8 / 264.9 vs 268.9 /
# 271.7 / 273.7, 4800^3 332.8 vs 325.8) and more waves gained little (6528 / 6656 x 4096 x
# 4096 322.0 / 316.8 vs 326.0 / 322.2; twenty-seventh session, 5120^3 (six waves and 8)
# 397.8 vs 397.4, 5632^3 (seven and 44) 521.1 vs 523.2), so the cut stops at four.
WAVE_CUT_MAX_WAVES = 5
WAVE_CUT_MAX_FILL = 0.5
# The second launch reads all of B again, which outlasts the idle SMs it saves where B is
# wide (twenty-eighth session, fp16 nt, us, cut vs one launch, cuBLAS): 896x11008x4096
# 135.2 vs 128.3 (119.6), 1280x11008x4096 189.2 vs 181.5 (158.8), 1664x11008x4096 233.1
# vs 227.7 (212.2), 512x28672x8192 458.5 vs 365.0 (336.4), 640x28672x8192 529.0 vs 460.1
# (428.8). Every measured gain has at most 8192 columns (1280x8192x4096 and
# 2176x8192x4096 above).
WAVE_CUT_MAX_N = 8192


def _wave_rows(m: int, n: int, sms: int) -> int | None:
    """Rows of an m x n output that fill whole waves of 128x256 tiles on sms SMs, where
    cutting the rest off pays (see WAVE_CUT_MAX_WAVES and WAVE_CUT_MAX_N); None where it
    does not."""
    if n > WAVE_CUT_MAX_N:
        return None
    cols = -(-n // 256)
    full, rest = divmod(-(-m // 128) * cols, sms)
    if not (1 <= full < WAVE_CUT_MAX_WAVES and 0 < rest <= WAVE_CUT_MAX_FILL * sms):
        return None
    rows = 128 * (full * sms // cols)
    return rows if 0 < rows < m else None


# Below this K, cuBLAS SGEMM's own error (2.1e-7 at K = 512, report) is under the split
# kernel's floor (2.5e-7, kernels/persistent.hi_flush_k): the in-loop split keeps tf32x3 no
# less accurate than SGEMM there (2.0e-7 at 512^3) on N(0,1) data.
SPLIT_TF32_MIN_K = 1024

# Staged tf32 halves against the in-loop split, H100 (perf/plans.py, tile_probe.py, report):
# the split kernel runs 115 TFLOPS on halves (4096^3: 1.341 ms in the report less 146 us of
# copies; 122-128 with the 256-K flush it had first) against 77 splitting in its K loop;
# the halves cost 12 bytes per operand element (read 4, write 8) at 2.6-2.8 TB/s (146 us
# for two 4096 x 4096 operands), the in-loop path's K-major/padded copies 8. (An operand
# read as given, raw_side, costs 8: the estimate keeps 12, measured before it.)
HALVES_TFLOPS, IN_LOOP_TFLOPS, COPY_BYTES_PER_S = 115e12, 77e12, 2.6e12
# The halves must save twice what their extra copies cost: 2048x11008x4096 nt was +10% by
# the estimate at margin 1 and measured 5% slower (1.71x vs 1.79x cuBLAS SGEMM) with the
# split kernel of the time (96 TFLOPS); 128x28672x8192 nt, all copies and little compute,
# ran 0.74x against 1.58x.
HALVES_MARGIN = 2.0
# And the split kernel needs several 128x128 tiles per SM to reach its rate: perf/plans.py,
# H100, split against in-loop, ms: 2048^3 (256 tiles, 1.9 per SM) 0.310 vs 0.237; 2560^3
# (400, 3.0 per SM) 0.404 vs 0.566; 2048x4096x4096 nt (512) 0.653 vs 0.840; 3072^3 (576)
# 0.600 vs 0.850; 4096^3 (1024) 1.275 vs 1.784; 2048x11008x4096 nt (1376) 1.684 vs 2.254;
# 8192x8192x1024 nt (4096) 1.351 vs 1.726 (K >= 4096 with the 256-K flush of the time).
# Between 1.9 and 3.0 per SM: unmeasured.
SPLIT_TF32_MIN_TILES_PER_SM = 3


class Remainders(NamedTuple):
    """The lo halves of a split_tf32 plan's operands (stage), and which operand, if any,
    went as given (raw_side): wgmma reads fp32 operands with their low 13 bits dropped, so
    that operand is its own hi half and its lo is the dropped part (copy.remainder_job)."""
    a: torch.Tensor
    b: torch.Tensor
    raw: str | None = None  # "a", "b" or None


# Where the hardware drops an fp32 operand's low 13 bits in a tf32 dot: on the H100 tf32
# errors matched truncated operands, 7.7e-4 emulated against 7.8e-4 measured at 4096^3
# (rounded: 2.9e-4, as cuBLAS; README "Which precision"). Elsewhere (and in the
# interpreter, whose dot is full fp32) both halves are staged.
RAW_HI_CAPABILITIES = ((9, 0),)


def raw_side(a: torch.Tensor, b: torch.Tensor, kp: int, capability) -> str | None:
    """The operand of a split_tf32 plan (batch 1, (1, M, K) A and (1, K, N) B, halves Kp
    long, on a GPU of this capability, None for none) that the split kernel can read as
    given instead of a staged hi half: contiguous and TMA-aligned in the layout the kernel
    reads (A row-major, B K-major), K == Kp; the larger when both can. Saves writing that
    operand's hi half: 4 of the 12 bytes per element the halves cost. Only one: the lo x lo
    product the kernel drops is unbiased while one remainder has either sign."""
    if capability not in RAW_HI_CAPABILITIES or a.shape[2] != kp:
        return None
    m, k = a.shape[1], a.shape[2]
    n = b.shape[2]
    a_ok = _tma_rows(a, 2) and a.stride(1) == k
    b_ok = _tma_rows(b, 1) and b.stride(2) == k
    if a_ok and b_ok:
        return "b" if n > m else "a"
    return "a" if a_ok else "b" if b_ok else None


def _halves_pay(m: int, n: int, k: int, in_loop_copied: int) -> bool:
    """Whether staging tf32 halves of A and B beats the in-loop split, whose plan copies
    in_loop_copied operand elements (padding, K-major copies)."""
    extra_bytes = 12 * (m + n) * k - 8 * in_loop_copied
    saved_s = 2 * m * n * k * (1 / IN_LOOP_TFLOPS - 1 / HALVES_TFLOPS)
    return HALVES_MARGIN * extra_bytes / COPY_BYTES_PER_S < saved_s


def _tma_direct(a: torch.Tensor, b: torch.Tensor, fp32_tensor_core: bool):
    """(copy A, copy B) when the persistent kernel can take A and B unpadded, with at most
    K-major copies of fp32 tensor-core operands; None otherwise. It takes A and B either
    way round when 16-bit (fp32: K-major), with 16-byte rows; fp32 qualifies when K
    elements are 16 bytes, as measured when a K-major copy had K elements per row (stage
    now gives it the padded pitch at any K; wider use unmeasured). (Measured with a
    row-major A, perf/plans.py above; an M-major one takes the same TMA loads, its tiles
    transposed.) Large products whose rows are off a sector pad instead
    (PITCH_PAD_MIN_MN)."""
    copy_rows_ok = (a.shape[2] * a.element_size()) % _persistent.TMA_ALIGN_BYTES == 0
    if fp32_tensor_core:
        copy_a, copy_b = not _tma_rows(a, 2), not _tma_rows(b, 1)
        return (copy_a, copy_b) if copy_rows_ok or not (copy_a or copy_b) else None
    if (_tma_rows(a, 2) or _tma_rows(a, 1)) and (_tma_rows(b, 2) or _tma_rows(b, 1)):
        return False, False
    return None


# TMA rows that start 16 bytes into a 32-byte sector (fp16 K = 8 mod 16, fp32 K = 4 mod 8;
# legal, 16-byte aligned) slow the persistent kernel on large products, so from
# PITCH_PAD_MIN_MN rows and columns such operands take the padded plan (copies at
# PAD_PITCH_BYTES, the column strip computed in A's copy) instead of running direct. Kernel
# alone, autotuned, CUDA-graph time after an L2 flush (H100, probes, not kept, twenty-second
# session), us, as given -> B copied to a 128-byte pitch -> both (cuBLAS): 4104^3 fp16 322.6
# -> 250.4 -> 234.7 (210.4); tf32 4096x4096x4100 nt 493.8 -> 389.1 -> 379.0 (391.4); 1000^3
# fp16 14.3 -> 13.7 -> 12.4 (12.0). Whole plans, GPU time, direct / padded (cuBLAS):
# perf/plans.py, 4104^3 fp16 335.5 / 257.6 with the strip (211.9); forced plans (probe, same
# session): 3000^3 fp16 133.9 / 120.4 (82.9), 2056^3 59.6 / 59.4 (32.5), tf32 4100^3 501.3
# (B's K-major copy, the strip on split-K) / 492.6 (573.7), 1000^3 fp16 14.3 / 16.3 (12.4):
# the copies cost more than they save there, so 1000^3 stays direct. Copying only one
# operand ran faster on some shapes (see docs/design.md, "TMA rows off a sector"); since the
# thirty-first session, two such plans (below).
# Since the persistent kernel reads such an A as two planes of rows (persistent.a_planes),
# a 16-bit product whose only off-sector operand is that A runs direct at any size.
# perf/plans.py, H100, GPU time (gpu_ms), ratio to cuBLAS, padded -> direct (thirty-first
# session): fp16 2048x2048x2056 0.72 -> 0.97, 4096x4096x4104 0.84 -> 1.00 (bf16 0.83 ->
# 1.00), 8192x8192x4104 0.86 -> 0.92 (bf16 0.95 -> 1.01), 2048x8192x2056 0.79 -> 0.99
# (bf16 0.79 -> 1.00), 4096x4096x1000 0.84 -> 0.98 (bf16 0.83 -> 0.99), 2048x2048x1032
# 0.76 -> 0.96 (bf16 0.74 -> 0.95), 3072x3072x3000 0.72 -> 0.85 (both with the wave cut).
# B's rows off a sector cost more read as given than padded (fp16, same measure): 4104^3
# 0.65 against 0.87, 8192x4104x8192 0.74 against 0.89, 2048x2056x2048 0.59 against 0.72.
# So a 16-bit B off a sector is staged K-major alone (at the padded pitch) beside a
# row-major A as given, one plane (planes would shift the copy's boxes off its sectors:
# persistent._shift_misaligns); tf32, whose B is staged K-major anyway, runs an A off a
# sector as given too. Probes of the two plans, same process, GPU time, ratio to cuBLAS,
# padded -> this plan: H100, fp16 (bf16 alike), A on sectors: 4096x4104x4096 0.81 -> 0.86,
# 8192x4104x8192 0.88 -> 0.94, 3072x4104x4096 0.78 -> 0.83, 2048x4104x8192 0.73 -> 0.76,
# 2048x2056x2048 0.72 -> 0.77, 2048x8200x4096 0.79 -> 0.82; H200, A off a sector too:
# 4104^3 0.92 -> 0.92 (bf16 0.86 -> 0.88; nt 0.93 -> 0.94), 4096x4096x4104 nt 0.88 ->
# 0.91, 4096x4104x4104 0.93 -> 0.95, 3000^3 0.76 -> 0.78, 2056^3 0.65 -> 0.63; tf32
# 4096x4096x4100 0.89 -> 0.94, 2048x2048x2052 0.79 -> 0.88, 3072x3072x3004 0.97 -> 1.00,
# 2048x8192x2052 0.95 -> 0.95 (on the H100, with planes still on beside the copy of B,
# direct lost: 4096x4096x4100 0.76 against 0.84 padded).
PITCH_PAD_MIN_MN = 2048


def _a_planes(a: torch.Tensor, b: torch.Tensor, precision: str) -> bool:
    """A 16-bit (1, M, K) A that the persistent kernel reads as two planes of rows beside
    (1, K, N) B as given (persistent.a_planes): see PITCH_PAD_MIN_MN."""
    return precision == "half" and _persistent.a_planes(a[0], b=b[0]) == 2


def _off_sector(t: torch.Tensor, copied: bool) -> bool:
    """A (1, R, C) operand read as given (not copied) whose rows, along either axis, are
    not whole 32-byte sectors apart."""
    pitch = t.stride(1) if t.stride(2) == 1 else t.stride(2)
    return not copied and (pitch * t.element_size()) % _persistent.SECTOR_BYTES != 0


# Row pitch of the padded copies: a multiple of 128 bytes, so that every row of a TMA box
# starts on a cache line. tile_probe.py, H100, L2 flushed, on 4097 x P x P with pitch P,
# us: fp16 persistent 128x256x64, P = 4104 (rows 16 bytes past a line) 317, 4112 (32) 245,
# 4128 (64) 240, 4160 (aligned) 238; tf32 through the library (B staged K-major) 4112 (64)
# 531, 4128 (aligned) 504.
PAD_PITCH_BYTES = 128


def padded_extent(x: int, element_size: int) -> int:
    """x rounded up to the pitch of a padded copy: ALIGN elements and 128 bytes."""
    step = max(ALIGN, PAD_PITCH_BYTES // element_size)
    return -(-x // step) * step


def stage(a: torch.Tensor, b: torch.Tensor, p: Plan, strip_from: int | None = None):
    """Copies of A (B, M, Kp) row-major, or (B, Mp, Kp) M-major if p.a_m_major (Mp:
    padded_extent; the plain kernel reads the zero rows past M, not wrapped ones), and B
    (B, Kp, Np), K-major if p.b_k_major, else row-major, with zeroed padding. Operands the
    plan leaves alone come back as they are. A split_tf32 plan returns (A hi, B hi,
    Remainders) instead, B K-major, one hi half perhaps the operand itself (raw_side). Kp
    and Np: padded_extent (Np also for any row-major copy, b_n_major).
    strip_from (a single product whose plan copies A): A's copy also computes the partial
    products of A with B's columns from strip_from on, returned third (copy.copy_jobs).
    Both operands' copies go in one launch."""
    batch, m, k = a.shape
    n = b.shape[2]
    if p.split_tf32:
        kp = padded_extent(k, 4)
        raw = raw_side(a, b, kp, capability(a.device))
        a_job = (remainder_job if raw == "a" else split_job)(a, (batch, m, kp))
        b_job = (remainder_job if raw == "b" else split_job)(b.transpose(1, 2), (batch, n, kp))
        copy_jobs(a_job, b_job)
        a_hi, a_lo = (a, a_job.dst) if raw == "a" else (a_job.dst, a_job.lo)
        b_hi = b if raw == "b" else b_job.dst.transpose(1, 2)
        b_lo = (b_job.dst if raw == "b" else b_job.lo).transpose(1, 2)
        return a_hi, b_hi, Remainders(a_lo, b_lo, raw)
    kp = padded_extent(k, a.element_size()) if p.pad else k
    # K-major copies keep the padded pitch even unpadded, their columns past kp zero and
    # unread: TMA rows off a sector slow the persistent kernel (PITCH_PAD_MIN_MN), and a
    # copy over the whole pitch ran faster than one into the K-wide view (4104^3 fp16 with
    # A copied into the 4104-wide view of its pitched buffer 358.8 us, into the whole pitch
    # 314.6: probes, twenty-second session).
    pitch = padded_extent(k, a.element_size())
    # A row-major copy of B keeps the padded pitch too: 16-byte loads along N at any N
    # (FMA_TRANSPOSED's A^T).
    np_ = padded_extent(n, b.element_size()) if p.pad or p.b_n_major else n
    a_job = b_job = None
    # The strip's partials read A as given: with a strip, A's copy is row-major.
    a_m_major = p.a_m_major and strip_from is None
    if strip_from is not None:
        a_job = padded_job(a, (batch, m, pitch))
    elif a_m_major:
        a_job = padded_job(a.transpose(1, 2), (batch, kp, padded_extent(m, a.element_size())))
    elif p.pad or p.a_k_major:
        a_job = padded_job(a, (batch, m, pitch))
    if p.b_k_major:
        b_job = padded_job(b.transpose(1, 2), (batch, np_, pitch))
    elif p.pad or p.b_n_major:
        b_job = padded_job(b, (batch, kp, np_))
    jobs = [job for job in (a_job, b_job) if job is not None]
    partials = None
    if jobs:
        partials = copy_jobs(*jobs, strip=None if strip_from is None
                             else b[0, :, strip_from:])
    if a_job is not None:
        a = a_job.dst.transpose(1, 2) if a_m_major else a_job.dst[:, :, :kp]
    if b_job is not None:
        b = b_job.dst.transpose(1, 2)[:, :kp] if p.b_k_major else b_job.dst
    return (a, b) if strip_from is None else (a, b, partials)


def run(a, b, out, d=None, *, alpha=1.0, beta=0.0, precision="ieee", activation=0,
        force: Plan | None = None):
    """out = act(alpha * a @ b + beta * d) through the planned path (force: a given plan;
    activation: an epilogue.ACTIVATIONS code).

    The interpreter runs operands as given: the plans are about GPU load widths."""
    if force is not None:
        p = force
    else:
        p = PLAIN if INTERPRETER else plan(a, b, precision, *_persistent.gpu_sms(a.device),
                                           dram_gbps=_persistent.dram_gbps(a.device))
    if p.transposed:
        # C^T = B^T A^T by the rest of the plan; out^T is a strided view of out.
        run(b.transpose(1, 2), a.transpose(1, 2), out.transpose(1, 2),
            None if d is None else d.expand(out.shape).transpose(1, 2), alpha=alpha,
            beta=beta, precision=precision, activation=activation,
            force=p._replace(transposed=False))
        return out
    if p.register_fed:
        plain_product = d is None and alpha == 1 and activation == 0
        single = plain_product and a.shape[0] == 1
        if (precision == "tf32" and single and not p.split_tf32
                and _register_fed.supports(a[0], b[0], out[0])):
            _register_fed.matmul_2d(a[0], b[0], out[0], _persistent.gpu_sms(a.device)[0])
            return out
        if (precision == "tf32" and plain_product and p.batched
                and _register_fed.supports_batched(a, b, out)):
            _register_fed.bmm(a, b, out, _persistent.gpu_sms(a.device)[0])
            return out
        if precision == "tf32x3" and activation == 0 and a.shape[0] == 1:
            d2 = None if d is None else d.expand(out.shape)[0]
            if _split_fed.supports(a[0], b[0], out[0], d2):
                _split_fed_run(a[0], b[0], out[0], d2, alpha=alpha, beta=beta)
                return out
        p = p._replace(register_fed=False)
    if p.fed_rows:
        if (d is None and alpha == 1 and activation == 0 and a.shape[0] == 1
                and _register_fed.supports_rows(a[0], b[0], out[0])):
            _register_fed.rows_2d(a[0], b[0], out[0], _persistent.gpu_sms(a.device)[0])
            return out
        p = p._replace(fed_rows=False)
    if p.pingpong:
        operands = (a[0], b[0], out[0]) if a.shape[0] == 1 else (a, b, out)
        has_d, d_full = epilogue_input(d, beta, out)
        d_full = (d_full[0] if a.shape[0] == 1 else d_full) if has_d else None
        if (precision in ("half", "tf32") and _pingpong.bias_rows(d_full)
                and _pingpong.supports(*operands)
                and all(_pingpong.rows_aligned(t) for t in (a, b, out))):
            _pingpong.matmul(*operands, _persistent.gpu_sms(a.device)[0], d=d_full,
                             alpha=alpha, beta=beta, activation=activation)
            return out
        p = p._replace(pingpong=False)
    lo = None
    if p.split_tf32 and (precision != "tf32x3" or a.dtype != torch.float32):
        raise ValueError(f"a split_tf32 plan runs float32 operands at precision 'tf32x3', "
                         f"not {a.dtype} at {precision!r}")
    if (p.a_m_major or p.b_n_major) and (p.persistent or p.gemv or p.a_k_major
                                          or p.b_k_major):
        raise ValueError(f"M-major A and N-major B copies feed the plain and split-K "
                         f"kernels' fp32 FMA dots; {p} runs another kernel or stages K-major "
                         f"copies")
    if p.core is not None and (p.split_tf32 or p.split_k or p.gemv):
        raise ValueError(f"a plan with a core runs single products on the tiled kernels, "
                         f"not {p}")
    if p.wave_rows is not None and (not p.persistent or p.core is not None
                                    or p.split_tf32 or not 0 < p.wave_rows < out.shape[1]):
        raise ValueError(f"a plan with wave_rows runs a persistent product without a core "
                         f"or tf32 halves in two launches of rows (0 < wave_rows < M = "
                         f"{out.shape[1]}), not {p}")
    if (p.persistent or p.split_k or p.gemv or p.core is not None) and a.shape[0] != 1:
        raise ValueError(f"{p} runs single products, not a batch of {a.shape[0]}; "
                         f"dispatch.plan gives batches the plain kernel")
    if p.core is not None and not _splitk.supports(a, b, out, d):
        p = p._replace(core=None)  # 2^31 elements and more: the tiled kernel takes it all
    n = out.shape[2]
    rows, cols = (out.shape[1], n) if p.core is None else p.core
    # A copy of A, if the plan makes one, computes a thin column fringe as it goes.
    copies_a = (p.pad or p.a_k_major) and not p.split_tf32
    strip_from = (cols if copies_a and 0 < n - cols <= STRIP_IN_COPY_MAX_COLS
                  and -(-a.shape[2] // COPY_TILE) <= STRIP_IN_COPY_MAX_TILES else None)
    partials = None
    if p.split_tf32:
        a, b, lo = stage(a, b, p)
    elif strip_from is not None:
        a, b, partials = stage(a, b, p, strip_from)
    elif p.copies:
        a, b = stage(a, b, p)
    epilogue = {"alpha": alpha, "beta": beta, "precision": precision, "activation": activation}
    if p.core is None and p.wave_rows is None:
        _tiled(a, b, out, d, p, lo, **epilogue)
        return out
    d3 = None if d is None else d.expand(out.shape)
    if p.core is None:
        # The rows of whole waves, then the rest: two launches, each tuned on its own shape.
        r = p.wave_rows
        for part in (slice(None, r), slice(r, None)):
            _tiled(a[:, part], b, out[:, part], None if d3 is None else d3[:, part], p, lo,
                   **epilogue)
        return out
    # The core first: a planned (not replayed) call spends ~100 us of host time launching
    # it (perf/timeline.py, 4097^3 fp16: the GPU idled 98 us when the split-K strip went
    # first), which the core's own run then hides from what follows.
    beside = (STRIP_BESIDE and p.persistent and partials is None and cols < n
              and a.dtype in (torch.float16, torch.bfloat16))
    _tiled(a[:, :rows], b[:, :, :cols], out[:, :rows, :cols],
           None if d3 is None else d3[:, :rows, :cols], p, lo, trigger=beside, **epilogue)
    _fringe(a[0], b[0], out[0], None if d3 is None else d3[0], rows, cols, partials,
            beside=beside, **epilogue)
    return out


def _fringe(a, b, out, d, rows: int, cols: int, partials, beside: bool = False,
            **epilogue) -> None:
    """The fringe of a plan with a core: out's columns from `cols` on (every row), then its
    rows from `rows` on (left of `cols`). 2-D a (M, K), b (K, NB), NB >= N (a padded copy's
    zero columns past N), out (M, N), d None or (M, N); partials: the column strip's
    partial products from A's copy, else None (the split-K kernel computes the strip);
    beside: the column strip runs beside the core, on the plain kernel (STRIP_BESIDE)."""
    n = out.shape[1]
    if cols < n:
        strip_d = None if d is None else d[:, cols:]
        if partials is not None:
            _splitk.reduce(partials, partials.shape[0], out[:, cols:], strip_d,
                           alpha=epilogue["alpha"], beta=epilogue["beta"],
                           activation=epilogue["activation"])
        else:
            # A column strip is a skinny product transposed: out[:, c:]^T = b[:, c:]^T a^T.
            if beside:  # one launch with the epilogue: no reduce to wait for the core
                _kernel.matmul_3d(b[None, :, cols:n].transpose(1, 2), a.T[None],
                                  out[None, :, cols:].transpose(1, 2),
                                  None if strip_d is None else strip_d.T[None], beside=True,
                                  **epilogue)
            else:
                _splitk.matmul_2d(b[:, cols:n].T, a.T, out[:, cols:].T,
                                  None if strip_d is None else strip_d.T, **epilogue)
    if rows < out.shape[0]:
        _splitk.matmul_2d(a[rows:], b, out[rows:, :cols],
                          None if d is None else d[rows:, :cols], **epilogue)


def split_fed_stage(a: torch.Tensor, b: torch.Tensor) -> tuple:
    """(Y's hi half, Y's remainder) for kernels/split_fed.py on 2-D a, b: Y as given and its
    remainder copied (remainder_job, into scratch), or where Y is not K-major as TMA reads
    it (tn) both its halves (split_job); (Q, Kp) K-contiguous."""
    y = _split_fed.operands(a, b)[1]
    shape = (1, y.shape[0], padded_extent(y.shape[1], 4))
    staged = _split_fed.y_staged(y)
    job = (split_job if staged else remainder_job)(y[None], shape)
    copy_jobs(job)
    return (job.dst[0], job.lo[0]) if staged else (y, job.dst[0])


def _split_fed_run(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor,
                   d: torch.Tensor | None = None, *, alpha: float = 1.0,
                   beta: float = 0.0) -> None:
    """out = alpha * a @ b + beta * d (2-D; d None or broadcast to out) in 3xTF32 on
    kernels/split_fed.py, after split_fed_stage; the kernel reads the rest as given."""
    y_hi, y_lo = split_fed_stage(a, b)
    _split_fed.matmul_2d(a, b, y_hi, y_lo, out, _persistent.gpu_sms(a.device)[0], d,
                         alpha=alpha, beta=beta)


def _tiled(a, b, out, d, p: Plan, lo, *, alpha, beta, precision, activation,
           trigger=False) -> None:
    """out = act(alpha * a @ b + beta * d) on the plan's kernel for staged (B, M, K) a,
    (B, K, N) b (N or more columns) and (B, M, N) out; lo: the tf32 remainders of a
    split_tf32 plan; trigger: the persistent kernel lets the next launch start beside it
    (STRIP_BESIDE)."""
    n = out.shape[2]
    # The single-product kernels take 2-D operands: D broadcast to the one output matrix (a
    # view; any plan may run on one, PLAIN ones on the K-major path included).
    d2 = None if d is None else d.expand(out.shape)[0]
    # fp32 on kernels/gemv.py, 16-bit on kernels/gemv16.py (their supports() split by dtype).
    for gemv in (_gemv, _gemv16) if p.gemv else ():
        if gemv.supports(a[0], b[0, :, :n], out[0], d2):
            gemv.matmul_2d(a[0], b[0, :, :n], out[0], d2, alpha=alpha, beta=beta,
                           activation=activation)
            return
    # A as given (K-major) and B row-major: as given, or B's row-major copy the only copy
    # (K_MAJOR_COPIED_B).
    b_only_copied = (K_MAJOR_COPIED_B and p.b_n_major and not p.split_k
                     and not p._replace(b_n_major=False).copies)
    as_given = ((not p.copies or b_only_copied) and a.shape[0] == 1
                and (p.split_k or a.shape[2] >= K_MAJOR_MID_MIN_K)
                and min(out.shape[1], n) >= K_MAJOR_AS_GIVEN_MIN_MN
                and out.shape[1] * n * a.shape[2] >= K_MAJOR_AS_GIVEN_MIN_MNK)
    if (precision == "ieee" and lo is None
            and (p.split_k and p.b_n_major and n >= K_MAJOR_FMA_MIN_N or as_given)
            and _simt_tma.supports_k_major(a[0], b[0, :, :n], out[0])):
        # FMA_TRANSPOSED's C^T = W A^T, or C = A B as given, on Hopper: see
        # K_MAJOR_FMA_MIN_N, K_MAJOR_AS_GIVEN_MIN_MN and K_MAJOR_MID_MIN_K.
        _simt_tma.split_matmul(a[0], b[0, :, :n], out[0], d2, alpha=alpha, beta=beta,
                               activation=activation, sms=_persistent.gpu_sms(a.device)[0])
        return
    if (p.sliced and a.shape[0] == 1 and lo is None
            and _sliced.supports(a[0], b[0, :, :n], out[0], precision)):
        _sliced.matmul_2d(a[0], b[0, :, :n], out[0], d2, alpha=alpha, beta=beta,
                          activation=activation, precision=precision,
                          sms=_persistent.gpu_sms(a.device)[0])
        return
    if (p.wide and a.shape[0] == 1 and lo is None
            and _wide.supports(a[0], b[0, :, :n], out[0], d2)):
        _wide.matmul_2d(a[0], b[0, :, :n], out[0], d2, alpha=alpha, beta=beta,
                        activation=activation, sms=_persistent.gpu_sms(a.device)[0])
        return
    if (p.tall and a.shape[0] == 1 and lo is None
            and _tall.supports(a[0], b[0, :, :n], out[0], d2)):
        _tall.matmul_2d(a[0], b[0, :, :n], out[0], d2, alpha=alpha, beta=beta,
                        activation=activation, sms=_persistent.gpu_sms(a.device)[0])
        return
    if p.batched and lo is None and _batched.supports(
            a, b[:, :, :n], out, precision, None if d is None else d.expand(out.shape)):
        _batched.matmul_3d(a, b[:, :, :n], out, d, alpha=alpha, beta=beta,
                           precision=precision, activation=activation,
                           sms=_persistent.gpu_sms(a.device)[0])
        return
    if p.split_k and _splitk.supports(a, b, out, d2):
        # B whole: past column n a padded copy's zeros, which keep 16-byte runs whole.
        _splitk.matmul_2d(a[0], b[0], out[0], d2, alpha=alpha, beta=beta,
                          precision=precision, activation=activation)
        return
    if p.persistent and _persistent.supports(a[0], b[0], out[0], precision):
        # An unaligned output (4097 columns) is stored without TMA, straight into out.
        _persistent.matmul_2d(a[0], b[0, :, :n], out[0], d2, alpha=alpha, beta=beta,
                              precision=precision, activation=activation,
                              lo=None if lo is None else (lo.a[0], lo.b[0, :, :n]),
                              trigger=trigger, mid_tiles=p.mid_tiles)
        return
    if (precision == "ieee" and lo is None and d is None and alpha == 1 and activation == 0
            and a.shape[0] == 1 and min(out.shape[1], n) >= SIMT_TMA_MIN
            and out.stride(1) % 4 == 0 and _simt_tma.supports(a[0], b[0], out[0])
            and _simt_tma.fills_waves(out.shape[1], n, _persistent.gpu_sms(a.device)[0])):
        _simt_tma.matmul_2d(a[0], b[0], out[0])  # b's columns past n: computed, not stored
        return
    if lo is not None:
        # hi + lo == the operand exactly (a raw operand is the operand): plain tf32x3 on
        # their sum loses nothing.
        a = a if lo.raw == "a" else a + lo.a
        b = b if lo.raw == "b" else b + lo.b
    _kernel.matmul_3d(a, b, out, d, alpha=alpha, beta=beta, precision=precision,
                      activation=activation)
