"""Every dispatch path of a shape, timed side by side with cuBLAS: the measurements behind
the dispatcher's rules (triton_gemm/dispatch.py).

    python perf/plans.py --case 8192,50257,768,nt --precision bf16
    python perf/plans.py --case 3000,3000,3000,pad --precision tf32,tf32x3,fp16

Paths: auto (what the library picks), plain (operands as given), padded (zero-padded copies;
fp32 tensor-core operands K-major), padded_persistent (the same on the persistent kernel),
split_k and split_k_padded (the split-K kernel as given and on padded copies, long K),
direct (the persistent kernel on unpadded operands, where TMA takes their rows), each of
those two with its thin fringe on the split-K kernel (_fringe_rows, _fringe_cols, _fringe_both:
dispatch._fringe_core), auto_uncut (the library's plan in one launch where it cuts the rows
of whole waves from the rest: dispatch._wave_rows) or auto_wave_cut (that cut where the
library's plan does not make it but the rule's rows exist), for tf32x3
k_major_persistent (K-major copies, split in the K loop) and split_tf32 (staged tf32
halves, three tf32 dots), for ieee a_m_major, b_n_major, a_m_b_n_major and
padded_a_m_major (copies laid out for fp32 FMA dots: A M-major, B row-major), and, for
outputs TMA cannot store, padded_workspace (TMA-stored into an aligned buffer, then
copied). Each is checked against float64 on a NaN-poisoned output before it is timed
(median of bench.gpu_median_ms, L2 flushed, copies included: ms), and timed again replayed
from a CUDA graph after the same flush (gpu_ms: bench.cold_graph_ms). dispatch.run plans
each call afresh, ~100 us of host time, so on small shapes ms times the host; gpu_ms is
what the library's replayed calls (launch_cache) cost the GPU. GPU only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from perf import bench
from perf.suites import Case
from triton_gemm import dispatch
from triton_gemm.kernels.persistent import dram_gbps
from triton_gemm.tolerances import rel_error, tolerance

LIBRARY_PRECISION = {"fp16": "half", "bf16": "half", "ieee": "ieee", "tf32": "tf32",
                     "tf32x3": "tf32x3"}


def candidate_plans(a, b, precision: str) -> dict:
    """Name -> Plan (None: the library's own choice) for (1, M, K) A and (1, K, N) B."""
    fp32_tc = precision in ("tf32", "tf32x3")
    plans = {"auto": None, "plain": dispatch.PLAIN,
             "padded": dispatch.Plan(True, fp32_tc, fp32_tc),
             "padded_persistent": dispatch.Plan(True, fp32_tc, fp32_tc, True)}
    if fp32_tc:
        plans["padded_as_laid_out"] = dispatch.Plan(True, False, False)  # no K-major copies
    if a.shape[2] >= dispatch.SPLITK_MIN_K:
        # The split-K kernel on the operands as given (narrow loads where they are off 16
        # bytes) and on padded copies.
        plans["split_k"] = dispatch.Plan(False, False, False, split_k=True)
        plans["split_k_padded"] = dispatch.Plan(True, fp32_tc, fp32_tc, split_k=True)
    direct = dispatch._tma_direct(a, b, fp32_tc)
    if direct is not None:
        plans["direct"] = dispatch.Plan(False, *direct, persistent=True)
    if precision == "ieee":
        # fp32 FMA: an M-major copy of A, a row-major copy of B (dispatch.FMA_STAGE_A_MIN).
        plans["a_m_major"] = dispatch.Plan(False, False, False, a_m_major=True)
        plans["b_n_major"] = dispatch.Plan(False, False, False, b_n_major=True)
        plans["a_m_b_n_major"] = dispatch.Plan(False, False, False, a_m_major=True,
                                               b_n_major=True)
        plans["padded_a_m_major"] = dispatch.Plan(True, False, False, a_m_major=True)
    sms = (torch.cuda.get_device_properties(a.device).multi_processor_count if a.is_cuda
           else None)
    auto = dispatch.plan(a, b, precision, sms,
                         dram_gbps=dram_gbps(a.device))
    if auto.wave_rows is not None:
        plans["auto_uncut"] = auto._replace(wave_rows=None)
    elif auto.persistent and auto.core is None and not auto.split_tf32 and sms:
        # The same cut where the library does not make it (tf32; the cases its rule leaves).
        rows = dispatch._wave_rows(a.shape[1], b.shape[2], sms)
        if rows is not None:
            plans["auto_wave_cut"] = auto._replace(wave_rows=rows)
    if precision == "half":
        # The persistent kernel on the operands as given (dispatch.SMALL_WAVE takes its mid
        # tiles for some products of fewer tiles than SMs) and kernels/wide.py's 128x192
        # tiles (dispatch.WIDE), wherever the rules would not take them.
        plans["persistent"] = dispatch.Plan(False, False, False, True)
        plans["wide"] = dispatch.Plan(False, False, False, True, wide=True)
    if precision == "tf32x3":
        # K-major copies on the persistent kernel, split by tl.dot in the K loop, against
        # halves staged once (dispatch.SPLIT_TF32).
        plans["k_major_persistent"] = dispatch.Plan(False, True, True, True)
        plans["split_tf32"] = dispatch.SPLIT_TF32
    # The persistent paths with their thin fringe rows, columns or both on the split-K
    # kernel (dispatch._fringe_core): "_fringe_rows" and so on.
    m, n = a.shape[1], b.shape[2]
    cut_m, cut_n = m - m % dispatch.FRINGE_TILE, n - n % dispatch.FRINGE_TILE
    cores = {}
    if 0 < cut_m < m:
        cores["rows"] = (cut_m, n)
    if 0 < cut_n < n:
        cores["cols"] = (m, cut_n)
    if len(cores) == 2:
        cores["both"] = (cut_m, cut_n)
    for name in [p for p in ("padded_persistent", "direct") if p in plans]:
        for side, core in cores.items():
            plans[f"{name}_fringe_{side}"] = plans[name]._replace(core=core)
    return plans


def measure(case: Case, precision: str, paths: set | None = None) -> list[dict]:
    """Rows of cuBLAS and each candidate path (paths: names to keep; None: all)."""
    dtype = bench.DTYPES[precision]
    a, b = bench.make_operands(case, dtype, "cuda")[0]
    ref = a.double() @ b.double()
    lib_precision = LIBRARY_PRECISION[precision]
    out = torch.empty(case.m, case.n, dtype=dtype, device="cuda")
    rows = []

    def row(name, fn, plan=""):
        out.fill_(float("nan"))
        fn()
        err = rel_error(out, ref)
        ms = bench.gpu_median_ms(fn)
        rows.append({"case": case.label, "precision": precision, "path": name, "plan": plan,
                     "ms": ms, "gpu_ms": bench.cold_graph_ms(fn),
                     "tflops": bench.tflops(case.m, case.n, case.k, ms),
                     "rel_error": err, "ok": err <= tolerance(dtype, lib_precision)})

    with bench.cublas_precision(precision):
        row("cublas", lambda: torch.matmul(a, b, out=out))
    plans = candidate_plans(a[None], b[None], lib_precision)
    for name, plan in plans.items():
        if paths is not None and name not in paths:
            continue
        shown = plan or dispatch.plan(a[None], b[None], lib_precision,
                                      torch.cuda.get_device_properties(0).multi_processor_count,
                                      dram_gbps=dram_gbps(a.device))
        row(name, lambda plan=plan: dispatch.run(a[None], b[None], out[None],
                                                 precision=lib_precision, force=plan),
            str(tuple(shown)))
    if (case.n * out.element_size()) % 16 and (paths is None or "padded_workspace" in paths):
        # The persistent kernel's earlier way with such an output: a TMA store into an
        # aligned workspace, then a copy into out.
        work = torch.empty(case.m, dispatch.padded_extent(case.n, out.element_size()),
                           dtype=dtype, device="cuda")
        padded = plans["padded_persistent"]

        def via_workspace():
            dispatch.run(a[None], b[None], work[None, :, :case.n], precision=lib_precision,
                         force=padded)
            out.copy_(work[:, :case.n])
        row("padded_workspace", via_workspace, str(tuple(padded)))
    base, gpu_base = rows[0]["ms"], rows[0]["gpu_ms"]
    for r in rows:
        r["vs_cublas"] = base / r["ms"]
        r["gpu_vs_cublas"] = gpu_base / r["gpu_ms"]
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", required=True, metavar="M,N,K[,LAYOUT]",
                        help="a shape and layout (nn, nt, pad); repeatable")
    parser.add_argument("--precision", default="fp16",
                        help=f"comma-separated, of {','.join(bench.PRECISIONS)}")
    parser.add_argument("--paths", default=None,
                        help="comma-separated path names to time (default: all)")
    args = parser.parse_args(argv)
    paths = None if args.paths is None else set(args.paths.split(","))
    if not torch.cuda.is_available():
        print("perf/plans.py times GPU paths: no CUDA GPU here", file=sys.stderr)
        return 2
    import pandas as pd
    print(torch.cuda.get_device_name(0))
    ok = True
    for text in args.case:
        m, n, k, *layout = text.split(",")
        for precision in args.precision.split(","):
            df = pd.DataFrame(measure(Case(int(m), int(n), int(k), *layout), precision,
                                      paths))
            print(df.to_string(index=False, float_format=lambda x: f"{x:.4g}"), flush=True)
            ok &= bool(df.ok.all())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
