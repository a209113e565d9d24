"""CUDA graphs: after a warm-up call (tuning, compilation), every kernel path can be captured
and replayed, so its launch path holds no host synchronisation and no host-side state that
goes stale between replays."""

import pytest
import torch

import triton_gemm as tg
from conftest import gpu_only, randn
from triton_gemm.tolerances import assert_close

# (name, M, N, K, dtype): one case per dispatcher path on a Hopper GPU.
PATHS = [
    ("plain", 200, 300, 100, torch.float16),
    ("persistent", 2048, 2048, 2048, torch.float16),
    ("ping-pong", 2048, 2048, 512, torch.float16),
    ("split-K", 16, 4096, 4096, torch.bfloat16),
    ("16-bit GEMV", 1, 4096, 4096, torch.float16),  # kernels/gemv16.py
    ("padded", 1000, 1000, 1000, torch.float16),
    ("staged tf32", 1024, 1024, 1024, torch.float32),
    ("ieee K-major", 64, 4096, 1024, torch.float32),  # simt_tma.split_matmul
]
PRECISIONS = {"staged tf32": "tf32", "ieee K-major": "ieee"}


@gpu_only
@pytest.mark.parametrize("name,m,n,k,dtype", PATHS, ids=[p[0] for p in PATHS])
def test_capture_and_replay(name, m, n, k, dtype):
    precision = PRECISIONS.get(name)
    x, w, bias = randn(m, k, dtype=dtype), randn(n, k, dtype=dtype), randn(n, dtype=dtype)

    def step():
        return tg.linear(x, w, bias, activation="gelu_tanh", precision=precision)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()  # warm-up: tuning and compilation happen outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step()
    for _ in range(2):  # new inputs, copied into the captured buffers, and a poisoned output
        x.copy_(randn(m, k, dtype=dtype))
        w.copy_(randn(n, k, dtype=dtype))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        ref = torch.nn.functional.gelu(x.double() @ w.double().t() + bias.double(),
                                       approximate="tanh")
        assert_close(out, ref, dtype, precision, f"graph replay, {name}")


@gpu_only
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_capture_and_replay_against_a_row_major_weight_in_runs(dtype):
    """addmm of 8 rows against a row-major weight in 16-byte runs off ALIGN (4104 columns):
    transposed on the plain kernel's thin tile, or on fast memory on the split-K kernel and
    its reduce (dispatch.TRANSPOSED_SPLIT_K), captured and replayed like the paths above."""
    m, n, k = 8, 4104, 4104
    x, w, bias = randn(m, k, dtype=dtype), randn(k, n, dtype=dtype), randn(n, dtype=dtype)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        tg.addmm(bias, x, w)  # warm-up: tuning and compilation happen outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = tg.addmm(bias, x, w)
    for _ in range(2):  # new inputs, copied into the captured buffers, and a poisoned output
        x.copy_(randn(m, k, dtype=dtype))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert_close(out, x.double() @ w.double() + bias.double(), dtype, None,
                     "graph replay, a row-major weight in runs")
