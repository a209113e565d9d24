"""perf/wave_probe.py without a GPU: its operand layouts and its command line."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perf import wave_probe  # noqa: E402


@pytest.mark.parametrize("layout,a_strides,b_strides", [
    ("nn", (5, 1), (3, 1)), ("nt", (5, 1), (1, 5)), ("tn", (1, 2), (3, 1)),
    ("tt", (1, 2), (1, 5))])
def test_operands_have_the_named_layout(layout, a_strides, b_strides):
    a, b = wave_probe._operands(f"2,3,5,{layout}", device="cpu")
    assert a.shape == (2, 5) and b.shape == (5, 3)
    assert a.stride() == a_strides and b.stride() == b_strides


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_operands_take_the_dtype_asked_for(dtype):
    a, b = wave_probe._operands("2,3,5,nt", dtype, device="cpu")
    assert a.dtype == b.dtype == dtype and b.stride() == (1, 5)


def test_an_unknown_layout_is_refused_by_name():
    with pytest.raises(ValueError, match="'pad'"):
        wave_probe._operands("2,3,5,pad", device="cpu")


def test_help_lists_the_probe_options():
    done = subprocess.run([sys.executable, "perf/wave_probe.py", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    for option in ("--cases", "--sustain", "--profile", "--kernels", "--group-m", "--dtype",
                   "--cublas-kernels"):
        assert option in done.stdout
