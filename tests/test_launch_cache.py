"""launch_cache: which calls are recorded, what a replay launches, and (GPU) that replayed
calls give the same answers as planned ones across signatures that must not share a record."""

import pytest
import torch
from triton.tools.tensor_descriptor import TensorDescriptor

from conftest import gpu_only, randn
from triton_gemm import launch_cache
from triton_gemm.kernels import common, persistent
from triton_gemm.tolerances import assert_close


class _FakeCompiled:
    """Stands in for a triton CompiledKernel: records what each run() was given."""

    function = "fn"
    packed_metadata = "meta"

    def __init__(self):
        self.calls = []

    def run(self, gx, gy, gz, stream, function, metadata, launch_meta, enter, exit_, *args):
        self.calls.append(((gx, gy, gz), stream, args))


def _operands():
    a, b, out, d = (torch.zeros(1, 4, 4) for _ in range(4))
    return a, b, out, d


def _record(*launch_tensors, workspaces=(), recordable=True):
    record = common.Capture()
    record.recordable = recordable
    record.workspaces = list(workspaces)
    compiled = _FakeCompiled()
    for tensors in launch_tensors:
        record.launches.append(common.Launch(compiled, (3, 1, 1), tensors, (7, 0.5), ("c",),
                                             common._geometries(tensors)))
    return record, compiled


def test_launch_tensors_map_to_operands_and_workspaces_by_start_address():
    a, b, out, d = _operands()
    work = torch.zeros(2, 4, 4)
    record, _ = _record((a[0], b[0, :, :3], work.transpose(1, 2)),
                        (work[:, :, :2], out, d.expand(1, 4, 4)), workspaces=[work])
    recipe = launch_cache._recipe(record, (a, b, out, d))
    assert recipe.slots == (((0, 0), (1, 0), (4, 0)), ((4, 0), (2, 0), (3, 0)))
    assert recipe.workspaces == (((2, 4, 4), torch.float32),)
    assert all(launch.tensors == () for launch in recipe.launches)  # no tensors kept


def test_views_inside_an_operand_or_workspace_map_to_its_offset():
    a, b, out, d = _operands()
    work = torch.zeros(2, 4, 4)
    record, _ = _record((a[:, 1:], b[0, :, 3:].T, work[1, :, 2:]), workspaces=[work])
    recipe = launch_cache._recipe(record, (a, b, out, None))
    assert recipe.slots == (((0, 16), (1, 12), (4, 72)),)  # float32: 4 bytes an element


@pytest.mark.parametrize("case", ["aliased operands", "unregistered tensor",
                                  "inside two operands", "tuning run", "no launch"])
def test_calls_that_cannot_be_replayed_are_not_recorded(case):
    a, b, out, d = _operands()
    operands = (a, b, out, d)
    record, _ = _record((a, b, out))
    if case == "aliased operands":
        operands = (a, a, out, None)
    elif case == "unregistered tensor":
        record, _ = _record((a.clone(), b, out))
    elif case == "inside two operands":
        operands = (a, a[:, 1:], out, None)
        record, _ = _record((a[:, 2:], out))
    elif case == "tuning run":
        record.recordable = False
    else:
        record, _ = _record()
    assert launch_cache._recipe(record, operands) is None


def test_replay_launches_the_new_operands_with_fresh_workspaces(monkeypatch):
    a, b, out, d = _operands()
    work = torch.zeros(2, 4, 4)
    record, compiled = _record((a, work), (work, out, d), (work[1], b[:, 2:]),
                               workspaces=[work])
    monkeypatch.setattr(common, "_last", {"config": None})  # the fake records stay here
    common.record("cfg", "half")
    recipe = launch_cache._recipe(record, (a, b, out, d))
    monkeypatch.setattr(common, "current_stream", lambda device: "stream")
    common.record("other", "half")
    a2, b2, out2, d2 = _operands()
    launch_cache._replay(recipe, (a2, b2, out2, d2), device=0)
    (first, second, third) = compiled.calls
    assert first[0] == (3, 1, 1) and first[1] == "stream"
    assert first[2][0] is a2 and first[2][2:] == (7, 0.5, "c")
    new_work = first[2][1]
    assert new_work is not work and new_work.shape == work.shape
    assert second[2][:3] == (new_work, out2, d2)
    # Views at an offset go as addresses into the new tensors.
    assert third[2][:2] == (new_work.data_ptr() + 64, b2.data_ptr() + 32)
    assert common.current_record() == ("cfg", "half")


def test_replay_builds_descriptors_around_the_new_operands(monkeypatch):
    """Host TMA descriptors are recorded by their base's place; a replay launches new ones
    of the same shape, strides and padding around the new operands (at the same offset for
    a view), and unused (None) arguments stay None."""
    a, b, out, d = _operands()
    a_desc = TensorDescriptor(a[0], [4, 4], [4, 1], [4, 4])
    b_desc = TensorDescriptor(b[0, 1:], [3, 4], [4, 1], [4, 4])
    record, compiled = _record((a_desc, b_desc, None, out))
    recipe = launch_cache._recipe(record, (a, b, out, d))
    assert recipe.slots == (((0, 0), (1, 16), None, (2, 0)),)
    monkeypatch.setattr(common, "_last", {"config": None})
    monkeypatch.setattr(common, "current_stream", lambda device: "stream")
    a2, b2, out2, d2 = _operands()
    launch_cache._replay(recipe, (a2, b2, out2, d2), device=0)
    (args,) = [call[2] for call in compiled.calls]
    new_a, new_b, unused, new_out = args[:4]
    assert new_a.base is a2 and (new_a.shape, new_a.strides) == ((4, 4), (4, 1))
    assert new_b.base.data_ptr() == b2.data_ptr() + 16 and new_b.shape == (3, 4)
    assert new_a.padding == new_b.padding == "zero"
    assert unused is None and new_out is out2
    # Without encodings from the recording (this fake's launches have none) there is no
    # cache; run_kernel's recordings carry one dict per descriptor argument.
    assert new_a.encoded is None


def test_replayed_descriptors_are_encoded_once_per_base_address():
    """cached_encoder: a replayed launch's descriptor argument is encoded (triton's
    make_tensordesc_arg, cuTensorMapEncodeTiled) once per base address and then reused;
    first-launch TensorDescriptors and metadata-less calls are encoded every time; a full
    cache starts over."""
    calls = []

    def encode(arg, metadata):
        calls.append(arg.base.data_ptr())
        return [("tensor map", arg.base.data_ptr()), *arg.shape, *arg.strides]

    make_arg = common.cached_encoder(encode)
    cache = {}
    a, b = torch.zeros(4, 4), torch.zeros(4, 4)

    def replayed(t):
        return common._ReplayDescriptor(t, (4, 4), (4, 1), "zero", cache)
    first = make_arg(replayed(a), {"swizzle": 128})
    assert make_arg(replayed(a), {"swizzle": 128}) is first
    assert make_arg(replayed(b), {"swizzle": 128})[0] == ("tensor map", b.data_ptr())
    assert calls == [a.data_ptr(), b.data_ptr()]
    planned = TensorDescriptor(a, [4, 4], [4, 1], [4, 4])
    make_arg(planned, {"swizzle": 128})
    make_arg(planned, {"swizzle": 128})
    make_arg(replayed(a), None)
    assert calls[2:] == [a.data_ptr()] * 3
    cache.clear()
    cache.update({i: [] for i in range(common.ENCODED_MAX)})  # full, a not in it
    make_arg(replayed(a), {"swizzle": 128})
    assert list(cache) == [a.data_ptr()] and calls[-1] == a.data_ptr()


def test_cached_encoder_wraps_triton_once(monkeypatch):
    """Installing twice (a re-import) wraps triton's encoder once."""
    from triton.backends.nvidia import driver as nvidia_driver

    def encode(arg, metadata):
        return []
    monkeypatch.setattr(nvidia_driver, "make_tensordesc_arg", encode)
    common._install_cached_encoder()
    common._install_cached_encoder()
    assert nvidia_driver.make_tensordesc_arg.uncached is encode


class _RecordingCFunction:
    """Stands in for triton's C launch function (no __code__, as a builtin has none)."""

    def __init__(self):
        self.calls = []

    def __call__(self, *args):
        self.calls.append(args)


def _triton_launcher(signature: dict, tensordesc_meta):
    """triton 3.6's own CudaLauncher (its __call__ and wrap_handle_tensordesc's inner, as
    a compiled kernel has them) around a recording C function, built without compiling."""
    from triton.backends.nvidia import driver as nvidia_driver
    c_function = _RecordingCFunction()
    launcher = object.__new__(nvidia_driver.CudaLauncher)
    launcher.num_ctas = 1
    launcher.launch = nvidia_driver.wrap_handle_tensordesc(c_function, signature,
                                                           tensordesc_meta)
    launcher.global_scratch_size = launcher.profile_scratch_size = 0
    launcher.global_scratch_align = launcher.profile_scratch_align = 1
    launcher.launch_cooperative_grid = launcher.launch_pdl = False
    return launcher, c_function


class _CompiledWith:
    """A CompiledKernel's attributes a launch reads, around a given launcher."""

    function = "cufunction"
    packed_metadata = "packed"

    def __init__(self, launcher, tensordesc_meta):
        self.run = launcher
        self.metadata = type("Metadata", (), {"tensordesc_meta": tensordesc_meta})()


def _as_addresses(args) -> list:
    """Launch arguments with tensors as the addresses the C launcher reads from them."""
    return [a.data_ptr() if isinstance(a, torch.Tensor) else
            int(a) if isinstance(a, common._Address) else a for a in args]


@pytest.mark.parametrize("lowered", [True, False])
def test_direct_replay_passes_the_c_function_what_triton_passes(monkeypatch, lowered):
    """A replay that goes direct (c_launch) hands triton's C launch function the same
    arguments as the same replay through triton's own launcher layers (CudaLauncher and
    wrap_handle_tensordesc): descriptors expanded around the new operands (TMA-lowered: the
    encoder's tensor map, else base, shape and strides twice), addresses at their offsets,
    an unused argument None, scalars and constexprs as recorded."""
    from triton.backends.nvidia import driver as nvidia_driver
    encoded = []

    def encode(arg, metadata):
        encoded.append(arg.base.data_ptr())
        return [("tensor map", arg.base.data_ptr(), metadata["swizzle"]), *arg.shape,
                *arg.strides]
    if lowered:
        monkeypatch.setattr(nvidia_driver, "make_tensordesc_arg", common.cached_encoder(encode))
    meta = [{"swizzle": 128}, {"swizzle": 64}] if lowered else None
    signature = {0: "tensordesc<fp16[4, 4]>", 1: "*fp32", 2: "tensordesc<fp16[4, 4]>",
                 3: "*fp32", 4: "i32", 5: "fp32", 6: "constexpr"}
    a, b, out, d = _operands()
    work = torch.zeros(2, 4, 4)
    tensors = (TensorDescriptor(a[0], [4, 4], [4, 1], [4, 4]), work[1],
               TensorDescriptor(b[0, 1:], [3, 4], [4, 1], [4, 4]), None)
    launcher, c_function = _triton_launcher(signature, meta)
    compiled = _CompiledWith(launcher, meta)
    record = common.Capture()
    record.workspaces = [work]
    record.launches.append(common.Launch(compiled, (5, 2, 1), tensors, (7, 0.5), (16,),
                                         common._geometries(tensors), ({}, None, {}, None)))
    recipe = launch_cache._recipe(record, (a, b, out, d))
    assert len(recipe.direct) == 1 and recipe.direct[0].function is c_function
    monkeypatch.setattr(common, "current_stream", lambda device: 99)
    a2, b2, out2, d2 = _operands()
    new_work = torch.zeros(2, 4, 4)  # both paths' workspace, so their addresses compare
    monkeypatch.setattr(torch, "empty", lambda shape, dtype, device: new_work)
    for _ in range(2):  # the second replay reuses the first's encodings
        launch_cache._replay(recipe, (a2, b2, out2, d2), device=0)
        launch_cache._replay(recipe._replace(direct=()), (a2, b2, out2, d2), device=0)
    direct, through_triton = c_function.calls[-2:]
    assert _as_addresses(direct) == _as_addresses(through_triton)
    assert direct[:5] == (5, 2, 1, 99, "cufunction")
    expanded = 5 if lowered else 10  # A's descriptor, from position 13
    assert direct[13 + expanded] == new_work.data_ptr() + 64
    assert direct[-4:] == (None, 7, 0.5, 16)
    if lowered:
        assert direct[13] == ("tensor map", a2.data_ptr(), 128)
        assert encoded == [a2.data_ptr(), b2.data_ptr() + 16]
    else:  # triton's metadata-less expansion: base, shape, strides, NaN padding, again
        assert direct[13:22] == (a2.data_ptr(), 4, 4, 4, 1, False, 4, 4, 4)


def test_launchers_of_another_shape_replay_through_triton():
    """c_launch goes direct only for triton 3.6's launcher shape: a launcher that needs
    scratch memory, or a compiled kernel without one (the fakes above), replays through
    Launch.run."""
    from triton_gemm.kernels import c_launch
    launcher, c_function = _triton_launcher({0: "*fp32", 1: "i32"}, None)
    assert c_launch.c_function(_CompiledWith(launcher, None)) == (c_function, False, False)
    launcher.global_scratch_size = 128
    assert c_launch.c_function(_CompiledWith(launcher, None)) is None
    assert c_launch.c_function(_FakeCompiled()) is None
    a, b, out, d = _operands()
    record, _ = _record((a, b, out))
    assert launch_cache._recipe(record, (a, b, out, d)).direct == ()


def test_signature_separates_alignment_strides_and_scalars():
    a = torch.zeros(1, 8, 32, dtype=torch.float16)
    b, out = torch.zeros(1, 32, 8, dtype=torch.float16), torch.zeros(1, 8, 8)
    storage = torch.zeros(8 * 32 + 1, dtype=torch.float16)
    shifted = storage[1:].view(1, 8, 32)

    def sig(a_, b_, alpha=1.0, d=None):
        return launch_cache.signature(a_, b_, out, d, alpha, 0.0, "half", 0, 0)

    base = sig(a, b)
    assert sig(torch.zeros_like(a), torch.zeros_like(b)) == base
    assert sig(shifted, b) != base                         # 16-byte alignment
    assert sig(a, b.transpose(1, 2).contiguous().transpose(1, 2)) != base  # layout
    assert sig(a, b, alpha=2.0) != base
    assert sig(a, b, d=out) != base


@gpu_only
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_replayed_calls_match_float64_across_signatures(dtype):
    """A sequence of calls that reuse and alternate signatures (a misaligned view, K-major
    B, D epilogue, split-K and persistent shapes, M-major A, the same tensor as A and B, a
    padded shape): each call's poisoned output matches float64; repeats are replays, except for
    aliased operands (never recorded)."""
    precision = "half" if dtype == torch.float16 else "ieee"
    storage = randn(96 * 80 + 8, dtype=dtype)
    square = randn(1, 512, 512, dtype=dtype)
    cases = {
        "plain": (randn(1, 96, 80, dtype=dtype), randn(1, 80, 80, dtype=dtype), None),
        "misaligned": (storage[1:1 + 96 * 80].view(1, 96, 80), randn(1, 80, 80, dtype=dtype),
                       None),
        "k-major B": (randn(1, 96, 80, dtype=dtype), randn(1, 80, 80, dtype=dtype).mT, None),
        "D epilogue": (randn(1, 96, 80, dtype=dtype), randn(1, 80, 80, dtype=dtype),
                       randn(1, 1, 80, dtype=dtype).expand(1, 96, 80)),
        "split-K": (randn(1, 16, 2048, dtype=dtype), randn(1, 2048, 256, dtype=dtype), None),
        "persistent": (randn(1, 2048, 512, dtype=dtype), randn(1, 512, 2048, dtype=dtype),
                       None),
        # 16-bit: the persistent kernel's descriptor on A's (K, M) rows, rebuilt on replay.
        "transposed A": (randn(1, 512, 2048, dtype=dtype).mT, randn(1, 512, 2048, dtype=dtype),
                         None),
        "A is B": (square, square, None),
        "padded": (randn(1, 96, 80, dtype=dtype), randn(1, 80, 72, dtype=dtype), None),
    }
    order = ["plain", "misaligned", "plain", "k-major B", "D epilogue", "split-K",
             "misaligned", "persistent", "A is B", "k-major B", "split-K", "D epilogue",
             "persistent", "A is B", "padded", "padded", "transposed A", "transposed A"]
    launch_cache.clear()
    replayed = launch_cache.stats["replayed"]
    for name in order:
        a, b, d = cases[name]
        if name == "plain":
            a = a.clone()  # a new address, the same signature
        out = torch.full((1, a.shape[1], b.shape[2]), float("nan"), dtype=dtype,
                         device=a.device)
        launch_cache.run(a, b, out, d, alpha=1.5, beta=0.5, precision=precision)
        ref = 1.5 * (a.double() @ b.double()) + (0 if d is None else 0.5 * d.double())
        assert_close(out, ref, dtype, None if dtype != torch.float32 else "ieee", name)
    assert launch_cache.stats["replayed"] - replayed == 8
    # With this triton every kernel's launcher is one c_launch reaches.
    assert all(recipe.direct for recipe in launch_cache._recipes.values())


@gpu_only
@pytest.mark.parametrize("m, n, k, dtype, precision", [
    (96, 80, 72, torch.float16, "half"),           # plain kernel, pointers
    (2048, 2048, 2048, torch.float16, "half"),     # persistent kernel, TMA descriptors
    (2048, 2048, 512, torch.float16, "half"),      # ping-pong kernel (Gluon)
    (1000, 1000, 1000, torch.float32, "tf32"),     # B's K-major copy, then the kernel
    (1024, 1024, 3072, torch.float32, "tf32x3"),   # the halves' copies, three products
    (127, 8191, 509, torch.float32, "ieee"),       # padded FMA copies
])
def test_direct_replays_write_what_triton_launches_write(m, n, k, dtype, precision):
    """A recipe replayed straight into triton's C launch function (c_launch) writes bit for
    bit what the same recipe replayed through triton's own launcher writes, on new operands
    and a poisoned output, and that matches float64."""
    launch_cache.clear()
    launch_cache.run(randn(1, m, k, dtype=dtype), randn(1, k, n, dtype=dtype),
                     torch.empty(1, m, n, dtype=dtype, device="cuda"), precision=precision)
    (recipe,) = launch_cache._recipes.values()
    assert recipe.direct
    a, b = randn(1, m, k, dtype=dtype), randn(1, k, n, dtype=dtype)
    outs = []
    for replayed in (recipe, recipe._replace(direct=())):
        out = torch.full((1, m, n), float("nan"), dtype=dtype, device="cuda")
        launch_cache._replay(replayed, (a, b, out, None), torch.cuda.current_device())
        outs.append(out)
    assert torch.equal(outs[0], outs[1])
    assert_close(outs[0], a.double() @ b.double(), dtype,
                 None if dtype != torch.float32 else precision, f"{m}x{n}x{k}")


@gpu_only
def test_fringe_plans_replay_with_their_strips():
    """4097^3 fp16 on Hopper cuts its last column off for the split-K kernel (dispatch's
    fringe); the strip is a view inside the staged copies, and the call still replays:
    the second call, on new operands, is a replay and matches float64 as the first did."""
    from triton_gemm import dispatch
    sms, tma = persistent.gpu_sms(torch.device("cuda"))
    a, b = randn(1, 4097, 4097, dtype=torch.float16), randn(1, 4097, 4097, dtype=torch.float16)
    if dispatch.plan(a, b, "half", sms, tma).core is None:
        pytest.skip("no fringe plan on this GPU (the persistent kernel needs Hopper)")
    launch_cache.clear()
    replayed = launch_cache.stats["replayed"]
    for _ in range(2):
        a, b = randn(1, 4097, 4097, dtype=torch.float16), randn(1, 4097, 4097, dtype=torch.float16)
        out = torch.full((1, 4097, 4097), float("nan"), dtype=torch.float16, device=a.device)
        launch_cache.run(a, b, out, precision="half")
        ref = a.double() @ b.double()
        assert_close(out[:, :, 4096:], ref[:, :, 4096:], torch.float16, what="column strip")
        assert_close(out, ref, torch.float16, what="4097^3")
    assert launch_cache.stats["replayed"] - replayed == 1


@gpu_only
def test_wave_rows_plans_replay_both_launches():
    """2208 x 2208 x 256 fp16 on the H100 leaves a last wave of 30 tiles of 128x256, so
    dispatch runs 1792 rows, then 416 (Plan.wave_rows), with a bias: the second call, on
    new operands, is a replay and matches float64 in both row ranges as the first did."""
    from triton_gemm import dispatch
    sms, tma = persistent.gpu_sms(torch.device("cuda"))
    m, n, k = 2208, 2208, 256
    rows = dispatch.plan(randn(1, m, k, dtype=torch.float16),
                         randn(1, k, n, dtype=torch.float16), "half", sms, tma).wave_rows
    if rows is None:
        pytest.skip(f"no whole-wave cut of {m}x{n} on {sms} SMs (the persistent kernel "
                    f"needs Hopper)")
    launch_cache.clear()
    replayed = launch_cache.stats["replayed"]
    for _ in range(2):
        a, b = randn(1, m, k, dtype=torch.float16), randn(1, k, n, dtype=torch.float16)
        bias = randn(1, 1, n, dtype=torch.float16)
        out = torch.full((1, m, n), float("nan"), dtype=torch.float16, device=a.device)
        launch_cache.run(a, b, out, bias.expand(1, m, n), beta=1.0, precision="half")
        ref = a.double() @ b.double() + bias.double()
        for part in (slice(None, rows), slice(rows, None)):
            assert_close(out[:, part], ref[:, part], torch.float16, what=f"rows {part}")
    assert launch_cache.stats["replayed"] - replayed == 1


@gpu_only
def test_transposed_fma_plans_replay_with_their_copy_of_a():
    """An ieee product against a K-major weight runs C^T = W A^T on split-K with A^T
    copied (dispatch.FMA_TRANSPOSED), 24 rows: padded rows in the copy, a bias epilogue.
    The second call, on new operands, is a replay and matches float64 as the first did."""
    from triton_gemm import dispatch
    sms, tma = persistent.gpu_sms(torch.device("cuda"))
    m, n, k = 24, dispatch.THIN_MIN_N, dispatch.SPLITK_MIN_K
    a, w = randn(1, m, k), randn(1, n, k)
    assert dispatch.plan(a, w.mT, "ieee", sms, tma) == dispatch.FMA_TRANSPOSED
    launch_cache.clear()
    replayed = launch_cache.stats["replayed"]
    for _ in range(2):
        a, w, bias = randn(1, m, k), randn(1, n, k), randn(1, 1, n)
        out = torch.full((1, m, n), float("nan"), device=a.device)
        launch_cache.run(a, w.mT, out, bias.expand(1, m, n), beta=1.0, precision="ieee")
        ref = a.double() @ w.double().mT + bias.double()
        assert_close(out, ref, torch.float32, "ieee", "C^T = W A^T")
    assert launch_cache.stats["replayed"] - replayed == 1


@pytest.mark.parametrize("bias", [False, True])
def test_single_products_run_on_2d_operands(bias):
    """A 2-D call (what mm, matmul and linear pass when nothing records) returns its own
    2-D output, with D broadcast from a bias vector; planned through dispatch on batch
    views of the same memory."""
    a, b = randn(40, 24), randn(24, 32)
    d = randn(32) if bias else None
    out = torch.full((40, 32), float("nan"), device=a.device)
    got = launch_cache.run(a, b, out, d, alpha=1.0, beta=1.0 if bias else 0.0,
                           precision="ieee")
    assert got is out
    ref = a.double() @ b.double() + (d.double() if bias else 0)
    assert_close(out, ref, torch.float32, "ieee", "2-D call")


@gpu_only
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_2d_calls_replay_and_match_float64(dtype):
    """mm, matmul and linear without autograd run on 2-D tensors: the second call of each
    signature (new operands) is a replay, for the plain, split-K, persistent and GEMV paths
    and a bias epilogue (one broadcast by a zero stride), and every output matches
    float64."""
    import triton_gemm
    precision = None if dtype == torch.float16 else "ieee"
    shapes = [(96, 80, 72), (16, 256, 2048), (2048, 2048, 2048)]
    launch_cache.clear()
    replayed = launch_cache.stats["replayed"]
    for _ in range(2):
        for m, n, k in shapes:
            a, b = randn(m, k, dtype=dtype), randn(k, n, dtype=dtype)
            assert_close(triton_gemm.mm(a, b, precision=precision), a.double() @ b.double(),
                         dtype, precision, f"mm {m}x{n}x{k}")
        x, w = randn(3, 40, 64, dtype=dtype), randn(48, 64, dtype=dtype)
        bias = randn(48, dtype=dtype)
        assert_close(triton_gemm.linear(x, w, bias, precision=precision),
                     x.double() @ w.double().T + bias.double(), dtype, precision, "linear")
        # One token through a layer: 16-bit on kernels/gemv16.py, ieee on kernels/gemv.py
        # or split-K.
        x, w = randn(1, 1, 1024, dtype=dtype), randn(1024, 1024, dtype=dtype)
        assert_close(triton_gemm.linear(x, w, bias[:1].expand(1024), precision=precision),
                     x.double() @ w.double().T + bias[:1].double(), dtype, precision,
                     "one-row linear")
    assert launch_cache.stats["replayed"] - replayed == len(shapes) + 2


def test_dependent_launch_only_on_hopper_gpus():
    """Programmatic dependent launch (common.dependent_launch) needs sm_90 and compiled
    kernels: never off CUDA or in the interpreter, and on a GPU exactly from capability 9,
    where the persistent TMA kernel runs too (common.hopper, persistent.gpu_sms)."""
    assert not common.dependent_launch("cpu")
    assert common.capability("cpu") is None and not common.hopper("cpu")
    assert common.dependent_meta("cpu") == {"DEPENDENT": False, "launch_pdl": False}
    if not torch.cuda.is_available():
        return
    if common.INTERPRETER:
        assert common.capability("cuda") is None and not common.dependent_launch("cuda")
        return
    assert common.capability("cuda") == torch.cuda.get_device_capability()
    assert common.capability(torch.device("cuda", 0)) == torch.cuda.get_device_capability(0)
    hopper = torch.cuda.get_device_capability()[0] >= 9
    assert common.dependent_launch("cuda") == common.hopper("cuda") == hopper
    assert persistent.gpu_sms(torch.device("cuda"))[1] == hopper


@gpu_only
def test_staged_products_launch_dependent_on_hopper():
    """A staged tf32 product (B's K-major copy, then the persistent kernel) and a split-K
    product (partials, then the reduce) record launches made with launch_pdl on Hopper,
    and none elsewhere; their results match float64 (the tests above check replays)."""
    hopper = torch.cuda.get_device_capability()[0] >= 9
    for m, n, k, precision in [(1000, 1000, 1000, "tf32"), (128, 128, 16384, "half")]:
        dtype = torch.float32 if precision == "tf32" else torch.float16
        a, b = randn(1, m, k, dtype=dtype), randn(1, k, n, dtype=dtype)
        out = torch.full((1, m, n), float("nan"), dtype=dtype, device="cuda")
        launch_cache.clear()
        launch_cache.run(a, b, out, precision=precision)
        (recipe,) = launch_cache._recipes.values()
        assert len(recipe.launches) == 2
        assert all(launch.compiled.metadata.launch_pdl == hopper for launch in recipe.launches)
        assert_close(out, a.double() @ b.double(), dtype,
                     precision if dtype == torch.float32 else None, f"{m}x{n}x{k}")
