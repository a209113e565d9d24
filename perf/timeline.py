"""Where an eager call's time goes on the GPU: the kernels of triton_gemm.matmul and of cuBLAS
for one shape, timed as the report's eager column times them (each call after an L2 flush that
reads 256 MB, bench.gpu_median_ms), listed with their durations and the idle gaps between
them. GPU only.

    python perf/timeline.py --shape 128,128,65536 --precision fp16
    python perf/timeline.py --shape 2048,4096,4096,nt --precision fp16

A gap between the kernels of one call is host launch cost the GPU waited for; kernels
slower here than in CUDA-graph replay (perf/report.py's GPU-time column) are paying for a
cold L2. A third row reads as many bytes as the operands hold (torch.sum, one pass): the floor
under this timing. `--flush write` empties L2 as triton.testing.do_bench does, by writing the
buffer, which leaves L2 full of dirty lines the timed kernels must write back.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import triton_gemm  # noqa: E402
from perf import bench  # noqa: E402
from perf.suites import Case  # noqa: E402

FLUSH_BYTES = 256 * 1024 * 1024  # triton.testing.do_bench's L2 flush buffer
# Kernels no GEMM launches mark each flush: a bitwise_not opens it (the write flush's own
# kernel, as do_bench's zero_() writes the buffer; a few bytes before a read flush), a neg of
# a few bytes closes it, so a call's kernels are those between a close and the next open.
FLUSH_OPEN, FLUSH_CLOSE = "bitwise_not", "neg_kernel"


def kernels_per_call(fn, flush, calls: int) -> list[list[tuple[str, float, float]]]:
    """[(name, start us, duration us)] of fn's kernels, per call, each call after a flush."""
    from torch.profiler import ProfilerActivity, profile
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            flush()
            fn()
        torch.cuda.synchronize()
    events = sorted((e for e in prof.events() if e.device_type.name == "CUDA"),
                    key=lambda e: e.time_range.start)
    per_call, current = [], None
    for e in events:
        name = e.name
        if FLUSH_OPEN in name:
            current = None
        elif FLUSH_CLOSE in name:
            current = []  # the flush is over: a call begins
            per_call.append(current)
        elif current is not None:
            current.append((name, e.time_range.start, e.time_range.end - e.time_range.start))
    return [c for c in per_call if c]


def report(label: str, calls) -> None:
    spans = [c[-1][1] + c[-1][2] - c[0][1] for c in calls]
    print(f"{label}: first kernel start to last kernel end, median {statistics.median(spans):.1f}"
          f" us over {len(calls)} calls")
    for i, (name, _, _) in enumerate(calls[0]):
        durs = [c[i][2] for c in calls if len(c) > i]
        gaps = [c[i][1] - (c[i - 1][1] + c[i - 1][2]) for c in calls if i and len(c) > i]
        gap = f", gap before it {statistics.median(gaps):.1f} us" if gaps else ""
        print(f"  {name[:70]:70s} {statistics.median(durs):7.1f} us{gap}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="128,128,65536",
                        help="M,N,K[,LAYOUT] (LAYOUT as perf/suites.py: nn, nt, tn, tt)")
    parser.add_argument("--precision", default="fp16", choices=bench.PRECISIONS,
                        help="operand dtype and precision, as perf/report.py names them")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--flush", default="read", choices=("write", "read"),
                        help="empty L2 by writing a 256 MiB buffer (as do_bench) or reading it")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("perf/timeline.py profiles GPU kernels; no CUDA GPU found")
    fields = args.shape.split(",")
    case = Case(*(int(x) for x in fields[:3]), *fields[3:])
    a, b = bench.make_operands(case, bench.DTYPES[args.precision], "cuda")[0]
    lib = args.precision if args.precision in triton_gemm.PRECISIONS else None
    cache = torch.zeros(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    floats = cache.view(torch.float32)  # zeros either way; sum reads without converting
    mark, close = torch.zeros(8, dtype=torch.int32, device="cuda"), torch.zeros(8, device="cuda")

    def flush():
        if args.flush == "write":
            torch.bitwise_not(cache, out=cache)
        else:
            torch.bitwise_not(mark, out=mark)
            floats.sum()
        torch.neg(close, out=close)
    nbytes = (a.numel() + b.numel() + case.m * case.n) * a.element_size()
    flat = torch.ones(nbytes // 4, dtype=torch.float32, device="cuda")
    print(f"{torch.cuda.get_device_name()}  {case.label} {args.precision}, {args.flush} flush, "
          f"{nbytes / 1e6:.1f} MB of operands and output")
    with bench.cublas_precision(args.precision):
        for label, fn in (("torch.matmul (cuBLAS)", lambda: torch.matmul(a, b)),
                          ("triton_gemm.matmul",
                           lambda: triton_gemm.matmul(a, b, precision=lib)),
                          ("reading as many bytes (torch.sum)", flat.sum)):
            report(label, kernels_per_call(fn, flush, args.calls))
    return 0


if __name__ == "__main__":
    sys.exit(main())
