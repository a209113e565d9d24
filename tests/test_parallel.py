"""Tensor-parallel layers: 2 processes (gloo on CPU under the interpreter; NCCL on 2 GPUs)
against the same model in one process, outputs and every gradient shard."""

import os
import socket
import sys
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from conftest import INTERPRETED

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world, port, backend, results):
    sys.path.insert(0, str(ROOT))
    import torch.distributed as dist

    import triton_gemm as tg
    from triton_gemm.parallel import ColumnParallelLinear, RowParallelLinear
    from triton_gemm.tolerances import rel_error

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NCCL_NVLS_ENABLE="0")
    device = f"cuda:{rank}" if backend == "nccl" else "cpu"
    dist.init_process_group(backend, rank=rank, world_size=world)
    try:
        torch.manual_seed(0)  # the same full model and data on every rank
        fc1, fc2 = torch.nn.Linear(16, 32).to(device), torch.nn.Linear(32, 8).to(device)
        x = torch.randn(5, 16, device=device, requires_grad=True)
        ref = fc2(torch.nn.functional.gelu(fc1(x)))
        ref.square().sum().backward()

        col = ColumnParallelLinear.from_linear(fc1, gather_output=False, precision="ieee")
        row = RowParallelLinear.from_linear(fc2, input_is_parallel=True, precision="ieee")
        xp = x.detach().clone().requires_grad_(True)
        out = row(torch.nn.functional.gelu(col(xp)))
        out.square().sum().backward()
        shard = slice(rank * 16, (rank + 1) * 16)
        errors = {
            "out": rel_error(out, ref),
            "x.grad": rel_error(xp.grad, x.grad),
            "fc1.weight.grad": rel_error(col.weight.grad, fc1.weight.grad[shard]),
            "fc1.bias.grad": rel_error(col.bias.grad, fc1.bias.grad[shard]),
            "fc2.weight.grad": rel_error(row.weight.grad, fc2.weight.grad[:, shard]),
            "fc2.bias.grad": rel_error(row.bias.grad, fc2.bias.grad),
        }
        gathered = ColumnParallelLinear.from_linear(fc1, gather_output=True, precision="ieee")
        errors["gathered"] = rel_error(gathered(x), fc1(x))
        scattered = RowParallelLinear.from_linear(fc2, input_is_parallel=False,
                                                  precision="ieee")
        h = torch.randn(5, 32, device=device)
        errors["scattered"] = rel_error(scattered(h), fc2(h))
        results[rank] = errors
        assert tg.last_config() is not None
    finally:
        dist.destroy_process_group()


def _run(world, backend):
    results = mp.Manager().dict()
    mp.spawn(_worker, args=(world, _free_port(), backend, results), nprocs=world, join=True)
    for rank in range(world):
        for name, err in results[rank].items():
            assert err <= 1e-5, f"rank {rank}: {name} relative error {err:.2e}"


@pytest.mark.skipif(not INTERPRETED or torch.cuda.is_available(),
                    reason="the gloo test runs CPU tensors through Triton's interpreter")
def test_two_ranks_gloo_match_one_process():
    _run(2, "gloo")


@pytest.mark.skipif(torch.cuda.device_count() < 2 or INTERPRETED, reason="needs 2 CUDA GPUs")
def test_two_ranks_nccl_match_one_process():
    _run(2, "nccl")


def test_needs_an_initialised_process_group():
    from triton_gemm.parallel import ColumnParallelLinear
    with pytest.raises(RuntimeError, match="init_process_group"):
        ColumnParallelLinear(4, 4)
