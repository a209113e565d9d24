"""Tiles of the padded-copy kernel (triton_gemm/kernels/copy.py) timed on the staged copies of
an unaligned product: the measurement behind copy.TILE; and a product's two copies in one
launch against two (copy.copy_jobs).

    python perf/copy_probe.py --size 4097
    python perf/copy_probe.py --pair 127,8191,509 --pair 4097,4097,4097

Copies timed (L2 flushed by a read, median of bench.gpu_median_ms, and replayed from a
CUDA graph after the same flush, bench.cold_graph_ms: TB/s from the latter): fp16 and fp32
(R, C) into a padded row-major buffer, and fp32 transposed into a padded K-major one, as
dispatch.stage makes them. --pair M,N,K: an fp32 (M, K) A into padded rows and a row-major
(K, N) B into a padded K-major copy, as a tf32 product stages them, in two launches and in
one, timed both ways too. The eager median times the host where the copy is short: compare
tiles by the replayed time. GPU only.
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from perf import bench
from triton_gemm import dispatch
from triton_gemm.kernels import copy as copy_kernels

TILES = ((64, 64, 4), (32, 128, 4), (64, 128, 4), (64, 128, 8), (32, 256, 4), (128, 64, 4),
         (128, 128, 8), (16, 256, 4))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4097)
    parser.add_argument("--pair", action="append", default=[], metavar="M,N,K")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("perf/copy_probe.py times GPU copies: no CUDA GPU here", file=sys.stderr)
        return 2
    if args.pair:
        return 0 if all(time_pair(*map(int, spec.split(","))) for spec in args.pair) else 1
    s = args.size
    print(torch.cuda.get_device_name(0), f"{s} x {s}")
    ok = True
    for name, dtype, transpose in (("fp16 row-major", torch.float16, False),
                                   ("fp32 row-major", torch.float32, False),
                                   ("fp32 K-major", torch.float32, True)):
        src = torch.randn(1, s, s, device="cuda").to(dtype)
        view = src.transpose(1, 2) if transpose else src
        pitch = dispatch.padded_extent(s, src.element_size())
        dst = torch.empty(1, s, pitch, dtype=dtype, device="cuda")
        moved = 2 * src.numel() * src.element_size() + (pitch - s) * s * src.element_size()
        for br, bc, warps in TILES:
            run = partial(copy_kernels.launch, copy_kernels.Job(view, dst),
                          tile=(br, bc, warps))
            dst.fill_(float("nan"))
            run()
            good = torch.equal(dst[:, :, :s], view) and not dst[:, :, s:].any()
            ok &= good
            us, gpu_us = 1e3 * bench.gpu_median_ms(run), 1e3 * bench.cold_graph_ms(run)
            print(f"{name:15s} {br:4d}x{bc:<4d} w{warps}  {us:7.1f} us eager "
                  f"{gpu_us:7.1f} us replayed  {moved / gpu_us / 1e6:5.2f} TB/s  "
                  f"{'ok' if good else 'WRONG'}", flush=True)
    return 0 if ok else 1


def time_pair(m: int, n: int, k: int) -> bool:
    """A tf32 product's copies (A padded, B K-major padded) in two launches and in one:
    us eager and replayed, and whether both ways give the same copies."""
    a = torch.randn(1, m, k, device="cuda")
    b = torch.randn(1, k, n, device="cuda")
    kp, np_ = dispatch.padded_extent(k, 4), dispatch.padded_extent(n, 4)
    a_dst = torch.empty(1, m, kp, device="cuda")
    b_dst = torch.empty(1, np_, kp, device="cuda")
    jobs = (copy_kernels.Job(a, a_dst), copy_kernels.Job(b.transpose(1, 2), b_dst))

    def two():
        copy_kernels.launch(jobs[0])
        copy_kernels.launch(jobs[1])

    def one():
        copy_kernels.launch(*jobs)
    results = {}
    for name, run in (("two launches", two), ("one launch", one)):
        a_dst.fill_(float("nan")), b_dst.fill_(float("nan"))
        run()
        results[name] = (a_dst.clone(), b_dst.clone())
        print(f"{m}x{n}x{k} {name:12s} {1e3 * bench.gpu_median_ms(run):7.1f} us eager "
              f"{1e3 * bench.cold_graph_ms(run):7.1f} us replayed", flush=True)
    same = all(torch.equal(x, y) for x, y in zip(*results.values()))
    right = torch.equal(a_dst[:, :, :k], a) and torch.equal(b_dst[:, :n, :k], b.transpose(1, 2))
    print(f"{m}x{n}x{k} copies {'ok' if same and right else 'WRONG'}")
    return same and right


if __name__ == "__main__":
    sys.exit(main())
