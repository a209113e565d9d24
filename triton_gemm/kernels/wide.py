"""Persistent TMA GEMM in 128x192 tiles for 16-bit products on Hopper (fp16, bf16): a tile
width that is not a power of two, as two accumulators side by side (128 and 64 columns) over
one A tile, B read as two TMA boxes a K step.

Why: triton's blocks are powers of two, and the wave count of a mid-size product depends on
the tile. 1536x1536 is 144 tiles of 128x128 (a wave of 132 SMs and 12 more) or 72 of
128x256 (60 SMs idle); 128x192 makes 96, one wave. cuBLAS runs 192x96 tiles there (128
tiles; nvjet_sm90_hsh_192x96_64x5_1x2, perf/cublas_kernels.py), a height triton's warpgroups
of 64 rows cannot split. perf/wide_tile_probe.py, H100, fp16, CUDA-graph time after the L2
flush, three interleaved rounds, us, the library's persistent kernel (p_128x256x64_sub_ws) /
this kernel (cuBLAS): 1536x1536x4096 45.6 / 36.7 (30.8), nt 45.2 / 36.9 (34.8),
1536x1536x8192 82.0 / 65.7 (58.0), 1664x1536x4096 39.5 / 37.5 (37.6), 1536x1536x2048 23.7 /
22.4 (18.7). Where it fills waves no better than the power-of-two tiles it loses (the same
tile in the probe's kernel): 1536x4608x4096 89.5 / 104.0 (91.6), 1024x1536x4096 27.5 / 35.6
(26.3), 2048x4096x4096 nt 94.2 / 109.4 (93.6). dispatch.WIDE_MIN_GAIN decides.

The tile: 4 warps (one warpgroup issuing both accumulators' wgmmas), 4 stages. Same probe,
1536x1536x4096 nn, us: 8 warps 42.0, 8 warps in 3 stages 43.1, 4 warps in 3 stages 41.9,
BK 32 in 6 stages 45.1, 8 warps warp-specialised 42.1 (4 warps warp-specialised does not
compile: triton 3.6's NVGPUWarpSpecialization pass fails). The K loop is not flattened into
the tile loop (flatten=False): flattened, the two accumulators' zeroing at a tile's start
sits between their wgmmas and ptxas serialises them (C7515; 56.3 us on 8 warps, 76.2 on 4).
Each K step issues the left part's wgmmas before loading the right part's B: loaded first,
both parts' barriers were waited on before any wgmma (41.5 against 37.0 us at nt, 39.6
against 37.2 at nn; perf/sass_audit-style offline builds: same registers, 218, no spills).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_wait

from .common import (INTERPRETER, cdiv, dependent_meta, epilogue_input, hopper, needs_int64,
                     record, run_kernel)
from .persistent import (_a_m_major, _b_k_major, _d_row, _tma_ok, a_planes, load_step,
                         programs, set_block_shapes, store_tile,
                         supports as persistent_supports, tile_origin, tma_descriptors)

# The tile: BM x (BN + BN / 2), BK deep (module docstring); GROUP_M as configs.GROUP_M.
BM, BN, BK, WARPS, STAGES, GROUP_M = 128, 128, 64, 4, 4, 8
WIDTH = BN + BN // 2


@triton.jit
def _wide_kernel(a_desc, b_desc, c_desc, bh_desc, ch_desc, c_ptr, d_ptr,
                 M, N, K, stride_cm, stride_dm, stride_dn, alpha, beta,
                 HAS_D: tl.constexpr, D_ROW: tl.constexpr, A_M_MAJOR: tl.constexpr,
                 B_K_MAJOR: tl.constexpr, UPCAST: tl.constexpr, ACTIVATION: tl.constexpr,
                 C_TMA: tl.constexpr, INT64: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                 BK: tl.constexpr, GROUP_M: tl.constexpr, DEPENDENT: tl.constexpr):
    """C (M, N) = act(alpha * A @ B + beta * D) in BM x (BN + BN / 2) tiles, each program
    walking tiles pid, pid + grid, ... in grouped order. A, B and C as
    persistent._persistent_kernel takes them (host descriptors: A (M, K) or its (K, M) rows
    with A_M_MAJOR, B (K, N) or its (N, K) rows with B_K_MAJOR, C by TMA with C_TMA else by
    pointers; INT64 as persistent.store_tile); bh_desc and ch_desc: B and C with blocks BN / 2 wide (the tile's right part)."""
    if DEPENDENT:
        gdc_wait()  # launched with launch_pdl: the kernel before may still be draining
    BH: tl.constexpr = BN // 2
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN + BH)
    k_tiles = tl.cdiv(K, BK)
    for tile in tl.range(tl.program_id(0), num_pid_m * num_pid_n, tl.num_programs(0),
                         flatten=False):
        off_m, off_n = tile_origin(tile, num_pid_m, num_pid_n, BM, BN + BH, GROUP_M)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        acc_h = tl.zeros((BM, BH), dtype=tl.float32)
        for ki in range(k_tiles):
            a, b = load_step(a_desc, b_desc, off_m, off_n, ki, A_M_MAJOR, B_K_MAJOR, UPCAST,
                             BK)
            # The left part's wgmmas go before the right part's B is loaded: they then wait
            # on A's and B's barrier only (module docstring: 37.0 against 41.5 us).
            acc = tl.dot(a, b, acc)
            if B_K_MAJOR:
                b_h = bh_desc.load([off_n + BN, ki * BK]).T
            else:
                b_h = bh_desc.load([ki * BK, off_n + BN])
            if UPCAST:
                b_h = b_h.to(tl.float32)
            acc_h = tl.dot(a, b_h, acc_h)
        store_tile(acc, c_ptr, c_desc, d_ptr, off_m, off_n, M, N, stride_cm, stride_dm,
                   stride_dn, alpha, beta, HAS_D, D_ROW, ACTIVATION, C_TMA, False, BM, BN, 0, 1,
                   INT64)
        store_tile(acc_h, c_ptr, ch_desc, d_ptr, off_m, off_n + BN, M, N, stride_cm,
                   stride_dm, stride_dn, alpha, beta, HAS_D, D_ROW, ACTIVATION, C_TMA, False,
                   BM, BH, 0, 1, INT64)


def tiles(m: int, n: int) -> int:
    """The 128x192 tiles of an m x n output."""
    return cdiv(m, BM) * cdiv(n, WIDTH)


def supports(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor,
             d: torch.Tensor | None = None) -> bool:
    """Whether 2-D a (M, K), b (K, N) and out (M, N) can run here with epilogue input d
    (None, or broadcast to out: a bias row at most): 16-bit, Hopper (or the interpreter),
    what the persistent kernel reads by TMA, and A's rows on 32-byte sectors
    (persistent.a_planes: rows 16 bytes off a sector read faster as planes there). A matrix
    D stays on the persistent kernel: its tile of pointers spilled 936 bytes here (sm_90a,
    ptxas -v, 255 registers on 4 warps; the kernel computes it right all the same)."""
    if a.dtype not in (torch.float16, torch.bfloat16) or b.dtype != a.dtype:
        return False
    if not (INTERPRETER or hopper(a.device)) or not persistent_supports(a, b, out, "tf32"):
        return False
    if d is not None and d.dim() == 2 and d.stride(0) != 0:
        return False
    return a_planes(a, b=b) == 1


def matmul_2d(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor,
              d: torch.Tensor | None = None, *, alpha: float = 1.0, beta: float = 0.0,
              activation: int = 0, sms: int) -> torch.Tensor:
    """out = act(alpha * a @ b + beta * d) for operands supports() accepts, d None or
    broadcastable to out by strides, in as few programs as take as many waves of sms
    programs as the tiles need (persistent.programs). Returns out."""
    m, k = a.shape
    n = b.shape[1]
    if out.numel() == 0:
        return out
    has_d, d = epilogue_input(d, beta, out)
    c_tma = _tma_ok(out, out.stride(0))
    a_m_major, b_k_major = _a_m_major(a), _b_k_major(b)
    descs = tma_descriptors(a, b, out, c_tma, half_tail=True)
    set_block_shapes(descs, {"BM": BM, "BN": BN, "BK": BK, "A_M_MAJOR": a_m_major,
                             "B_K_MAJOR": b_k_major, "EPILOGUE_SUBTILE": False,
                             "HALF_TAIL": True})
    a_desc, b_desc, c_desc, _, _, bh_desc, ch_desc = descs
    grid = programs(BM, WIDTH, m, n, sms, half_tail=False)
    run_kernel(_wide_kernel, (grid,),
               (a_desc, b_desc, c_desc, bh_desc, ch_desc, out, d, m, n, k, out.stride(0),
                d.stride(0), d.stride(1), float(alpha), float(beta)),
               {"HAS_D": has_d, "D_ROW": _d_row(has_d, d), "A_M_MAJOR": a_m_major,
                "B_K_MAJOR": b_k_major, "UPCAST": INTERPRETER and a.dtype == torch.bfloat16,
                "ACTIVATION": activation, "C_TMA": c_tma, "INT64": needs_int64(out, d),
                "BM": BM, "BN": BN, "BK": BK,
                "GROUP_M": GROUP_M, "num_warps": WARPS, "num_stages": STAGES,
                **dependent_meta(a.device)})
    record(triton.Config({"WIDE": True, "BM": BM, "BN": WIDTH, "BK": BK},
                         num_warps=WARPS, num_stages=STAGES), "wide")
    return out
