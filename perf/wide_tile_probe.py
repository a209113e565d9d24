"""Probe: tiles whose width is not a power of two (128x192 as a 128-wide and a 64-wide
accumulator side by side), on a persistent TMA kernel of 16-bit products, beside cuBLAS and
the library in interleaved rounds of CUDA-graph time after the L2 flush. Why: triton's
blocks are powers of two, and cuBLAS runs 192-wide tiles where they cut fewer waves
(1536x1536: 96 tiles of 128x192 fill one wave of 132 SMs, where 144 of 128x128 take two and
72 of 128x256 leave 60 SMs idle).

    python perf/wide_tile_probe.py --case 1536,1536,4096,nt [--case ...]
        [--tiles BM,BN1,BN2,BK,WARPS,STAGES[,ws][,nf] ...] [--rounds 3] [--dtype fp16|bf16]

A tile is BM x (BN1 + BN2): two accumulators over one A tile, B read as two TMA boxes;
BN2 = 0 is the ordinary BM x BN1 tile on the same kernel. ws: warp-specialised K loop;
nf: the K loop apart from the tile loop (flattened, two accumulators' zeroing sits between
their wgmmas and ptxas serialises them: C7515).
GPU (Hopper) only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import triton_gemm  # noqa: E402
from perf import bench  # noqa: E402
from perf.simt_gluon_probe import add_checked, time_and_print  # noqa: E402
from perf.suites import Case  # noqa: E402
from triton_gemm.kernels.common import cdiv  # noqa: E402
from triton_gemm.kernels.persistent import tile_origin  # noqa: E402
from triton_gemm.tolerances import tolerance  # noqa: E402

TILES = ("128,128,0,64,4,5", "128,256,0,64,8,3", "128,128,64,64,8,4,nf",
         "128,128,64,64,8,3,nf", "128,128,64,64,4,4,nf", "128,128,64,64,8,4,ws")
GROUP_M = 8


@triton.jit
def _wide_kernel(a_desc, b1_desc, b2_desc, c1_desc, c2_desc, M, N, K,
                 B_K_MAJOR: tl.constexpr, BM: tl.constexpr, BN1: tl.constexpr,
                 BN2: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                 WARP_SPECIALIZE: tl.constexpr, FLATTEN: tl.constexpr = True):
    """C (M, N) = A (M, K) @ B in BM x (BN1 + BN2) tiles, each program walking tiles pid,
    pid + grid, ...; B (K, N) row-major, or its (N, K) rows with B_K_MAJOR."""
    BN: tl.constexpr = BN1 + BN2
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    for tile in tl.range(tl.program_id(0), num_pid_m * num_pid_n, tl.num_programs(0),
                         flatten=FLATTEN and not WARP_SPECIALIZE, warp_specialize=WARP_SPECIALIZE):
        off_m, off_n = tile_origin(tile, num_pid_m, num_pid_n, BM, BN, GROUP_M)
        acc1 = tl.zeros((BM, BN1), dtype=tl.float32)
        if BN2 > 0:
            acc2 = tl.zeros((BM, BN2), dtype=tl.float32)
        for ki in range(k_tiles):
            k = ki * BK
            a = a_desc.load([off_m, k])
            if B_K_MAJOR:
                b1 = b1_desc.load([off_n, k]).T
            else:
                b1 = b1_desc.load([k, off_n])
            acc1 = tl.dot(a, b1, acc1)
            if BN2 > 0:
                if B_K_MAJOR:
                    b2 = b2_desc.load([off_n + BN1, k]).T
                else:
                    b2 = b2_desc.load([k, off_n + BN1])
                acc2 = tl.dot(a, b2, acc2)
        dtype = c1_desc.dtype
        c1_desc.store([off_m, off_n], acc1.to(dtype))
        if BN2 > 0:
            c2_desc.store([off_m, off_n + BN1], acc2.to(dtype))


def run_tile(a, b, out, bm, bn1, bn2, bk, warps, stages, ws=False, flatten=True, sms=None):
    """out = a @ b on the probe kernel at this tile, in as few programs as take as many
    waves of sms as the tiles need (the library's balanced waves)."""
    m, k = a.shape
    n = b.shape[1]
    k_major = b.stride(0) == 1

    def desc(t, block):
        return TensorDescriptor(t, list(t.shape), [t.stride(0), 1], block)
    bt = b.T if k_major else b
    b1 = desc(bt, [bn1, bk] if k_major else [bk, bn1])
    b2 = desc(bt, [max(bn2, 16), bk] if k_major else [bk, max(bn2, 16)])
    c1 = desc(out, [bm, bn1])
    c2 = desc(out, [bm, max(bn2, 16)])
    sms = sms or torch.cuda.get_device_properties(a.device).multi_processor_count
    tiles = cdiv(m, bm) * cdiv(n, bn1 + bn2)
    grid = cdiv(tiles, cdiv(tiles, sms))
    _wide_kernel[(grid,)](desc(a, [bm, bk]), b1, b2, c1, c2, m, n, k, B_K_MAJOR=k_major,
                          BM=bm, BN1=bn1, BN2=bn2, BK=bk, GROUP_M=GROUP_M,
                          WARP_SPECIALIZE=ws, FLATTEN=flatten, num_warps=warps, num_stages=stages)
    return out


def parse_tile(spec: str):
    """BM,BN1,BN2,BK,WARPS,STAGES then flags: ws (warp-specialised), nf (the K loop not
    flattened into the tile loop)."""
    parts = spec.split(",")
    return tuple(int(v) for v in parts[:6]) + ("ws" in parts[6:], "nf" not in parts[6:])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", required=True, metavar="M,N,K[,LAYOUT]")
    parser.add_argument("--tiles", nargs="*", default=TILES,
                        metavar="BM,BN1,BN2,BK,WARPS,STAGES[,ws][,nf]")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dtype", default="fp16", choices=("fp16", "bf16"))
    args = parser.parse_args(argv)
    dtype = bench.DTYPES[args.dtype]
    for spec in args.case:
        m, n, k, *layout = spec.split(",")
        m, n, k = int(m), int(n), int(k)
        a, b = bench.make_operands(Case(m, n, k, *layout), dtype, "cuda")[0]
        ref = a.double() @ b.double()
        fns = {"cublas": lambda a=a, b=b: a @ b,
               "library": lambda a=a, b=b: triton_gemm.matmul(a, b)}
        triton_gemm.matmul(a, b)
        print(f"{spec}: the library runs {triton_gemm.last_config()}", flush=True)
        for tile_spec in args.tiles:
            tile = parse_tile(tile_spec)
            out = torch.empty(m, n, device="cuda", dtype=dtype)

            def fn(out=out, tile=tile, a=a, b=b):
                return run_tile(a, b, out, *tile)
            add_checked(fns, tile_spec, fn, out, ref, f"{spec} {tile_spec}",
                        tolerance(dtype, None))
        time_and_print(f"graph {spec}", fns, bench.cold_graph_ms, args.rounds, 2 * m * n * k)
    return 0


if __name__ == "__main__":
    sys.exit(main())
