"""perf/read_ceiling.py: its streaming read reads every element once, and its table's floor
is the report's."""

import sys
from pathlib import Path

import pytest
import torch
from conftest import DEVICE, requires_kernels

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perf import bench, read_ceiling, suites


@requires_kernels
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_streaming_read_sums_every_element_once(dtype):
    # 1000 elements: 15 blocks of 64 and a partial one, over 3 programs (6, 5 and 5 blocks).
    src = torch.rand(1000, device=DEVICE).to(dtype) + 1.0
    partial = torch.full((3,), float("nan"), device=DEVICE)
    read_ceiling.read_sum(src, partial, block=64, warps=1, stages=1)
    want = src.double().sum().item()
    assert partial.double().sum().item() == pytest.approx(want, rel=1e-6)
    # Program 0 owns blocks 0, 3, ..., 15 (the partial one).
    owned = torch.cat([src[i:i + 64] for i in range(0, 1000, 192)]).double().sum().item()
    assert partial[0].item() == pytest.approx(owned, rel=1e-6)


def test_table_floor_is_the_reports_and_times_are_multiples_of_it():
    row = {"shape": "16x8192x8192 nt", "M": 16, "N": 8192, "K": 8192, "precision": "fp16",
           "read_us": 50.0, "cublas_us": 51.0, "triton_us": 49.0}
    df = read_ceiling.table([row], copy_bps=3.0e12)
    floor = 1e6 * bench.min_bytes(suites.Case(16, 8192, 8192), 2) / 3.0e12
    assert df["floor_us"].iloc[0] == pytest.approx(floor)
    assert df["read_vs_floor"].iloc[0] == pytest.approx(50.0 / floor)
    assert df["triton_vs_floor"].iloc[0] == pytest.approx(49.0 / floor)
    assert df["copy_tbps"].iloc[0] == pytest.approx(3.0)


def test_bad_arguments_are_refused_by_name(capsys):
    with pytest.raises(SystemExit):
        read_ceiling.main(["--case", "8,8,8", "--rounds", "0"])
    assert "--rounds must be at least 1, got 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        read_ceiling.main([])
    assert "give --case or --suite" in capsys.readouterr().err
