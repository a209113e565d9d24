"""perf/transformer.py at its tiny size: a real model trained one step through triton_gemm
(patched Linears, autocast, autograd) matches torch against a float64 copy."""

import sys
from pathlib import Path

from conftest import requires_kernels

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


@requires_kernels
def test_tiny_decoder_matches_torch(capsys):
    from perf import transformer
    assert transformer.main(["--tiny"]) == 0
    out = capsys.readouterr().out
    assert out.count("PASS") == 3
