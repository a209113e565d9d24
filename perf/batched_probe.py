"""Probe: batched products (attention's q @ k^T and attn @ V, and plain bmm) on
kernels/batched.py at pinned tiles, beside cuBLAS and the library, in interleaved rounds of
CUDA-graph time after the L2 flush ("library": the library's bmm as it plans; "library
copy": where that is the register-fed kernel, the plan's K-major copy and batched kernel
instead; "register-fed": kernels/register_fed.py's batched launch where the library does
not run it (nt: both operands read from shared memory); "plain": the plain kernel, where
batches ran before).

    python perf/batched_probe.py --case 32,2048,2048,128,nt [--case ...]
        [--tiles BM,BN,BK,WARPS,STAGES,SUB ...] [--rounds 3] [--dtype fp16|bf16|tf32]
        [--d none|bias|rows|matrix|mask]

A case is BATCH,M,N,K[,LAYOUT]: LAYOUT nn (default), nt, tn or tt as the report's (t: the
operand is the transpose of a row-major tensor; nt: k^T, tn: attention's P^T in dV). BK is
at 16 bits (fp32 operands take K steps of as many bytes); SUB 1 stores C in two halves.
--d times baddbmm (cuBLAS: torch.baddbmm) with an input of the operands' dtype (see D_SHAPES):
a bias of N, a bias row per product, a matrix per product, or one (M, N) mask for all;
pinned tiles then run D as the kernel reads it and, where that is not by pointers, by
pointers too ("ptr").
GPU (Hopper) only.
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
from triton_gemm import dispatch  # noqa: E402
from perf import bench  # noqa: E402
from perf.simt_gluon_probe import add_checked, time_and_print  # noqa: E402
from triton_gemm.kernels import batched, register_fed  # noqa: E402
from triton_gemm.kernels.persistent import dram_gbps, gpu_sms  # noqa: E402
from triton_gemm.tolerances import tolerance  # noqa: E402

TILES = ("128,256,64,8,3,1", "128,128,64,8,4,0", "128,128,64,4,4,0", "256,128,64,8,3,1",
         "128,256,64,8,4,1")
# --dtype: operand dtype; fp32 names the precision (ieee and tf32x3 against cuBLAS SGEMM,
# on the library's paths only: the batched kernel runs tf32).
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "tf32": torch.float32,
          "tf32x3": torch.float32, "ieee": torch.float32}

# --d: the shape of baddbmm's input for a (batch, M, N) output.
D_SHAPES = {"bias": lambda b, m, n: (n,), "rows": lambda b, m, n: (b, 1, n),
            "matrix": lambda b, m, n: (b, m, n), "mask": lambda b, m, n: (m, n)}


def operands(spec: str, dtype: torch.dtype) -> tuple:
    """(a, b) of a BATCH,M,N,K[,LAYOUT] case, N(0, 1)."""
    batch, m, n, k, *layout = spec.split(",")
    batch, m, n, k = int(batch), int(m), int(n), int(k)
    layout = layout[0] if layout else "nn"
    if layout[0] == "t":
        a = torch.randn(batch, k, m, device="cuda", dtype=dtype).transpose(1, 2)
    else:
        a = torch.randn(batch, m, k, device="cuda", dtype=dtype)
    if layout[1] == "t":
        b = torch.randn(batch, n, k, device="cuda", dtype=dtype).transpose(1, 2)
    else:
        b = torch.randn(batch, k, n, device="cuda", dtype=dtype)
    return a, b


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", required=True, metavar="B,M,N,K[,LAYOUT]")
    parser.add_argument("--tiles", nargs="*", default=TILES, metavar="BM,BN,BK,W,S,SUB")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dtype", default="fp16", choices=tuple(DTYPES))
    parser.add_argument("--d", default="none", choices=("none", *D_SHAPES))
    args = parser.parse_args(argv)
    dtype = DTYPES[args.dtype]
    precision = args.dtype if dtype == torch.float32 else None
    torch.backends.cuda.matmul.allow_tf32 = args.dtype == "tf32"
    tiles = args.tiles if args.dtype in ("fp16", "bf16", "tf32") else []
    sms = gpu_sms(torch.device("cuda"))[0]
    for spec in args.case:
        a, b = operands(spec, dtype)
        ref = torch.bmm(a.double(), b.double())
        d = None
        if args.d != "none":
            d = torch.randn(D_SHAPES[args.d](*ref.shape), device="cuda", dtype=dtype)
            ref += d.double()
        d_full = None if d is None else d.expand(ref.shape)
        bound = tolerance(dtype, precision)
        fns = {"cublas": (lambda a=a, b=b: torch.bmm(a, b)) if d is None
               else (lambda a=a, b=b, d=d: torch.baddbmm(d, a, b))}
        # The library's call and the plain kernel (where batches ran before
        # kernels/batched.py), each timed only once it matches the reference.
        out = torch.empty(ref.shape, device="cuda", dtype=dtype)
        add_checked(fns, "library", (lambda a=a, b=b, out=out: triton_gemm.bmm(
            a, b, precision=precision, out=out)) if d is None else (
            lambda a=a, b=b, d=d, out=out: triton_gemm.baddbmm(d, a, b, precision=precision,
                                                                out=out)),
            out, ref, f"{spec} library", bound)
        library_config = triton_gemm.last_config()
        print(f"{spec}: the library runs {library_config}", flush=True)
        resolved = precision or "half"  # dispatch's name for the operands' precision
        planned = dispatch.plan(a, b, resolved, sms, dram_gbps=dram_gbps(a.device))
        if planned.register_fed:  # beside it, the plan's K-major copy (batched kernel)
            out = torch.empty(ref.shape, device="cuda", dtype=dtype)
            add_checked(fns, "library copy", lambda a=a, b=b, out=out, d=d_full: dispatch.run(
                a, b, out, d, beta=1.0, precision=resolved,
                force=planned._replace(register_fed=False)), out, ref, f"{spec} library copy",
                bound)
        out = torch.empty(ref.shape, device="cuda", dtype=dtype)
        if (d is None and register_fed.supports_batched(a, b, out)
                and not library_config.startswith(("rfb", "gsb"))):
            # kernels/register_fed.py's batched launch where the library does not run it
            add_checked(fns, "register-fed", lambda a=a, b=b, out=out: register_fed.bmm(
                a, b, out, sms), out, ref, f"{spec} register-fed", bound)
            out = torch.empty(ref.shape, device="cuda", dtype=dtype)
        add_checked(fns, "plain", lambda a=a, b=b, out=out, d=d_full: dispatch.run(
            a, b, out, d, beta=1.0, precision=resolved, force=dispatch.PLAIN),
            out, ref, f"{spec} plain", bound)
        for tile_spec in tiles:
            tile = tuple(int(v) for v in tile_spec.split(","))
            tile = (*tile[:5], bool(tile[5]))
            out = torch.empty(ref.shape, device="cuda", dtype=dtype)

            modes = {"": None}
            if d_full is not None and batched._d_mode(True, d_full) != batched.D_POINTERS:
                modes[" ptr"] = batched.D_POINTERS  # D by pointers beside its own mode
            for suffix, mode in modes.items():
                def fn(out=out, tile=tile, a=a, b=b, d=d_full, mode=mode):
                    return batched.matmul_3d(a, b, out, d, beta=1.0, precision="tf32",
                                             sms=sms, tile=tile, d_mode=mode)
                add_checked(fns, tile_spec + suffix, fn, out, ref,
                            f"{spec} {tile_spec}{suffix}", bound)
        batch_, m, k = a.shape
        time_and_print(f"graph {spec}", fns, bench.cold_graph_ms, args.rounds,
                       2 * batch_ * m * b.shape[2] * k)
    return 0


if __name__ == "__main__":
    sys.exit(main())
