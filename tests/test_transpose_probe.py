"""perf/transpose_probe.py: its Gluon kernel (tf32 with B made K-major in shared memory)
compiles for sm_90a without a GPU and issues what its design says, in a subprocess
(triton.compile needs the interpreter off). Its speed is the GPU's to say (README)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perf import transpose_probe  # noqa: E402

H100_SMEM = 232448  # bytes of shared memory per block, opt-in


def test_config_text_names_every_kernel_argument():
    cfg = transpose_probe.parse_config("128,256,32,3,2,8,1,1")
    assert cfg == {"KIND": "", "BM": 128, "BN": 256, "BK": 32, "STAGES": 3, "AHEAD": 2,
                   "num_warps": 8, "CONST": 1, "INFLIGHT": 1}
    cfg = transpose_probe.parse_config("ws:128,256,32,4,8,1,4,152,1")
    assert cfg == {"KIND": "ws", "BM": 128, "BN": 256, "BK": 32, "STAGES": 4, "num_warps": 8,
                   "CONST": 1, "LOADER_WARPS": 4, "LOADER_REGS": 152, "LOAD_AHEAD": 1}
    cfg = transpose_probe.parse_config("rsws:256,128,32,4,8,16")
    assert cfg == {"KIND": "rsws", "BM": 256, "BN": 128, "BK": 32, "STAGES": 4,
                   "num_warps": 8, "GROUP_M": 16}
    with pytest.raises(ValueError):
        transpose_probe.parse_config("128,256,32,3,2,8")
    with pytest.raises(KeyError):
        transpose_probe.parse_config("xx:1,2")


def _offline(config: str) -> dict:
    code = ("import json, sys; sys.path.insert(0, '.'); from perf import transpose_probe as t; "
            f"print(json.dumps(t.offline_sass(t.parse_config('{config}'))))")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=False,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_kernel_compiles_to_wgmma_on_a_shared_memory_transpose():
    report = _offline("128,256,32,3,2,8,1,1")
    ops = report["opcodes"]
    # Four k8 wgmmas per 32-deep K step, 64 rows per warpgroup, the whole 256-wide tile.
    assert ops.get("HGMMA.64x256x8.F32.TF32") == 4, ops
    assert not any(op.startswith("HMMA") for op in ops), ops
    # B's 32x256 tile over 256 threads: 32 elements each, stored as eight 16-byte K runs.
    assert ops.get("STS.128") == 8, ops
    assert report["spill_bytes"] == 0
    assert report["shared"] <= H100_SMEM


def test_the_warp_specialised_variant_splits_the_registers():
    report = _offline("ws:128,256,32,4,8,1,4,152,1")
    ops = report["opcodes"]
    assert ops.get("HGMMA.64x256x8.F32.TF32") == 4, ops
    # Four loader warps store the tile: 64 elements a thread, sixteen 16-byte runs; setmaxnreg
    # hands registers from them to the wgmma warps.
    assert ops.get("STS.128") == 16, ops
    assert ops.get("USETMAXREG.DEALLOC.CTAPOOL", 0) > 0, ops
    assert report["spill_bytes"] == 0
    assert report["shared"] <= H100_SMEM
