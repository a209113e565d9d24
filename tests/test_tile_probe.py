"""perf/tile_probe.py's candidates: which configs a probe times, with which block sizes, and
that a split-K candidate computes the product it is timed on."""

import sys
from pathlib import Path

import pytest
import torch

from conftest import DEVICE, randn, requires_kernels
from triton_gemm import configs
from triton_gemm.tolerances import assert_close

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perf import tile_probe  # noqa: E402

# (BM, BN, BK, SPLIT, warps, stages), BK given for 16-bit operands as the CLI takes it.
TILE = (32, 32, 32, 4, 2, 1)


def _splitk(candidates):
    return [(label, fn) for kind, label, fn in candidates if kind == "splitk"]


def test_split_k_tiles_given_are_probed_at_every_fp32_tensor_core_precision():
    a, b = torch.zeros(8, 8), torch.zeros(8, 8)
    halves = ((a, a), (b, b))  # tf32x3's staged halves (unused by split-K candidates)
    for precision, kwargs in (("tf32", {}), ("tf32x3", {"halves": halves})):
        labels = [label for label, _ in _splitk(
            tile_probe.candidates(precision, splitk=[TILE], **kwargs))]
        assert labels == ["32x32x16 split4 w2 s1"], (precision, labels)
    # fp32 FMA takes BK as given.
    labels = [label for label, _ in _splitk(tile_probe.candidates("ieee", splitk=[TILE]))]
    assert labels == ["32x32x32 split4 w2 s1"]


@requires_kernels
def test_tf32x3_split_k_candidate_computes_the_product():
    (label, fn), = _splitk(tile_probe.candidates(
        "tf32x3", halves=((None, None), (None, None)), splitk=[TILE]))
    a = randn(20, 300, dtype=torch.float32)
    b = randn(300, 70, dtype=torch.float32)
    out = torch.full((20, 70), float("nan"), device=DEVICE)
    out = fn(a, b, out)
    assert_close(out, a.double() @ b.double(), torch.float32, "tf32x3", label)


def test_rounds_time_every_candidate_in_turn():
    calls = []

    def timer(fn):
        calls.append(fn())
        return float(len(calls))
    times = tile_probe.interleaved({"x": lambda: "x", "y": lambda: "y", "z": lambda: "z"},
                                   timer, rounds=3)
    assert calls == ["x", "y", "z"] * 3
    assert times == {"x": [1.0, 4.0, 7.0], "y": [2.0, 5.0, 8.0], "z": [3.0, 6.0, 9.0]}


def test_rounds_below_one_are_refused_by_name(capsys):
    with pytest.raises(SystemExit):
        tile_probe.main(["--case", "8,8,8", "--rounds", "0"])
    assert "--rounds must be at least 1, got 0" in capsys.readouterr().err


def test_transposed_16_bit_candidates_run_c_transposed_on_the_operands_as_given():
    """--transposed at fp16: the split-K and plain tiles given both run C^T = W A^T (BK as
    given), labelled so."""
    w, at = torch.zeros(40, 56, dtype=torch.float16), torch.zeros(56, 8, dtype=torch.float16)
    labels = [(kind, label) for kind, label, _ in tile_probe.candidates(
        "fp16", splitk=[TILE], plain=[(32, 16, 32, 4, 2)], transposed=(w, at))
        if kind not in ("persistent", "streamk", "gemv16")]
    assert labels == [("splitk", "C^T 32x32x32 split4 w2 s1"), ("plain", "C^T 32x16x32 w4 s2")]


def test_16_bit_candidates_hold_the_gemv16_tiles():
    """--only gemv16 (16-bit only): every configs.GEMV16_TILES config, by its table name."""
    names = [label for kind, label, _ in tile_probe.candidates("bf16", splitk=[], plain=[])
             if kind == "gemv16"]
    assert names == [t[0] for t in configs.GEMV16_TILES]
    assert not [c for c in tile_probe.candidates("tf32", splitk=[], plain=[])
                if c[0] == "gemv16"]


def test_stream_k_candidates_mirror_the_persistent_tiles_not_warp_specialised():
    """--only streamk: each persistent tile given, but a warp-specialised one (the stream-K
    kernel waits on flags between tiles), also on the stream-K kernel, labelled alike."""
    tiles = [(128, 64, 64, 4, 4, False), (128, 128, 64, 8, 3, True, True)]
    labels = [(kind, label) for kind, label, _ in tile_probe.candidates("fp16", persistent=tiles)
              if kind in ("persistent", "streamk")]
    assert labels == [("persistent", "128x64x64 w4 s4"), ("streamk", "128x64x64 w4 s4"),
                      ("persistent", "128x128x64 w8 s3 sub ws")]


@requires_kernels
def test_transposed_16_bit_plain_candidate_computes_the_product():
    a = randn(8, 56, dtype=torch.float16)
    b = randn(56, 40, dtype=torch.float16)
    (kind, label, fn), = [c for c in tile_probe.candidates(
        "fp16", splitk=[], plain=[(32, 16, 32, 4, 2)], transposed=(b.t(), a.t()))
        if c[0] == "plain"]
    out = fn(a, b, torch.full((8, 40), float("nan"), dtype=torch.float16, device=DEVICE))
    assert_close(out, a.double() @ b.double(), torch.float16, None, label)
