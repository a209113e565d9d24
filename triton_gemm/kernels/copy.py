"""Strided copy with zero fill, as a Triton kernel: the dispatcher's staged operands (padded
and K-major copies).

Why a kernel of our own rather than torch's copy_ and fill: its launches go through
common.run_kernel, so the launch cache records and replays a padded call whole; with
torch's ops (an allocation, a copy and one or two fills per operand) every padded call paid
planning and ~200 us of host time on the H100 machine (1000^3 fp16: 204 us eager against
18 us of GPU time, perf/results)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import run_kernel, workspace

# Tile per program: 64 x 64 elements (16 KB of fp32) with 4 warps, a tile transposed
# through shared memory when source and destination are contiguous along different axes.
_TILE = 64


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, ROWS, COLS, DST_ROWS, DST_COLS,
                 s_b, s_r, s_c, d_b, d_r, d_c,
                 BR: tl.constexpr, BC: tl.constexpr):
    """dst[b, r, c] = src[b, r, c] for r < ROWS, c < COLS, else 0, over dst's
    DST_ROWS x DST_COLS; any strides, 64-bit offsets. One grid axis walks (batch, row tile,
    column tile): the y and z axes would cap batch and tiles at 65535."""
    pid = tl.program_id(0).to(tl.int64)
    col_tiles = tl.cdiv(DST_COLS, BC)
    tiles = tl.cdiv(DST_ROWS, BR) * col_tiles
    batch = pid // tiles
    rows = ((pid % tiles) // col_tiles) * BR + tl.arange(0, BR)
    cols = ((pid % tiles) % col_tiles) * BC + tl.arange(0, BC)
    inside = (rows[:, None] < ROWS) & (cols[None, :] < COLS)
    x = tl.load(src_ptr + batch * s_b + rows[:, None] * s_r + cols[None, :] * s_c,
                mask=inside, other=0.0)
    tl.store(dst_ptr + batch * d_b + rows[:, None] * d_r + cols[None, :] * d_c, x,
             mask=(rows[:, None] < DST_ROWS) & (cols[None, :] < DST_COLS))


def copy_into(src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    """dst (batch, R', C') <- src (batch, R, C) with R <= R', C <= C', the rest of dst zero.
    Returns dst."""
    batch, rows, cols = src.shape
    dst_rows, dst_cols = dst.shape[1], dst.shape[2]
    if dst.numel() == 0:
        return dst
    grid = (batch * triton.cdiv(dst_rows, _TILE) * triton.cdiv(dst_cols, _TILE),)
    run_kernel(_copy_kernel, grid,
               (src, dst, rows, cols, dst_rows, dst_cols, *src.stride(), *dst.stride()),
               {"BR": _TILE, "BC": _TILE, "num_warps": 4})
    return dst


def padded_copy(src: torch.Tensor, shape: tuple) -> torch.Tensor:
    """A new contiguous (batch, R', C') tensor (scratch: common.workspace) holding src
    (batch, R, C) in its top-left corner and zeros elsewhere."""
    return copy_into(src, workspace(shape, src.dtype, src.device))
