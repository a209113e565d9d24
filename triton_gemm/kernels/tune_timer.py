"""How the autotuner times a config (triton.autotune's do_bench): GPU time of one launch
after an L2 flush, with the GPU kept busy while the host issues the launch, so that the
host's speed cannot decide the choice.

triton's do_bench flushes L2, records a CUDA event and then launches the config. Where the
host takes longer to launch than the flush keeps the GPU busy (~85 us), the GPU idles
between the event and the kernel and the idle time is timed as the kernel's. Through
triton's Python launcher (binder, descriptor prepare hook) a persistent-kernel launch took
75-145 us of host time on the lent H100 machine, and do_bench then timed 1000^3 fp16's
p_128x256x64_sub at 64-73 us in three calls, against 15.0 us of GPU time (CUDA graph) and
16.2 here; 128x11008x4096 fp16's tiles came out in a different order in each call.

Here a sleep kernel of twice the host's launch time runs between the flush and the start
event, so the launch is queued before the event fires. The flush reads 256 MB, as the
report's timing does (perf/bench.py: triton's zero-writing flush leaves dirty lines that
the timed kernel writes back, a cost memory-bound products do not have in use).
"""

from __future__ import annotations

import time

import torch

# Bytes read to flush L2 before each timed launch: five times the H100's 50 MB.
FLUSH_BYTES = 256 << 20
# Milliseconds of timed and of warm-up launches per config, as triton's do_bench.
REP_MS = 100.0
WARMUP_MS = 25.0
# The sleep lasts this many times the host's launch time (a margin for its jitter).
HOST_MARGIN = 2.0

_cycles_per_us: dict[int, float] = {}


def _sleep_rate(device: int) -> float:
    """GPU clock cycles per microsecond of torch.cuda._sleep on device, measured once."""
    if device not in _cycles_per_us:
        cycles = 1 << 22
        start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        torch.cuda._sleep(cycles)  # the first call loads the kernel
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        _cycles_per_us[device] = cycles / (start.elapsed_time(end) * 1e3)
    return _cycles_per_us[device]


def bench(fn, quantiles=(0.5, 0.2, 0.8)) -> list[float]:
    """Milliseconds of fn() at the given quantiles over REP_MS of launches on the current
    CUDA device, each after an L2 flush and a sleep longer than fn's host time."""
    device = torch.cuda.current_device()
    source = torch.ones(FLUSH_BYTES // 4, device=f"cuda:{device}")
    sink = torch.empty((), device=f"cuda:{device}")
    fn()  # compiles
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(3):
        fn()
    host_us = (time.perf_counter() - start) / 3 * 1e6
    torch.cuda.synchronize()
    sleep_cycles = int(HOST_MARGIN * host_us * _sleep_rate(device))

    def timed(reps: int) -> tuple[list[float], float]:
        """(ms of each launch, ms of the whole loop) over reps flushed, slept launches."""
        pairs = [tuple(torch.cuda.Event(enable_timing=True) for _ in range(2))
                 for _ in range(reps)]
        loop = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
        loop[0].record()
        for begin, finish in pairs:
            torch.sum(source, dim=0, out=sink)
            torch.cuda._sleep(sleep_cycles)
            begin.record()
            fn()
            finish.record()
        loop[1].record()
        torch.cuda.synchronize()
        return [b.elapsed_time(f) for b, f in pairs], loop[0].elapsed_time(loop[1])

    _, loop_ms = timed(3)
    per_rep = loop_ms / 3
    for _ in range(max(1, int(WARMUP_MS / per_rep))):
        fn()
    times, _ = timed(max(5, int(REP_MS / per_rep)))
    return torch.quantile(torch.tensor(times, dtype=torch.float64),
                          torch.tensor(quantiles, dtype=torch.float64)).tolist()
