"""The dispatcher: which copies it plans, and that every staged path computes the product."""

import math

import pytest
import torch

from conftest import CASE_IDS, CASES, DEVICE, randn, requires_kernels, single_plan
import triton_gemm
from triton_gemm import configs, dispatch, last_config
from triton_gemm.kernels import persistent as _persistent
from triton_gemm.kernels.common import hopper
from triton_gemm.tolerances import assert_close, rel_error


def _ops(m, n, k, a_layout="row", b_layout="row", dtype=torch.float32, device="cpu"):
    a = torch.empty(1, m, k, dtype=dtype, device=device) if a_layout == "row" else \
        torch.empty(1, k, m, dtype=dtype, device=device).transpose(1, 2)
    b = torch.empty(1, k, n, dtype=dtype, device=device) if b_layout == "row" else \
        torch.empty(1, n, k, dtype=dtype, device=device).transpose(1, 2)
    return a, b


def test_aligned_operands_run_as_given():
    for precision in ("tf32", "half"):
        assert dispatch.plan(*_ops(4096, 4096, 4096, "row", "col"), precision) == dispatch.PLAIN
    assert dispatch.plan(*_ops(4096, 4096, 4096), "half") == dispatch.PLAIN
    assert dispatch.plan(*_ops(4096, 4096, 4096, "col", "row"), "ieee") == dispatch.PLAIN


def test_fp32_fma_operands_are_staged_m_major_a_and_row_major_b():
    """ieee: A copied M-major from FMA_STAGE_A_MIN rows and columns, a K-major B copied
    row-major from FMA_STAGE_B_MIN_M rows; neither below, nor where split-K or GEMV run."""
    big, rows = dispatch.FMA_STAGE_A_MIN, dispatch.FMA_STAGE_B_MIN_M
    a_m = dispatch.Plan(False, False, False, a_m_major=True)
    b_n = dispatch.Plan(False, False, False, b_n_major=True)
    assert dispatch.plan(*_ops(big, big, 512), "ieee") == a_m
    assert dispatch.plan(*_ops(big - 16, big, 512), "ieee") == dispatch.PLAIN
    assert dispatch.plan(*_ops(big, big - 16, 512), "ieee") == dispatch.PLAIN
    assert dispatch.plan(*_ops(big, big, 512, "row", "col"), "ieee") == \
        a_m._replace(b_n_major=True)
    assert dispatch.plan(*_ops(rows, 4096, 512, "row", "col"), "ieee") == b_n
    assert dispatch.plan(*_ops(rows - 16, 4096, 512, "row", "col"), "ieee") == dispatch.PLAIN
    # Layouts the FMA dot reads well are left alone; other precisions are unaffected.
    assert dispatch.plan(*_ops(big, big, 512, "col", "row"), "ieee") == dispatch.PLAIN
    assert dispatch.plan(*_ops(big, big, 512, "row", "col"), "tf32") == dispatch.PLAIN
    assert dispatch.plan(*_ops(big, big, 512, "row", "col"), "half") == dispatch.PLAIN
    # Split-K (few tiles, long K) and GEMV read the operands as given; against a wide
    # K-major weight the transposed split-K product copies A^T instead.
    assert dispatch.plan(*_ops(rows, 256, 8192, "row", "col"), "ieee", 132).split_k
    assert not dispatch.plan(*_ops(rows, 256, 8192, "row", "col"), "ieee", 132).b_n_major
    assert dispatch.plan(*_ops(8, 8192, 8192, "row", "col"), "ieee", 132) == dispatch.GEMV
    assert dispatch.plan(*_ops(rows, 8192, 8192, "row", "col"), "ieee", 132) == \
        dispatch.FMA_TRANSPOSED
    # Unaligned operands: A's copy is M-major (and padded) at any size; B is padded (a
    # row-major copy) only from FMA_PAD_B_MIN_M rows, and read as given below them unless
    # K-major (then copied row-major).
    pad_rows = dispatch.FMA_PAD_B_MIN_M
    assert dispatch.plan(*_ops(pad_rows, 100, 100), "ieee") == \
        dispatch.Plan(True, False, False, a_m_major=True)
    assert dispatch.plan(*_ops(pad_rows - 1, 8191, 509), "ieee") == \
        dispatch.Plan(False, False, False, a_m_major=True)
    assert dispatch.plan(*_ops(100, 100, 100, "row", "col"), "ieee") == \
        dispatch.Plan(False, False, False, a_m_major=True, b_n_major=True)


def test_unaligned_sizes_are_padded_when_large():
    p = dispatch.plan(*_ops(4097, 4097, 4097, dtype=torch.float16), "half")
    assert p.pad and not p.b_k_major
    assert dispatch.plan(*_ops(4097, 4097, 4097), "tf32") == dispatch.Plan(True, True, True)
    # At the threshold: M = 63 is memory-bound, padding would double the bytes.
    assert not dispatch.plan(*_ops(dispatch.PAD_MIN_MN - 1, 4097, 4097), "half").pad
    assert dispatch.plan(*_ops(dispatch.PAD_MIN_MN, 4097, 4097), "half").pad


@requires_kernels
@pytest.mark.parametrize("dtype,plan", [
    (torch.float16, dispatch.Plan(True, False, False)),
    (torch.float32, dispatch.Plan(True, True, True)),
    (torch.float32, dispatch.SPLIT_TF32),
    (torch.float32, dispatch.Plan(True, False, False, a_m_major=True)),
    (torch.float32, dispatch.Plan(False, True, True, True))],
    ids=["fp16-pad", "fp32-pad-k-major", "fp32-halves", "fp32-pad-m-major",
         "fp32-unpadded-k-major"])
def test_padded_copies_have_cache_line_rows(dtype, plan):
    """Every row of a padded copy starts on a 128-byte line (the TMA boxes' rows then do),
    the operand sits in its top-left corner and the padding is zero."""
    a = randn(1, 70, 33, dtype=dtype)
    b = randn(1, 33, 35, dtype=dtype)
    sa, sb, *halves = dispatch.stage(a, b, plan)
    for staged, src in ((sa, a), (sb, b)):
        row_pitch = max(staged.stride(1), staged.stride(2)) * staged.element_size()
        assert row_pitch % dispatch.PAD_PITCH_BYTES == 0, (staged.shape, staged.stride())
        rows, cols = src.shape[1:]
        if halves:  # tf32 halves: hi + lo is the operand
            continue
        assert torch.equal(staged[:, :rows, :cols], src)
        assert not staged[:, rows:].any() and not staged[:, :, cols:].any()
    if halves:
        lo, = halves
        assert lo.raw is None  # both halves staged off the H100
        assert torch.equal(sa[:, :70, :33] + lo.a[:, :70, :33], a)
        assert torch.equal(sb[:, :33, :35] + lo.b[:, :33, :35], b)


def test_fp32_tensor_core_operands_are_staged_k_major_for_large_problems():
    row_b = _ops(dispatch.STAGE_MIN, 4096, 4096)
    assert dispatch.plan(*row_b, "tf32") == dispatch.Plan(False, False, True)
    assert dispatch.plan(*row_b, "tf32x3") == dispatch.Plan(False, False, True)
    assert dispatch.plan(*row_b, "ieee") == dispatch.PLAIN  # FMA prefers row-major B
    assert dispatch.plan(*_ops(dispatch.STAGE_MIN - 1, 4096, 4096), "tf32") == dispatch.PLAIN
    assert dispatch.plan(*_ops(4096, 4096, 4096, "col", "col"), "tf32") == \
        dispatch.Plan(False, True, False)


def test_small_fp32_tensor_core_products_run_as_given():
    side = round(dispatch.STAGE_MIN_MNK ** (1 / 3))
    for precision in ("tf32", "tf32x3"):
        assert dispatch.plan(*_ops(side, side, side), precision) == \
            dispatch.Plan(False, False, True)
        # One aligned step (16) under it, along K or M: as given.
        assert dispatch.plan(*_ops(side, side, side - 16), precision) == dispatch.PLAIN
        assert dispatch.plan(*_ops(side - 16, side, side, "col", "col"), precision) == \
            dispatch.PLAIN


PLANS = [dispatch.Plan(True, False, False), dispatch.Plan(True, True, True),
         dispatch.Plan(False, True, True), dispatch.Plan(False, False, True),
         dispatch.Plan(True, True, True, True), dispatch.Plan(False, True, True, True),
         dispatch.Plan(True, True, False, True), dispatch.Plan(False, False, False, False, True),
         dispatch.Plan(True, True, True, False, True), dispatch.TRANSPOSED, dispatch.GEMV,
         dispatch.Plan(True, False, False, a_m_major=True),
         dispatch.Plan(False, False, False, a_m_major=True),
         dispatch.Plan(False, False, False, a_m_major=True, b_n_major=True),
         dispatch.Plan(False, False, False, b_n_major=True), dispatch.FMA_TRANSPOSED,
         dispatch.TRANSPOSED_SPLIT_K]


@requires_kernels
@pytest.mark.parametrize("dtype,precision", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("plan", PLANS, ids=lambda p: "-".join(
    f for f, v in zip(p._fields, p) if v))
def test_staged_paths_compute_the_product(dtype, precision, plan):
    precision = precision or "half"
    # These kernels take single products.
    batch = 1 if plan.persistent or plan.split_k or plan.gemv else 2
    a = randn(batch, 45, 33, dtype=dtype).transpose(1, 2)  # (batch, 33, 45): column-major A
    b = randn(batch, 45, 19, dtype=dtype)
    d = randn(19, dtype=dtype)
    out = torch.full((batch, 33, 19), float("nan"), dtype=dtype, device=a.device)
    dispatch.run(a, b, out, d, alpha=0.5, beta=2.0, precision=precision, force=plan)
    ref = 0.5 * (a.double() @ b.double()) + 2.0 * d.double()
    assert_close(out, ref, dtype, None if precision == "half" else precision, str(plan))


@requires_kernels
@pytest.mark.parametrize("plan,precision", [
    (dispatch.Plan(True, False, False), "ieee"), (dispatch.Plan(True, True, True), "tf32"),
    (dispatch.Plan(False, False, False, a_m_major=True, b_n_major=True), "ieee"),
    (dispatch.SPLIT_TF32, "tf32x3"), (dispatch.Plan(False, False, True), "tf32")],
    ids=["padded", "padded-k-major", "fma-layouts", "split-tf32", "b-only"])
def test_staged_operands_are_copied_in_one_launch(monkeypatch, plan, precision):
    """dispatch.stage copies A and B in one launch of the copy kernel (copy.copy_jobs), or
    just the one operand it stages, and the product is still right."""
    from triton_gemm.kernels import copy
    launches = []
    real_launch = copy.launch
    monkeypatch.setattr(copy, "launch", lambda *args, **kwargs: (
        launches.append(len([job for job in args if job is not None])),
        real_launch(*args, **kwargs)))
    a = randn(1, 45, 33).transpose(1, 2)                   # (1, 33, 45): column-major A
    b = randn(1, 45, 19)
    out = torch.full((1, 33, 19), float("nan"), device=a.device)
    dispatch.run(a, b, out, precision=precision, force=plan)
    assert launches == [1 if plan == dispatch.Plan(False, False, True) else 2]
    assert_close(out, a.double() @ b.double(), torch.float32, precision, str(plan),
                 operands=(a, b))


@pytest.mark.parametrize("plan", [p for p in PLANS if p.persistent or p.split_k or p.gemv],
                         ids=lambda p: "-".join(f for f, v in zip(p._fields, p) if v))
def test_single_product_plans_refuse_a_batch(plan):
    """The persistent, split-K and GEMV kernels take one product: a batch forced on them is
    an error, not a product of its first matrix alone."""
    a, b = torch.ones(2, 4, 8), torch.ones(2, 8, 4)
    with pytest.raises(ValueError, match="single products, not a batch of 2"):
        dispatch.run(a, b, torch.empty(2, 4, 4), precision="ieee", force=plan)


@pytest.mark.parametrize("plan", [
    dispatch.Plan(False, False, False, True, a_m_major=True),
    dispatch.Plan(False, False, False, gemv=True, b_n_major=True),
    dispatch.Plan(False, True, False, a_m_major=True),
    dispatch.Plan(False, False, True, b_n_major=True),
    dispatch.Plan(False, False, False, transposed=True, gemv=True, a_m_major=True)],
    ids=["persistent", "gemv", "a-both-layouts", "b-both-layouts", "transposed-gemv"])
def test_fma_layout_copies_refuse_other_kernels(plan):
    """M-major A and row-major B copies are for the plain and split-K kernels' FMA dots; a
    plan that also asks for another kernel or for K-major copies of the same operand is
    refused, transposed or not."""
    a, b = torch.ones(1, 4, 8), torch.ones(1, 8, 4)
    with pytest.raises(ValueError, match="fp32 FMA dots"):
        dispatch.run(a, b, torch.empty(1, 4, 4), precision="ieee", force=plan)


@requires_kernels
@pytest.mark.parametrize("a_layout,b_layout", [("row", "row"), ("col", "col"), ("row", "col")])
def test_split_tf32_plan_computes_the_product(a_layout, b_layout):
    """3xTF32 from staged halves on the persistent kernel: any operand layout, K not a
    multiple of 16 (zero-padded halves), an unaligned output, the addmm epilogue; accurate
    to tf32x3's tolerance, which a lost remainder term (errors ~2^-11, even where the
    interpreter multiplies in full fp32) fails."""
    m, n, k = (300, 270, 1000) if DEVICE == "cuda" else (70, 45, 75)
    a, b = (t.to(DEVICE) for t in _ops(m, n, k, a_layout, b_layout))
    a.normal_(), b.normal_()
    d = randn(n)
    out = torch.full((1, m, n), float("nan"), device=a.device)
    dispatch.run(a, b, out, d, alpha=0.5, beta=2.0, precision="tf32x3",
                 force=dispatch.SPLIT_TF32)
    ref = 0.5 * (a.double() @ b.double()) + 2.0 * d.double()
    assert_close(out, ref, torch.float32, "tf32x3", "split halves", operands=(a, b))


def test_split_tf32_plan_reads_one_aligned_operand_as_given_where_wgmma_truncates():
    """dispatch.raw_side: on an H100 (capability 9.0) the split kernel reads one operand
    as given, contiguous in the layout it reads (A row-major, B K-major) with halves as long
    as K, the larger where both qualify; elsewhere, and on a CPU, both halves are staged."""
    h100 = (9, 0)
    assert dispatch.raw_side(*_ops(256, 512, 1024), 1024, h100) == "a"
    assert dispatch.raw_side(*_ops(256, 512, 1024, "row", "col"), 1024, h100) == "b"
    assert dispatch.raw_side(*_ops(512, 256, 1024, "row", "col"), 1024, h100) == "a"
    assert dispatch.raw_side(*_ops(256, 512, 1024, "col", "row"), 1024, h100) is None
    a, b = _ops(512, 256, 1000, "row", "col")
    assert dispatch.raw_side(a, b, dispatch.padded_extent(1000, 4), h100) is None
    a, b = _ops(512, 256, 1024, "row", "col")
    assert dispatch.raw_side(a, b, 1024, (8, 0)) is None
    assert dispatch.raw_side(a, b, 1024, None) is None
    wide = torch.empty(1, 512, 1056)[:, :, :1024]           # rows longer than K
    assert dispatch.raw_side(wide, _ops(512, 256, 1024)[1], 1024, h100) is None


@requires_kernels
@pytest.mark.parametrize("a_layout,b_layout", [("row", "row"), ("row", "col")])
def test_split_tf32_plan_with_an_operand_read_as_given(a_layout, b_layout):
    """K a multiple of 32 (halves as long as K): on the H100 the stage reads A (nn) or the
    larger B (nt) as given; the product stays within tf32x3's tolerance on N(0,1) data and
    within 8e-7 on U(0,1) data (a remainder counted twice or lost is ~2^-11)."""
    m, n, k = (256, 384, 1024) if DEVICE == "cuda" else (64, 48, 64)
    a, b = (t.to(DEVICE) for t in _ops(m, n, k, a_layout, b_layout))
    if DEVICE == "cuda" and torch.cuda.get_device_capability() in dispatch.RAW_HI_CAPABILITIES:
        assert dispatch.stage(a, b, dispatch.SPLIT_TF32)[2].raw == \
            ("a" if b_layout == "row" else "b")
    for fill, bound in ((torch.Tensor.normal_, None), (torch.Tensor.uniform_, 8e-7)):
        fill(a), fill(b)
        out = torch.full((1, m, n), float("nan"), device=a.device)
        dispatch.run(a, b, out, precision="tf32x3", force=dispatch.SPLIT_TF32)
        ref = a.double() @ b.double()
        if bound is None:
            assert_close(out, ref, torch.float32, "tf32x3", "split, one raw", operands=(a, b))
        else:
            assert rel_error(out, ref) <= bound


@pytest.mark.skipif(DEVICE != "cuda", reason="compares with cuBLAS SGEMM on the GPU")
@pytest.mark.parametrize("k", [1024, 2048, 4096, 8192])
def test_tf32x3_paths_are_as_accurate_as_cublas_sgemm(k):
    """Issue-level accuracy: tf32x3 no worse than cuBLAS fp32 (no TF32) on the same inputs,
    on N(0,1) data (at K = 4096 cuBLAS measured 5.7e-7 on these sizes against 1.1e-6 at
    4096^3, and a 256-K flush of the split kernel lost with 6.4e-7) and at a long K where a
    biased accumulation shows (the split path adding every product into the tensor core's
    accumulator measured 5.7e-5 at K = 8192, cuBLAS 1.6e-6). One-signed data: the next
    test."""
    m, n = 3072, 3072  # large enough that the auto plan stages halves
    a, b = randn(1, m, k), randn(1, k, n)
    ref = a.double() @ b.double()
    allow = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        cublas = rel_error(a @ b, ref)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = allow
    sms = _persistent.gpu_sms(a.device)[0]
    assert dispatch.plan(a, b, "tf32x3", sms) == dispatch.SPLIT_FED_PLAN
    for plan in (None, dispatch.SPLIT_TF32, dispatch.Plan(False, True, True, True)):
        out = torch.full((1, m, n), float("nan"), device=a.device)
        dispatch.run(a, b, out, precision="tf32x3", force=plan)
        assert rel_error(out, ref) <= cublas, (plan, rel_error(out, ref), cublas)


@pytest.mark.skipif(DEVICE != "cuda", reason="the tensor core's truncation shows on the GPU")
@pytest.mark.parametrize("k", [4096, 8192])
def test_split_tf32_plan_stays_accurate_on_one_signed_data(k):
    """U(0,1) operands: every product positive, so the tensor core's truncating adds all go
    one way and the split kernel's error grows with its flush interval (hi_flush_k). At
    3072 x 3072, H100 (perf/accuracy.py --flush): every 128 K 6.2e-7, every 256 K 1.4e-6
    (cuBLAS SGEMM 2.2e-7 at K = 4096, 2.7e-7 at 8192: on such data tf32x3 loses to it, as
    the README says). The bound holds the interval where it is."""
    m = n = 3072
    a = torch.rand(1, m, k, device=DEVICE)
    b = torch.rand(1, k, n, device=DEVICE)
    sms = _persistent.gpu_sms(a.device)[0]
    assert dispatch.plan(a, b, "tf32x3", sms) == dispatch.SPLIT_FED_PLAN
    for plan in (None, dispatch.SPLIT_TF32):  # kernels/split_fed.py, the staged halves
        out = torch.full((1, m, n), float("nan"), device=a.device)
        dispatch.run(a, b, out, precision="tf32x3", force=plan)
        assert rel_error(out, a.double() @ b.double()) <= 8e-7, plan


@requires_kernels
@pytest.mark.parametrize("plan", ["staged", "fed"])
@pytest.mark.parametrize("b_row", ["exact", "mixed"])
def test_split_tf32_plan_keeps_an_infinite_operand_infinite(b_row, plan):
    """inf in A against a row of B: exactly tf32 (remainder 0, so inf x 0 = NaN in the
    remainder products) or not (remainders of both signs, so -inf in them where the
    product is +inf). Neither may turn the row to NaN; torch gives inf there. Staged halves
    and, on Hopper, kernels/split_fed.py (B split in registers; elsewhere its plan runs the
    staged halves)."""
    a, b = randn(1, 40, 48), randn(1, 48, 24).abs() + 1.0
    a[0, 3, 5] = float("inf")
    if b_row == "exact":
        b[0, 5] = 2.0
    else:  # rounding to tf32 leaves remainders of either sign
        b[0, 5] = 1.0 + torch.arange(24, device=b.device) * (1.5 * 2.0 ** -11)
    out = torch.full((1, 40, 24), float("nan"), device=a.device)
    dispatch.run(a, b, out, precision="tf32x3", force=dispatch.SPLIT_TF32 if plan == "staged"
                 else dispatch.SPLIT_FED_PLAN)
    expected = torch.matmul(a, b)
    assert torch.isinf(expected[0, 3]).all() and torch.equal(out[0, 3], expected[0, 3])
    assert torch.isfinite(out[0, :3]).all() and torch.isfinite(out[0, 4:]).all()


def test_split_tf32_plan_is_for_float32_tf32x3_only():
    a, b = _ops(64, 64, 64, dtype=torch.float16)
    with pytest.raises(ValueError, match="tf32x3"):
        dispatch.run(a, b, torch.empty(1, 64, 64, dtype=torch.float16), precision="half",
                     force=dispatch.SPLIT_TF32)


def test_sixteen_byte_rows_skip_the_padded_copies_on_hopper():
    """Rows of 16 bytes that are not 16 elements (fp16 1000, fp32 36) go to the TMA kernel
    as they are, at any tile count; fp32 still gets its K-major copy of B. Rows TMA cannot
    take (4097 fp16), batches and misaligned bases are padded as before."""
    sms = 132
    half = _ops(1000, 1000, 1000, dtype=torch.float16)
    assert dispatch.plan(*half, "half", sms) == dispatch.Plan(False, False, False, True)
    assert dispatch.plan(*half, "half", None).pad  # not Hopper
    for a_layout, b_layout in (("col", "row"), ("col", "col")):  # 16-bit A M-major too
        assert dispatch.plan(*_ops(1000, 1000, 1000, a_layout, b_layout, torch.float16),
                             "half", sms) == dispatch.Plan(False, False, False, True)
    assert dispatch.plan(*_ops(1000, 1000, 1000), "tf32", sms) == \
        dispatch.Plan(False, False, True, True)
    assert dispatch.plan(*_ops(1000, 1000, 1000, "col"), "tf32x3", sms) == \
        dispatch.Plan(False, True, True, True)
    assert dispatch.plan(*_ops(1000, 1000, 1000), "ieee", sms).pad  # SIMT: no TMA path
    assert dispatch.plan(*_ops(4097, 4097, 4097, dtype=torch.float16), "half", sms).pad
    assert dispatch.plan(*_ops(4097, 4096, 4097), "tf32", sms).pad
    a, b = half
    assert dispatch.plan(a.expand(2, -1, -1), b.expand(2, -1, -1), "half", sms).pad
    shifted = torch.empty(1000 * 1000 + 1, dtype=torch.float16)[1:].view(1, 1000, 1000)
    assert dispatch.plan(shifted, b, "half", sms).pad


def test_rows_off_a_sector_on_large_products_take_copies_only_where_they_pay():
    """TMA-legal rows 16 bytes into a 32-byte sector (fp16 4104, fp32 4100) run direct
    below PITCH_PAD_MIN_MN rows or columns. From there: at 16 bits a row-major A's, beside
    B's rows on sectors, are read as two planes of rows (even M); a B off a sector is
    staged K-major alone, a row-major A as given beside it; at tf32 (B staged K-major
    anyway) A runs as given; the rest is padded (with the column strip in A's copy). Rows
    on whole sectors (fp16 2000) stay direct."""
    sms, big, small = 132, dispatch.PITCH_PAD_MIN_MN, dispatch.PITCH_PAD_MIN_MN - 8
    half, single = torch.float16, torch.float32
    for dtype, precision, k in ((half, "half", 4104), (single, "tf32", 4100)):
        direct = dispatch.plan(*_ops(small, big, k, dtype=dtype), precision, sms)
        assert not direct.pad and direct.persistent, direct
    planes = dispatch.plan(*_ops(big, big, 4104, dtype=half), "half", sms)
    assert planes == dispatch.Plan(False, False, False, True), planes
    b_staged = {(big, 4104, big, "row"): (big, 4096), (big, 4104, 4104, "row"): (big, 4096),
                (4104, 4104, 4104, "row"): (4104, 4096),
                (4104, 4104, 4104, "col"): (4104, 4096)}
    for (m, n, k, b_layout), core in b_staged.items():
        p = dispatch.plan(*_ops(m, n, k, "row", b_layout, half), "half", sms)
        assert p == dispatch.Plan(False, False, True, True, core=core), (m, n, k, p)
    tf32 = dispatch.plan(*_ops(big, big, 4100, dtype=single), "tf32", sms)
    assert tf32 == dispatch.Plan(False, False, True, True), tf32
    padded = [dispatch.plan(*_ops(big, big, 4100, dtype=single), "tf32x3", sms),
              # Two planes of 1025 rows take more rows of tiles than 2050.
              dispatch.plan(*_ops(big + 2, big, 4104, dtype=half), "half", sms),
              dispatch.plan(*_ops(4104, 4104, 4104, "col", "row", half), "half", sms),
              dispatch.plan(*_ops(big, big, 4100, "row", "col", single), "tf32", sms)]
    for p in padded:
        assert p.pad and p.persistent, p
    sector_rows = _ops(4000, 4000, 2000, dtype=half)  # 4000-byte rows
    assert dispatch.plan(*sector_rows, "half", sms) == \
        dispatch.Plan(False, False, False, True)


def test_a_direct_plan_cuts_strips_only_from_rows_of_16_byte_runs():
    """A direct plan's column strip streams A as given on the split-K kernel, its row strip
    B: cut where they come in whole 16-byte runs, which the kernel's vector hints load 16
    bytes wide (dispatch.FRINGE_TILE). 1024x4104x4104 fp16 (136 tiles of 128x256, one wave
    and 4; 128 without the last 8 columns) cuts its column strip; with A's K 4100 in rows
    4104 apart (TMA takes them, the runs break at K) it runs uncut. Rows likewise from a
    K-major B: 3336x1280 (135 tiles; 130 without the last 8 rows), A M-major with
    3336-element rows (direct), B's K 4104 (cut) or 4100 in rows 4104 apart (uncut; the
    uncut outputs then run the rows of their one whole wave first, _wave_rows)."""
    sms, half = 132, torch.float16
    cut = dispatch.plan(*_ops(1024, 4104, 4104, dtype=half), "half", sms)
    assert cut == dispatch.Plan(False, False, False, True, core=(1024, 4096)), cut
    a_short = torch.empty(1, 1024, 4104, dtype=half)[:, :, :4100]
    uncut = dispatch.plan(a_short, torch.empty(1, 4100, 4104, dtype=half), "half", sms)
    assert uncut == dispatch.Plan(False, False, False, True, wave_rows=7 * 128), uncut
    a_m_major = torch.empty(1, 4104, 3336, dtype=half).transpose(1, 2)
    b_k_major = torch.empty(1, 1280, 4104, dtype=half).transpose(1, 2)
    rows = dispatch.plan(a_m_major, b_k_major, "half", sms)
    assert rows == dispatch.Plan(False, False, False, True, core=(3328, 1280)), rows
    rows_short = dispatch.plan(a_m_major[:, :, :4100], b_k_major[:, :4100], "half", sms)
    # Uncut, its 135 tiles are a wave and 3: the rows of 26 x 5 tiles go first.
    assert rows_short == dispatch.Plan(False, False, False, True, wave_rows=26 * 128), \
        rows_short


def test_skinny_split_k_plans_run_operands_as_given():
    """Skinny products on the split-K kernel run every operand as given, to 64 rows (past
    dispatch.PAD_MIN_MN): rows of whole 16-byte runs (4104 fp16, 4100 fp32) under the
    kernel's vector hints, rows off 16 bytes (4097, or 4100 fp16) on its narrow tiles. Its
    other products pad those at any size. (16-bit ones of few rows against a row-major
    weight in 16-byte runs run transposed on the plain kernel, as given too; on fast
    memory transposed on the split-K kernel.)"""
    sms = 132
    for dtype, precision, size in ((torch.float16, "half", 4104),
                                   (torch.float32, "tf32", 4100),
                                   (torch.float16, "half", 4097),
                                   (torch.float16, "half", 4100),
                                   (torch.float32, "tf32", 4097),
                                   (torch.float32, "tf32x3", 4097)):
        for m in (8, 64):
            for layout in ("row", "col"):
                ops = _ops(m, size, size, "row", layout, dtype)
                p = dispatch.plan(*ops, precision, sms)
                runs = (precision == "half" and size == 4104 and layout == "row"
                        and m <= dispatch.TRANSPOSED_RUNS_MAX_M)
                fast = dispatch.plan(*ops, precision, sms, dram_gbps=4814.0)
                if runs:
                    assert p == dispatch.TRANSPOSED, (dtype, size, m, layout, p)
                    assert fast == dispatch.TRANSPOSED_SPLIT_K, (dtype, size, m, layout, fast)
                else:
                    assert fast == p, (dtype, size, m, layout, p, fast)
                    assert p == dispatch.Plan(False, False, False, split_k=True), \
                        (dtype, size, m, layout, p)
    p = dispatch.plan(*_ops(128, 32, 4097, "row", "row", torch.float16), "half", sms)
    assert p.split_k and not p.pad, p  # 128 x 32 outputs: SPLITK_AS_GIVEN_MAX_MN


@pytest.mark.parametrize("precision,dtype,largest", [
    ("half", torch.float16, 128), ("tf32x3", torch.float32, 128),
    ("tf32", torch.float32, 256), ("ieee", torch.float32, 256)])
def test_huge_k_split_k_plans_run_narrow_operands_as_given_up_to_a_size(precision, dtype,
                                                                        largest):
    """Few-tile split-K plans run an operand off 16-byte runs (K = 65535: A's rows) as
    given up to dispatch.SPLITK_AS_GIVEN_MAX_MN outputs of the precision, and pad it past
    that; operands in whole runs never pad."""
    sms = 132
    assert dispatch.SPLITK_AS_GIVEN_MAX_MN[precision] == largest * largest
    for size, as_given in ((largest, True), (largest + 64, False)):
        p = dispatch.plan(*_ops(size, size, 65535, "row", "row", dtype), precision, sms)
        assert p.split_k and p.pad != as_given, (size, p)
    p = dispatch.plan(*_ops(largest + 64, largest + 64, 65536, "row", "row", dtype),
                      precision, sms)
    assert p.split_k and not p.pad, p


def _padded_rows(m, n, k, dtype):
    """The report's "pad" layout: leading dimensions 3 and 5 past K and N."""
    return (torch.empty(1, m, k + 3, dtype=dtype, device=DEVICE)[:, :, :k],
            torch.empty(1, k, n + 5, dtype=dtype, device=DEVICE)[:, :, :n])


@pytest.mark.parametrize("dtype,precision", [(torch.float16, "half"), (torch.float32, "tf32"),
                                             (torch.float32, "tf32x3")])
def test_persistent_plans_for_unaligned_operands_stage_what_the_kernel_takes(dtype, precision):
    """Operands that need padding for the plain kernel: a plan that sends them to the
    persistent kernel (padded or direct) must stage operands it accepts; otherwise run()
    falls back to the plain kernel on unpadded, unaligned operands (fp32 3000^3 with padded
    leading dimensions ran 10 TFLOPS that way, against 61 padded)."""
    sms = 1  # every tile count qualifies; sizes with 16-byte rows (72) or not (81)
    layouts = [_ops(s, s, s, la, lb, dtype, DEVICE) for s in (72, 81)
               for la in ("row", "col") for lb in ("row", "col")]
    layouts += [_padded_rows(s, s, s, dtype) for s in (72, 81, 96)]
    persistent = 0
    for a, b in layouts:
        p = dispatch.plan(a, b, precision, sms)
        if not p.persistent:
            continue
        persistent += 1
        assert p.split_tf32 == (precision == "tf32x3" and b.shape[2] % 4 == 0
                                and a.shape[2] >= dispatch.SPLIT_TF32_MIN_K)
        sa, sb, *_ = dispatch.stage(a, b, p)
        out = torch.empty(a.shape[1], b.shape[2], dtype=dtype, device=DEVICE)
        assert _persistent.supports(sa[0], sb[0, :, :b.shape[2]], out, precision), \
            (p, a.stride(), b.stride(), a.shape)
    assert persistent >= 6


@requires_kernels
@pytest.mark.parametrize("dtype,precision,k,padded_rows,a_m_major", [
    (torch.float16, "half", 40, False, False), (torch.bfloat16, "half", 40, False, False),
    (torch.float16, "half", 40, False, True), (torch.float32, "tf32x3", 36, False, False),
    (torch.float32, "tf32x3", 36, True, False)])
def test_sixteen_byte_rows_on_the_tma_kernel_compute_the_product(dtype, precision, k,
                                                                 padded_rows, a_m_major):
    """The plan above, run: unpadded operands whose sizes are not multiples of 16 elements,
    an unaligned output stored by pointer stores, a bias-style D. padded_rows: leading
    dimensions 3 and 5 past K and N, rows TMA cannot take, so fp32 A and B get K-major copies.
    a_m_major: a 16-bit A stored M-contiguous, read through its transposed descriptor."""
    if padded_rows:
        a = randn(1, 72, k + 3, dtype=dtype)[:, :, :k]
        b = randn(1, k, 77, dtype=dtype)[:, :, :72]
    elif a_m_major:
        a, b = randn(1, k, 72, dtype=dtype).transpose(1, 2), randn(1, k, 72, dtype=dtype)
    else:
        a, b = randn(1, 72, k, dtype=dtype), randn(1, k, 72, dtype=dtype)
    p = dispatch.plan(a, b, precision, sms=132)
    assert p.persistent and not p.pad and p.a_k_major == padded_rows
    d = randn(72, dtype=dtype)
    out = torch.full((1, 72, 72), float("nan"), dtype=dtype, device=a.device)
    dispatch.run(a, b, out, d, alpha=0.5, beta=2.0, precision=precision, force=p)
    ref = 0.5 * (a.double() @ b.double()) + 2.0 * d.double()
    assert_close(out, ref, dtype, None if precision == "half" else precision, str(p))
    family = configs.persistent_family(dtype, False, 72, 72,
                                       _persistent._num_sms(a.device.index or 0))
    assert last_config() in {configs.config_name(c, family)
                             for c in configs.persistent_configs(family)}


def test_tf32x3_stages_halves_for_large_products_with_aligned_output_rows():
    """The split plan where it measured faster: persistent tile counts and outputs TMA can
    store; 4097 columns (pointer-stored output) and 1000^3 (64 tiles) keep the old paths.
    Every layout goes to kernels/split_fed.py first (SPLIT_FED_PLAN: the staged halves stay
    for calls it cannot take); padded operands stage both."""
    sms = 132
    assert dispatch.plan(*_ops(4096, 4096, 4096), "tf32x3", sms) == dispatch.SPLIT_FED_PLAN
    assert dispatch.plan(*_ops(4096, 4096, 4096, "col", "col"), "tf32x3", sms) == \
        dispatch.SPLIT_FED_PLAN
    assert dispatch.plan(*_ops(4096, 4096, 4096, "col", "row"), "tf32x3", sms) == \
        dispatch.SPLIT_FED_PLAN
    # Rows of 16-byte multiples that are not ALIGN elements: split_fed's TMA reads them as
    # they are; rows off 16 bytes (the report's "pad" layout) leave run() the staged halves.
    assert dispatch.plan(*_padded_rows(3000, 3000, 3000, torch.float32), "tf32x3", sms) == \
        dispatch.SPLIT_FED_PLAN
    assert not dispatch.plan(*_ops(4097, 4097, 4097), "tf32x3", sms).split_tf32
    assert not dispatch.plan(*_ops(4096, 4097, 4096), "tf32x3", sms).split_tf32
    assert not dispatch.plan(*_ops(1000, 1000, 1000), "tf32x3", sms).split_tf32
    # K under SPLIT_TF32_MIN_K: the split kernel's error floor is above cuBLAS SGEMM's.
    assert not dispatch.plan(*_ops(8192, 8192, 1008), "tf32x3", sms).split_tf32
    assert dispatch.plan(*_ops(8192, 8192, dispatch.SPLIT_TF32_MIN_K), "tf32x3", sms) == \
        dispatch.SPLIT_FED_PLAN
    assert not dispatch.plan(*_ops(4096, 4096, 4096), "tf32", sms).split_tf32
    # Copies against compute (_halves_pay), on shapes measured both ways: an nt weight
    # product needs no copies for the in-loop split, so only large M and N repay the halves.
    assert dispatch.plan(*_ops(8192, 4096, 4096, "row", "col"), "tf32x3", sms) == \
        dispatch.SPLIT_FED_PLAN
    assert dispatch.plan(*_ops(2048, 11008, 4096, "row", "col"), "tf32x3", sms) == \
        dispatch.SPLIT_FED_PLAN
    assert not dispatch.plan(*_ops(128, 28672, 8192, "row", "col"), "tf32x3", sms).split_tf32
    # Tiles per SM (SPLIT_TF32_MIN_TILES_PER_SM): 2048^3 has 1.9, 2560^3 3.0.
    assert not dispatch.plan(*_ops(2048, 2048, 2048), "tf32x3", sms).split_tf32
    assert dispatch.plan(*_ops(2560, 2560, 2560), "tf32x3", sms) == dispatch.SPLIT_FED_PLAN
    assert dispatch.plan(*_ops(2560, 2560, 2560), "tf32x3", sms)._replace(
        register_fed=False) == dispatch.SPLIT_TF32


def test_halves_pay_at_the_cost_threshold():
    """The rule itself at its boundary: square nn products with a K-major copy of B."""
    def pays(s):
        return dispatch._halves_pay(s, s, s, s * s)
    assert pays(4096) and not pays(1024)
    boundary = next(s for s in range(1024, 4097, 16) if pays(s))
    assert all(pays(s) for s in range(boundary, 4097, 16))
    assert 1024 < boundary < 2048


def test_thin_fringes_run_on_split_k_where_they_save_a_wave():
    sms = 132

    def plan(m, n, k, precision="half", dtype=torch.float16, **layouts):
        return dispatch.plan(*_ops(m, n, k, dtype=dtype, **layouts), precision, sms)

    # 4097^3: 33 x 17 tiles of 128x256 take five waves, 33 x 16 four. The row fringe would
    # save none (32 x 17): columns only.
    assert plan(4097, 4097, 4097).core == (4097, 4096)
    assert plan(4097, 4097, 4097, "tf32", torch.float32).core == (4097, 4096)
    assert plan(4096, 4097, 4096).core == (4096, 4096)
    # Rows: 4097 x 8448 takes 33 x 33 tiles, nine waves, and 4096 x 8448 eight (32 x 33),
    # with B row-major or K-major (its rows whole 16-byte runs); 2049^3 and 2056^3 cut both
    # (17 x 9 tiles, two waves; 16 x 8, one).
    wide = 33 * 256
    assert plan(4097, wide, 4096).core == (4096, wide)
    assert plan(4097, wide, 4096, b_layout="col").core == (4096, wide)
    assert plan(4097, wide, 4096, "tf32", torch.float32).core == (4096, wide)  # staged K-major
    assert plan(2049, 2049, 2049).core == (2048, 2048)
    assert plan(2056, 2056, 2056).core == (2048, 2048)
    # No wave saved (4096 x 4097: 32 x 17 tiles), a fringe wider than SKINNY_M, or no
    # fringe: nothing cut.
    assert plan(4097, 4096, 4096).core is None
    assert plan(4093, 4091, 4099).core is None
    assert plan(4096, 4096 + dispatch.SKINNY_M + 1, 4096).core is None
    assert plan(4096, 4096, 4096).core is None
    # Only the persistent kernel's plans: not off Hopper, not mid-M, not batched.
    assert dispatch.plan(*_ops(4097, 4097, 4097, dtype=torch.float16), "half", sms,
                         tma=False).core is None
    assert plan(200, 4097, 4096).core is None
    a, b = _ops(4097, 4097, 4097, dtype=torch.float16)
    assert dispatch.plan(a.expand(2, -1, -1), b.expand(2, -1, -1), "half", sms).core is None


# Column strips of 4 (inside A's copy where the plan copies A) and 12 (wider than
# STRIP_IN_COPY_MAX_COLS: split-K), row strips of 8 (split-K).
FRINGE_PLANS = [dispatch.Plan(False, False, False, core=(128, 128)),
                dispatch.Plan(True, True, True, core=(136, 136)),
                dispatch.Plan(True, True, False, True, core=(128, 140)),
                dispatch.Plan(False, True, True, True, core=(128, 128)),
                dispatch.Plan(True, False, False, True, core=(128, 136))]


@requires_kernels
@pytest.mark.parametrize("dtype,precision", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("plan", FRINGE_PLANS, ids=lambda p: "-".join(
    f for f, v in zip(p._fields, p) if v is True) + f"-core{p.core[0]}x{p.core[1]}")
def test_fringe_plans_compute_every_region(dtype, precision, plan):
    """The core on the tiled kernel, the column strip inside A's copy or on the split-K
    kernel, the row strip on the split-K kernel: each region of the poisoned output matches
    float64, epilogue included."""
    precision = precision or "half"
    a = randn(1, 136, 72, dtype=dtype)
    b = randn(1, 140, 72, dtype=dtype).transpose(1, 2)  # K-major B, as linear gives
    d = randn(140, dtype=dtype)
    out = torch.full((1, 136, 140), float("nan"), dtype=dtype, device=a.device)
    dispatch.run(a, b, out, d, alpha=0.5, beta=2.0, precision=precision, force=plan,
                 activation=1)
    ref = torch.relu(0.5 * (a.double() @ b.double()) + 2.0 * d.double())
    rows, cols = plan.core
    every = slice(None)
    for region in ((every, slice(rows), slice(cols)), (every, slice(rows, None)),
                   (every, slice(rows), slice(cols, None))):
        if out[region].numel():
            assert_close(out[region], ref[region], dtype,
                         None if precision == "half" else precision, f"{plan} {region}")


@requires_kernels
@pytest.mark.parametrize("plan,in_copy", [
    (dispatch.Plan(True, False, False, core=(136, 136)), True),    # 4 columns
    (dispatch.Plan(True, False, False, core=(136, 128)), False),   # 12: wider than the cap
    (dispatch.Plan(False, False, False, core=(136, 136)), False)])  # A not copied
def test_thin_column_strips_ride_on_the_copy_of_a(monkeypatch, plan, in_copy):
    """Which kernel computes the column strip: A's copy when the plan copies A and the strip
    is at most STRIP_IN_COPY_MAX_COLS wide, else the split-K kernel."""
    calls = {"copy": 0, "split_k": 0}
    copy_jobs, split_k = dispatch.copy_jobs, dispatch._splitk.matmul_2d

    def counted(name, fn):
        def wrapper(*args, **kwargs):
            calls[name] += name != "copy" or kwargs.get("strip") is not None
            return fn(*args, **kwargs)
        return wrapper
    monkeypatch.setattr(dispatch, "copy_jobs", counted("copy", copy_jobs))
    monkeypatch.setattr(dispatch._splitk, "matmul_2d", counted("split_k", split_k))
    a, b = randn(1, 136, 72, dtype=torch.float16), randn(1, 72, 140, dtype=torch.float16)
    out = torch.full((1, 136, 140), float("nan"), dtype=torch.float16, device=a.device)
    dispatch.run(a, b, out, precision="half", force=plan)
    assert calls == {"copy": int(in_copy), "split_k": int(not in_copy)}
    assert_close(out, a.double() @ b.double(), torch.float16, what=str(plan))


@requires_kernels
@pytest.mark.parametrize("dtype,precision,on,beside", [
    (torch.float16, "half", True, True), (torch.bfloat16, "half", True, True),
    (torch.float16, "half", False, False), (torch.float32, "tf32", True, False)])
def test_column_strips_of_a_as_given_run_beside_the_core(monkeypatch, dtype, precision, on,
                                                         beside):
    """A 16-bit column strip the split-K kernel would run after the core runs beside it on
    the plain kernel (STRIP_BESIDE): the core's launch lets it start, the strip's waits for
    the core at its end. fp32 strips, and all strips with STRIP_BESIDE off, run after the
    core on the split-K kernel. The answer is the same either way (the interpreter runs
    both launches in order)."""
    seen = {"plain": 0, "split_k": 0}
    tiled, plain, split_k = dispatch._tiled, dispatch._kernel.matmul_3d, \
        dispatch._splitk.matmul_2d

    def core(*args, **kwargs):
        seen["trigger"] = kwargs.get("trigger", False)
        return tiled(*args, **kwargs)

    def plain_strip(*args, **kwargs):
        seen["plain"] += 1
        seen["beside"] = kwargs.get("beside", False)
        return plain(*args, **kwargs)

    def split_k_strip(*args, **kwargs):
        seen["split_k"] += 1
        return split_k(*args, **kwargs)
    monkeypatch.setattr(dispatch, "STRIP_BESIDE", on)
    monkeypatch.setattr(dispatch, "_tiled", core)
    monkeypatch.setattr(dispatch._kernel, "matmul_3d", plain_strip)
    monkeypatch.setattr(dispatch._splitk, "matmul_2d", split_k_strip)
    a, b = randn(1, 136, 72, dtype=dtype), randn(1, 72, 140, dtype=dtype)
    d = randn(140, dtype=dtype)
    out = torch.full((1, 136, 140), float("nan"), dtype=dtype, device=a.device)
    plan = dispatch.Plan(False, False, False, True, core=(136, 128))  # 12 columns, A given
    dispatch.run(a, b, out, d, alpha=0.5, beta=2.0, precision=precision, force=plan)
    # The core runs on the plain kernel in the interpreter (dispatch._tiled's fallback).
    assert seen["trigger"] == beside and seen.get("beside", False) == beside, seen
    assert seen["split_k"] == (not beside), seen
    ref = 0.5 * (a.double() @ b.double()) + 2.0 * d.double()
    assert_close(out, ref, dtype, None if precision == "half" else precision, str(plan))


@pytest.mark.skipif(DEVICE != "cuda", reason="launches run beside one another on the GPU")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_strips_beside_the_core_are_right_call_after_call(dtype):
    """A B off a sector at PITCH_PAD_MIN_MN (staged K-major, A as given) cuts an 8-column
    strip that runs beside the core on the plain kernel's beside tile: every eager call
    (planned, then
    replayed) and a CUDA-graph replay fill the whole poisoned output, the bias included,
    and the kernel after the call sees both finished."""
    import triton_gemm
    big = dispatch.PITCH_PAD_MIN_MN
    m, n, k = big, big + 8, big + 8
    a, b = randn(m, k, dtype=dtype), randn(k, n, dtype=dtype)
    bias = randn(n, dtype=dtype)
    p = dispatch.plan(a[None], b[None], "half", *_persistent.gpu_sms(a.device))
    assert p.core == (m, big) and p.b_k_major and not p.a_k_major, p
    ref = a.double() @ b.double() + bias.double()
    beside_tile = configs.config_name(configs.plain_beside_config("half"), "half")
    for call in range(6):
        out = torch.full((m, n), float("nan"), dtype=dtype, device=a.device)
        triton_gemm.addmm(bias, a, b, out=out)
        assert last_config() == beside_tile
        assert_close(out, ref, dtype, None, f"call {call}")
    out = torch.full((m, n), float("nan"), dtype=dtype, device=a.device)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        triton_gemm.addmm(bias, a, b, out=out)
    for replay in range(3):
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert_close(out, ref, dtype, None, f"graph replay {replay}")


def test_fringe_plans_are_for_single_products_on_the_tiled_kernels():
    a, b = _ops(136, 140, 72)
    out = torch.empty(1, 136, 140)
    for p in (dispatch.Plan(False, False, False, split_k=True, core=(128, 128)),
              dispatch.SPLIT_TF32._replace(core=(128, 128))):
        with pytest.raises(ValueError, match="core"):
            dispatch.run(a, b, out, precision="tf32x3", force=p)
    with pytest.raises(ValueError, match="core"):
        dispatch.run(a.expand(2, -1, -1), b.expand(2, -1, -1), out.expand(2, -1, -1),
                     precision="ieee", force=dispatch.PLAIN._replace(core=(128, 128)))


def test_rows_of_whole_waves_run_apart_from_a_part_empty_last_wave():
    """dispatch._wave_rows: where 128x256 tiles leave a last wave at most half full after
    fewer than WAVE_CUT_MAX_WAVES whole waves, and B has at most WAVE_CUT_MAX_N columns,
    the first launch takes the rows of whole waves."""
    sms = 132

    def rows(m, n, k, precision="half", dtype=torch.float16, **layouts):
        return dispatch.plan(*_ops(m, n, k, dtype=dtype, **layouts), precision,
                             sms).wave_rows
    # 2208^3: 18 x 9 tiles, a wave and 30; the first launch 14 x 9 = 126 of them.
    assert rows(2208, 2208, 2208) == 14 * 128
    assert rows(2400, 2400, 2400) == 13 * 128       # 19 x 10: a wave and 58
    assert rows(3008, 3008, 3008) == 22 * 128       # 24 x 12: two waves and 24
    assert rows(3200, 3200, 3200) == 20 * 128       # 25 x 13: two waves and 61
    assert rows(2304, 4096, 4096, b_layout="col") == 16 * 128
    assert rows(3000, 3000, 3000) == 22 * 128       # on padded copies (rows off a sector)
    assert rows(2208, 2208, 2208, dtype=torch.bfloat16) == 14 * 128
    # Four whole waves: 4224^3 is 33 x 17 tiles, four waves and 33; the first launch 31 x 17.
    assert rows(4224, 4224, 4224) == 31 * 128
    assert rows(4352, 4352, 4352) == 31 * 128       # 34 x 17: four waves and 50
    assert rows(4736, 4096, 4096) == 33 * 128       # 37 x 16: four waves and 64 (48%)
    assert rows(2176, 8192, 4096, b_layout="col") == 16 * 128   # 17 x 32: four and 16
    # One launch: a last wave over half full (2560^3: 68 of 132), five waves or more, less
    # than one, B wider than 8192 columns (the second launch reads all of it again), and the
    # report's square and llm shapes.
    for m, n, k in ((2560, 2560, 2560), (2816, 2816, 2816), (4608, 4608, 4608),
                    (4800, 4800, 4800), (5376, 4096, 4096),
                    (896, 11008, 4096), (1664, 11008, 4096), (512, 28672, 8192),
                    (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
                    (2048, 4096, 4096), (2048, 8192, 28672), (2048, 11008, 4096),
                    (8192, 4096, 11008)):
        assert rows(m, n, k) is None, (m, n, k)
    # At 8192 columns B is still narrow enough: 6 x 32 tiles, a wave and 60.
    assert rows(768, 8192, 4096) == 4 * 128

    # tf32 too (B staged K-major or not), not 3xTF32 (not measured), not beside a thin
    # fringe's core (4097^3), not batched, not off Hopper.
    assert rows(2208, 2208, 2208, "tf32", torch.float32) == 14 * 128
    assert rows(2304, 4096, 4096, "tf32", torch.float32, b_layout="col") == 16 * 128
    assert rows(2208, 2208, 2208, "tf32x3", torch.float32) is None
    assert rows(4097, 4097, 4097) is None
    a, b = _ops(2208, 2208, 2208, dtype=torch.float16)
    assert dispatch.plan(a.expand(2, -1, -1), b.expand(2, -1, -1), "half", sms).wave_rows \
        is None
    assert dispatch.plan(a, b, "half", sms, tma=False).wave_rows is None


@requires_kernels
@pytest.mark.parametrize("dtype,precision", [
    (torch.float16, "half"), (torch.bfloat16, "half"), (torch.float32, "tf32")],
    ids=["fp16", "bf16", "fp32-tf32"])
def test_wave_rows_plans_compute_both_launches(monkeypatch, dtype, precision):
    """A plan with wave_rows runs its rows in two launches of the tiled kernel; both regions
    of the poisoned output match float64, epilogue included."""
    launched = []
    tiled = dispatch._tiled

    def counted(a, b, out, *args, **kwargs):
        launched.append(out.shape[1])
        return tiled(a, b, out, *args, **kwargs)
    monkeypatch.setattr(dispatch, "_tiled", counted)
    a = randn(1, 200, 72, dtype=dtype)
    b = randn(1, 140, 72, dtype=dtype).transpose(1, 2)
    d = randn(140, dtype=dtype)
    out = torch.full((1, 200, 140), float("nan"), dtype=dtype, device=a.device)
    plan = dispatch.Plan(False, False, False, True, wave_rows=128)
    dispatch.run(a, b, out, d, alpha=0.5, beta=2.0, precision=precision, force=plan,
                 activation=1)
    assert launched == [128, 72]
    ref = torch.relu(0.5 * (a.double() @ b.double()) + 2.0 * d.double())
    for part in (slice(None, 128), slice(128, None)):
        assert_close(out[:, part], ref[:, part], dtype,
                     None if precision == "half" else precision, f"rows {part}")


def test_wave_rows_only_split_persistent_products():
    a, b = _ops(200, 140, 72, dtype=torch.float16)
    out = torch.empty(1, 200, 140, dtype=torch.float16)
    persistent = dispatch.Plan(False, False, False, True)
    for p in (dispatch.PLAIN._replace(wave_rows=128), persistent._replace(wave_rows=200),
              persistent._replace(wave_rows=0),
              persistent._replace(wave_rows=128, core=(128, 128))):
        with pytest.raises(ValueError, match="wave_rows"):
            dispatch.run(a, b, out, precision="half", force=p)
    with pytest.raises(ValueError, match="batch"):
        dispatch.run(a.expand(2, -1, -1), b.expand(2, -1, -1), out.expand(2, -1, -1),
                     precision="half", force=persistent._replace(wave_rows=128))


def test_persistent_kernel_for_large_single_products_on_hopper():
    sms = 132
    big = _ops(2048, 2048, 1024, dtype=torch.float16)
    assert dispatch.plan(*big, "half", sms).persistent
    assert not dispatch.plan(*big, "half", None).persistent  # not Hopper
    assert not dispatch.plan(*big, "ieee", sms).persistent  # SIMT: no TMA path
    # Fewer 128x128 tiles than SMs: the plain kernel.
    assert not dispatch.plan(*_ops(1024, 2048, 1024, dtype=torch.float16), "half", sms).persistent
    assert dispatch.plan(*_ops(1152, 2048, 1024, dtype=torch.float16), "half", sms).persistent
    a, b = big
    assert not dispatch.plan(a.expand(2, -1, -1), b.expand(2, -1, -1), "half", sms).persistent


def test_split_k_for_few_output_tiles_and_long_k():
    sms = 132
    # (Skinny products against wider K-major weights run transposed, and single 16-bit
    # rows on the GEMV kernel: the next test.)
    for m, n, k in [(16, 2048, 8192), (2, 2048, 4096), (128, 128, 65536), (64, 64, 1024)]:
        p = dispatch.plan(*_ops(m, n, k, b_layout="col", dtype=torch.float16), "half", sms)
        assert p.split_k and not p.persistent, (m, n, k)
    # Skinny at any N; past SKINNY_M rows, enough 64x64 tiles for every SM, or too short a
    # K: the tiled kernels.
    assert dispatch.plan(*_ops(16, 28672, 8192), "tf32x3", sms).split_k
    wide = _ops(dispatch.SKINNY_M + 1, 28672, 8192, dtype=torch.float16)
    assert not dispatch.plan(*wide, "half", sms).split_k
    assert dispatch.plan(*_ops(16, 28672, 1024), "tf32x3", sms).split_k
    assert not dispatch.plan(*_ops(16, 28672, 1023, dtype=torch.float16), "half", sms).split_k
    assert not dispatch.plan(*_ops(128, 128, dispatch.SPLITK_MIN_K - 1), "ieee", sms).split_k
    edge = dispatch.SPLITK_TILE * sms // 4  # two rows of tiles, one tile per two SMs
    assert dispatch.plan(*_ops(128, edge, 4096), "ieee", sms).split_k
    assert not dispatch.plan(*_ops(128, edge + dispatch.SPLITK_TILE, 4096), "ieee", sms).split_k
    assert not dispatch.plan(*_ops(128, 4096, 4096), "ieee", sms).split_k  # measured: plain
    a, b = _ops(16, 8192, 8192)
    assert not dispatch.plan(a.expand(2, -1, -1), b.expand(2, -1, -1), "ieee", sms).split_k
    assert not dispatch.plan(a, b, "ieee", None).split_k  # interpreter: plain kernel
    # Non-Hopper GPUs split K too, but never take the TMA kernel.
    assert dispatch.plan(a, b, "tf32x3", sms, tma=False).split_k
    big = _ops(4096, 4096, 4096, dtype=torch.float16)
    assert not dispatch.plan(*big, "half", sms, tma=False).persistent


def test_skinny_products_against_a_wide_k_major_weight_run_transposed():
    """M <= SKINNY_M rows against a K-major weight of at least THIN_MIN_N columns, both
    operands K-contiguous: C^T = B^T A^T on the plain kernel (16-bit, tf32; aligned), or the
    GEMV kernels (ieee and tf32x3, up to GEMV_MAX_M rows, any alignment; 16-bit, one row,
    aligned, from GEMV16_MIN_N columns); against a
    row-major weight, 16-bit or tf32 and aligned, transposed too. Every other skinny
    product keeps split-K as given."""
    sms = 132

    def plan(m, n, k, precision="half", a_layout="row", b_layout="col", dtype=torch.float16,
             batch=1):
        a, b = _ops(m, n, k, a_layout, b_layout, dtype)
        return dispatch.plan(a.expand(batch, -1, -1), b.expand(batch, -1, -1), precision, sms)

    for m, n in [(2, 8192), (16, 8192), (dispatch.SKINNY_M, 8192), (16, dispatch.THIN_MIN_N),
                 (16, 28672)]:
        assert plan(m, n, 8192) == dispatch.TRANSPOSED, (m, n)
    # One 16-bit row: the 16-bit GEMV kernel, where its rows are aligned.
    half_rows = dispatch.GEMV_MAX_M["half"]
    for m, n, k, dtype in [(half_rows, 8192, 8192, torch.float16),
                           (half_rows, dispatch.THIN_MIN_N, 4096, torch.bfloat16),
                           (half_rows, 28672, 8192, torch.float16)]:
        assert plan(m, n, k, dtype=dtype) == dispatch.GEMV, (m, n, k, dtype)
    assert plan(half_rows + 1, 8192, 8192) == dispatch.TRANSPOSED
    # Narrower weights too, down to GEMV16_MIN_N columns; below it split-K.
    assert plan(half_rows, dispatch.GEMV16_MIN_N, 8192) == dispatch.GEMV
    assert plan(half_rows, 2048, dispatch.SPLITK_MIN_K) == dispatch.GEMV
    narrow = plan(half_rows, dispatch.GEMV16_MIN_N - 16, 8192)
    assert narrow.split_k and not narrow.gemv
    assert not plan(half_rows, 2048, dispatch.SPLITK_MIN_K - 16).gemv  # no split-K: K short
    assert not plan(half_rows, 8192, 8184).gemv  # K off ALIGN: split-K as given
    assert not plan(half_rows, 8192, 8192, b_layout="row").gemv  # a row-major weight
    assert plan(16, 8192, 8192, dtype=torch.bfloat16) == dispatch.TRANSPOSED
    assert plan(16, 8192, 8192, "tf32", dtype=torch.float32) == dispatch.TRANSPOSED
    for m, n, k in [(1, 8192, 8192), (dispatch.SKINNY_M, 4096, 4096), (16, 11008, 4096)]:
        assert plan(m, n, k, b_layout="row") == dispatch.TRANSPOSED, (m, n, k)
    assert plan(8, 4096, 4096, b_layout="row", dtype=torch.bfloat16) == dispatch.TRANSPOSED
    assert plan(64, 8192, 8192, "tf32", b_layout="row", dtype=torch.float32) == \
        dispatch.TRANSPOSED
    ieee_rows = dispatch.GEMV_MAX_M["ieee"]
    for m, n, k in [(1, 8192, 8192), (ieee_rows, 8192, 8192), (ieee_rows, 8192, 8184),
                    (ieee_rows, dispatch.THIN_MIN_N, dispatch.SPLITK_MIN_K)]:
        assert plan(m, n, k, "ieee", dtype=torch.float32) == dispatch.GEMV, (m, n, k)
    tf32x3_rows = dispatch.GEMV_MAX_M["tf32x3"]
    assert plan(tf32x3_rows, 8192, 8192, "tf32x3", dtype=torch.float32) == dispatch.GEMV
    split = [plan(16, dispatch.THIN_MIN_N - 16, 8192),         # a narrower weight
             plan(16, 8192, 8192, "tf32x3", b_layout="row", dtype=torch.float32),
             plan(32, 4104, 4104, b_layout="row"),              # 16-byte runs, not ALIGN
             plan(8, 4104, 4104, "tf32", b_layout="row", dtype=torch.float32),
             plan(16, dispatch.THIN_MIN_N - 16, 8192, b_layout="row"),
             plan(16, 8192, 8192, a_layout="col"),             # M-contiguous A
             plan(16, 8192, 8192, "tf32x3", dtype=torch.float32),
             plan(tf32x3_rows + 1, 8192, 8192, "tf32x3", dtype=torch.float32),
             plan(ieee_rows, 8192, 8192, "ieee", b_layout="row", dtype=torch.float32),
             plan(ieee_rows, dispatch.THIN_MIN_N - 16, 8192, "ieee", dtype=torch.float32)]
    assert all(p.split_k and not p.transposed and not p.gemv for p in split), split
    # K no multiple of ALIGN against a K-major weight: split-K as given.
    assert plan(16, 8192, 8184).split_k and not plan(16, 8192, 8184).transposed
    assert not plan(dispatch.SKINNY_M + 1, 8192, 8192).transposed
    assert not plan(16, 8192, dispatch.SPLITK_MIN_K - 1).transposed
    assert not plan(16, 8192, dispatch.SPLITK_MIN_K - 1, "ieee", dtype=torch.float32).gemv
    assert not plan(16, 8192, 8192, batch=2).transposed
    assert not plan(16, 8192, 8192, "ieee", dtype=torch.float32, batch=2).gemv
    assert plan(ieee_rows + 1, 8192, 8192, "ieee", dtype=torch.float32) == \
        dispatch.FMA_TRANSPOSED
    assert not dispatch.plan(*_ops(16, 8192, 8192, b_layout="col", dtype=torch.float16),
                             "half", None).transposed  # interpreter: plain kernel


def test_fp32_fma_products_against_a_k_major_weight_run_transposed_on_split_k():
    """ieee, GEMV_MAX_M + 1 .. FMA_TRANSPOSED_MAX_M rows against an aligned K-major weight
    of at least THIN_MIN_N columns and SPLITK_MIN_K depth: C^T = W A^T on the split-K
    kernel with A^T copied row-major, whatever A's layout; not past those bounds, for a
    row-major or unaligned weight, a batch, other precisions, or without the GPU."""
    sms = 132
    rows, most = dispatch.GEMV_MAX_M["ieee"] + 1, dispatch.FMA_TRANSPOSED_MAX_M

    def plan(m, n, k, a_layout="row", b_layout="col", precision="ieee", batch=1, gpu=sms):
        a, b = _ops(m, n, k, a_layout, b_layout)
        return dispatch.plan(a.expand(batch, -1, -1), b.expand(batch, -1, -1), precision,
                             gpu)

    for m, n, k in [(rows, 8192, 8192), (64, 8192, 8192), (100, 4096, 4096),
                    (most, dispatch.THIN_MIN_N, dispatch.SPLITK_MIN_K), (128, 28672, 8192)]:
        assert plan(m, n, k) == dispatch.FMA_TRANSPOSED, (m, n, k)
    assert plan(64, 8192, 8192, a_layout="col") == dispatch.FMA_TRANSPOSED
    others = [plan(most + 1, 4096, 4096), plan(64, dispatch.THIN_MIN_N - 16, 8192),
              plan(64, 8192, dispatch.SPLITK_MIN_K - 16), plan(64, 8192, 8184),
              plan(64, 8192, 8192, b_layout="row"), plan(64, 8192, 8192, batch=2),
              plan(64, 8192, 8192, precision="tf32x3"), plan(64, 8192, 8192, gpu=None)]
    assert dispatch.FMA_TRANSPOSED not in others, others


def test_16bit_skinny_products_against_a_row_major_weight_in_16_byte_runs_run_transposed():
    """Up to TRANSPOSED_RUNS_MAX_M rows of 16-bit operands against a row-major weight of at
    least THIN_MIN_N columns in rows of whole 16-byte runs that are not ALIGN elements
    (fp16 4104): C^T = W A^T on the plain kernel, as given; not past those rows, for a
    K-major weight, tf32, rows off 16-byte runs, a batch, or without the GPU."""
    sms, most = 132, dispatch.TRANSPOSED_RUNS_MAX_M

    def plan(m, n, k, b_layout="row", precision="half", dtype=torch.float16, batch=1,
             gpu=sms):
        a, b = _ops(m, n, k, "row", b_layout, dtype)
        return dispatch.plan(a.expand(batch, -1, -1), b.expand(batch, -1, -1), precision,
                             gpu)

    for m, n, k in [(8, 4104, 4104), (1, 4104, 4104), (most, 4104, 4104),
                    (8, 8200, dispatch.SPLITK_MIN_K + 8)]:
        assert plan(m, n, k) == dispatch.TRANSPOSED, (m, n, k)
    assert plan(8, 4104, 4104, dtype=torch.bfloat16) == dispatch.TRANSPOSED
    others = [plan(most + 1, 4104, 4104), plan(8, 4104, 4104, "col"),
              plan(8, 4104, 4104, "row", "tf32", torch.float32), plan(8, 4100, 4100),
              plan(8, 4097, 4097), plan(8, 4104, 4104, batch=2), plan(8, 4104, 4104, gpu=None)]
    assert all(not p.transposed for p in others), others


def _run_as_planned(a, b, precision, plan, dram_gbps=None):
    """(1, M, K) a @ (1, K, N) b on plan: on the GPU, first that the dispatcher plans it so
    (on memory of dram_gbps); then run (forced, so the interpreter takes it too) with the
    addmm epilogue and an activation into a poisoned output, every element checked against
    float64."""
    n, dtype = b.shape[2], a.dtype
    d = randn(n, dtype=dtype)
    if DEVICE == "cuda":
        sms = _persistent.gpu_sms(a.device)[0]
        assert dispatch.plan(a, b, precision, sms, dram_gbps=dram_gbps) == plan
    out = torch.full((1, a.shape[1], n), float("nan"), dtype=dtype, device=a.device)
    dispatch.run(a, b, out, d, alpha=0.5, beta=2.0, precision=precision, activation=1,
                 force=plan)
    ref = torch.relu(0.5 * (a.double() @ b.double()) + 2.0 * d.double())
    assert_close(out, ref, dtype, None if precision == "half" else precision, str(plan))


SKINNY_PLANNED = [(torch.float16, "half", 16, dispatch.TRANSPOSED),
                  (torch.bfloat16, "half", 16, dispatch.TRANSPOSED),
                  (torch.float16, "half", dispatch.GEMV_MAX_M["half"], dispatch.GEMV),
                  (torch.bfloat16, "half", dispatch.GEMV_MAX_M["half"], dispatch.GEMV),
                  (torch.float16, "half", dispatch.GEMV_MAX_M["half"] + 1,
                   dispatch.TRANSPOSED),
                  (torch.float32, "tf32", 16, dispatch.TRANSPOSED),
                  (torch.float32, "ieee", dispatch.GEMV_MAX_M["ieee"], dispatch.GEMV),
                  (torch.float32, "ieee", dispatch.GEMV_MAX_M["ieee"] + 1,
                   dispatch.FMA_TRANSPOSED),
                  (torch.float32, "ieee", dispatch.K_MAJOR_FMA_MIN_N - 1,
                   dispatch.FMA_TRANSPOSED),
                  (torch.float32, "ieee", dispatch.K_MAJOR_FMA_MIN_N, dispatch.FMA_TRANSPOSED),
                  (torch.float32, "ieee", dispatch.FMA_TRANSPOSED_MAX_M, dispatch.FMA_TRANSPOSED)]


TRANSPOSED_RUNS_PLANNED = [(dtype, m, gbps) for dtype in (torch.float16, torch.bfloat16)
                           for m in (1, dispatch.TRANSPOSED_RUNS_MAX_M)
                           for gbps in (3352.0, 4814.0)]


@requires_kernels
@pytest.mark.parametrize("dtype,m,dram_gbps", TRANSPOSED_RUNS_PLANNED,
                         ids=[f"{str(dt)[6:]}-{m}-{g:.0f}GBps"
                              for dt, m, g in TRANSPOSED_RUNS_PLANNED])
def test_16bit_skinny_product_against_a_weight_in_16_byte_runs_as_planned(dtype, m,
                                                                          dram_gbps):
    """A 16-bit skinny product against a row-major weight in rows of 16-byte runs off ALIGN
    (4104 columns on the GPU; forced in the interpreter, on a small shape), as the
    dispatcher plans it on an H100's memory (3352 GB/s) and an H200's (4814), with the addmm
    epilogue and an activation: right answer in every element of a poisoned output,
    computed transposed on the plain kernel's thin tiles, or on fast memory on the split-K
    kernel (its runs tile when tuned: the M_RUNS key)."""
    n, k = (4104, 4104) if DEVICE == "cuda" else (40, 56)
    a = randn(1, m, k, dtype=dtype)
    b = randn(1, k, n, dtype=dtype)
    fast = dram_gbps >= dispatch.FAST_MEMORY_GBPS
    plan = dispatch.TRANSPOSED_SPLIT_K if fast else dispatch.TRANSPOSED
    _run_as_planned(a, b, "half", plan, dram_gbps)
    if DEVICE == "cuda" and not fast:  # tuned or not: a thin tile ran
        assert last_config() in {t[0] for t in configs._THIN_TILES["half"]}
    elif DEVICE == "cuda":  # C^T: n rows, m columns
        untuned = configs.splitk_default_config("half", n, m, k)
        assert last_config() in {t[0] for t in configs._SPLITK_RUNS_TILES} | {
            configs.config_name(untuned, "half")}, last_config()


@requires_kernels
@pytest.mark.parametrize("dtype,precision,m,plan", SKINNY_PLANNED,
                         ids=[f"{p}-{str(dt)[6:]}-{m}" for dt, p, m, _ in SKINNY_PLANNED])
def test_skinny_product_against_a_weight_as_planned(dtype, precision, m, plan):
    """A product against a K-major weight at the thresholds of the transposed plans, as the
    dispatcher plans it on the GPU (forced in the interpreter, on small shapes), with the
    addmm epilogue and an activation: right answer in every element of a poisoned output,
    computed on the plain kernel's thin tiles (16-bit, tf32), the GEMV kernels (ieee, few
    rows; 16-bit, one row) or, on a copy of A^T, the split-K kernel (ieee, more rows; 9
    rows: A^T's rows padded) or on Hopper from K_MAJOR_FMA_MIN_N rows simt_tma's K-major
    path."""
    n, k = (dispatch.THIN_MIN_N, 2048) if DEVICE == "cuda" else (40, 48)
    m = m if DEVICE == "cuda" else min(m, 9)
    a = randn(1, m, k, dtype=dtype)
    b = randn(1, n, k, dtype=dtype).transpose(1, 2)  # a K-major weight
    _run_as_planned(a, b, precision, plan)
    if DEVICE == "cuda":  # tuned or not: the plan's kernel ran
        if (plan == dispatch.FMA_TRANSPOSED and m >= dispatch.K_MAJOR_FMA_MIN_N
                and hopper(a.device)):  # kernels/simt_tma.py's K-major path
            assert last_config().startswith("stk_"), last_config()
            return
        if plan == dispatch.FMA_TRANSPOSED:  # C^T: n rows, m columns
            untuned = configs.splitk_default_config("simt", n, m, k)
            ran = (*configs.splitk_tiles("simt"), (configs.config_name(untuned, "simt"),))
        elif plan == dispatch.GEMV:
            ran = configs.GEMV16_TILES if precision == "half" else configs.GEMV_TILES
        else:  # no other tile is that thin
            ran = configs._THIN_TILES[configs.family_for(dtype, precision)]
        assert last_config() in {t[0] for t in ran}


_HUGE_K_PRECISIONS = ((torch.float16, "half"), (torch.bfloat16, "half"),
                      (torch.float32, "tf32"), (torch.float32, "tf32x3"),
                      (torch.float32, "ieee"))
HUGE_K_AS_GIVEN = [(dtype, precision, largest + extra)
                   for dtype, precision in _HUGE_K_PRECISIONS
                   for largest in [math.isqrt(dispatch.SPLITK_AS_GIVEN_MAX_MN[precision])]
                   for extra in (0, 64)]


@requires_kernels
@pytest.mark.parametrize("dtype,precision,size", HUGE_K_AS_GIVEN,
                         ids=[f"{p}-{str(dt)[6:]}-{s}" for dt, p, s in HUGE_K_AS_GIVEN])
def test_split_k_product_off_16_byte_runs_as_planned(dtype, precision, size):
    """A few-tile split-K product whose A rows are off 16 bytes (K odd), at the size
    dispatch.SPLITK_AS_GIVEN_MAX_MN takes as given and one tile row past it (padded), as
    the dispatcher plans it on the GPU (both plans forced in the interpreter, on a small
    shape), with the addmm epilogue and an activation: right answer in every element of a
    poisoned output."""
    m, k = (size, 4097) if DEVICE == "cuda" else (24, 67)
    a, b = randn(1, m, k, dtype=dtype), randn(1, k, m, dtype=dtype)
    as_given = size * size <= dispatch.SPLITK_AS_GIVEN_MAX_MN[precision]
    fp32_tc = precision in ("tf32", "tf32x3")
    plan = (dispatch.Plan(False, False, False, split_k=True) if as_given
            else dispatch.Plan(True, fp32_tc, fp32_tc, split_k=True))
    _run_as_planned(a, b, precision, plan)


def test_mid_m_weight_products_take_the_persistent_kernel():
    """16-bit products of SKINNY_M < M <= MID_M_MAX rows against a weight of at least
    MID_MIN_WEIGHT elements run on the persistent kernel at any tile count (its mid-M tiles),
    tf32 ones too against a K-major weight; fewer rows split K, more rows or a smaller weight
    keep the plain kernel below one 128x128 tile per SM, and so do tf32 products against a
    row-major weight and fp32 FMA ones."""
    sms = 132

    def plan(m, n, k, precision="half", dtype=torch.float16):
        return dispatch.plan(*_ops(m, n, k, b_layout="col", dtype=dtype), precision, sms)

    for m in (dispatch.SKINNY_M + 1, 128, configs.MID_M_MAX):
        assert plan(m, 4096, 4096) == dispatch.Plan(False, False, False, persistent=True), m
    assert plan(128, 4096, 4096, dtype=torch.bfloat16).persistent
    assert plan(128, 8192, 28672).persistent
    assert plan(dispatch.SKINNY_M, 2048, 4096).split_k
    assert not plan(configs.MID_M_MAX + 1, 2048, 4096).persistent  # 48 tiles
    assert not plan(128, 4096, 4095).persistent  # weight just below MID_MIN_WEIGHT
    assert plan(128, 4096, 4096, "tf32", torch.float32) == dispatch.Plan(
        False, False, False, persistent=True)
    assert not dispatch.plan(*_ops(128, 4096, 4096), "tf32", sms).persistent  # row-major B
    assert not plan(128, 4096, 4096, "ieee", torch.float32).persistent
    assert not plan(128, 4096, 4096, "tf32x3", torch.float32).persistent
    assert not dispatch.plan(*_ops(128, 4096, 4096, dtype=torch.float16), "half",
                             sms, tma=False).persistent


def test_persistent_family_by_shape():
    """Which persistent tile table a product tunes over (configs.persistent_family)."""
    half = torch.float16
    assert configs.persistent_family(half, False, 128, 4096, 132) == "half_mid"
    assert configs.persistent_family(torch.bfloat16, False, 256, 4096, 132) == "half_mid"
    # Past MID_M_MAX rows, "half" with fewer tiles than SMs but for SMALL_WAVE_MIN_TILES
    # (64) to half the SMs' count (66): 1000^3 and 1024^3 are 64 tiles.
    assert configs.persistent_family(half, False, 257, 4096, 132) == "half"  # 96 tiles
    assert configs.persistent_family(half, False, 1000, 1000, 132) == "half_mid"
    assert configs.persistent_family(half, False, 768, 1408, 132) == "half_mid"  # 66 tiles
    assert configs.persistent_family(half, False, 1024, 1056, 132) == "half"  # 72 tiles
    assert configs.persistent_family(half, False, 1024, 1024, 120) == "half"  # 64 > 120 // 2
    assert configs.persistent_family(half, False, 1024, 896, 132) == "half"  # 56 tiles
    assert configs.persistent_family(half, False, 2000, 1000, 132) == "half"  # 128 tiles
    assert configs.persistent_family(torch.float32, False, 1024, 1024, 132) == "tf32"
    assert configs.persistent_family(half, False, 1024, 2176, 132) == "half"  # 136 tiles
    assert configs.persistent_family(half, False, 2048, 2048, 132) == "half"  # 256 tiles
    assert configs.persistent_family(torch.float32, False, 1000, 1000, 132) == "tf32"
    assert configs.persistent_family(half, False, 256, 16384, 132) == "half"  # 256 tiles
    assert configs.persistent_family(torch.float32, False, 128, 4096, 132) == "tf32_mid"
    assert configs.persistent_family(torch.float32, False, 512, 4096, 132) == "tf32"
    assert configs.persistent_family(torch.float32, True, 128, 4096, 132) == "split"


def test_small_waves_of_aligned_products_plan_the_persistent_kernels_mid_tiles(monkeypatch):
    """SMALL_WAVE: 64 to 66 tiles of 128x128 on 132 SMs, aligned 16-bit operands too shallow
    for K slices: persistent on its mid tiles (Plan.mid_tiles); tf32 the same, a row-major B
    staged K-major; more tiles, fewer, K slices, ieee, tf32x3, batches and the switch off
    keep their plans."""
    mid = dispatch.Plan(False, False, False, persistent=True, mid_tiles=True)
    for m, n, k, b_k_major in ((1024, 1024, 1024, False), (1024, 1024, 1024, True),
                               (1024, 1024, 2048, False), (768, 1408, 2048, False)):
        for dtype in (torch.float16, torch.bfloat16):
            p = single_plan(m, n, k, dtype, b_k_major)
            assert p == mid, (m, n, k, p)
        p = single_plan(m, n, k, torch.float32, b_k_major, precision="tf32")
        assert p == mid._replace(b_k_major=not b_k_major), (m, n, k, p)
    assert not single_plan(1024, 1056, 1024).persistent  # 72 tiles: the plain kernel
    assert not single_plan(1024, 896, 1024).persistent  # 56 tiles
    assert single_plan(1024, 1024, 8192).sliced
    for precision in ("ieee", "tf32x3"):
        p = single_plan(1024, 1024, 1024, torch.float32, precision=precision)
        assert not p.mid_tiles, (precision, p)
    assert not single_plan(1024, 1024, 1024, batch=2).persistent
    assert not single_plan(1000, 1000, 1000, torch.float32, precision="tf32").mid_tiles
    assert not single_plan(1024, 1024, 1024, sms=120).persistent  # 64 tiles > 120 // 2
    monkeypatch.setattr(dispatch, "SMALL_WAVE", False)
    assert not single_plan(1024, 1024, 1024).persistent


@pytest.mark.skipif(DEVICE != "cuda", reason="the persistent TMA kernel runs on the GPU")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_small_wave_products_run_on_the_mid_tiles(dtype):
    """1024^3 and a linear layer of 1024x1024x2048 with a bias (fp32 at tf32): the
    persistent kernel's mid tiles on Hopper with 132 SMs, right on a NaN-poisoned output."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    if sms != 132 or not hopper(torch.device("cuda")):
        pytest.skip("the rule's tile counts are set for 132 SMs of a Hopper GPU")
    precision, family = ("tf32", "tf32_mid") if dtype == torch.float32 else (None, "half_mid")
    mid = {configs.config_name(c, family) for c in configs.persistent_configs(family)}
    a, b = randn(1024, 1024, dtype=dtype), randn(1024, 1024, dtype=dtype)
    out = torch.full((1024, 1024), float("nan"), dtype=dtype, device=a.device)
    triton_gemm.matmul(a, b, out=out, precision=precision)
    assert last_config() in mid, last_config()
    assert_close(out, a.double() @ b.double(), dtype, precision, "1024^3")
    x, w = randn(1024, 2048, dtype=dtype), randn(1024, 2048, dtype=dtype)
    bias = randn(1024, dtype=dtype)
    y = triton_gemm.linear(x, w, bias, precision=precision)
    assert last_config() in mid, last_config()
    assert_close(y, x.double() @ w.double().T + bias.double(), dtype, precision, "linear")


@pytest.mark.skipif(DEVICE != "cuda", reason="the mid-M plan needs the GPU's TMA kernel")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_mid_m_product_runs_on_the_mid_tiles(dtype):
    """A mid-M product as the dispatcher plans it, with a bias-style D: right answer on a
    poisoned output, tuned over the mid-M tiles (fp32 operands at tf32)."""
    m, n, k = 128, 4096, 4096
    precision, family = ("tf32", "tf32_mid") if dtype == torch.float32 else ("half", "half_mid")
    a = randn(1, m, k, dtype=dtype)
    b = randn(1, n, k, dtype=dtype).transpose(1, 2)
    d = randn(n, dtype=dtype)
    p = dispatch.plan(a, b, precision, *_persistent.gpu_sms(a.device))
    assert p.persistent
    out = torch.full((1, m, n), float("nan"), dtype=dtype, device=a.device)
    dispatch.run(a, b, out, d, alpha=0.5, beta=2.0, precision=precision)
    ref = 0.5 * (a.double() @ b.double()) + 2.0 * d.double()
    assert_close(out, ref, dtype, None if precision == "half" else precision, "mid-M")
    assert last_config() in {configs.config_name(c, family)
                             for c in configs.persistent_configs(family)}


@pytest.mark.skipif(DEVICE != "cuda", reason="the persistent TMA kernel runs on the GPU")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("b_layout", ["row", "col"])
def test_transposed_a_runs_on_the_persistent_kernel(dtype, b_layout):
    """A 16-bit A stored M-contiguous (X^T, as a weight gradient dY^T X takes it) reaches
    the persistent kernel as it is, no copy: right answer on a poisoned output, with a D."""
    # 256 tiles of 128x128; K not a multiple of the tiles' BK; under PITCH_PAD_MIN_MN, so
    # rows off a sector (A's 2040, a K-major B's 520) run direct too.
    m, n, k = 2040, 2040, 520
    a, b = (t.normal_() for t in _ops(m, n, k, "col", b_layout, dtype, DEVICE))
    p = dispatch.plan(a, b, "half", *_persistent.gpu_sms(a.device))
    assert p.persistent and not p.copies, p
    d = randn(n, dtype=dtype)
    out = torch.full((1, m, n), float("nan"), dtype=dtype, device=a.device)
    dispatch.run(a, b, out, d, alpha=0.5, beta=2.0, precision="half")
    assert last_config() in {configs.config_name(c, "half")
                             for c in configs.persistent_configs("half")}
    ref = 0.5 * (a.double() @ b.double()) + 2.0 * d.double()
    assert_close(out, ref, dtype, None, f"M-major A, B {b_layout}")


@pytest.mark.skipif(DEVICE != "cuda", reason="the persistent TMA kernel runs on the GPU")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_large_products_with_rows_off_a_sector_run_their_plans(dtype):
    """At PITCH_PAD_MIN_MN rows and columns: a row-major A of rows 16 bytes off a sector
    (K 2056) runs direct, read as two planes of rows (padded where planes take more tiles:
    M 2050); a B off a sector (N 2056) is staged K-major, A as given (one plane) whether
    its rows are on a sector or not. Right answers on poisoned outputs, with a bias."""
    big = dispatch.PITCH_PAD_MIN_MN
    for m, n, k, kind in ((big, big, big + 8, "planes"), (big + 2, big, big + 8, "padded"),
                          (big, big + 8, big, "b_k_major"),
                          (big, big + 8, big + 8, "b_k_major")):
        a, b = (t.normal_() for t in _ops(m, n, k, dtype=dtype, device=DEVICE))
        p = dispatch.plan(a, b, "half", *_persistent.gpu_sms(a.device))
        assert p.persistent and p.pad == (kind == "padded"), p
        assert p.b_k_major == (kind == "b_k_major") and not p.a_k_major, p
        d = randn(n, dtype=dtype)
        out = torch.full((1, m, n), float("nan"), dtype=dtype, device=a.device)
        dispatch.run(a, b, out, d, alpha=0.5, beta=2.0, precision="half")
        ref = 0.5 * (a.double() @ b.double()) + 2.0 * d.double()
        assert_close(out, ref, dtype, None, f"{m}x{n}x{k} {kind}")


@pytest.mark.parametrize("precision", ["half", "tf32", "tf32x3", "ieee"])
def test_no_product_plans_the_plain_kernel(precision):
    """K = 0 (alpha = 0 runs so too) plans the plain kernel whatever the output's size: the
    paths planned at K > 0 (persistent TMA tiles, rows_2d, split-K, copies) have nothing to
    compute, and TMA takes no empty dimension."""
    dtype = torch.float16 if precision == "half" else torch.float32
    plain = dispatch.Plan(pad=False, a_k_major=False, b_k_major=False)
    for m, n, k, b_k_major in ((4096, 4096, 4096, False), (11008, 144, 512, True),
                               (128, 16896, 4096, True), (16, 8192, 8192, True),
                               (4097, 4097, 4097, False)):
        assert single_plan(m, n, k, dtype, b_k_major, precision=precision) != plain
        assert single_plan(m, n, 0, dtype, b_k_major, precision=precision) == plain
    assert single_plan(1024, 1024, 0, dtype, batch=8, precision=precision) == plain
