"""Where the suite runs: a CUDA GPU when there is one, else Triton's CPU interpreter.

The GPU suite runs the same tests at larger shapes and adds dtypes the interpreter cannot
check (a bf16 dot). Without CUDA and without TRITON_INTERPRET=1 the kernel tests skip.
"""

import json
import os
import random
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
import torch

ON_GPU = torch.cuda.is_available()
INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") == "1"
if ON_GPU and not INTERPRETED:
    # The suite touches many (shape, dtype, layout) keys; tuning each would take minutes.
    # Tuning itself is tested in a subprocess (test_autotune.py). Must precede the import.
    os.environ.setdefault("TRITON_GEMM_AUTOTUNE", "0")

DEVICE = "cuda" if ON_GPU and not INTERPRETED else "cpu"
RUNNABLE = DEVICE == "cuda" or INTERPRETED

requires_kernels = pytest.mark.skipif(
    not RUNNABLE, reason="needs a CUDA GPU, or TRITON_INTERPRET=1 for Triton's CPU interpreter")
gpu_only = pytest.mark.skipif(DEVICE != "cuda", reason="needs a CUDA GPU (not the interpreter)")

# (dtype, precision) pairs the suite covers; bf16 runs in the interpreter with its dot
# upcast to fp32 (loads, stores and masks are still bf16), and natively on the GPU.
CASES = [
    (torch.float32, "ieee"),
    (torch.float32, "tf32"),
    (torch.float32, "tf32x3"),
    (torch.float16, None),
    (torch.bfloat16, None),
]
CASE_IDS = ["fp32-ieee", "fp32-tf32", "fp32-tf32x3", "fp16", "bf16"]

# linear()'s fused activations as torch computes them (the tests' references).
TORCH_ACTIVATIONS = {
    "relu": torch.relu,
    "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda z: torch.nn.functional.gelu(z, approximate="tanh"),
    "silu": torch.nn.functional.silu,
}


# Fresh data every session; TRITON_GEMM_TEST_SEED=<n> replays a failing one.
SESSION_SEED = int(os.environ.get("TRITON_GEMM_TEST_SEED", random.SystemRandom().randrange(2**31)))


def pytest_report_header(config):
    return (f"triton_gemm: device={DEVICE}, interpreter={INTERPRETED}, "
            f"TRITON_GEMM_TEST_SEED={SESSION_SEED}")


def randn(*shape, dtype=torch.float32):
    """Fresh N(0, 1) data on the suite's device."""
    return torch.randn(tuple(shape), dtype=torch.float32, device=DEVICE).to(dtype)


def poisoned(*shape, dtype=torch.float32):
    """An output full of NaN on the suite's device, so an element a call leaves unwritten
    fails."""
    return torch.full(shape, float("nan"), dtype=dtype, device=DEVICE)


def offline_build(script: str, *args) -> dict:
    """The JSON a compile script prints last, run with json.dumps(args) as its argument in
    a subprocess from the repository root without the interpreter (triton.compile for a GPU
    target needs it off); fails the test with the script's stderr if it fails."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", script, json.dumps(list(args))],
                          cwd=Path(__file__).resolve().parent.parent, env=env, check=False,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def stored(t: torch.Tensor, transposed: bool) -> torch.Tensor:
    """t as is, or the same matrix stored the other way (the transpose of a contiguous one)."""
    return t.t().contiguous().t() if transposed else t


def single_plan(m, n, k, dtype=torch.float16, b_k_major=False, batch=1, precision="half",
                sms=132):
    """dispatch.plan for (batch, m, k) @ (batch, k, n) operands (B stored K-major with
    b_k_major) on a GPU of `sms` SMs; meta-free empty CPU tensors (no data read)."""
    from triton_gemm import dispatch
    a = torch.empty(batch, m, k, dtype=dtype)
    b = (torch.empty(batch, n, k, dtype=dtype).transpose(1, 2) if b_k_major
         else torch.empty(batch, k, n, dtype=dtype))
    return dispatch.plan(a, b, precision, sms)


def check_pointer_store_and_matrix_d(kernel, m: int, n: int, k: int) -> None:
    """A kernel module's matmul_2d (kernels/tall.py, kernels/wide.py) into an fp16 out whose
    rows are off 16 bytes (stored by pointers) with a bias, out's column past N left NaN;
    then with a matrix D, which supports() leaves to the persistent kernel but the kernel
    computes right all the same."""
    from triton_gemm.tolerances import assert_close
    name = kernel.__name__.rsplit(".", 1)[-1]
    a, b = randn(m, k, dtype=torch.float16), randn(k, n, dtype=torch.float16)
    bias, d = randn(n, dtype=torch.float16), randn(m, n, dtype=torch.float16)
    buffer = poisoned(m, n + 1, dtype=torch.float16)
    out = buffer[:, :n]
    assert kernel.supports(a, b, out, bias.expand(m, n)) and not kernel.supports(a, b, out, d)
    kernel.matmul_2d(a, b, out, bias, alpha=-1.0, beta=0.5, sms=3)
    assert_close(out, -(a.double() @ b.double()) + 0.5 * bias.double(), torch.float16,
                 what=f"{name}, pointer-stored C", operands=(a, b))
    assert torch.isnan(buffer[:, n]).all()
    out = poisoned(m, n, dtype=torch.float16)
    kernel.matmul_2d(a, b, out, d, alpha=2.0, beta=-1.0, sms=3)
    assert_close(out, 2.0 * (a.double() @ b.double()) - d.double(), torch.float16,
                 what=f"{name}, matrix D", operands=(a, b))


@pytest.fixture(autouse=True)
def _seed_per_test(request):
    """Each test draws its own stream from the session seed and its name."""
    torch.manual_seed(SESSION_SEED ^ zlib.crc32(request.node.nodeid.encode()))
