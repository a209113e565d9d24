"""The Gluon kernel probes (perf/simt_gluon_probe.py, perf/split_fed_probe.py): their tiles
are set on the kernel modules for one call only."""

import sys
from pathlib import Path

import pytest
import torch

from triton_gemm.kernels import simt_tma

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perf import simt_gluon_probe  # noqa: E402


def test_a_probed_tile_leaves_the_kernels_constants_as_they_were(monkeypatch):
    """run_tile sets BM, BN, BK, STAGES and WARPS for its call, and
    puts them back even when the call fails (here: nothing to launch on)."""
    seen = {}

    def launch(a, b, out):
        seen["tile"] = (simt_tma.BM, simt_tma.BN, simt_tma.BK, simt_tma.STAGES,
                        simt_tma.WARPS)
        raise RuntimeError("no GPU here")
    monkeypatch.setattr(simt_tma, "matmul_2d", launch)
    before = (simt_tma.BM, simt_tma.BN, simt_tma.BK, simt_tma.STAGES, simt_tma.WARPS)
    with pytest.raises(RuntimeError, match="no GPU"):
        simt_gluon_probe.run_tile(torch.zeros(1), torch.zeros(1), torch.zeros(1),
                                  64, 128, 16, 5, 4)
    assert seen["tile"] == (64, 128, 16, 5, 4)
    assert (simt_tma.BM, simt_tma.BN, simt_tma.BK, simt_tma.STAGES, simt_tma.WARPS) == before


def test_a_probed_split_fed_tile_leaves_the_kernels_constants_as_they_were(monkeypatch):
    """perf/split_fed_probe.py's run_tile: BQ, BK and STAGES for its call only."""
    from perf import split_fed_probe
    from triton_gemm.kernels import split_fed
    seen = {}

    def launch(a, b, y_hi, y_lo, out, sms):
        seen["tile"] = (split_fed.BQ, split_fed.BK, split_fed.STAGES)
        raise RuntimeError("no GPU here")
    monkeypatch.setattr(split_fed, "matmul_2d", launch)
    before = (split_fed.BQ, split_fed.BK, split_fed.STAGES)
    with pytest.raises(RuntimeError, match="no GPU"):
        split_fed_probe.run_tile(*[torch.zeros(1)] * 5, 132, 64, 32, 6)
    assert seen["tile"] == (64, 32, 6)
    assert (split_fed.BQ, split_fed.BK, split_fed.STAGES) == before
