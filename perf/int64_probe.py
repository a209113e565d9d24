"""Probe: what the epilogues' INT64 branch costs. Tensors whose storage reaches 2^31
elements take it (common.needs_int64, by storage size, so a small view of such a storage
takes it too); here it is forced on ordinary shapes and timed beside the int32 branch and
cuBLAS, in interleaved rounds of CUDA-graph replays after an L2 flush (bench.cold_graph_ms).
INT64 is in the tuning key (configs.TUNING_KEY), so each branch runs its own tuned config, as
a call that needs it would.

    python perf/int64_probe.py [--rounds 5]

Each call is first checked against float64 on a NaN-poisoned output, both ways; the probe
exits non-zero if one is over its precision's tolerance. GPU only.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import triton_gemm  # noqa: E402
from triton_gemm import launch_cache  # noqa: E402
from perf import bench  # noqa: E402
from perf.tile_probe import interleaved  # noqa: E402
from triton_gemm.kernels import matmul, persistent, streamk, tall, wide  # noqa: E402
from triton_gemm.tolerances import rel_error, tolerance  # noqa: E402

# The modules whose launchers set INT64 from needs_int64. Not splitk: there the same test
# decides eligibility (splitk.supports), so forcing it would time another path.
INT64_MODULES = (matmul, persistent, streamk, tall, wide)

# (label, dtype, precision, M, N, K, layout, call): calls whose epilogues take the branch
# (matrix D, pointer-stored C).
CASES = (
    ("addmm D fp16", torch.float16, None, 8192, 8192, 8192, "nn", "addmm"),
    ("addmm D tf32", torch.float32, "tf32", 8192, 8192, 8192, "nt", "addmm"),
    ("mm fp16 N=8191 (pointer C)", torch.float16, None, 8192, 8191, 8192, "nn", "mm"),
    ("addmm D bf16 4096^3", torch.bfloat16, None, 4096, 4096, 4096, "nn", "addmm"),
)


@contextlib.contextmanager
def forced_int64():
    saved = {m: m.needs_int64 for m in INT64_MODULES}
    for module in INT64_MODULES:
        module.needs_int64 = lambda *tensors: True
    try:
        yield
    finally:
        for module, fn in saved.items():
            module.needs_int64 = fn


def call(kind, a, b, d, out, precision, force):
    with forced_int64() if force else contextlib.nullcontext():
        if kind == "addmm":
            return triton_gemm.addmm(d, a, b, beta=0.5, precision=precision, out=out)
        return triton_gemm.mm(a, b, precision=precision, out=out)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("perf/int64_probe.py times kernels beside cuBLAS on a CUDA GPU; none found")
    # Replay would launch a signature's first recipe whatever needs_int64 says later, so every
    # call plans afresh, as with TRITON_GEMM_LAUNCH_CACHE=0 (graph replays leave planning's
    # host time out of the timing).
    launch_cache.ENABLED = False
    torch.backends.cuda.matmul.allow_tf32 = True
    print(f"{torch.cuda.get_device_name()}; us, median of {args.rounds} interleaved rounds "
          "of cold-L2 graph replays [range]")
    failed = []
    for label, dtype, precision, m, n, k, layout, kind in CASES:
        a = torch.randn(m, k, device="cuda", dtype=dtype)
        b = (torch.randn(n, k, device="cuda", dtype=dtype).T if layout == "nt"
             else torch.randn(k, n, device="cuda", dtype=dtype))
        d = torch.randn(m, n, device="cuda", dtype=dtype) if kind == "addmm" else None
        ref = a.double() @ b.double() + (0 if d is None else 0.5 * d.double())
        out = torch.empty(m, n, device="cuda", dtype=dtype)
        tol = tolerance(dtype, precision)
        for force in (False, True):
            out.fill_(float("nan"))
            call(kind, a, b, d, out, precision, force)
            err = rel_error(out, ref)
            status = "ok" if err <= tol else "FAILED"
            if err > tol:
                failed.append(f"{label} INT64={force}")
            print(f"  {label} INT64={force}: rel. error {err:.2e} ({status}), "
                  f"config {triton_gemm.last_config()}")
        cublas = (lambda: torch.addmm(d, a, b, beta=0.5, out=out)) if kind == "addmm" else (
            lambda: torch.mm(a, b, out=out))
        fns = {"int32": lambda: call(kind, a, b, d, out, precision, False),
               "INT64": lambda: call(kind, a, b, d, out, precision, True),
               "cuBLAS": cublas}
        times = interleaved(fns, bench.cold_graph_ms, args.rounds)
        line = ", ".join(f"{name} {statistics.median(t) * 1e3:.1f} "
                         f"[{min(t) * 1e3:.1f}-{max(t) * 1e3:.1f}]" for name, t in times.items())
        ratio = statistics.median(times["INT64"]) / statistics.median(times["int32"])
        print(f"{label}: {line}; INT64 / int32 {ratio:.3f}")
    if failed:
        sys.exit("over the precision's tolerance: " + ", ".join(failed))


if __name__ == "__main__":
    main()
