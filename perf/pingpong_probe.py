"""Probe: kernels/pingpong.py (two wgmma warpgroups taking turns, each tile's epilogue
behind the other's K loop) beside cuBLAS and the library, fp16 / bf16, in interleaved
rounds of CUDA-graph time after the L2 flush; each kernel timed only once it matches
float64 on a NaN-poisoned output ("library": the library as it plans; "no ping-pong": its
plan with kernels/pingpong.py left out, where it plans it).

    python perf/pingpong_probe.py --case 32,1000,1000,1000,nn [--case ...]
        [--tiles BM,BN,BK,STAGES,CHUNKS ...] [--dtype fp16|bf16|tf32] [--rounds 3] [--bias]

A case is BATCH,M,N,K[,LAYOUT]: BATCH 1 runs 2-D operands (mm), more a batch (bmm); LAYOUT
nn (default), nt, tn or tt as the report's (t: the operand is the transpose of a
row-major tensor). --bias adds a bias of N in the epilogue (cuBLAS: torch.addmm /
torch.baddbmm; the library's addmm / baddbmm). GPU (Hopper) only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import triton_gemm  # noqa: E402
from perf import bench  # noqa: E402
from perf.batched_probe import operands  # noqa: E402
from perf.simt_gluon_probe import add_checked, time_and_print  # noqa: E402
from triton_gemm import dispatch  # noqa: E402
from triton_gemm.kernels import pingpong  # noqa: E402
from triton_gemm.kernels.persistent import dram_gbps, gpu_sms  # noqa: E402
from triton_gemm.tolerances import tolerance  # noqa: E402

# --dtype: operand dtype; tf32 runs fp32 operands at tf32 (cuBLAS with TF32 on).
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "tf32": torch.float32}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", required=True, metavar="B,M,N,K[,LAYOUT]")
    parser.add_argument("--tiles", nargs="*", default=None, metavar="BM,BN,BK,STAGES,CHUNKS",
                        help="default: pingpong.tile_for the dtype's")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dtype", default="fp16", choices=tuple(DTYPES))
    parser.add_argument("--bias", action="store_true")
    args = parser.parse_args(argv)
    dtype = DTYPES[args.dtype]
    precision = "tf32" if dtype == torch.float32 else "half"  # dispatch's name for it
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    tiles = args.tiles or [",".join(map(str, pingpong.tile_for(dtype)))]
    sms = gpu_sms(torch.device("cuda"))[0]
    for spec in args.case:
        a, b = operands(spec, dtype)
        if a.shape[0] == 1:  # 2-D: mm
            a, b = a[0], b[0]
        ref = a.double() @ b.double()
        bound = tolerance(dtype, "tf32" if precision == "tf32" else None)
        bias = torch.randn(ref.shape[-1], device="cuda").to(dtype) if args.bias else None
        out = torch.empty(ref.shape, device="cuda", dtype=dtype)
        if bias is None:
            fns = {"cublas": lambda a=a, b=b: a @ b}
            add_checked(fns, "library", lambda a=a, b=b, out=out: triton_gemm.matmul(
                a, b, out=out, precision=precision if precision == "tf32" else None),
                out, ref, f"{spec} library", bound)
        else:
            ref += bias.double()
            torch_fn, library_fn = ((torch.addmm, triton_gemm.addmm) if a.dim() == 2
                                    else (torch.baddbmm, triton_gemm.baddbmm))
            fns = {"cublas": lambda a=a, b=b, f=torch_fn, d=bias: f(d, a, b)}
            add_checked(fns, "library", lambda a=a, b=b, out=out, f=library_fn, d=bias: f(
                d, a, b, out=out, precision=precision if precision == "tf32" else None),
                out, ref, f"{spec} library", bound)
        print(f"{spec}: the library runs {triton_gemm.last_config()}", flush=True)
        a3, b3 = (a, b) if a.dim() == 3 else (a[None], b[None])
        planned = dispatch.plan(a3, b3, precision, sms,
                                dram_gbps=dram_gbps(a.device))
        if planned.pingpong:
            out = torch.empty(ref.shape, device="cuda", dtype=dtype)
            add_checked(fns, "no ping-pong", lambda a=a3, b=b3, out=out, d=bias: dispatch.run(
                a, b, out.view(a.shape[0], *out.shape[-2:]), d, beta=1.0, precision=precision,
                force=planned._replace(pingpong=False)), out, ref, f"{spec} no ping-pong",
                bound)
            print(f"{spec}: without ping-pong it runs {triton_gemm.last_config()}", flush=True)
        for tile_spec in tiles:
            tile = tuple(int(v) for v in tile_spec.split(","))
            out = torch.empty(ref.shape, device="cuda", dtype=dtype)
            if not pingpong.supports(a, b, out):
                print(f"{spec}: pingpong does not take these operands")
                break
            add_checked(fns, f"pp {tile_spec}",
                        lambda a=a, b=b, out=out, tile=tile, d=bias: pingpong.matmul(
                            a, b, out, sms, tile, None if d is None else d.expand(out.shape),
                            beta=1.0), out, ref, f"{spec} pp {tile_spec}", bound)
        flops = 2 * ref.numel() * a.shape[-1]
        time_and_print(f"graph {spec}", fns, bench.cold_graph_ms, args.rounds, flops)
    return 0


if __name__ == "__main__":
    sys.exit(main())
