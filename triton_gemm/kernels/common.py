"""What every kernel launcher shares: run modes, the layout key, and the config record."""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from typing import NamedTuple, Optional

import torch
import triton
from triton import knobs
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonTensorDescriptor
from triton.tools.tensor_descriptor import TensorDescriptor
from triton.runtime import driver as _driver

from .. import configs
from . import tune_timer

# Host TMA descriptors of triton kernels and of Gluon ones (kernels/register_fed.py): the
# same fields (base, shape, strides, block_shape, padding) for launching and replaying.
DESCRIPTORS = (TensorDescriptor, GluonTensorDescriptor)

# triton.jit reads TRITON_INTERPRET when a kernel is defined, so the mode is fixed at import.
INTERPRETER = os.environ.get("TRITON_INTERPRET", "0") == "1"

# Triton's own autotune cache (a JSON file per kernel and key under TRITON_CACHE_DIR,
# default ~/.triton/cache) lets a second process skip tuning. TRITON_GEMM_TUNE_CACHE=0
# turns it off.
TUNE_CACHE = os.environ.get("TRITON_GEMM_TUNE_CACHE", "1") != "0"

# TRITON_GEMM_AUTOTUNE=0 skips tuning and runs each family's default config: for test
# suites that would otherwise tune every (shape bucket, dtype, layout) they touch.
AUTOTUNE = os.environ.get("TRITON_GEMM_AUTOTUNE", "1") != "0"

# Operand layouts, the LAYOUT key argument: bit 0 set when A is K-contiguous (row-major),
# bit 1 set when B is K-contiguous (K-major, e.g. a transposed weight). fp32-input
# tensor-core dots run 142 vs 308 TFLOPS on the H100 depending on B's layout, so tuned
# configs must not be shared across layouts.
A_K_CONTIGUOUS = 1
B_K_CONTIGUOUS = 2

# Widest load per thread: the pointer kernels' hints (matmul.vector_width,
# splitk.vector_hints) promise runs of this many bytes that triton cannot see by itself.
VECTOR_BYTES = 16


def cdiv(a: int, b: int) -> int:
    """ceil(a / b) for host code: triton.cdiv (a constexpr function in triton 3.6) costs
    ~2.5 us a call from Python (this machine), integer division ~0.03."""
    return -(-a // b)


def layout_code(a: torch.Tensor, b: torch.Tensor) -> int:
    """LAYOUT key of (..., M, K) A and (..., K, N) B."""
    code = 0
    if a.stride(-1) == 1:
        code |= A_K_CONTIGUOUS
    if b.stride(-2) == 1:
        code |= B_K_CONTIGUOUS
    return code


def tuning_args(m: int, n: int, k: int, a: torch.Tensor, b: torch.Tensor) -> tuple:
    """Values of configs.TUNING_KEY's integer arguments (after the kernel's own)."""
    return configs.bucket(m), configs.bucket(n), configs.bucket(k), layout_code(a, b)


def launch(kernel, tuner, grid, args, meta, config, family: str, key: tuple, prepare=None):
    """Run a pinned config on the raw kernel, or the family's tuned config for key (the
    autotuner tunes on the first call of a key); record and return the config that ran.
    prepare(args, kwargs), if given, runs before the kernel with the launch's constexprs
    (the tuner's own launches get it from make_tuners).

    key must hold everything the autotuner keys on (configs.TUNING_KEY values and the
    operand dtypes). A hit skips triton's Autotuner.run, which costs ~40 us of host time
    per call on the H100 machine's CPU (perf/overhead.py: 83 us through the autotuner
    against 40 us for the kernel with a pinned config, 2048^3 fp16)."""
    if config is None:
        chosen = _chosen.get((id(tuner), key))
        if chosen is None:
            not_recordable()  # the autotuner launches on its own
            tuner[grid](*args, **meta)
            config = tuner.best_config
            _chosen[(id(tuner), key)] = (config, config.all_kwargs())
            record(config, family)
            return config
        config, config_kwargs = chosen
    else:
        config_kwargs = config.all_kwargs()
    constexprs = {**meta, **config_kwargs}
    if prepare is not None:
        prepare(args, constexprs)
    run_kernel(kernel, grid, args, constexprs)
    record(config, family)
    return config


_chosen: dict = {}  # (id(autotuner), key) -> (config, its kwargs): the launch fast path


_compiled: dict = {}   # launch variant (see run_kernel) -> compiled kernel
_COMPILED_MAX = 4096   # variants kept; past this the table starts over (a re-bind each)
_pointer_args: dict = {}   # id(kernel) -> (leading pointer arguments, constexpr names)


def launch_hooks_set() -> bool:
    """Whether a launch enter/exit hook is installed (an empty HookChain is triton's idle
    default)."""
    return any(hook is not None and getattr(hook, "calls", True)
               for hook in (knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook))


def run_kernel(kernel, grid, args: tuple, constexprs: dict, prepare=None) -> None:
    """kernel[grid](*args, **constexprs), where args are all of the kernel's runtime
    arguments in order and constexprs its constexpr arguments plus launch options
    (num_warps, ...). prepare(compiled), where given, runs on each compiled kernel before
    its first launch (register_fed's clusters set the launch's CTAs a cluster there).

    The first launch of a variant goes through triton's JIT (compiling if needed) and keeps
    the compiled kernel; later launches of the same variant call it directly. That skips
    triton's argument binder and cache-key construction: 35 us per launch on the H100
    machine's CPU for the plain kernel's 30 arguments, against 10 us for a one-argument
    kernel (perf/overhead.py). A variant is everything triton specialises on, taken
    coarser: the scalar arguments as they are (triton looks at ==1, %16 and width), and
    per pointer argument its dtype and 16-byte alignment, per host TMA descriptor its
    dtype and block shape (what triton specialises a descriptor on). The kernel's pointer
    and descriptor arguments come first (named *_ptr, *_desc; None for an unused one).
    Under capture() the launch is also recorded.
    """
    if INTERPRETER or (launch_hooks_set() and prepare is None):
        # The interpreter has no compiled kernels; launch hooks (profilers) get triton's
        # own launch path and its metadata (not a prepared kernel: triton's launch would
        # not know what prepare changed).
        kernel[grid](*args, **constexprs)
        not_recordable()
        return
    info = _pointer_args.get(id(kernel))
    if info is None:
        names = [p.name for p in kernel.params]
        pointers = next(i for i, name in enumerate(names)
                        if not name.endswith(("_ptr", "_desc")))
        info = _pointer_args[id(kernel)] = (
            pointers, [p.name for p in kernel.params if p.is_constexpr])
    pointers, names = info
    device = _driver.active.get_current_device()
    tensors = args[:pointers]
    variant = (id(kernel), device, tuple(constexprs.items()), args[pointers:],
               tuple([_specialisation(t) for t in tensors]))
    compiled = _compiled.get(variant)
    if callable(grid):
        grid = grid(constexprs)
    grid = (*grid, 1, 1)[:3]
    constexpr_values = tuple(constexprs[name] for name in names)
    launched = False
    if compiled is None:
        if len(_compiled) >= _COMPILED_MAX:
            _compiled.clear()
        if prepare is None:
            compiled = _compiled[variant] = kernel[grid](*args, **constexprs)
            launched = True
        else:
            compiled = kernel.warmup(*args, grid=grid, **constexprs)
            prepare(compiled)
            _compiled[variant] = compiled
    if not launched:
        stream = _driver.active.get_current_stream(device)
        compiled.run(grid[0], grid[1], grid[2], stream, compiled.function,
                     compiled.packed_metadata, None, None, None, *args, *constexpr_values)
    record_to = getattr(_local, "capture", None)
    if record_to is not None:
        geometries = _geometries(tensors)
        record_to.launches.append(Launch(
            compiled, grid, tensors, args[pointers:], constexpr_values, geometries,
            tuple(None if g is None else {} for g in geometries)))


def _specialisation(arg):
    """What a compiled kernel depends on of a leading (pointer or descriptor) argument."""
    if arg is None:
        return None
    if isinstance(arg, DESCRIPTORS):  # its base is 16-byte aligned (it asserts so)
        return arg.base.dtype, tuple(arg.block_shape)
    return arg.dtype, arg.data_ptr() % 16 == 0


def _geometries(tensors) -> tuple:
    """Per leading argument, (shape, strides, padding) of a host TMA descriptor, else None:
    with a new base address, what triton's launcher needs to build the descriptor again
    (the block shape is the compiled kernel's)."""
    if not any(isinstance(t, DESCRIPTORS) for t in tensors):
        return ()
    return tuple((tuple(t.shape), tuple(t.strides), t.padding)
                 if isinstance(t, DESCRIPTORS) else None for t in tensors)


class _Address(int):
    """A device address standing in for a tensor's data_ptr() as a descriptor base."""

    def data_ptr(self) -> int:
        return int(self)


class _ReplayDescriptor(NamedTuple):
    """The fields of a TensorDescriptor triton's launcher reads to encode a TMA descriptor,
    and the encodings of its launch argument so far (cached_encoder)."""
    base: object       # has data_ptr()
    shape: tuple
    strides: tuple
    padding: str
    encoded: Optional[dict] = None  # base address -> triton's encoded argument


# Encodings kept per descriptor argument of a recorded launch; past this it starts over.
# Replays rotate through few base addresses (torch's caching allocator hands the same blocks
# back), so a handful is the working set.
ENCODED_MAX = 64


def cached_encoder(encode):
    """triton's make_tensordesc_arg (encode(arg, metadata): the launcher's TMA descriptor
    argument, cuTensorMapEncodeTiled inside), reusing the encoding of a replayed launch's
    descriptor whose base address it has seen: its shape, strides, padding and block (the
    compiled kernel's metadata) are those of its launch, so the address decides the bytes.
    Other arguments are encoded afresh.

    Why: a replayed 1000^3 fp16 matmul on the H100 machine spent 42 us of host time, 5 x 5.8
    us of it in this function (perf/overhead.py --profile: 3.1 us of each in
    fill_tma_descriptor); torch.matmul took 13.5 us. With the cache, host us per call
    (perf/overhead.host_us, cached against uncached in turns, three rounds, on a host whose
    torch.matmul moved between 17 and 56 us): triton_gemm.matmul 1000^3 fp16 62-71 against
    76-81, 2048x2048x256 36-44 against 49-54. perf/overhead.py times a replay both ways: on a
    quieter host (torch.matmul 13.1 us), 1000^3 fp16 27.5 us cached against 33.1."""
    def make_tensordesc_arg(arg, metadata):
        cache = getattr(arg, "encoded", None)
        if cache is None or metadata is None:
            return encode(arg, metadata)
        key = arg.base.data_ptr()
        hit = cache.get(key)
        if hit is None:
            if len(cache) >= ENCODED_MAX:
                cache.clear()
            hit = cache[key] = encode(arg, metadata)
        return hit
    make_tensordesc_arg.uncached = encode
    return make_tensordesc_arg


def encode_descriptor(arg, metadata) -> list:
    """The launcher's arguments for descriptor arg (a TensorDescriptor or _ReplayDescriptor)
    through triton's make_tensordesc_arg as installed (cached_encoder, which keeps a
    _ReplayDescriptor's encoding in its dict)."""
    from triton.backends.nvidia import driver as nvidia_driver
    return nvidia_driver.make_tensordesc_arg(arg, metadata)


def _install_cached_encoder() -> None:
    """Put cached_encoder in front of triton's make_tensordesc_arg, which its launchers look up
    by name at each launch (triton 3.6, NVIDIA backend); nothing where that is absent."""
    try:
        from triton.backends.nvidia import driver as nvidia_driver
    except ImportError:
        return
    encode = getattr(nvidia_driver, "make_tensordesc_arg", None)
    if callable(encode) and not hasattr(encode, "uncached"):
        nvidia_driver.make_tensordesc_arg = cached_encoder(encode)


if not INTERPRETER:
    _install_cached_encoder()


class Launch(NamedTuple):
    """One launch of a compiled kernel as run_kernel ran it."""
    compiled: object       # triton CompiledKernel
    grid: tuple            # 3 ints
    tensors: tuple         # the pointer and descriptor arguments
    scalars: tuple         # the other runtime arguments
    constexprs: tuple      # constexpr values in parameter order (the launcher takes them)
    geometries: tuple = ()  # _geometries(tensors): () when none is a descriptor
    encoded: tuple = ()    # per descriptor argument, its encodings (cached_encoder), else None

    def run(self, tensors, stream) -> None:
        """Launch on new leading arguments: tensors, addresses (ints) or None, in order; a
        descriptor's place takes its new base, and the descriptor is built around it (or
        reused, where this launch has encoded one around that base before)."""
        if self.geometries:
            caches = self.encoded or (None,) * len(self.geometries)
            tensors = [t if g is None or t is None else _ReplayDescriptor(
                t if hasattr(t, "data_ptr") else _Address(t), *g, cache)
                for t, g, cache in zip(tensors, self.geometries, caches)]
        compiled = self.compiled
        compiled.run(self.grid[0], self.grid[1], self.grid[2], stream, compiled.function,
                     compiled.packed_metadata, None, None, None, *tensors, *self.scalars,
                     *self.constexprs)


class Capture:
    """What a call launched (run_kernel's launches, in order), the workspaces it allocated
    through workspace(), and whether it can be replayed from that record at all."""

    def __init__(self):
        self.launches: list[Launch] = []
        self.workspaces: list[torch.Tensor] = []
        self.recordable = True


# The active Capture of this thread (autograd runs backward on threads of its own).
_local = threading.local()


@contextlib.contextmanager
def capture():
    """Record the kernel launches this thread makes inside the block."""
    previous = getattr(_local, "capture", None)
    _local.capture = Capture()
    try:
        yield _local.capture
    finally:
        _local.capture = previous


def not_recordable() -> None:
    """Mark the active capture (if any) as not replayable: work ran outside run_kernel's
    compiled launches."""
    record_to = getattr(_local, "capture", None)
    if record_to is not None:
        record_to.recordable = False


def workspace(shape: tuple, dtype: torch.dtype, device) -> torch.Tensor:
    """torch.empty for scratch memory a launch sequence needs, registered with an active
    capture so a replay allocates its own."""
    t = torch.empty(shape, dtype=dtype, device=device)
    if getattr(_local, "capture", None) is not None:
        _local.capture.workspaces.append(t)
    return t


_flag_buffers: dict = {}  # (device, stream) -> int32 zeros


def flags(count: int, device) -> torch.Tensor:
    """count int32 zeros for a kernel that leaves them zero (kernels/streamk.py's handover
    flags), kept across calls so no launch pays for zeroing them: one buffer per device and
    stream, as launches on one stream never overlap. A launch that takes it is not replayed
    by launch_cache (the buffer is neither an operand nor a workspace)."""
    device = torch.device(device)
    stream = None if INTERPRETER or device.type != "cuda" else \
        torch.cuda.current_stream(device).cuda_stream
    key = (device, stream)
    buffer = _flag_buffers.get(key)
    if buffer is None or buffer.numel() < count:
        buffer = _flag_buffers[key] = torch.zeros(count, dtype=torch.int32, device=device)
    return buffer


@functools.lru_cache(maxsize=None)
def _capability(device_index: int) -> tuple:
    return torch.cuda.get_device_capability(device_index)


def capability(device) -> tuple | None:
    """The (major, minor) compute capability of a CUDA device; None off CUDA and in the
    interpreter, where no kernel runs on a GPU."""
    if INTERPRETER:
        return None
    device = torch.device(device)
    if device.type != "cuda":
        return None
    return _capability(device.index if device.index is not None
                       else torch.cuda.current_device())


def hopper(device) -> bool:
    """Hopper or newer (compute capability 9 and up): TMA, wgmma and programmatic
    dependent launch."""
    cap = capability(device)
    return cap is not None and cap[0] >= 9


def dependent_launch(device) -> bool:
    """Whether a kernel that reads what the kernel before it on the stream wrote may be
    launched with programmatic dependent launch (triton's launch_pdl: CUDA's programmatic
    stream serialization), starting while that kernel drains and waiting for its writes
    with gdc_wait: Hopper or newer (compute capability 9), not the interpreter.

    Why: a product's second kernel (split-K's reduce, the kernel after a staged copy)
    started 1.0-1.8 us after the first ended, where cuBLAS's reduce starts as its split-K
    kernel ends. perf/timeline.py, H100, eager spans, us, without -> with (cuBLAS):
    128x128x16384 fp16 9.3 -> 8.2 (7.9), 128x128x65536 fp16 16.8 -> 15.4 (16.2); 4097^3 tf32
    470.5 (1172) against 475.1 with 1.8-us gaps a session before. The gaps read -0.1 to
    -0.2 (the kernels overlap by their launch).
    Each kernel waits first thing, so nothing it touches can race the kernel before it.
    Letting the next kernel's programs start early as well (gdc_launch_dependents at the
    start of the copy and split-K kernels) was slower: 256x256x32768 fp16 22.5 against
    19.8, 4097^3 tf32's persistent kernel 401 against 377."""
    return hopper(device)


def dependent_meta(device) -> dict:
    """A launch's DEPENDENT constexpr and launch_pdl option (dependent_launch): the kernels
    that take DEPENDENT wait with gdc_wait before touching memory when it is set."""
    dependent = dependent_launch(device)
    return {"DEPENDENT": dependent, "launch_pdl": dependent}


def current_device() -> int:
    return _driver.active.get_current_device()


def current_stream(device: int):
    return _driver.active.get_current_stream(device)


_last = {"config": None}
_tuners: dict = {}  # (kernel name, family) -> triton Autotuner


class _Prepared:
    """A jit kernel as the autotuner sees it, with prepare(args, kwargs) run before each of
    the autotuner's launches (benchmark runs and the final one, whose config comes from the
    disk cache without a benchmark). A per-config pre_hook would do it too, but triton's
    autotuner keeps no disk cache for configs with one."""

    def __init__(self, fn, prepare):
        self.fn = fn
        self.prepare = prepare
        self.arg_names = fn.arg_names

    def run(self, *args, **kwargs):
        self.prepare(args, kwargs)
        return self.fn.run(*args, **kwargs)


def make_tuners(kernel, name: str, family_configs: dict, prune, prepare=None) -> dict:
    """One triton.autotune wrapper of kernel per config family, registered for
    tuned_configs(): {family: autotuner}. prune is called with family= as well; prepare
    (args, kwargs), if given, before each of the autotuner's launches (see _Prepared)."""
    tuners = {}
    tuned = kernel if prepare is None else _Prepared(kernel, prepare)
    for family, family_list in family_configs.items():
        family_prune = functools.partial(prune, family=family)
        tuners[family] = triton.autotune(configs=family_list, key=configs.TUNING_KEY,
                                         prune_configs_by={"early_config_prune": family_prune},
                                         cache_results=TUNE_CACHE,
                                         do_bench=None if INTERPRETER else tune_timer.bench,
                                         )(tuned)
        _tuners[(name, family)] = tuners[family]
    return tuners


def epilogue_input(d, beta: float, out: torch.Tensor):
    """(HAS_D, D as the kernel takes it): D expanded to out's shape when beta * D counts,
    else out itself as a placeholder the kernel never reads."""
    has_d = d is not None and beta != 0
    return has_d, (d.expand(out.shape) if has_d else out)


def dot_precision(dtype: torch.dtype, precision: str) -> str:
    """tl.dot's input_precision: the resolved precision for fp32 operands; "tf32" (ignored
    by tl.dot) for 16-bit ones."""
    return "tf32" if dtype in (torch.float16, torch.bfloat16) else precision


def needs_int64(*tensors: torch.Tensor) -> bool:
    """Whether an element offset can pass 2^31: bounded by each tensor's storage size,
    which is one call per tensor (a span over sizes and strides costs ~5 us each)."""
    return any(t.untyped_storage().nbytes() // t.element_size() >= 2**31 for t in tensors)


def shares_storage(x: torch.Tensor, y: torch.Tensor) -> bool:
    """Whether x and y are views of one storage (a kernel's output that is its D too):
    one call per tensor, like needs_int64, where an overlap test of their spans would cost
    more."""
    return x.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()


def tuned_configs() -> dict:
    """The autotuners' choices so far: {(kernel, family, key): config name}."""
    return {(kernel, family, key): configs.config_name(cfg, family)
            for (kernel, family), tuner in _tuners.items() for key, cfg in tuner.cache.items()}


def record(config, family: str) -> None:
    _last["config"] = (config, family)  # named on demand: naming costs ~10 us per call


def current_record():
    """The (config, family) record last_config() names; restore_record() puts it back."""
    return _last["config"]


def restore_record(config_record) -> None:
    _last["config"] = config_record


def last_config() -> str | None:
    """Name of the config the most recent launch ran (tuned, pinned or default)."""
    if _last["config"] is None:
        return None
    return configs.config_name(*_last["config"])
