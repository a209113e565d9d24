"""Replayed launches handed straight to triton's C launch function.

Between a call of CompiledKernel.run and the C function that calls cuLaunchKernelEx, triton
3.6 (NVIDIA backend) has two Python layers: CudaLauncher.__call__, which allocates global
and profile scratch, and, for a kernel with host TMA descriptors, wrap_handle_tensordesc's
`inner`, which walks every argument and expands each descriptor into its tensor map, shape
and strides (make_tensordesc_arg). A replay (launch_cache) knows before its first launch
which of a kernel's arguments are addresses and which are descriptors, and the descriptors'
encodings are cached per base address (common.cached_encoder's dicts), so it builds the C
function's argument list itself: addresses as ints (the C launcher then skips its
cuPointerGetAttribute check of a tensor), descriptors from the cache, the scalar and
constexpr arguments as recorded. A replay builds every launch's list before making the
first launch, so a staged product's launches leave the host back to back.

Why: perf/overhead.py on the H100 machine, a replay's host time per call direct against
through triton's launcher: 1000^3 fp16 (one launch, five descriptors) 11.7 us against 23.7,
1000^3 tf32 (B's K-major copy, then the kernel) 28.4 against 48.9. That 1000^3 tf32 row of
the report's odd suite went from 0.60x cuBLAS eager to 0.97x (GPU time 1.00x).

Only launchers of the shape described go direct: no global or profile scratch, and `launch`
either the C function or triton's `inner` around it. For any other, direct() returns None
and the replay goes through Launch.run (triton's own path).
"""

from __future__ import annotations

from typing import NamedTuple, Optional

from . import common


def c_function(compiled) -> Optional[tuple]:
    """(triton's C launch function, cooperative-grid flag, PDL flag) under compiled's
    launcher, or None when the launcher is not the triton 3.6 shape this module knows."""
    launcher = getattr(compiled, "run", None)
    if (getattr(launcher, "global_scratch_size", None) != 0
            or getattr(launcher, "profile_scratch_size", None) != 0):
        return None
    function = getattr(launcher, "launch", None)
    code = getattr(function, "__code__", None)
    if code is not None:
        # wrap_handle_tensordesc's inner(*args): the C function is its free variable
        # `launcher`.
        if code.co_name != "inner" or "launcher" not in code.co_freevars:
            return None
        function = function.__closure__[code.co_freevars.index("launcher")].cell_contents
        if hasattr(function, "__code__"):
            return None
    if not callable(function):
        return None
    return (function, getattr(launcher, "launch_cooperative_grid", None),
            getattr(launcher, "launch_pdl", None))


class Descriptor(NamedTuple):
    """A host TMA descriptor argument of a recorded launch, rebuilt around a new base."""
    shape: tuple
    strides: tuple
    padding: str
    metadata: Optional[dict]  # triton's tensordesc_meta entry; None: passed unlowered
    encoded: dict             # base address -> expanded arguments (common.cached_encoder's)

    def expanded(self, address: int) -> list:
        """The launcher's arguments for this descriptor around address: from encoded, or
        encoded now through triton's (cached, common.cached_encoder) encoder, which keeps
        it there."""
        hit = self.encoded.get(address)
        if hit is None:
            hit = common.encode_descriptor(common._ReplayDescriptor(
                common._Address(address), self.shape, self.strides, self.padding,
                self.encoded), self.metadata)
        return hit


class DirectLaunch(NamedTuple):
    """One recorded launch as the C function's argument list, less its leading arguments,
    which a replay fills in from its operands' and workspaces' addresses."""
    function: object   # triton's C launch function
    grid: tuple        # 3 ints
    fixed: tuple       # after the stream: CUfunction, cooperative grid, PDL, global and
                       # profile scratch, packed metadata, launch metadata, enter/exit hooks
    leading: tuple     # per leading argument: None (unused), or ((pool index, byte
                       # offset), Descriptor or None for a plain address)
    rest: tuple        # the scalar and constexpr arguments, as recorded

    def arguments(self, stream, addresses: list) -> list:
        """The C function's arguments for a launch on the pool whose start addresses are
        addresses (operands a, b, out, d, then the workspaces)."""
        arguments = [*self.grid, stream, *self.fixed]
        for entry in self.leading:
            if entry is None:
                arguments.append(None)
                continue
            (index, offset), descriptor = entry
            address = addresses[index] + offset
            if descriptor is None:
                arguments.append(address)
            else:
                arguments.extend(descriptor.expanded(address))
        arguments.extend(self.rest)
        return arguments


def direct(launch: common.Launch, slots: tuple) -> Optional[DirectLaunch]:
    """launch (recorded by run_kernel, slots as launch_cache._recipe maps its leading
    arguments) as a DirectLaunch, or None when its launcher cannot go direct."""
    found = c_function(launch.compiled)
    if found is None:
        return None
    function, cooperative, pdl = found
    compiled = launch.compiled
    geometries = launch.geometries or (None,) * len(slots)
    encoded = launch.encoded or (None,) * len(slots)
    described = sum(g is not None for g in geometries)
    metadata = list(getattr(compiled.metadata, "tensordesc_meta", None) or
                    [None] * described)
    if len(metadata) != described:
        return None
    leading = []
    for slot, geometry, cache in zip(slots, geometries, encoded):
        if geometry is None:
            leading.append(None if slot is None else (slot, None))
            continue
        if slot is None or cache is None:
            return None
        leading.append((slot, Descriptor(*geometry, metadata.pop(0), cache)))
    fixed = (compiled.function, cooperative, pdl, None, None, compiled.packed_metadata,
             None, None, None)
    return DirectLaunch(function, tuple(launch.grid), fixed, tuple(leading),
                        (*launch.scalars, *launch.constexprs))
