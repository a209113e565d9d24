"""From measured rows to the report: ratios to cuBLAS, % of peak, markdown, CSV, plots."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from perf.bench import BASELINE, peak_tflops
from perf.suites import SUITES

SHAPE_COLS = ["M", "N", "K", "layout", "batch"]  # a suites.Case's fields, in its order


def add_derived(df: pd.DataFrame) -> pd.DataFrame:
    """vs_cublas: cuBLAS time at the row's baseline precision over the row's time, for the
    same shape in the same run; pct_peak: TFLOPS over the device's peak for the precision."""
    df = df.copy()
    df["batch"] = batches(df)
    base = df[df.impl == "cublas"].set_index(SHAPE_COLS + ["precision"])["time_ms"]
    keys = zip(*(df[c] for c in SHAPE_COLS), df.precision.map(BASELINE))
    df["vs_cublas"] = [base.get(key, float("nan")) for key in keys] / df.time_ms
    if "graph_ms" in df:
        graph_base = df[df.impl == "cublas"].set_index(SHAPE_COLS + ["precision"])["graph_ms"]
        keys = zip(*(df[c] for c in SHAPE_COLS), df.precision.map(BASELINE))
        df["graph_vs_cublas"] = [graph_base.get(k, float("nan")) for k in keys] / df.graph_ms
    df["pct_peak"] = [100.0 * t / peak_tflops(g, p)
                      for t, g, p in zip(df.tflops, df.gpu, df.precision)]
    if "floor_ms" in df:  # results from before the memory floor have none
        df["pct_floor"] = 100.0 * df.floor_ms / df.time_ms
    return df


# Suites whose products are bound by memory, not arithmetic: the report gives their time as
# a share of the memory floor.
MEMORY_BOUND_SUITES = ("skinny", "splitk")


def pivot(df: pd.DataFrame, value: str) -> pd.DataFrame:
    """impl/precision x shape table of one column, rows in the order they were measured."""
    rows = df.assign(implementation=df.impl + " " + df.precision)
    table = rows.pivot_table(index="implementation", columns="shape", values=value, sort=False,
                             dropna=False)
    return table[list(dict.fromkeys(df["shape"]))]


def batches(df: pd.DataFrame) -> pd.Series:
    """Each row's batch: rows from before batched cases have none (single products)."""
    if "batch" not in df:
        return pd.Series(1, index=df.index)
    return df["batch"].fillna(1).astype(int)


def _case_keys(df: pd.DataFrame) -> list:
    """Each row's suites.Case fields, as a tuple (equal to the Case)."""
    return list(zip(*(df[c] for c in SHAPE_COLS[:-1]), batches(df)))


def _suite_of(key: tuple) -> str:
    for name, cases in SUITES.items():
        if key in cases:
            return name
    return "other"


def by_suite(df: pd.DataFrame, value: str, floatfmt: str) -> list[str]:
    """One markdown table of a column per shape suite (narrow enough to read)."""
    suites = pd.Series([_suite_of(key) for key in _case_keys(df)], index=df.index)
    lines = []
    for name in dict.fromkeys(suites):
        lines += [f"### {name}", "", pivot(df[suites == name], value).to_markdown(
            floatfmt=floatfmt), ""]
    return lines


def _provenance(df: pd.DataFrame) -> str:
    """The header's device, versions and dates; a report merged from runs of several days
    (--from-csv) names its range, each row's own date being in report.csv."""
    first = df.iloc[0]
    dates = sorted(df.date.astype(str).unique())
    when = dates[0] if len(dates) == 1 else (
        f"{dates[0]} to {dates[-1]}, merged runs (each row's date is in report.csv)")
    versions = "; ".join(sorted({f"torch {t}, triton {tr}" for t, tr in zip(df.torch, df.triton)}))
    return f"Device: {first.gpu}; {versions}; {when}."


def markdown(df: pd.DataFrame, title: str) -> str:
    first = df.iloc[0]
    lines = [f"# {title}", "", _provenance(df), ""]
    if first["mode"] != "gpu":
        lines += ["**CPU interpreter run: times are Triton-interpreter times on the CPU, "
                  "not GPU figures. Only the error columns mean anything here.**", "",
                  "## Relative error against float64", "",
                  pivot(df, "rel_error").to_markdown(floatfmt=".2e"), "",
                  "## CPU-interpreter milliseconds (not GPU figures)", "",
                  pivot(df, "time_ms").to_markdown(floatfmt=".0f"), ""]
        return "\n".join(lines)
    for heading, value, fmt in (("TFLOPS (median)", "tflops", ".1f"),
                                ("Ratio to cuBLAS in the same run", "vs_cublas", ".2f"),
                                ("Ratio to cuBLAS, GPU time only (CUDA graph replay, no L2 "
                                 "flush)", "graph_vs_cublas", ".2f"),
                                ("% of peak", "pct_peak", ".1f"),
                                ("Relative error against float64", "rel_error", ".1e")):
        if value in df:  # results from before graph timing have no graph column
            lines += [f"## {heading}", ""] + by_suite(df, value, fmt)
    if "pct_floor" in df and df.pct_floor.notna().any():
        bandwidth = ", ".join(f"{v:.2f}" for v in sorted(df.copy_tbps.dropna().unique()))
        floors = []
        for name in MEMORY_BOUND_SUITES:  # by membership: a shape may sit in two suites
            member = pd.Series([key in SUITES[name] for key in _case_keys(df)],
                               index=df.index)
            rows = df[member & df.pct_floor.notna()]
            if len(rows):
                floors += [f"### {name}", "",
                           pivot(rows, "pct_floor").to_markdown(floatfmt=".1f"), ""]
        if floors:
            lines += ["## % of the memory floor (memory-bound suites)", "",
                      "Operands read once and the output written once, at the device-to-device "
                      f"copy bandwidth measured in the run ({bandwidth} TB/s, read plus "
                      "written); 100 would be the floor itself.", ""] + floors
    return "\n".join(lines)


def plot(df: pd.DataFrame, out_dir: Path, ladder_order) -> list[Path]:
    """ladder.png (the CUDA ladder at 4096^3 with cuBLAS marked) and sizes.png (TFLOPS
    against size per precision on the square shapes). Returns the files written."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    at = df[(df.M == 4096) & (df.N == 4096) & (df.K == 4096) & (df.layout == "nn")
            & (batches(df) == 1)]
    ladder = at[at.impl.isin(ladder_order)].set_index("impl").reindex(
        [s for s in ladder_order if s in set(at.impl)])
    if len(ladder):
        fig, ax = plt.subplots(figsize=(10, 4.5))
        extra = at[(at.impl == "triton")][["precision", "tflops"]]
        names = list(ladder.index) + [f"triton {p}" for p in extra.precision]
        values = list(ladder.tflops) + list(extra.tflops)
        ax.bar(range(len(names)), values, color=["tab:blue"] * len(ladder) +
               ["tab:orange"] * len(extra))
        for precision, style in (("ieee", "-"), ("fp16", "--")):
            ref = at[(at.impl == "cublas") & (at.precision == precision)]
            if len(ref):
                ax.axhline(ref.tflops.iloc[0], color="k", linestyle=style,
                           label=f"cuBLAS {precision}: {ref.tflops.iloc[0]:.0f}")
        ax.set_xticks(range(len(names)), names, rotation=35, ha="right")
        ax.set_ylabel("TFLOPS")
        ax.set_yscale("log")
        ax.set_title(f"SGEMM ladder, 4096^3, {at.gpu.iloc[0]}")
        ax.legend()
        fig.tight_layout()
        written.append(out_dir / "ladder.png")
        fig.savefig(written[-1], dpi=120)
        plt.close(fig)

    in_suite = [key in SUITES["square"] for key in _case_keys(df)]
    square = df[in_suite]
    precisions = list(dict.fromkeys(square[square.impl == "triton"].precision))
    if square.M.nunique() > 1 and precisions:
        fig, axes = plt.subplots(1, len(precisions), figsize=(3.6 * len(precisions), 3.6),
                                 squeeze=False)
        for ax, precision in zip(axes[0], precisions):
            for impl, p in (("triton", precision), ("cublas", BASELINE[precision])):
                group = square[(square.impl == impl) & (square.precision == p)].sort_values("M")
                ax.plot(group.M, group.tflops, marker="o", label=f"{impl} {p}")
            ax.set_title(precision)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("M = N = K")
            ax.legend()
        axes[0][0].set_ylabel("TFLOPS")
        fig.tight_layout()
        written.append(out_dir / "sizes.png")
        fig.savefig(written[-1], dpi=120)
        plt.close(fig)
    return written


def write(df: pd.DataFrame, out_dir: Path, title: str, ladder_order) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    csv = out_dir / "report.csv"
    df.assign(batch=batches(df)).to_csv(csv, index=False)
    md = out_dir / "report.md"
    md.write_text(markdown(df, title))
    files = [csv, md]
    if df["mode"].iloc[0] == "gpu":
        files += plot(df, out_dir, ladder_order)
    return files
