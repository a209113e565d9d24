"""Tiles of the padded-copy kernel (triton_gemm/kernels/copy.py) timed on the staged copies of
an unaligned product: the measurement behind copy.TILE.

    python perf/copy_probe.py --size 4097

Copies timed (L2 flushed, median of triton.testing.do_bench): fp16 and fp32 (R, C) into a
padded row-major buffer, and fp32 transposed into a padded K-major one, as dispatch.stage
makes them. GPU only.
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

from triton_gemm import dispatch
from triton_gemm.kernels import copy as copy_kernels

TILES = ((64, 64, 4), (32, 128, 4), (64, 128, 4), (64, 128, 8), (32, 256, 4), (128, 64, 4),
         (128, 128, 8), (16, 256, 4))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4097)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("perf/copy_probe.py times GPU copies: no CUDA GPU here", file=sys.stderr)
        return 2
    import triton.testing
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
            run = partial(copy_kernels.launch, view, dst, tile=(br, bc, warps))
            dst.fill_(float("nan"))
            run()
            good = torch.equal(dst[:, :, :s], view) and not dst[:, :, s:].any()
            ok &= good
            us = 1e3 * triton.testing.do_bench(run, warmup=25, rep=100, return_mode="median")
            print(f"{name:15s} {br:4d}x{bc:<4d} w{warps}  {us:7.1f} us  "
                  f"{moved / us / 1e6:5.2f} TB/s  {'ok' if good else 'WRONG'}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
