"""K-sliced TMA GEMM for products of few output tiles over a long K (Hopper): fp16, bf16,
and fp32 operands at tf32 and 3xTF32.

Each program takes one 128x128 tile and one slice of K: its operands by host TMA
descriptors (any of the four layouts, as kernels/persistent.py reads them), its fp32 partial
into a (slices, M, N) workspace; splitk.reduce then sums the slices in one fixed order
(bitwise reproducible) with the epilogue. One wave: tiles x slices at most the SMs.

Why: a product of fewer tiles than SMs leaves SMs idle on the persistent kernel (1024x1024
is 64 tiles of 128x128 on the H100's 132 SMs), and the plain kernel, which tunes to smaller
tiles to fill them, re-reads its operands from L2 more often. perf/sliced_probe.py, H100,
fp16 nn, CUDA-graph time after the L2 flush, three interleaved rounds, us, the library then
(the plain kernel) / 128x128x64 4 warps 5 stages in 2 slices / (cuBLAS): 1024x1024x8192
41.2 / 32.5 (29.1; the partials alone 29.3: the reduce costs ~3 us); 4096x256x8192 51.6 /
39.6 (35.5); 768x768x4096 22.5 / 20.2, in 3 slices 18.7 (15.0). Not in slices shallower
than MIN_SLICE_K: 1024x1024x2048 in 2 slices of 1024 15.3 / 17.1 (12.7). 128x256 and
256x128 tiles (8 warps, 3 stages) ran 1024x1024x8192 in 2 slices at 50.5 and 53.0; 128x128
with BK 128 (8 warps, 3 stages) 35.3; 4 stages 32.8, 3 stages 40.9; 8 warps as 4; 128x64 and
64x128 in 2 slices 45.7 and 41.5 (forty-fourth session; those runs stored the partials by
TMA, the kept kernel by pointers, as fast: 32.0 against cuBLAS 32.3 in a later run).
On sm_90a (offline, tests) the loop is HGMMA.64x128x16, 154-160 registers, no spills, 164 KB
of shared memory. fp32 operands (K-major both: wgmma reads 32-bit operands no other way)
take K steps of 32, 3xTF32 on WARPS_3XTF32. perf/report.py's mid suite (H100, eager,
against cuBLAS tf32 / SGEMM, the plain kernel before): 768x768x4096 tf32 0.66x -> 0.99x,
tf32x3 0.81x -> 1.33x; 1024x1024x8192 0.67x -> 0.94x, 1.28x -> 1.53x; 4096x256x8192 0.72x
-> 0.89x, 1.29x -> 1.55x.
Not kept: the tile's last slice to arrive (an atomic count) summing the partials and
storing C itself, no reduce launch: slower in the same run (us, fused / reduce, cuBLAS):
1024x1024x8192 33.7 / 32.0 (32.3), 768x768x4096 in 3 slices 21.3 / 18.0 (15.3),
4096x256x8192 39.1 / 38.1 (36.5): one finisher an SM reads every slice of its tile where
the reduce spreads that over all SMs. Nor past one wave (same probe, us, library / in 1 /
2 / 3 / 4 slices (cuBLAS)): 1536x1536x4096 (144 tiles; the persistent kernel's 72 of
128x256) 45.4 / 54.0 / 51.6 / 56.5 / 62.6 (30.5), 1536x1536x8192 81.7 / 95.6 / 85.0 / 86.5
/ 91.4 (57.7), 1280x1280x4096 (100 tiles) 27.2 / 31.0 / 35.6 / 42.4 / 45.6 (24.8),
2048x2048x4096 49.8 / 61.7 / 76.7 / 92.5 / 104.9 (49.2): a program a tile and slice loses
the persistent kernel's overlap of one tile's epilogue with the next tile's loads. Nor for
the mid-M rows against a large K-major weight (fp16 nt, us, the library's mid tiles /
the best sliced (cuBLAS)): 128x4096x4096 18.3 / 21.3 (128x64 in 2; 17.8), 128x4096x11008
39.6 / 41.2 (39.5), 256x4096x4096 21.7 / 24.0 (21.7); 128x8192x28672 172.6 / 170.0 (178.8)
is within the runs' noise.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_wait

from .common import (INTERPRETER, cdiv, dependent_meta, dot_precision, hopper, record,
                     run_kernel, workspace)
from .persistent import (_a_m_major, _b_k_major, _tma_ok, load_step, set_block_shapes,
                         tile_origin, tma_descriptors)
from .splitk import reduce

# The tile (module docstring): BM, BN, BK (16-bit operands; fp32 ones take K steps of as
# many bytes, BK / 2), warps, stages; GROUP_M as configs.GROUP_M.
BM, BN, BK, WARPS, STAGES, GROUP_M = 128, 128, 64, 4, 5, 8
# 3xTF32 splits each operand tile into two in registers: on 4 warps the tile spilled (255
# registers, 1292 bytes; sm_90a, ptxas -v), on 8 it takes 182 and none (tests).
WARPS_3XTF32 = 8
# 3xTF32's K elements between IEEE adds of the tensor core's truncating accumulator (0: none;
# 128 as kernels/persistent.hi_flush_k). perf/sliced_probe.py --precision tf32x3, H100,
# graph us and relative error, flush none / 128 / 64 (cuBLAS SGEMM's error): N(0,1)
# 768x768x4096 in 3 slices 78.2 / 82.1 / 83.0 us, 1.8e-7 / 1.6e-7 / 1.6e-7 (4.4e-7), in 2
# slices 2.0e-7 / 1.6e-7 / 1.7e-7; 1024x1024x8192 in 2 slices 212.1 / 221.1 / 225.7 us,
# 2.4e-7 / 1.8e-7 / 2.0e-7 (8.1e-7). U(0,1) (every product positive, the truncations one
# way): 768x768x4096 in 2 slices 1.5e-7 / 1.3e-7 / 1.4e-7 (1.5e-7), 1024x1024x8192 1.6e-7 /
# 1.4e-7 / 1.5e-7 (3.0e-7). Unflushed matched SGEMM at 2048-deep slices; deeper ones add more.
FLUSH_K = 128
# The shallowest slice worth a program (module docstring: slices of 1024 lost, of 1366 won).
MIN_SLICE_K = 1280


def slices(m: int, n: int, k: int, sms: int) -> int:
    """The K slices an (m, n, k) product runs in: as many as one wave of sms programs holds,
    none shallower than MIN_SLICE_K; 1 (not worth slicing, or an empty output) or more."""
    tiles = cdiv(m, BM) * cdiv(n, BN)
    return max(min(sms // tiles, k // MIN_SLICE_K), 1) if tiles else 1


@triton.jit
def _sliced_kernel(a_desc, b_desc, part_ptr, M, N, K_SLICE_STEPS,
                   PRECISION: tl.constexpr, A_M_MAJOR: tl.constexpr,
                   B_K_MAJOR: tl.constexpr, UPCAST: tl.constexpr, BM: tl.constexpr,
                   BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                   FLUSH_STEPS: tl.constexpr, DEPENDENT: tl.constexpr):
    """W[s] tile = A[:, slice s] @ B[slice s, :] for program (s, tile) of a (slices, M, N)
    fp32 workspace W at part_ptr: K_SLICE_STEPS steps a slice (past K, TMA reads zeros)."""
    if DEPENDENT:
        gdc_wait()  # launched with launch_pdl: the kernel before may still be draining
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    tiles = num_pid_m * num_pid_n
    pid = tl.program_id(0)
    s = pid // tiles
    off_m, off_n = tile_origin(pid % tiles, num_pid_m, num_pid_n, BM, BN, GROUP_M)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    if FLUSH_STEPS == 0:
        for ki in range(K_SLICE_STEPS):
            a, b = load_step(a_desc, b_desc, off_m, off_n, s * K_SLICE_STEPS + ki, A_M_MAJOR,
                             B_K_MAJOR, UPCAST, BK)
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
    else:
        # The tensor core truncates every add into its accumulator: a run of FLUSH_STEPS
        # steps, then an IEEE add into acc (FLUSH_STEPS).
        run = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(K_SLICE_STEPS):
            a, b = load_step(a_desc, b_desc, off_m, off_n, s * K_SLICE_STEPS + ki, A_M_MAJOR,
                             B_K_MAJOR, UPCAST, BK)
            run = tl.dot(a, b, run, input_precision=PRECISION)
            if ki % FLUSH_STEPS == FLUSH_STEPS - 1:
                acc += run
                run = tl.zeros((BM, BN), dtype=tl.float32)
        acc += run
    rows = off_m + tl.arange(0, BM)
    cols = off_n + tl.arange(0, BN)
    # int32 offsets: slices x M x N is at most a wave of 128x128 tiles (slices()).
    tl.store(part_ptr + s * M * N + rows[:, None] * N + cols[None, :], acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


def _operand_ok(t: torch.Tensor) -> bool:
    """t (R, C) has a unit stride and a TMA-aligned other stride and base address."""
    if t.stride(1) == 1:
        return _tma_ok(t, t.stride(0))
    return t.stride(0) == 1 and _tma_ok(t, t.stride(1))


def supports(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor,
             precision: str = "tf32") -> bool:
    """Whether a (M, K) and b (K, N) can run here into out (M, N, any strides) on Hopper
    (or the interpreter): fp16 or bf16, each contiguous along either dimension; or fp32 at
    precision "tf32" or "tf32x3", both K-major (wgmma reads 32-bit operands only so); rows
    and base 16-byte aligned."""
    if a.dim() != 2 or b.dim() != 2 or out.dim() != 2 or min(a.shape + b.shape) == 0:
        return False
    if b.dtype != a.dtype or not (INTERPRETER or hopper(a.device)):
        return False
    if a.dtype == torch.float32:
        return (precision in ("tf32", "tf32x3") and a.stride(1) == 1 and b.stride(0) == 1
                and _tma_ok(a, a.stride(0)) and _tma_ok(b.T, b.stride(1)))
    return a.dtype in (torch.float16, torch.bfloat16) and _operand_ok(a) and _operand_ok(b)


def matmul_2d(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor,
              d: torch.Tensor | None = None, *, alpha: float = 1.0, beta: float = 0.0,
              activation: int = 0, precision: str = "tf32", sms: int) -> torch.Tensor:
    """out = act(alpha * a @ b + beta * d) for operands supports() accepts (precision:
    fp32 operands' "tf32" or "tf32x3"), d None or broadcastable to out, in slices(...,
    sms) K slices summed by splitk.reduce. Returns out."""
    m, k = a.shape
    n = b.shape[1]
    bk = BK * 2 // a.element_size()  # a K step of as many bytes for fp32 operands
    three = a.dtype == torch.float32 and precision == "tf32x3"
    warps = WARPS_3XTF32 if three else WARPS
    split = slices(m, n, k, sms)
    steps = cdiv(cdiv(k, split), bk)
    split = cdiv(k, steps * bk)  # every slice non-empty
    a_m_major, b_k_major = _a_m_major(a), _b_k_major(b)
    # A and B as the persistent kernel reads them (an M-major A, a K-major B transposed).
    descs = tma_descriptors(a, b, out, c_tma=False)
    set_block_shapes(descs, {"BM": BM, "BN": BN, "BK": bk, "A_M_MAJOR": a_m_major,
                             "B_K_MAJOR": b_k_major})
    a_desc, b_desc = descs[:2]
    work = workspace((split, m, n), torch.float32, a.device)
    run_kernel(_sliced_kernel, (cdiv(m, BM) * cdiv(n, BN) * split,),
               (a_desc, b_desc, work, m, n, steps),
               {"PRECISION": dot_precision(a.dtype, precision), "A_M_MAJOR": a_m_major,
                "B_K_MAJOR": b_k_major, "UPCAST": INTERPRETER and a.dtype == torch.bfloat16,
                "BM": BM, "BN": BN, "BK": bk, "GROUP_M": GROUP_M,
                "FLUSH_STEPS": FLUSH_K // bk if three else 0, "num_warps": warps,
                "num_stages": STAGES, **dependent_meta(a.device)})
    reduce(work, split, out, d, alpha=alpha, beta=beta, activation=activation)
    record(triton.Config({"SLICED": True, "BM": BM, "BN": BN, "BK": bk, "SPLIT": split},
                         num_warps=warps, num_stages=STAGES), "sliced")
    return out
