"""Benchmark every implementation against cuBLAS and write the report.

    python perf/report.py --quick                 # a few shapes, every implementation
    python perf/report.py --suite square,llm      # full suites
    python perf/report.py --impl triton,cublas --precision fp16,bf16 --suite llm

On a CUDA GPU: every cuda_ref ladder step, triton_gemm at each precision (ieee, tf32,
tf32x3, fp16, bf16) and cuBLAS (torch.matmul with TF32 on only for tf32) in the same run;
median time (bench.gpu_median_ms: each call after an L2 flush that reads 256 MB; the median
of ROUNDS rounds that take every implementation of a shape in turn), TFLOPS = 2MNK/t (times
the batch of a batched case), ratio to cuBLAS, % of the device's peak, % of the memory
floor (operands read and output written once at the copy bandwidth measured in the run),
relative error against float64. Written to perf/results/<gpu>/ as
report.csv, report.md, ladder.png and sizes.png. While it runs, report.partial.csv there
holds the shapes finished so far (appended as each finishes, removed once the report is
written): after a run cut short (a timeout), `--from-csv` builds the report from it.

Without a GPU: the Triton kernels run in Triton's CPU interpreter on a few tiny shapes and
the report shows their error; its times are interpreter times, not GPU figures.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

ON_GPU = torch.cuda.is_available()
if not ON_GPU:
    # triton.jit reads this when triton_gemm's kernels are defined: set it before the import.
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pandas as pd  # noqa: E402
import triton  # noqa: E402

import triton_gemm  # noqa: E402
from perf import bench, suites, tables  # noqa: E402
from triton_gemm import cuda_ref  # noqa: E402
from triton_gemm.tolerances import tolerance  # noqa: E402

IMPL_GROUPS = ("triton", "cublas", "cuda_ref")


def _csv_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="perf/report.py",
        description="Benchmark triton_gemm, the CUDA SGEMM ladder and cuBLAS (torch.matmul) "
                    "in one run; write CSV, markdown and plots.",
        epilog="Without a CUDA GPU the Triton kernels run in the CPU interpreter on tiny "
               "shapes: a correctness check, not a benchmark.")
    parser.add_argument("--quick", action="store_true",
                        help=f"a few shapes ({', '.join(c.label for c in suites.QUICK)}); "
                             "under 5 minutes on an H100")
    parser.add_argument("--suite", default="square",
                        help=f"comma-separated shape suites from {', '.join(suites.SUITES)} "
                             "(default: square)")
    parser.add_argument("--m", default=None, metavar="M[,M...]",
                        help="run only the suites' shapes with these row counts (re-measuring "
                             "part of a suite, e.g. --suite llm --m 16)")
    parser.add_argument("--impl", default=",".join(IMPL_GROUPS),
                        help="comma-separated implementations: triton, cublas, cuda_ref (all "
                             "ladder steps) or single steps: " + ", ".join(cuda_ref.NAMES))
    parser.add_argument("--precision", default=",".join(bench.PRECISIONS),
                        help="comma-separated precisions from " + ", ".join(bench.PRECISIONS))
    parser.add_argument("--out", type=Path, default=None,
                        help="output folder (default: perf/results/<gpu name>/)")
    parser.add_argument("--from-csv", type=Path, nargs="+", default=None, metavar="CSV",
                        help="measure nothing: rebuild the tables and plots from report.csv "
                             "files of earlier runs (one GPU), e.g. suites run in separate calls")
    args = parser.parse_args(argv)
    for path in args.from_csv or ():
        if not path.is_file():
            parser.error(f"--from-csv: no such file {path}")
    for name in _csv_list(args.suite):
        if name not in suites.SUITES:
            parser.error(f"--suite: unknown suite {name!r}; choose from {', '.join(suites.SUITES)}")
    for name in _csv_list(args.impl):
        if name not in IMPL_GROUPS and name not in cuda_ref.NAMES:
            parser.error(f"--impl: unknown implementation {name!r}; choose from "
                         f"{', '.join(IMPL_GROUPS + cuda_ref.NAMES)}")
    for name in _csv_list(args.precision):
        if name not in bench.PRECISIONS:
            parser.error(f"--precision: unknown precision {name!r}; choose from "
                         f"{', '.join(bench.PRECISIONS)}")
    if args.m is not None and not all(v.isdigit() for v in _csv_list(args.m)):
        parser.error(f"--m: expected comma-separated row counts, got {args.m!r}")
    if not _csv_list(args.impl) or not _csv_list(args.precision):
        parser.error("--impl and --precision need at least one value")
    return args


def build_impls(impl_names, precisions, on_gpu) -> list[bench.Impl]:
    """The implementations to run, cuBLAS baselines first so ratios come from this run."""
    wanted = set(impl_names)
    impls = []
    if on_gpu and "cublas" in wanted:
        baselines = dict.fromkeys(bench.BASELINE[p] for p in precisions)
        for p in baselines:
            impls.append(bench.Impl("cublas", p, torch.matmul, suites.LAYOUTS, p))
    if "triton" in wanted:
        for p in precisions:
            arg = p if p in triton_gemm.PRECISIONS else None
            impls.append(bench.Impl(
                "triton", p, lambda a, b, arg=arg: triton_gemm.matmul(a, b, precision=arg),
                suites.LAYOUTS, p))
    steps = cuda_ref.NAMES if "cuda_ref" in wanted else [n for n in cuda_ref.NAMES if n in wanted]
    if on_gpu and "ieee" in precisions:
        for step in steps:
            p = "fp16" if step in cuda_ref.TENSOR_CORE_KERNELS else "ieee"
            impls.append(bench.Impl(step, p, cuda_ref.KERNELS[step], ("nn",), "ieee"))
    return impls


def _meta() -> dict:
    gpu = torch.cuda.get_device_name() if ON_GPU else "cpu-interpreter"
    return {"gpu": gpu, "torch": torch.__version__, "triton": triton.__version__,
            "date": datetime.date.today().isoformat(),
            "mode": "gpu" if ON_GPU else "cpu-interpreter",
            # How L2 was emptied before each timed call (rows of reports before 2026-11-23
            # were timed after do_bench's zero-write flush: "write").
            "l2_flush": bench.L2_FLUSH if ON_GPU else ""}


# Timing rounds per (shape, implementation). One do_bench median of a kernel moved by up to
# 10% within a minute on the H100 (five back-to-back measurements, each after the other
# side's: cuBLAS tf32 4096^3 344-385 us, fp16 8192^3 1601-1773 us; triton_gemm tf32 4096^3
# 420-485 us), enough to turn 0.9x into 1.03x when the two sides of a ratio were timed once
# each, seconds apart (the report of 2026-11-22 had cuBLAS tf32 4096^3 at 443 us). So every
# implementation of a shape is timed once per round, round after round, each round with a
# ROUNDS-th of the timing budget, and a row keeps the median of its rounds: both sides
# of a ratio sample the same stretch of time. time_spread: (slowest - fastest) / median.
ROUNDS = 5
REP_MS = 100  # timing budget per row (ms), shared by its rounds


def runs(case: suites.Case, impl: bench.Impl) -> bool:
    """Whether impl takes the case: its layout, and 3-D operands only for bench.BATCH_IMPLS
    (the CUDA ladder multiplies matrices)."""
    return case.layout in impl.layouts and (case.batch == 1 or impl.name in bench.BATCH_IMPLS)


def run(cases, impls, *, on_gpu, time_fn=bench.time_ms, graph_fn=bench.graph_ms,
        progress=True, rounds=ROUNDS, checkpoint: Path | None = None) -> pd.DataFrame:
    """Measure every (case, impl) pair; one row each. time_ms: eager calls (host launch
    cost included where it exceeds the GPU time), the median of `rounds` interleaved
    rounds (ROUNDS); graph_ms: the same calls replayed from a CUDA graph (GPU time only),
    for the implementations in bench.GRAPH_IMPLS. checkpoint: a CSV each case's rows are
    appended to once it is measured (its ratios from its own cuBLAS rows, as the whole)."""
    meta = _meta()
    # The memory floor's bandwidth, measured once per run (so floors and times share a run).
    copy_bps = bench.copy_bandwidth() if on_gpu else float("nan")
    l2 = torch.cuda.get_device_properties(0).L2_cache_size if on_gpu else 0
    device = "cuda" if on_gpu else "cpu"
    pairs = [(c, i) for c in cases for i in impls if runs(c, i)]
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=len(pairs), desc="benchmark", unit="run", file=sys.stderr)
    rows = []
    for case in cases:
        first_row = len(rows)
        operands, checked = {}, []
        for impl in (i for i in impls if runs(case, i)):
            if impl.operands not in operands:
                sets = bench.make_operands(case, bench.DTYPES[impl.operands], device, l2)
                a, b = sets[0]
                operands[impl.operands] = (sets, a.double() @ b.double())
            sets, ref = operands[impl.operands]
            a, b = sets[0]
            with bench.cublas_precision(impl.precision):
                out = impl.fn(a, b)  # compiles and tunes outside the timed rounds
            err = ((out.double() - ref).norm() / ref.norm()).item()
            del out
            checked.append((impl, sets, err))
        # The float64 references are done with: only the operand sets stay for the rounds.
        operands = ref = None
        times = [[] for _ in checked]
        configs = [""] * len(checked)
        for _ in range(rounds):
            for i, (impl, sets, _) in enumerate(checked):
                if bar:
                    bar.set_postfix_str(f"{case.label} {impl.name} {impl.precision}")
                with bench.cublas_precision(impl.precision):
                    times[i].append(time_fn(impl.fn, sets, on_gpu, REP_MS / rounds))
                if impl.name == "triton":
                    configs[i] = triton_gemm.last_config()
        for (impl, sets, err), samples, config in zip(checked, times, configs, strict=True):
            with bench.cublas_precision(impl.precision):
                graph = (graph_fn(impl.fn, sets) if on_gpu and impl.name in bench.GRAPH_IMPLS
                         else float("nan"))
            ms = statistics.median(samples)
            dtype = bench.DTYPES[impl.precision]
            elem_bytes = torch.finfo(bench.DTYPES[impl.operands]).bits // 8
            rows.append({
                "shape": case.label, "M": case.m, "N": case.n, "K": case.k,
                "layout": case.layout, "impl": impl.name, "precision": impl.precision,
                "time_ms": ms, "graph_ms": graph,
                "time_spread": (max(samples) - min(samples)) / ms,
                "floor_ms": bench.min_bytes(case, elem_bytes) / copy_bps * 1e3,
                "copy_tbps": copy_bps / 1e12,
                "tflops": (bench.tflops(case.batch * case.m, case.n, case.k, ms) if on_gpu
                           else float("nan")),
                "rel_error": err,
                "config": config,
                "error_ok": err <= tolerance(dtype, impl.precision if dtype == torch.float32
                                             else None),
                **meta, "batch": case.batch})
            if bar:
                bar.update()
        if checkpoint is not None and len(rows) > first_row:
            done = tables.add_derived(pd.DataFrame(rows[first_row:]))
            done.to_csv(checkpoint, mode="a", header=not checkpoint.exists(), index=False)
        del checked
    if bar:
        bar.close()
    return tables.add_derived(pd.DataFrame(rows))


def default_out(gpu: str) -> Path:
    return ROOT / "perf" / "results" / re.sub(r"[^A-Za-z0-9.]+", "-", gpu).strip("-")


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.from_csv:
        df = pd.concat([pd.read_csv(p, keep_default_na=False, na_values=[""])
                        for p in args.from_csv], ignore_index=True)
        if df.gpu.nunique() != 1:
            print(f"--from-csv: rows come from several devices {sorted(df.gpu.unique())}; "
                  f"ratios are only meaningful within one", file=sys.stderr)
            return 2
        return _write_report(df, args.out)
    precisions = _csv_list(args.precision)
    if ON_GPU:
        cases = list(suites.QUICK) if args.quick else suites.cases(_csv_list(args.suite))
        if args.m is not None:
            rows = {int(v) for v in _csv_list(args.m)}
            cases = [c for c in cases if c.m in rows]
            if not cases:
                print(f"--m {args.m}: no shape of the chosen suites has these rows",
                      file=sys.stderr)
                return 2
    else:
        cases = list(suites.INTERPRETER)
        print("No CUDA GPU: running the Triton kernels in the CPU interpreter on tiny shapes "
              "(a correctness check; times are not GPU figures).", file=sys.stderr)
    impls = build_impls(_csv_list(args.impl), precisions, ON_GPU)
    if not impls:
        print("nothing to run for this --impl/--precision on this machine", file=sys.stderr)
        return 2
    out = args.out or default_out(_meta()["gpu"])
    out.mkdir(parents=True, exist_ok=True)
    partial = out / PARTIAL_CSV
    partial.unlink(missing_ok=True)
    # The interpreter's times are no GPU figures: one round there.
    df = run(cases, impls, on_gpu=ON_GPU, rounds=ROUNDS if ON_GPU else 1, checkpoint=partial)
    status = _write_report(df, out)
    partial.unlink(missing_ok=True)
    return status


# The rows of a run in progress, shape by shape (see the module's docstring).
PARTIAL_CSV = "report.partial.csv"


def _write_report(df: pd.DataFrame, out: Path | None) -> int:
    out = out or default_out(df.gpu.iloc[0])
    files = tables.write(df, out, "triton_gemm benchmark report", cuda_ref.NAMES)
    print(tables.markdown(df, "triton_gemm benchmark report"))
    print("\nwrote " + ", ".join(str(f) for f in files))
    bad = df[~df.error_ok]
    if len(bad):
        print(f"\n{len(bad)} row(s) exceed their precision's error tolerance:\n"
              + bad[["shape", "impl", "precision", "rel_error"]].to_string(index=False))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
