"""Autotuning on the GPU: a first process tunes and caches on disk, a second reuses it."""

import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import gpu_only

ROOT = Path(__file__).resolve().parent.parent
# 2048^3: a product the persistent kernel tunes for (1536^3 now runs kernels/wide.py's one
# tile, which tunes nothing).
SCRIPT = """
import time, torch, triton_gemm as tg
a = torch.randn(2048, 2048, device="cuda", dtype=torch.float16)
b = torch.randn(2048, 2048, device="cuda", dtype=torch.float16)
start = time.perf_counter()
c = tg.matmul(a, b)
torch.cuda.synchronize()
print("first call seconds", round(time.perf_counter() - start, 1))
ref = a.double() @ b.double()
print("rel error", ((c.double() - ref).norm() / ref.norm()).item())
print("chosen", tg.tuned_configs())
"""


def _run(cache_dir):
    env = dict(os.environ, TRITON_CACHE_DIR=str(cache_dir), TRITON_PRINT_AUTOTUNING="1",
               TRITON_GEMM_AUTOTUNE="1", PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    print(res.stdout)
    return res.stdout


@gpu_only
def test_tuning_is_cached_across_processes(tmp_path):
    first = _run(tmp_path)
    assert re.search(r"Triton autotuning for function _(matmul|persistent)_kernel", first)
    assert re.search(r"'(p_|h_|seed_)\w+'", first.split("chosen")[1])
    second = _run(tmp_path)
    assert "Triton autotuning for function" not in second  # read from the disk cache
    assert first.split("chosen")[1] == second.split("chosen")[1]
    assert float(second.split("rel error")[1].split()[0]) < 1e-3
