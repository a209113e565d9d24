"""The autotuner's timer: GPU time of a config, not the host's time to launch it."""

import time

import torch
import triton

from conftest import gpu_only
from triton_gemm.kernels import tune_timer


@gpu_only
def test_a_slow_host_is_not_timed_as_the_kernel():
    """A launch whose host side takes 0.5 ms: triton's do_bench times the host's wait as
    well, the tuner's timer only the kernel (a few microseconds)."""
    x = torch.randn(1 << 20, device="cuda")

    def launch():
        time.sleep(500e-6)
        x.mul_(1.0)
    assert triton.testing.do_bench(launch, return_mode="median") > 0.3
    kernel_ms = tune_timer.bench(launch)[0]
    assert 0 < kernel_ms < 0.05
