"""Error of the fp32 precisions on data of both signs and of one sign, against cuBLAS SGEMM on
the same inputs: the measurements behind the split kernel's flush interval
(kernels/persistent.hi_flush_k) and the README's accuracy table. GPU only.

    python perf/accuracy.py                      # every path, N(0,1) and U(0,1) data
    python perf/accuracy.py --flush 64,128 --time  # the split kernel at other intervals
    python perf/accuracy.py --hi staged,raw --time  # both hi halves staged, or one raw

Relative Frobenius error against the float64 product of the same inputs. On N(0,1) data
rounding errors cancel; on U(0,1) data every product is positive, so a rounding that always
goes one way (the tensor core truncates) adds up instead.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from perf import bench  # noqa: E402
from perf.suites import Case  # noqa: E402
import triton_gemm  # noqa: E402
from triton_gemm import dispatch, launch_cache  # noqa: E402
from triton_gemm.kernels import persistent  # noqa: E402
from triton_gemm.tolerances import rel_error  # noqa: E402

# One shape per dispatch path of tf32x3 (tiled, split-K, persistent from tf32 halves,
# padded) and the sizes where cuBLAS SGEMM changes kernels.
PATH_CASES = (Case(512, 512, 512), Case(1024, 1024, 1024), Case(2048, 2048, 2048),
              Case(4096, 4096, 4096), Case(1000, 1000, 1000), Case(4097, 4097, 4097),
              Case(127, 8191, 509), Case(16, 8192, 8192, "nt"), Case(128, 4096, 4096, "nt"),
              Case(128, 128, 65536), Case(256, 256, 32768), Case(2048, 11008, 4096, "nt"))
# Products the split kernel runs (3 and more 128x128 tiles per SM).
SPLIT_CASES = (Case(2560, 2560, 2048), Case(3072, 3072, 4096), Case(4096, 4096, 4096),
               Case(3072, 3072, 8192), Case(6144, 6144, 8192), Case(2048, 11008, 4096, "nt"))
TIME_CASES = (Case(4096, 4096, 4096), Case(8192, 8192, 8192))
DATA = {"N(0,1)": torch.randn, "U(0,1)": torch.rand}


def errors(a, b, precisions) -> dict:
    """Relative error of cuBLAS SGEMM and of triton_gemm at each precision."""
    ref = a.double() @ b.double()
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        out = {"cublas": rel_error(a @ b, ref)}
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before
    for precision in precisions:
        out[precision] = rel_error(triton_gemm.matmul(a, b, precision=precision), ref)
        out[precision + " config"] = triton_gemm.last_config()
    return out


def set_flush(interval) -> None:
    """Run the split kernel with its hi accumulator flushed every `interval` elements of K
    (an int), or by the library's rule (a function of K)."""
    persistent.hi_flush_k = interval if callable(interval) else (lambda k: interval)
    launch_cache.clear()  # replayed calls would keep the old interval


_RAW_HI_CAPABILITIES = dispatch.RAW_HI_CAPABILITIES


def set_raw_hi(raw: bool) -> None:
    """Let the split kernel read one operand as given where the library would
    (dispatch.raw_side), or stage both hi halves."""
    dispatch.RAW_HI_CAPABILITIES = _RAW_HI_CAPABILITIES if raw else ()
    launch_cache.clear()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="perf/accuracy.py")
    parser.add_argument("--flush", default=None, metavar="K[,K...]",
                        help="compare the split kernel at these flush intervals instead")
    parser.add_argument("--hi", default=None, metavar="staged,raw",
                        help="compare the split kernel with both hi halves staged and with "
                             "one operand read as given (dispatch.raw_side) instead")
    parser.add_argument("--time", action="store_true",
                        help="with --flush or --hi: also time tf32x3 at 4096^3 and 8192^3 "
                             "in each variant")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("perf/accuracy.py compares with cuBLAS on a CUDA GPU; none found")
    torch.manual_seed(0)
    print(torch.cuda.get_device_name(), "relative error (cuBLAS SGEMM on the same inputs)")
    if args.flush is None and args.hi is None:
        for case in PATH_CASES:
            for data, gen in DATA.items():
                e = errors(*bench.make_operands(case, torch.float32, "cuda", gen=gen)[0],
                           ("tf32x3", "ieee"))
                verdict = "<=" if e["tf32x3"] <= e["cublas"] else "> "
                print(f"{case.label:18s} {data}  cuBLAS {e['cublas']:.2e}  tf32x3 "
                      f"{e['tf32x3']:.2e} {verdict} cuBLAS ({e['tf32x3 config']})  ieee "
                      f"{e['ieee']:.2e}", flush=True)
        return
    if args.flush is not None:
        variants = [(f"{k} K", lambda k=int(k): set_flush(k)) for k in args.flush.split(",")]
    else:
        variants = [(hi, lambda raw=hi == "raw": set_raw_hi(raw)) for hi in args.hi.split(",")]
    default = persistent.hi_flush_k
    try:
        for case in SPLIT_CASES:
            for data, gen in DATA.items():
                a, b = bench.make_operands(case, torch.float32, "cuda", gen=gen)[0]
                row = []
                for label, set_variant in variants:
                    set_variant()
                    e = errors(a, b, ("tf32x3",))
                    row.append(f"{label} {e['tf32x3']:.2e}")
                print(f"{case.label:18s} {data}  cuBLAS {e['cublas']:.2e}  " + "  ".join(row),
                      flush=True)
        for case in TIME_CASES if args.time else ():
            sets = bench.make_operands(case, torch.float32, "cuda", 50 << 20)
            for round_ in range(2):
                with bench.cublas_precision("ieee"):
                    row = [f"cuBLAS SGEMM {bench.time_ms(lambda a, b: a @ b, sets, True):.3f}"]
                for label, set_variant in variants:
                    set_variant()
                    ms = bench.time_ms(lambda a, b: triton_gemm.matmul(a, b, precision="tf32x3"),
                                       sets, True)
                    row.append(f"{label} {ms:.3f}")
                print(f"{case.label} ms, round {round_ + 1}: " + "  ".join(row), flush=True)
    finally:
        set_flush(default)
        set_raw_hi(True)


if __name__ == "__main__":
    main()
