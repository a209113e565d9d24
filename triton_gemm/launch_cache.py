"""Replay of resolved calls: the kernel launches a call signature led to, run again without
planning, config lookup or argument binding.

A call's path (dispatch.plan, the kernel family, the tuned config, the kernel's scalar
arguments and specialisation) depends only on the operands' shapes, strides, dtypes,
16-byte alignment and device, and on alpha, beta, precision and activation: the signature.
The first call of a signature runs through dispatch.run with its launches recorded
(kernels/common.capture); when every tensor those launches touch is an operand of the
call or scratch allocated through common.workspace (split-K partials, padded and K-major
staged copies made by kernels/copy.py), or a view inside exactly one of them (a fringe strip
of dispatch), the record is kept, and
later calls of the signature allocate fresh scratch and launch the same compiled kernels on
their own operands, through triton's C launch function where kernels/c_launch.py can reach
it. Calls being tuned are not kept and take dispatch.run again.

Why: each eager GEMM spent 70-160 us of host time on the H100 machine's CPU
(perf/overhead.py) against 12-25 us for torch.matmul, and a GPT-2-small training step
(perf/transformer.py --profile) ran 33.6 ms of GPU kernels in 83.8 ms of wall time: the
host was the limit.

TRITON_GEMM_LAUNCH_CACHE=0 turns replay off.
"""

from __future__ import annotations

import os
from typing import NamedTuple, Optional

import torch

from . import dispatch
from .kernels import c_launch, common

ENABLED = os.environ.get("TRITON_GEMM_LAUNCH_CACHE", "1") != "0" and not common.INTERPRETER

# Signatures kept; past this the table starts over (a workload cycling through more
# signatures than this is rare, and each miss only costs the planned path once).
MAX_ENTRIES = 4096

class Recipe(NamedTuple):
    launches: tuple          # common.Launch, in order
    slots: tuple             # per launch, per pointer or descriptor argument: (pool index,
                             # byte offset), or None for an unused (None) argument; the
                             # pool holds a, b, out, d, then the workspaces
    workspaces: tuple        # (shape, dtype) of each scratch tensor, pool index 4, 5, ...
    config: object           # common's record of the config that ran (for last_config())
    direct: tuple = ()       # per launch, its c_launch.DirectLaunch; () when one launch
                             # cannot go direct (then every launch runs through Launch.run)


_recipes: dict = {}
stats = {"replayed": 0, "planned": 0}


def signature(a, b, out, d, alpha, beta, precision, activation, device) -> tuple:
    """Everything the launches of a call depend on (see the module docstring)."""
    key = (device, a.dtype, precision, activation, alpha, beta,
           a.shape, a.stride(), b.shape, b.stride(), out.shape, out.stride(),
           a.data_ptr() % 16 == 0, b.data_ptr() % 16 == 0, out.data_ptr() % 16 == 0)
    if d is None:
        return key
    return (*key, d.dtype, d.shape, d.stride(), d.data_ptr() % 16 == 0)


def run(a, b, out, d=None, *, alpha: float = 1.0, beta: float = 0.0, precision: str = "ieee",
        activation: int = 0) -> torch.Tensor:
    """dispatch.run(a, b, out, d, ...) by replay when this signature was recorded.

    a, b, out: (B, M, K), (B, K, N), (B, M, N), or all three 2-D (one product; a replay
    then needs no batch views, ~1 us of host time each); d broadcasts to out."""
    if not ENABLED or common.launch_hooks_set():
        return _planned(a, b, out, d, alpha, beta, precision, activation)
    device = common.current_device()
    key = signature(a, b, out, d, alpha, beta, precision, activation, device)
    recipe = _recipes.get(key)
    if recipe is not None:
        _replay(recipe, (a, b, out, d), device)
        stats["replayed"] += 1
        return out
    with common.capture() as record:
        _planned(a, b, out, d, alpha, beta, precision, activation)
    stats["planned"] += 1
    recipe = _recipe(record, (a, b, out, d))
    if recipe is not None:
        if len(_recipes) >= MAX_ENTRIES:
            _recipes.clear()
        _recipes[key] = recipe
    return out


def _planned(a, b, out, d, alpha, beta, precision, activation) -> torch.Tensor:
    """dispatch.run, on batch views of 2-D operands (the same addresses, so a record of
    the call replays on the 2-D tensors)."""
    batched = (a[None], b[None], out[None]) if a.dim() == 2 else (a, b, out)
    dispatch.run(*batched, d, alpha=alpha, beta=beta, precision=precision,
                 activation=activation)
    return out


def _replay(recipe: Recipe, operands: tuple, device: int) -> None:
    device_of_out = operands[2].device
    workspaces = [torch.empty(shape, dtype=dtype, device=device_of_out)
                  for shape, dtype in recipe.workspaces]
    stream = common.current_stream(device)
    if recipe.direct:
        addresses = [None if t is None else t.data_ptr() for t in (*operands, *workspaces)]
        # Every launch's arguments first, so the launches leave the host back to back.
        calls = [launch.arguments(stream, addresses) for launch in recipe.direct]
        for launch, arguments in zip(recipe.direct, calls):
            launch.function(*arguments)
    else:
        pool = [*operands, *workspaces]
        for launch, slots in zip(recipe.launches, recipe.slots):
            # An int pointer is what triton's launcher passes for a tensor (its data_ptr()).
            launch.run([None if slot is None else pool[slot[0]] if slot[1] == 0
                        else pool[slot[0]].data_ptr() + slot[1] for slot in slots], stream)
    common.restore_record(recipe.config)


def _span_bytes(t: torch.Tensor) -> int:
    """Bytes from t's first element to just past its last."""
    if t.numel() == 0:
        return 0
    last = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
    return (last + 1) * t.element_size()


def _recipe(record: common.Capture, operands: tuple) -> Optional[Recipe]:
    """The replayable form of a recorded call, or None when it cannot be replayed: nothing
    or a tuning run was recorded, operands share an address or a launch pointer lies inside
    two of them (which operand it stands for would be ambiguous), or a launch touched
    memory that is neither an operand nor a workspace."""
    if not record.recordable or not record.launches:
        return None
    # Every tensor a launch takes starts inside exactly one operand or workspace: the
    # operand itself, a view of it (a[0], b[:, c:].T of a fringe strip), a transposed
    # staged copy; the pool index and byte offset name it.
    present = [t for t in operands if t is not None] + record.workspaces
    starts = {t.data_ptr() for t in present}
    if len(starts) != len(present):
        return None
    pool = [(i, t) for i, t in enumerate(operands) if t is not None]
    pool += [(len(operands) + i, t) for i, t in enumerate(record.workspaces)]
    ranges = [(i, t.data_ptr(), t.data_ptr() + max(_span_bytes(t), 1)) for i, t in pool]
    slots = []
    for launch in record.launches:
        launch_slots = []
        for t in launch.tensors:
            if t is None:  # an argument the kernel does not use (None: a constexpr)
                launch_slots.append(None)
                continue
            ptr = (t.base if isinstance(t, common.DESCRIPTORS) else t).data_ptr()
            inside = [(i, ptr - start) for i, start, end in ranges if start <= ptr < end]
            if len(inside) != 1:
                return None
            launch_slots.append(inside[0])
        slots.append(tuple(launch_slots))
    # The recipe keeps compiled kernels, never tensors.
    launches = tuple(launch._replace(tensors=()) for launch in record.launches)
    direct = tuple(c_launch.direct(launch, launch_slots)
                   for launch, launch_slots in zip(launches, slots))
    return Recipe(launches, tuple(slots),
                  tuple((tuple(t.shape), t.dtype) for t in record.workspaces),
                  common.current_record(), direct if all(direct) else ())


def clear() -> None:
    """Forget every recorded signature (tests; after changing tuned configs)."""
    _recipes.clear()
