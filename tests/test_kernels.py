"""The Triton kernel itself: every autotune config pinned once, outputs poisoned first."""

import pytest
import torch
import triton
import triton.language as tl

from conftest import DEVICE, gpu_only, offline_build, poisoned, randn, requires_kernels
from triton_gemm.tolerances import assert_close, rel_error
from triton_gemm import configs
from triton_gemm.kernels import common
from triton_gemm.kernels import matmul as kernel
from triton_gemm.kernels import gemv, gemv16, persistent, splitk

# Family -> the (dtype, precision) pairs it serves.
FAMILY_CASES = {
    "simt": [(torch.float32, "ieee")],
    "tf32": [(torch.float32, "tf32"), (torch.float32, "tf32x3")],
    "half": [(torch.float16, "half"), (torch.bfloat16, "half")],
}
PINNED = [(family, tile, dtype, precision)
          for family, cases in FAMILY_CASES.items()
          for tile in configs.tiles(family) for dtype, precision in cases]

H100_SMEM = 232448  # bytes of shared memory per block (opt-in) on the H100 and H200

# Ragged against every tile, K crossing several BK steps of the smaller tiles.
M, N, K = (300, 270, 200) if DEVICE == "cuda" else (67, 45, 70)


@requires_kernels
@pytest.mark.parametrize("family,tile,dtype,precision", PINNED,
                         ids=[f"{t[0]}-{dt}-{p}".replace("torch.", "") for _, t, dt, p in PINNED])
def test_every_config(family, tile, dtype, precision):
    """Each config as the autotuner could pick it, with the addmm epilogue on half the runs."""
    config = configs.configs(family)[configs.tiles(family).index(tile)]
    a, b = randn(2, M, K, dtype=dtype), randn(2, K, N, dtype=dtype)
    d = randn(1, 1, N, dtype=dtype)
    out = poisoned(2, M, N, dtype=dtype)
    kernel.matmul_3d(a, b, out, d, alpha=1.5, beta=-0.5, precision=precision, config=config)
    ref = 1.5 * torch.matmul(a.double(), b.double()).cpu() - 0.5 * d.double().cpu()
    assert_close(out, ref, dtype, None if precision == "half" else precision, tile[0])


# 16-byte rows that are not 16 elements (K and B's row stride 8 mod 16 for 16-bit
# operands, multiples of 4 for fp32): the kernel's VEC hint.
VM, VN, VK = (300, 264, 200) if DEVICE == "cuda" else (67, 72, 40)


@requires_kernels
@pytest.mark.parametrize("family,tile,dtype,precision", PINNED,
                         ids=[f"{t[0]}-{dt}-{p}".replace("torch.", "") for _, t, dt, p in PINNED])
def test_every_config_on_16_byte_rows(family, tile, dtype, precision):
    """Each config with the VEC hint (kernel.vector_width), A row-major with B row-major
    and K-major, then A M-major with B K-major (a skinny product against a row-major
    weight, run transposed), a batch and the addmm epilogue: the hint promises only what
    holds (a wrong one misaligns the GPU's vector loads)."""
    config = configs.configs(family)[configs.tiles(family).index(tile)]
    a_row = randn(2, VM, VK, dtype=dtype)
    d = randn(1, 1, VN, dtype=dtype)
    # An M-major A's runs need MA rows in whole runs: VM rounded up, read to VM.
    a_m_major = randn(2, VK, -(-VM // 8) * 8, dtype=dtype).mT
    for a, b in ((a_row, randn(2, VK, VN, dtype=dtype)),
                 (a_row, randn(2, VN, VK, dtype=dtype).mT),
                 (a_m_major, randn(2, VN, VK, dtype=dtype).mT)):
        vec, a_m, b_k_major = kernel.vector_width(a, b, VK, VN)
        assert vec == 16 // a.element_size() and b_k_major == (b.stride(1) == 1)
        assert a_m == (a.stride(1) == 1)
        out = poisoned(2, VM, VN, dtype=dtype)
        kernel.matmul_3d(a, b, out, d, alpha=1.5, beta=-0.5, precision=precision,
                         config=config)
        ref = (1.5 * torch.matmul(a[:, :VM].double(), b.double()).cpu()
               - 0.5 * d.double().cpu())
        assert_close(out, ref, dtype, None if precision == "half" else precision,
                     f"{tile[0]}, A M-major: {a_m}, B K-major: {b_k_major}")


def test_vector_width_needs_every_row_on_16_bytes():
    """No hint where triton sees 16 elements anyway, where a base or stride is off 16 bytes,
    or where neither operand dimension of B is contiguous."""
    half = torch.float16
    none = (0, False, False)
    a, b = torch.empty(1, 64, 40, dtype=half), torch.empty(1, 40, 72, dtype=half)
    assert kernel.vector_width(a, b, 40, 72) == (8, False, False)
    assert kernel.vector_width(a.float(), b.float(), 40, 72) == (4, False, False)
    assert kernel.vector_width(torch.empty(1, 64, 48, dtype=half),
                               torch.empty(1, 48, 64, dtype=half), 48, 64) == none
    storage = torch.empty(64 * 40 + 1, dtype=half)
    assert kernel.vector_width(storage[1:].view(1, 64, 40), b, 40, 72) == none
    assert kernel.vector_width(torch.empty(1, 64, 36, dtype=half),
                               torch.empty(1, 36, 72, dtype=half), 36, 72) == none
    assert kernel.vector_width(a, torch.empty(1, 40, 144, dtype=half)[:, :, ::2], 40,
                               72) == none
    # M-major A: its MA counts too (72 rows, not 68), and its column stride.
    a_m = torch.empty(1, 40, 72, dtype=half).mT
    assert kernel.vector_width(a_m, b, 40, 72) == (8, True, False)
    assert kernel.vector_width(a_m, b.mT.contiguous().mT, 40, 72) == (8, True, True)
    assert kernel.vector_width(a_m[:, :68], b, 40, 72) == none
    assert kernel.vector_width(torch.empty(1, 40, 76, dtype=half).mT[:, :72], b, 40,
                               72) == none
    assert kernel.vector_width(a_m[:, ::2], b, 40, 72) == none  # nothing contiguous


@requires_kernels
@pytest.mark.parametrize("dtype,precision", [(torch.float32, "tf32x3"), (torch.float16, "half")])
def test_default_config_writes_every_element(dtype, precision):
    a, b = randn(3, 33, 70, dtype=dtype), randn(3, 70, 130, dtype=dtype)
    out = poisoned(3, 33, 130, dtype=dtype)
    kernel.matmul_3d(a, b, out, precision=precision)
    assert_close(out, torch.matmul(a.double(), b.double()), dtype,
                 None if precision == "half" else precision, "default config")


@requires_kernels
def test_output_strides_are_respected():
    """A strided output view: the kernel writes only its elements."""
    a, b = randn(1, 20, 30), randn(1, 30, 10)
    base = poisoned(1, 40, 10, dtype=torch.float32)
    kernel.matmul_3d(a, b, base[:, ::2], precision="ieee")
    assert_close(base[:, ::2], torch.matmul(a.double(), b.double()), torch.float32, "ieee",
                 "strided out")
    assert base[:, 1::2].isnan().all()


@requires_kernels
def test_rows_of_a_past_the_output_are_not_used():
    """An M-major A with more rows than the output (a padded copy): only the first M rows
    count, edge tiles read the rows past M (here NaN) without storing them, and every
    output element is written. Every SIMT tile, so each has ragged edge tiles."""
    a = torch.full((1, K, M + 37), float("nan"), device=DEVICE).transpose(1, 2)
    a[:, :M] = randn(1, M, K)
    b = randn(1, K, N)
    ref = torch.matmul(a[:, :M].double(), b.double())
    for tile in configs.tiles("simt"):
        out = poisoned(1, M, N, dtype=torch.float32)
        kernel.matmul_3d(a, b, out, precision="ieee",
                         config=configs.configs("simt")[configs.tiles("simt").index(tile)])
        assert_close(out, ref, torch.float32, "ieee", tile[0])


def test_layout_code_and_int64_check():
    a = torch.empty(1, 8, 4)
    b = torch.empty(1, 4, 6)
    assert common.layout_code(a, b) == common.A_K_CONTIGUOUS
    assert common.layout_code(a, b.mT.contiguous().mT) == (common.A_K_CONTIGUOUS
                                                           | common.B_K_CONTIGUOUS)
    assert common.layout_code(a.mT.contiguous().mT, b) == 0
    assert not common.needs_int64(torch.empty(3, 5), torch.empty(1, 5).expand(2**31, 5))
    assert common.needs_int64(torch.empty(0), torch.empty(2**31, dtype=torch.int8).view(
        torch.float16)[:1]) is False  # 2^30 halves
    assert common.needs_int64(torch.empty(2**31 + 8, dtype=torch.int8))
    small = torch.empty(2, 2)
    assert splitk.supports(small, small, small)  # int32 offsets only: large D refused too
    assert not splitk.supports(small, small, small, torch.empty(2**31 + 8, dtype=torch.int8))


@gpu_only
def test_int64_offsets_beyond_2_pow_31_elements():
    """A has 2^31 + 2048*16 elements: 32-bit offsets would wrap and read the wrong rows."""
    k = 2048
    m = 2**31 // k + 16
    a = torch.empty(m, k, dtype=torch.float16, device="cuda")
    a[:-32].zero_()
    a[-32:] = torch.randn(32, k, device="cuda").half()
    b = randn(k, 16, dtype=torch.float16)
    out = poisoned(1, m, 16, dtype=torch.float16)
    kernel.matmul_3d(a.unsqueeze(0), b.unsqueeze(0), out, precision="half")
    assert_close(out[0, -32:], torch.matmul(a[-32:].double(), b.double()), torch.float16,
                 what="rows past 2^31 elements")
    assert (out[0, :-32] == 0).all()


def aligned(rows, cols, dtype, fill=None):
    """A (rows, cols) view whose row stride is padded to 16 bytes, as TMA needs."""
    per_16 = 128 // torch.finfo(dtype).bits  # elements per 16 bytes
    storage_cols = -(-cols // per_16) * per_16
    if fill is None:
        base = randn(rows, storage_cols, dtype=dtype)
    else:
        base = torch.full((rows, storage_cols), fill, dtype=dtype, device=DEVICE)
    return base[:, :cols]


def staged_halves(a, b):
    """(A hi, B hi, (A lo, B lo)): the tf32 halves of (M, K) A and K-major (K, N) B that the
    split family runs on (3xTF32 as three tf32 dots), as dispatch stages them."""
    from triton_gemm.kernels.copy import copy_jobs, split_job
    (m, k), n = a.shape, b.shape[1]
    kp = -(-k // 16) * 16  # 16-byte rows for TMA; the halves are zero past K
    a_job, b_job = split_job(a[None], (1, m, kp)), split_job(b.t()[None], (1, n, kp))
    copy_jobs(a_job, b_job)
    (a, a_lo), (b, b_lo) = (a_job.dst, a_job.lo), (b_job.dst, b_job.lo)
    return a[0, :, :k], b[0, :, :k].t(), (a_lo[0, :, :k], b_lo[0, :, :k].t())


PERSISTENT_CASES = [
    (family, tile, dtype, "half", b_k_major)
    for family in ("half", "half_mid") for tile in configs.persistent_tiles(family)
    for dtype in (torch.float16, torch.bfloat16) for b_k_major in (False, True)
] + [
    ("tf32", tile, torch.float32, precision, True)
    for tile in configs.persistent_tiles("tf32") for precision in ("tf32", "tf32x3")
] + [("tf32_mid", tile, torch.float32, "tf32", True)
     for tile in configs.persistent_tiles("tf32_mid")] + [("split", tile, torch.float32, "tf32x3", True) for tile in configs.persistent_tiles("split")]


@requires_kernels
@pytest.mark.parametrize("family,tile,dtype,precision,b_k_major", PERSISTENT_CASES,
                         ids=[f"{t[0]}-{dt}-{p}-{'kmajor' if km else 'row'}".replace("torch.", "")
                              for _, t, dt, p, km in PERSISTENT_CASES])
@pytest.mark.parametrize("d_kind", ["bias", "matrix"])
def test_every_persistent_config(family, tile, dtype, precision, b_k_major, d_kind):
    """Each persistent TMA config, ragged M/N/K, output poisoned; with a D wherever the
    pruner lets the config run with one (on the H100's 227 KB): a bias (one row broadcast,
    read as a vector: D_ROW) or a whole matrix."""
    m, n, k = (300, 270, 200) if DEVICE == "cuda" else (67, 45, 70)
    config = configs.persistent_configs(family)[configs.persistent_tiles(family).index(tile)]
    bias = d_kind == "bias"
    if (not bias and DEVICE == "cuda"
            and tile[0] != configs.config_name(configs.persistent_default_config(family),
                                               family)):
        # Each variant is a GPU compile of seconds. A matrix D takes the pointer tile that a
        # bias took on every config before D_ROW (the same code, only stride_dm differs).
        pytest.skip("a matrix D on the GPU: each family's default config")
    with_d = configs.persistent_fits(config, family, True, H100_SMEM, d_row=bias)
    if not with_d and bias:
        pytest.skip(f"{tile[0]} does not fit the H100 with any D (the matrix case runs it)")
    a = aligned(m, k, dtype)
    b = aligned(n, k, dtype).t() if b_k_major else aligned(k, n, dtype)
    d = None if not with_d else randn(n, dtype=dtype) if bias else randn(m, n, dtype=dtype)
    out = aligned(m, n, dtype, fill=float("nan"))
    assert persistent.supports(a, b, out, precision)
    ref = -(a.double() @ b.double()).cpu()
    a, b, lo = staged_halves(a, b) if family == "split" else (a, b, None)
    assert persistent.supports(a, b, out, precision)
    persistent.matmul_2d(a, b, out, d, alpha=-1.0, beta=2.0, precision=precision,
                         config=config, lo=lo)
    if with_d:
        ref += 2.0 * d.double().cpu()
    assert_close(out, ref, dtype, None if precision == "half" else precision, tile[0])


@requires_kernels
@pytest.mark.parametrize("family,dtype,precision,a_m_major", [
    ("half", torch.float16, "half", False), ("half", torch.bfloat16, "half", True),
    ("tf32", torch.float32, "tf32", False)])
def test_persistent_runs_a_part_wave_tail_as_half_tiles(family, dtype, precision, a_m_major):
    """Whole waves of 128x256 tiles and a tail of at most half a wave (run as 128x128
    halves, HALF_TAIL) in one launch: 144 tiles on the H100's 132 SMs, 3 on the
    interpreter's 2; every element of the poisoned output written, with a D epilogue, TMA-
    and pointer-stored; a_m_major: A stored M-contiguous."""
    sms = persistent._num_sms(0)
    rows, cols = (12, 12) if DEVICE == "cuda" else (3, 1)
    m, n, k = rows * 128 - 5, cols * 256 - 24, 200 if DEVICE == "cuda" else 70
    tail = (rows * cols) % sms
    assert rows * cols > sms and 0 < 2 * tail <= sms
    assert family in persistent.HALF_TAIL_FAMILIES
    # 128x256 tiles that fit with a D, TMA- and pointer-stored (the tf32 one is
    # warp-specialised: the halves' loop follows a warp-specialised one).
    name = "p_128x256x64_sub" if family == "half" else "pt_128x256x32_sub_ws"
    names = [t[0] for t in configs.persistent_tiles(family)]
    config = configs.persistent_configs(family)[names.index(name)]
    assert (config.kwargs["BM"], config.kwargs["BN"]) == (128, 256)
    assert all(configs.persistent_fits(config, family, True, H100_SMEM, c_tma)
               for c_tma in (True, False))
    assert persistent._halves_run(config, m, n, sms)  # the launch takes the tail's path
    a = aligned(k, m, dtype).t() if a_m_major else aligned(m, k, dtype)
    b = aligned(n, k, dtype).t()
    d = randn(n, dtype=dtype)
    ref = (-(a.double() @ b.double()) + 2.0 * d.double()).cpu()
    for pad in (0, 1):  # an aligned output row (TMA store), then an unaligned one
        storage = torch.full((m, n + pad), float("nan"), dtype=dtype, device=a.device)
        out = storage[:, :n]
        persistent.matmul_2d(a, b, out, d, alpha=-1.0, beta=2.0, precision=precision,
                             config=config)
        assert_close(out, ref, dtype, None if precision == "half" else precision,
                     f"tail, row pad {pad}")


@pytest.mark.parametrize("half_tail", [False, True])
def test_persistent_grid_gives_every_program_work_and_every_tile_a_program(half_tail):
    """persistent.programs against the kernel's own walk (whole tiles pid, pid + grid, ...,
    then tail halves pid, pid + sms, ...): every tile and half run once, no program idle,
    and the whole tiles in as many waves as sms programs would take, shared evenly
    (BALANCED_WAVES). 1000^3 in 128x128 tiles (64 on 132 SMs) once launched 128
    programs."""
    sms = 132
    cases = [(bm, bn, m, n) for bm, bn in ((128, 128), (128, 256), (64, 128))
             for m in (1, 127, 1000, 1536, 2048, 4097) for n in (64, 1000, 4096, 11008)]
    for bm, bn, m, n in cases:
        tiles = -(-m // bm) * -(-n // bn)
        tail = persistent._tail_tiles(bm, bn, m, n, sms) if half_tail else 0
        grid = persistent.programs(bm, bn, m, n, sms, half_tail)
        whole = [list(range(pid, tiles - tail, grid)) for pid in range(grid)]
        work = [w + list(range(pid, 2 * tail, sms)) for pid, w in enumerate(whole)]
        label = (bm, bn, m, n, grid)
        assert all(work), label
        assert sorted(t for w in whole for t in w) == list(range(tiles - tail)), label
        assert grid >= 2 * tail and grid <= sms, label
        if not tail:
            counts = {len(w) for w in whole}
            assert max(counts) == -(-tiles // sms) and max(counts) - min(counts) <= 1, label
    assert persistent.programs(128, 128, 1000, 1000, sms, True) == 64
    assert persistent.programs(128, 256, 1000, 1000, sms, True) == 64  # 32 tiles as halves
    # 4096^3: 512 tiles of 128x256, four waves on 132 SMs, so 128 programs of four each
    assert persistent.programs(128, 256, 4096, 4096, sms, True) == 128
    assert persistent.programs(128, 256, 33 * 128, 4096, sms, True) == 132  # 4 * 132 tiles


@triton.jit
def _tile_origins(out_ptr, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """out[tile] = persistent.tile_origin(tile) for every tile, in 1 x 1 tiles."""
    for tile in range(num_pid_m * num_pid_n):
        off_m, off_n = persistent.tile_origin(tile, num_pid_m, num_pid_n, 1, 1, GROUP_M)
        tl.store(out_ptr + 2 * tile, off_m)
        tl.store(out_ptr + 2 * tile + 1, off_n)


def _group_heights(order: list, cols: int) -> list:
    """Heights of the groups a tile order walks, checking that each group takes its rows
    of tiles a column at a time: tile j of a group of h rows from row r is (r + j % h,
    j // h)."""
    heights, start = [], 0
    while start < len(order):
        first = order[start][0]
        height = 1
        while start + height < len(order) and order[start + height][1] == 0:
            height += 1
        group = order[start:start + height * cols]
        assert group == [[first + j % height, j // height] for j in range(height * cols)]
        heights.append(height)
        start += height * cols
    return heights


@requires_kernels
def test_tile_order_walks_even_groups_of_rows():
    """persistent.tile_origin runs every tile once, in groups of rows of tiles at most
    GROUP_M tall, as few as that allows, as tall as one another but the last (a few rows
    shorter at most). Groups of 8 once cut 10 rows of tiles as 8 + 2: the last group read
    all of B again for two rows (1280x11008x4096 fp16 181 us against 172 in one group)."""
    expected = {(10, 8): [5, 5], (9, 16): [9], (10, 16): [10], (17, 16): [9, 8],
                (17, 8): [6, 6, 5], (33, 16): [11, 11, 11], (32, 16): [16, 16],
                (1, 16): [1], (49, 16): [13, 13, 13, 10]}
    for (rows, group_m), heights in expected.items():
        for cols in (2, 3, 43):  # one column would hide where groups end
            out = torch.full((rows * cols, 2), -1, dtype=torch.int32, device=DEVICE)
            _tile_origins[(1,)](out, rows, cols, group_m)
            order = out.tolist()
            label = (rows, cols, group_m)
            every_tile = [[r, c] for r in range(rows) for c in range(cols)]
            assert sorted(order) == every_tile, label
            got = _group_heights(order, cols)
            assert got == heights, label
            assert max(got) <= group_m and len(got) == -(-rows // group_m), label
            assert all(h == got[0] for h in got[:-1]), label
            assert got[-1] > got[0] - len(got), label
    assert configs.persistent_group_m(128, 256) == 16
    assert configs.persistent_group_m(256, 128) == configs.persistent_group_m(128, 128) == 8


def test_split_flush_interval_is_at_least_two_k_steps_of_every_split_tile():
    """The split kernel folds a one-step flush back into the tensor core's accumulator
    (its static_assert); the interval grows with K, never past 128 (256 measured less
    accurate than cuBLAS SGEMM on some inputs)."""
    flushes = [persistent.hi_flush_k(k) for k in (1024, 2047, 2048, 4095, 4096, 65536)]
    assert flushes == sorted(flushes) and flushes[0] == 64 and flushes[-1] == 128
    for tile in configs.persistent_tiles("split"):
        assert all(f % (2 * tile[3]) == 0 for f in flushes), tile[0]


def test_persistent_supports_only_tma_friendly_operands():
    a, b = torch.empty(64, 64), torch.empty(64, 64)
    out = torch.empty(64, 64)
    assert persistent.supports(a, b.t(), out, "tf32")
    assert not persistent.supports(a, b, out, "tf32")  # fp32 B must be K-major
    assert not persistent.supports(a, b.t(), out, "ieee")  # no tensor cores
    h = torch.empty(64, 64, dtype=torch.float16)
    assert persistent.supports(h, h, h, "half")
    assert persistent.supports(h.t(), h, h, "half")  # M-major A: wgmma reads it transposed
    assert not persistent.supports(a.t(), b.t(), out, "tf32")  # fp32 A must be K-major too
    m_major_odd = torch.empty(64, 63, dtype=torch.float16).t()  # (K, M) rows of 63 elements
    assert not persistent.supports(m_major_odd, h, h[:63], "half")
    assert not persistent.supports(torch.empty(64, 64, 2, dtype=torch.float16)[:, :, 0], h, h,
                                   "half")  # neither dimension contiguous
    odd = torch.empty(64, 63, dtype=torch.float16)
    assert not persistent.supports(odd, torch.empty(63, 64, dtype=torch.float16), h, "half")
    assert persistent.supports(h, h, torch.empty(64, 67, dtype=torch.float16)[:, :64], "half")
    assert not persistent.supports(h, h, h.t(), "half")  # out must be row-major


@requires_kernels
@pytest.mark.parametrize("dtype,precision", [(torch.float16, "half"), (torch.bfloat16, "half"),
                                             (torch.float32, "tf32x3")])
def test_persistent_stores_an_unaligned_output_without_tma(dtype, precision):
    """An output row stride TMA cannot take (not a multiple of 16 bytes) is stored by masked
    pointer stores: the product with a D epilogue lands in the view, the columns beyond it
    in the same rows stay untouched."""
    m, n, k = (300, 270, 200) if DEVICE == "cuda" else (67, 45, 70)
    a = aligned(m, k, dtype)
    b = aligned(n, k, dtype).t() if dtype == torch.float32 else aligned(k, n, dtype)
    d = randn(n, dtype=dtype)
    storage = torch.full((m, n + 1), float("nan"), dtype=dtype, device=a.device)
    out = storage[:, :n]
    assert (out.stride(0) * out.element_size()) % 16 != 0
    persistent.matmul_2d(a, b, out, d, alpha=-1.0, beta=2.0, precision=precision)
    ref = -(a.double() @ b.double()).cpu() + 2.0 * d.double().cpu()
    assert_close(out, ref, dtype, None if precision == "half" else precision, "pointer store")
    assert torch.isnan(storage[:, n:]).all()


def persistent_launch_meta(monkeypatch, *names) -> list:
    """The list each persistent kernel launch appends its constexprs `names` to (one value,
    or a tuple of several), the launch itself going ahead."""
    seen = []
    real_launch = persistent.launch

    def spy(kernel, tuner, grid, args, meta, *rest, **kwargs):
        values = tuple(meta[name] for name in names)
        seen.append(values[0] if len(values) == 1 else values)
        return real_launch(kernel, tuner, grid, args, meta, *rest, **kwargs)
    monkeypatch.setattr(persistent, "launch", spy)
    return seen


@requires_kernels
@pytest.mark.parametrize("dtype,precision", [(torch.float16, "half"), (torch.float32, "tf32")])
def test_int64_epilogue_offsets_give_the_same_results(dtype, precision, monkeypatch):
    """The epilogues' INT64 branch (taken for tensors of 2^31 elements, which
    test_large_outputs.py runs on the GPU) forced on small ones: the persistent kernel's
    matrix D and pointer-stored C, and splitk.reduce's partials, C and D."""
    monkeypatch.setattr(persistent, "needs_int64", lambda *tensors: True)
    monkeypatch.setattr(splitk, "needs_int64", lambda *tensors: True)
    seen = persistent_launch_meta(monkeypatch, "INT64")
    m, n, k = (300, 270, 200) if DEVICE == "cuda" else (67, 45, 72)
    a = aligned(m, k, dtype)
    b = aligned(n, k, dtype).t() if dtype == torch.float32 else aligned(k, n, dtype)
    d = randn(m, n, dtype=dtype)
    storage = torch.full((m, n + 1), float("nan"), dtype=dtype, device=a.device)
    out = storage[:, :n]  # a row stride TMA cannot store: pointer stores
    persistent.matmul_2d(a, b, out, d, alpha=-1.0, beta=2.0, precision=precision)
    assert seen == [True]
    product = (a.double() @ b.double()).cpu()
    assert_close(out, -product + 2.0 * d.double().cpu(), dtype,
                 None if precision == "half" else precision, "persistent, INT64")
    work = randn(3, m, n)
    out = torch.full((m, n), float("nan"), dtype=dtype, device=a.device)
    splitk.reduce(work, 3, out, d, alpha=0.5, beta=-1.0)
    assert_close(out, 0.5 * work.double().sum(0) - d.double(), dtype, "ieee", "reduce, INT64")


@requires_kernels
def test_a_one_row_d_takes_the_vector_epilogue(monkeypatch):
    """D_ROW (a D read as one row vector) exactly where every row of D is one row: a bias,
    a (1, N) or scalar addmm input; not a matrix or a column broadcast."""
    m, n, k = 40, 24, 32
    a, b = aligned(m, k, torch.float16), aligned(k, n, torch.float16)
    seen = persistent_launch_meta(monkeypatch, "D_ROW")
    cases = {"bias": randn(n, dtype=torch.float16), "row": randn(1, n, dtype=torch.float16),
             "scalar": randn(dtype=torch.float16), "matrix": randn(m, n, dtype=torch.float16),
             "column": randn(m, 1, dtype=torch.float16), "none": None}
    for name, d in cases.items():
        out = aligned(m, n, torch.float16, fill=float("nan"))
        persistent.matmul_2d(a, b, out, d, beta=0.5, precision="half")
        ref = (a.double() @ b.double()).cpu()
        if d is not None:
            ref += 0.5 * d.double().cpu()
        assert_close(out, ref, torch.float16, None, f"D {name}")
    assert seen == [True, True, True, False, False, False]


PLANE_CASES = [(torch.float16, "half", False), (torch.bfloat16, "half", True),
               (torch.float32, "tf32", True), (torch.float32, "tf32x3", True)]


@requires_kernels
@pytest.mark.parametrize("dtype,precision,b_k_major", PLANE_CASES,
                         ids=[f"{dt}-{p}-{'kmajor' if km else 'row'}".replace("torch.", "")
                              for dt, p, km in PLANE_CASES])
def test_persistent_reads_an_a_off_a_sector_as_two_planes(dtype, precision, b_k_major,
                                                          monkeypatch):
    """A row-major A whose rows are 16 bytes off a 32-byte sector (fp16 K = 8 mod 16, fp32
    K = 4 mod 8) runs as planes of even and odd rows (A_PLANES), the odd rows' K steps 16
    bytes early: exact over ragged tiles, each plane's last row of tiles moved back inside
    it (CLAMP, overlapping the row before: 225 rows a plane in 128-row tiles here), with a
    bias or no D, TMA- and pointer-stored; a matrix D (which runs one plane), an odd M, a
    sector-aligned pitch and the split kernel do not."""
    m, n, k = (1000, 272, 200) if DEVICE == "cuda" else (450, 48, 40)  # C rows: 16 bytes
    if dtype == torch.float32:
        k -= 4  # 784 / 144 bytes a row
    monkeypatch.setattr(persistent, "CLAMP_PLANES", True)
    seen = persistent_launch_meta(monkeypatch, "A_PLANES", "K_SHIFT", "CLAMP")
    a = aligned(m, k, dtype)
    assert (a.stride(0) * a.element_size()) % 32 == 16
    b = aligned(n, k, dtype).t() if b_k_major else aligned(k, n, dtype)
    for d_kind, pad in (("bias", 0), ("matrix", 1), (None, 1), ("bias", 1)):
        d = {"bias": randn(n, dtype=dtype), "matrix": randn(m, n, dtype=dtype),
             None: None}[d_kind]
        storage = torch.full((m, n + pad), float("nan"), dtype=dtype, device=a.device)
        out = storage[:, :n]  # pad 1: no TMA store
        assert persistent._tma_ok(out, out.stride(0)) == (pad == 0)
        persistent.matmul_2d(a, b, out, d, alpha=-1.0, beta=2.0, precision=precision)
        ref = -(a.double() @ b.double()).cpu()
        if d is not None:
            ref += 2.0 * d.double().cpu()
        label = f"planes, D {d_kind}, row pad {pad}"
        assert_close(out, ref, dtype, None if precision == "half" else precision, label)
        if pad:
            assert torch.isnan(storage[:, n:]).all()
    planes = (2, 16 // a.element_size(), True)
    assert seen == [planes, (1, 0, True), planes, planes]
    assert persistent.a_planes(a[1:]) == 1  # odd M
    # Planes of 260 rows take three rows of 128-row tiles each, 520 rows five.
    assert persistent.a_planes(aligned(520, k, dtype)) == 1
    assert persistent.a_planes(aligned(1000, k, dtype)) == 2
    assert persistent.a_planes(aligned(m, 2 * k, dtype)) == 1  # rows on a sector
    assert persistent.a_planes(a, split=True) == 1
    assert persistent.a_planes(aligned(k, m, dtype).t()) == 1  # M-major
    # Beside a K-major B on sectors (a staged copy) the shifted K steps would move B's
    # boxes off them; beside one off a sector (as here when b_k_major) they may.
    b_on_sector = aligned(n, 2 * k, dtype)[:, :k].t()
    assert persistent.a_planes(a, b=b_on_sector) == 1
    assert persistent.a_planes(a, b=b) == 2


PLANE_CONFIGS = [(family, tile, dtype, precision)
                 for family, dtype, precision in (("half", torch.float16, "half"),
                                                  ("half_mid", torch.bfloat16, "half"),
                                                  ("tf32", torch.float32, "tf32"),
                                                  ("tf32_mid", torch.float32, "tf32"))
                 for tile in configs.persistent_tiles(family)]


@gpu_only
@pytest.mark.parametrize("family,tile,dtype,precision", PLANE_CONFIGS,
                         ids=[f"{t[0]}-{dt}".replace("torch.", "") for _, t, dt, _ in PLANE_CONFIGS])
def test_every_persistent_config_on_planes_of_rows(family, tile, dtype, precision):
    """Every config that runs A as planes (persistent.a_planes), ragged N and K, a bias,
    TMA- and pointer-stored C: 16-bit B row-major, fp32 B K-major (wgmma's rule)."""
    m, n, k = 1000, 272, 200 if dtype != torch.float32 else 196
    config = configs.persistent_configs(family)[configs.persistent_tiles(family).index(tile)]
    a = aligned(m, k, dtype)
    assert persistent.a_planes(a) == 2
    b = aligned(n, k, dtype).t() if dtype == torch.float32 else aligned(k, n, dtype)
    with_d = configs.persistent_fits(config, family, True, H100_SMEM, d_row=True)
    d = randn(n, dtype=dtype) if with_d else None
    ref = -(a.double() @ b.double()).cpu() + (2.0 * d.double().cpu() if with_d else 0.0)
    for pad in (0, 1):
        storage = torch.full((m, n + pad), float("nan"), dtype=dtype, device=a.device)
        out = storage[:, :n]
        c_tma = persistent._tma_ok(out, out.stride(0))
        assert c_tma == (pad == 0)
        if not configs.persistent_fits(config, family, with_d, H100_SMEM, c_tma, d_row=with_d):
            continue  # the pruner keeps it off a pointer-stored C (too much shared memory)
        persistent.matmul_2d(a, b, out, d, alpha=-1.0, beta=2.0, precision=precision,
                             config=config)
        assert_close(out, ref, dtype, None if precision == "half" else precision,
                     f"{tile[0]} planes, row pad {pad}")


def test_persistent_grid_covers_every_tile_of_both_planes():
    """programs() with planes: each plane's rows tile apart (M / 2 rows in BM tiles)."""
    sms = 132
    for bm, bn in ((128, 128), (128, 256), (64, 128)):
        for m in (2, 250, 258, 1000, 4104):
            for n in (64, 1000, 4096):
                tiles = 2 * -(-(m // 2) // bm) * -(-n // bn)
                waves = -(-tiles // sms)
                assert persistent.programs(bm, bn, m, n, sms, False, 2) == -(-tiles // waves)
    # 258 rows: 129 a plane, two rows of 128-row tiles each (4 in all; 3 for 258 as one)
    assert persistent.programs(128, 128, 258, 128, sms, False, 2) == 4


def test_every_persistent_config_has_a_measured_shared_memory_size():
    """Both C stores and the three epilogues measured; every config runs TMA-stored on the
    H100, and whatever the epilogue, some config of each family fits (the defaults, which
    run untuned)."""
    for family in persistent.PERSISTENT_FAMILIES:
        for tile in configs.persistent_tiles(family):
            (without_d, with_d, with_row), pointer_stored = configs.PERSISTENT_SMEM[tile[0]]
            assert without_d <= H100_SMEM, f"{tile[0]} cannot run on the H100"
            assert with_d >= with_row >= without_d and len(pointer_stored) == 3
        default = configs.persistent_default_config(family)
        for has_d, d_row in ((False, False), (True, False), (True, True)):
            for c_tma in (False, True):
                assert configs.persistent_fits(default, family, has_d, H100_SMEM, c_tma, d_row)


SPLITK_PINNED = [(family, tile, dtype, precision)
                 for family, cases in FAMILY_CASES.items()
                 for tile in configs.splitk_tiles(family) for dtype, precision in cases]
every_splitk_config = pytest.mark.parametrize(
    "family,tile,dtype,precision", SPLITK_PINNED,
    ids=[f"{t[0]}-{dt}-{p}".replace("torch.", "") for _, t, dt, p in SPLITK_PINNED])


def pinned_splitk_config(family, tile):
    return configs.splitk_configs(family)[configs.splitk_tiles(family).index(tile)]
# Small M and N, K long enough for every SPLIT to leave some slices empty in the
# interpreter (slices past K must still write their zero partials).
SM, SN, SK = (50, 140, 1500) if DEVICE == "cuda" else (20, 70, 300)


@requires_kernels
@every_splitk_config
def test_every_splitk_config(family, tile, dtype, precision):
    """Each split-K config with a strided output, a K-major B and the addmm epilogue."""
    config = pinned_splitk_config(family, tile)
    a = randn(SM, SK, dtype=dtype)
    b = randn(SN, SK, dtype=dtype).t()
    d = randn(1, SN, dtype=dtype)
    out = poisoned(SN, SM, dtype=dtype).t()
    splitk.matmul_2d(a, b, out, d, alpha=1.5, beta=-0.5, precision=precision, config=config)
    ref = 1.5 * (a.double() @ b.double()) - 0.5 * d.double()
    assert_close(out, ref, dtype, None if precision == "half" else precision, tile[0])


# 16-byte runs that are not 16 elements (M, N, K and strides 8 mod 16): the split-K
# kernel's vector hints, along K, M (A) and N (B).
VSM, VSN, VSK = (56, 136, 1496) if DEVICE == "cuda" else (24, 72, 296)


@requires_kernels
@every_splitk_config
def test_every_splitk_config_on_16_byte_runs(family, tile, dtype, precision):
    """Each split-K config with both operands hinted (splitk.vector_hints): row-major A and
    B (a skinny product against a row-major weight), then M-major A and K-major B (a
    direct plan's column strip), then row-major ones in 8-byte runs. The hints promise
    only what holds (a wrong one misaligns the GPU's vector loads)."""
    config = pinned_splitk_config(family, tile)
    vec = 16 // torch.empty((), dtype=dtype).element_size()
    half = vec // 2  # elements per 8 bytes: sizes an odd multiple of them
    for a, b, runs in ((randn(VSM, VSK, dtype=dtype), randn(VSK, VSN, dtype=dtype), vec),
                       (randn(VSK, VSM, dtype=dtype).t(), randn(VSN, VSK, dtype=dtype).t(),
                        vec),
                       (randn(VSM, VSK - half, dtype=dtype),
                        randn(VSK - half, VSN - half, dtype=dtype), half)):
        hints = splitk.vector_hints(a, b)
        assert (hints["A_VEC"], hints["B_VEC"]) == (runs, runs), hints
        n = b.shape[1]
        d = randn(1, n, dtype=dtype)
        out = poisoned(VSM, n, dtype=dtype)
        splitk.matmul_2d(a, b, out, d, alpha=1.5, beta=-0.5, precision=precision,
                         config=config)
        ref = 1.5 * (a.double() @ b.double()) - 0.5 * d.double()
        assert_close(out, ref, dtype, None if precision == "half" else precision,
                     f"{tile[0]}, {hints}")


@requires_kernels
def test_splitk_reads_only_the_first_m_rows_and_n_columns():
    """Operands wider than the output (padded copies: dispatch passes them whole): rows of
    A past M and columns of B past N, here NaN, are read by edge tiles but never reach the
    output; an operand too small for the output is refused, naming the shapes."""
    a = torch.full((SM + 24, SK), float("nan"), device=DEVICE)
    b = torch.full((SK, SN + 40), float("nan"), device=DEVICE)
    a[:SM], b[:, :SN] = randn(SM, SK), randn(SK, SN)
    out = poisoned(SM, SN, dtype=torch.float32)
    splitk.matmul_2d(a, b, out, precision="ieee")
    assert_close(out, a[:SM].double() @ b[:, :SN].double(), torch.float32, "ieee",
                 "padded operands")
    with pytest.raises(ValueError, match="at least 41 columns"):
        splitk.matmul_2d(a[:SM], b[:, :40], poisoned(SM, 41, dtype=torch.float32))


def test_splitk_vector_hints_need_every_run_on_16_bytes():
    """Runs of 16 bytes, else 8; no hint where triton sees 16 elements anyway, where a
    base is off 16 bytes, a stride or the extent along the runs off 8, or where neither
    dimension is contiguous."""
    half = torch.float16

    def hints(a, b):
        h = splitk.vector_hints(a, b)
        return h["A_VEC"], h["A_M_RUNS"], h["B_VEC"], h["B_N_RUNS"]

    a, b = torch.empty(8, 4104, dtype=half), torch.empty(4104, 4104, dtype=half)
    assert hints(a, b) == (8, False, 8, True)
    assert hints(a.float(), b.float()) == (4, False, 4, True)
    assert hints(b.t()[:8], a.t()) == (8, True, 8, False)  # a column strip: both transposed
    assert hints(torch.empty(8, 4096, dtype=half),
                 torch.empty(4096, 4096, dtype=half)) == (0, False, 0, True)
    assert hints(a, b[:, :4100]) == (8, False, 4, True)  # N 8 bytes past 16: 8-byte runs
    assert hints(a, b[:, :4098]) == (8, False, 0, True)  # nor those
    assert hints(a.float(), b.float()[:, :4098]) == (4, False, 2, True)
    # K off 16 bytes: A's runs along K break; B's along N do not.
    assert hints(a[:, :4100], b[:4100]) == (4, False, 8, True)
    assert hints(a[:, :4097], b[:4097]) == (0, False, 8, True)
    assert hints(a[:, :4097], b.t()[:4097]) == (0, False, 0, False)
    storage = torch.empty(8 * 4104 + 1, dtype=half)
    assert hints(storage[1:].view(8, 4104), b) == (0, False, 8, True)  # base off 16 bytes
    assert hints(a[:, ::2], b[:, ::2]) == (0, True, 0, True)  # nothing contiguous
    # M-major A of 8 rows, its columns 12 (8-byte runs) or 10 elements apart
    assert hints(torch.empty(4, 12, dtype=half).t()[:8], b[:4]) == (4, True, 8, True)
    assert hints(torch.empty(4, 10, dtype=half).t()[:8], b[:4]) == (0, True, 8, True)


def test_splitk_narrow_loads_need_an_operand_off_16_byte_runs():
    """The split-K kernel loads an operand less than 16 bytes wide (splitk.narrow_loads:
    8 bytes under its hints, or one element at a time) only where its runs along its
    contiguous dimension are not whole 16-byte runs."""
    half = torch.float16
    a, b = torch.empty(8, 4104, dtype=half), torch.empty(4104, 4104, dtype=half)
    assert not splitk.narrow_loads(a, b)  # hinted runs
    assert not splitk.narrow_loads(torch.empty(8, 4096, dtype=half),
                                   torch.empty(4096, 4096, dtype=half))
    assert not splitk.narrow_loads(a.float()[:, :4100], b.float()[:4100, :4100])
    assert splitk.narrow_loads(a, b[:, :4100])  # B's rows in 8-byte runs
    assert splitk.narrow_loads(a.float()[:, :4098], b.float()[:4098, :4098])
    assert splitk.narrow_loads(a[:, :4097], b[:4097])  # A's rows by element
    assert splitk.narrow_loads(a[:, :4097], b.t()[:4097])  # and a K-major B's
    assert splitk.narrow_loads(a[:, ::2], b[::2])  # nothing contiguous
    assert splitk.run_elements(b[:, :4100], 1) == 4
    assert splitk.run_elements(b.float()[:, :4098], 1) == 2
    assert splitk.run_elements(b[:, :4098], 1) == 0


def test_splitk_row_planes_where_a_rows_are_off_16_byte_runs():
    """A 16-bit K-contiguous A whose rows are not whole 16-byte runs is read in planes of
    rows sharing a start within a run (splitk.row_planes): run / gcd(row stride, run) of
    them, 1 where only K's end is off a run; none where A is whole runs or fp32, B is
    K-major, A's base is off 16 bytes or a plane would hold under ROW_PLANES_MIN_ROWS
    rows."""
    half = torch.float16
    rows = 8 * splitk.ROW_PLANES_MIN_ROWS
    b = torch.empty(65536, 128, dtype=half)
    for k, planes in ((65535, 8), (65534, 4), (65532, 2), (65536, 0)):
        assert splitk.row_planes(torch.empty(rows, k, dtype=half), b[:k]) == planes, k
    assert splitk.row_planes(torch.empty(rows, 65536, dtype=torch.bfloat16)[:, :65533],
                             b[:65533].bfloat16()) == 1
    assert splitk.row_planes(torch.empty(rows, 65535), b[:65535].float()) == 0  # fp32
    a = torch.empty(rows, 65535, dtype=half)
    assert splitk.row_planes(a, torch.empty(128, 65535, dtype=half).t()) == 0  # K-major B
    assert splitk.row_planes(a[:rows - 1], b[:65535]) == 0  # a plane of 15 rows
    storage = torch.empty(rows * 65535 + 8, dtype=half)
    assert splitk.row_planes(storage[1:1 + rows * 65535].view(rows, 65535), b[:65535]) == 0
    assert splitk.row_planes(torch.empty(65535, rows, dtype=half).t(), b[:65535]) == 0
    # Read in planes, A loads whole runs: not a narrow operand, hinted 16 bytes wide.
    assert not splitk.narrow_loads(a, b[:65535], 8)
    assert splitk.narrow_loads(a, b[:65535, :127], 8)  # B still off its runs
    assert splitk.vector_hints(a, b[:65535], 8)["A_VEC"] == 8


def test_split_k_tile_sets_of_planes_and_of_fp32_by_element(monkeypatch):
    """An A read in planes tunes on tiles at most a plane tall, among them
    configs._SPLITK_PLANES_TILES, which nothing else tunes on; an fp32 operand loaded
    less than 16 bytes wide tunes on the narrow tiles and configs._SPLITK_NARROW_MMA_TILES,
    which aligned operands keep too; 16-bit narrow loads do not take them."""
    monkeypatch.setattr(configs, "_shared_memory_limit", lambda index: 232448)
    a = torch.empty(128, 65536, dtype=torch.float16)

    def kept(family, layout, planes=0, m=128):
        args = {"a_ptr": a if family == "half" else a.float(), "M": m, "N": 128,
                "K": 65535, "LAYOUT": layout}
        return {configs.config_name(c, family) for c in configs.splitk_prune(
            configs.splitk_configs(family), args, family=family, A_PLANES=planes)}
    planes_tiles = {t[0] for t in configs._SPLITK_PLANES_TILES}
    in_planes = kept("half", 0, 8)
    assert planes_tiles <= in_planes
    assert all(name.startswith("k_16x") for name in in_planes), in_planes
    assert {n for n in kept("half", 0, 2) if n.startswith("k_64x")}  # planes of 64 rows
    assert not kept("half", 0) & planes_tiles
    assert not kept("half", configs.NARROW_LOADS) & planes_tiles
    mma = {t[0] for t in configs._SPLITK_NARROW_MMA_TILES}
    assert mma and mma <= kept("tf32", configs.NARROW_LOADS)
    assert mma <= kept("tf32", 0)
    assert not {t[0] for t in configs._SPLITK_MMA_TILES} & kept("half", configs.NARROW_LOADS)


def test_splitk_col_planes_where_b_rows_are_off_16_byte_runs():
    """A 16-bit row-major B whose rows are not whole 16-byte runs is read in planes of its
    rows (splitk.col_planes) as A's are (row_planes); none where B is whole runs, fp32 or
    K-major, A is not K-contiguous or is read in planes itself (operand_planes)."""
    half = torch.float16
    a = torch.empty(8, 4097, dtype=half)
    for n, planes in ((4097, 8), (4098, 4), (4100, 2), (4096, 0)):
        assert splitk.col_planes(a, torch.empty(4097, n, dtype=half)) == planes, n
    b = torch.empty(4097, 4097, dtype=half)
    assert splitk.col_planes(a, torch.empty(4097, 4104, dtype=half)[:, :4097]) == 1
    assert splitk.col_planes(a.float(), b.float()) == 0
    assert splitk.col_planes(a, torch.empty(4097, 4097, dtype=half).t()) == 0  # K-major
    assert splitk.col_planes(torch.empty(4097, 8, dtype=half).t(), b) == 0  # M-major A
    tall = torch.empty(8 * splitk.ROW_PLANES_MIN_ROWS, 4097, dtype=half)
    assert splitk.operand_planes(tall, b) == (8, 0)  # A's planes, never both
    assert splitk.operand_planes(a, b) == (0, 8)
    hints = splitk.vector_hints(a, b, 0, 8)
    assert (hints["A_VEC"], hints["B_VEC"], hints["B_PLANES"]) == (0, 8, 8)


# B's rows off 16-byte runs, read in planes: (dtype, rows, K, N, B's row stride, planes).
COL_PLANE_CASES = [(torch.float16, 8, 301, 97, 97, 8), (torch.bfloat16, 5, 257, 130, 130, 4),
                   (torch.float16, 20, 300, 203, 204, 2), (torch.bfloat16, 3, 299, 61, 64, 1)]


@requires_kernels
# The interpreter's dot meets the inf in columns that are loaded but never stored.
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("dtype,rows,k,n,stride,planes", COL_PLANE_CASES,
                         ids=[f"{str(c[0])[6:]}-{c[5]}planes" for c in COL_PLANE_CASES])
def test_splitk_on_col_planes(dtype, rows, k, n, stride, planes):
    """Rows of B off 16-byte runs, read in planes (each plane a K slice of its own, its
    column tiles shifted back to a run boundary) match float64 on every pinned tile and
    the untuned default, with the addmm epilogue; an inf in B reaches only its own
    column, whichever plane's shifted tile holds it."""
    a = randn(rows, k, dtype=dtype)
    b = randn(k, stride, dtype=dtype)[:, :n]
    assert splitk.col_planes(a, b) == planes
    d = randn(1, n, dtype=dtype)
    for config in [configs._splitk_config(*t) for t in PLANE_TILES] + [None]:
        out = poisoned(rows, n, dtype=dtype)
        splitk.matmul_2d(a, b, out, d, alpha=1.5, beta=-0.5, precision="half",
                         config=config)
        ref = 1.5 * (a.double() @ b.double()) - 0.5 * d.double()
        assert_close(out, ref, dtype, None, str(config))
    b[7, 0] = b[9, n - 1] = b[k - 1, n - 1] = float("inf")
    out = poisoned(rows, n, dtype=dtype)
    splitk.matmul_2d(a, b, out, precision="half",
                     config=configs._splitk_config(*PLANE_TILES[0]))
    assert (~torch.isfinite(out)).any(0).nonzero().flatten().tolist() == [0, n - 1]


def test_split_k_tile_set_of_col_planes(monkeypatch):
    """B read in planes tunes on configs._SPLITK_COL_PLANES_TILES alone, which nothing
    else tunes on, their partials (SPLIT times the planes) within the budget; the
    workspace holds the most partials any of them writes."""
    monkeypatch.setattr(configs, "_shared_memory_limit", lambda index: 232448)
    b = torch.empty(4097, 4097, dtype=torch.float16)

    def kept(layout, b_planes):
        args = {"a_ptr": b, "M": 8, "N": 4097, "K": 4097, "LAYOUT": layout}
        return {configs.config_name(c, "half") for c in configs.splitk_prune(
            configs.splitk_configs("half"), args, family="half", B_PLANES=b_planes)}
    cols = {t[0] for t in configs._SPLITK_COL_PLANES_TILES}
    assert kept(configs.NARROW_LOADS, 8) == cols
    assert kept(0, 2) == cols
    assert not kept(configs.NARROW_LOADS, 0) & cols and not kept(0, 0) & cols
    most = max(t[4] for t in configs._SPLITK_COL_PLANES_TILES)
    assert splitk._max_split("half", 8, 4097, 4097, 2, 8) == most * 8


# A's rows off 16-byte runs, read in planes: (dtype, rows, K, row stride, planes); rows not
# a multiple of the planes (planes of unequal height), K long enough that the last slices
# of the larger SPLITs hold none of it.
PLANE_CASES = [(torch.float16, 130, 297, 297, 8), (torch.bfloat16, 70, 298, 298, 4),
               (torch.bfloat16, 35, 300, 300, 2), (torch.float16, 20, 299, 304, 1)]
# Tiles taller than a plane (rows wasted, still correct), shallow and deep K steps.
PLANE_TILES = [(16, 32, 32, 4, 4, 2), (32, 16, 16, 8, 4, 2), (64, 64, 64, 2, 4, 2)]


@requires_kernels
@pytest.mark.parametrize("dtype,rows,k,stride,planes", PLANE_CASES,
                         ids=[f"{str(c[0])[6:]}-{c[4]}planes" for c in PLANE_CASES])
def test_splitk_on_row_planes(dtype, rows, k, stride, planes):
    """Rows of A off 16-byte runs, read in planes (each tile shifted back to a run
    boundary, the elements outside [0, K) zeroed), match float64 on every pinned tile,
    with the addmm epilogue; an inf in another row's run next to a row's ends reaches
    only its own row's output."""
    a = randn(rows, stride, dtype=dtype)[:, :k]
    b = randn(k, 40, dtype=dtype)
    assert splitk.row_planes(a, b) == planes
    d = randn(1, 40, dtype=dtype)
    for bm, bn, bk, split, warps, stages in PLANE_TILES:
        out = poisoned(rows, 40, dtype=dtype)
        config = configs._splitk_config(bm, bn, bk, split, warps, stages)
        splitk.matmul_2d(a, b, out, d, alpha=1.5, beta=-0.5, precision="half",
                         config=config)
        ref = 1.5 * (a.double() @ b.double()) - 0.5 * d.double()
        assert_close(out, ref, dtype, None, f"{bm}x{bn}x{bk} split {split}")
    a[5, 0] = a[9, k - 1] = float("inf")
    out = poisoned(rows, 40, dtype=dtype)
    splitk.matmul_2d(a, b, out, precision="half",
                     config=configs._splitk_config(*PLANE_TILES[0]))
    assert (~torch.isfinite(out)).any(1).nonzero().flatten().tolist() == [5, 9]


def test_m_major_runs_into_thin_outputs_tune_on_the_runs_tiles_only(monkeypatch):
    """A weight in 16-byte runs off ALIGN as the M-major A of an output at most
    SPLITK_RUNS_MAX_N wide (C^T = W A^T of 16-bit 8x4104x4104) carries the M_RUNS key bit
    and tunes on configs._SPLITK_RUNS_TILES alone; wider outputs, aligned or K-major
    weights and narrow loads neither carry it nor see those tiles."""
    monkeypatch.setattr(configs, "_shared_memory_limit", lambda index: 232448)
    half = torch.float16
    w, a = torch.empty(4104, 4104, dtype=half), torch.empty(16, 4104, dtype=half)
    thin = configs.SPLITK_RUNS_MAX_N

    def bits(a_, b_, n):
        return splitk.tile_set_bits(splitk.narrow_loads(a_, b_), splitk.vector_hints(a_, b_), n)
    assert bits(w.t(), a.t(), thin) == configs.M_RUNS
    assert bits(w.t(), a.t()[:, :8], 8) == configs.M_RUNS
    assert bits(w.t(), torch.empty(4104, 32, dtype=half), 32) == 0
    aligned = torch.empty(4096, 4096, dtype=half)
    assert bits(aligned.t(), a.t()[:4096], thin) == 0  # triton sees it
    assert bits(w, a.t(), thin) == 0  # K-major weight
    assert bits(w.t()[:, :4097], a.t()[:4097], thin) == configs.NARROW_LOADS
    runs = {t[0] for t in configs._SPLITK_RUNS_TILES}
    assert runs <= {t[0] for t in configs.splitk_tiles("half")}

    def kept(layout, n):
        args = {"a_ptr": w, "M": 4104, "N": n, "K": 4104, "LAYOUT": layout}
        return {configs.config_name(c, "half") for c in configs.splitk_prune(
            configs.splitk_configs("half"), args, family="half")}
    assert kept(configs.M_RUNS, 8) == runs
    assert kept(configs.M_RUNS | common.B_K_CONTIGUOUS, thin) == runs
    assert kept(0, 8) and not kept(0, 8) & runs
    assert not kept(configs.NARROW_LOADS, 8) & runs


@gpu_only
def test_splitk_tunes_m_major_runs_apart(monkeypatch):
    """Autotuned (as the suite is not, conftest): C^T = W A^T of 8x4104x4104 fp16 (the
    weight row-major in 16-byte runs off ALIGN: dispatch.TRANSPOSED_SPLIT_K) runs the
    runs tile; the same tuning buckets with a 4112-wide weight (rows on 16 elements: no
    hint needed) a tile of the others. Both right against float64."""
    monkeypatch.setattr(splitk, "AUTOTUNE", True)
    runs = {t[0] for t in configs._SPLITK_RUNS_TILES}
    assert configs.bucket(4104) == configs.bucket(4112)
    for size, on_runs in ((4104, True), (4112, False)):
        w, a = randn(size, size, dtype=torch.float16), randn(8, size, dtype=torch.float16)
        out = poisoned(size, 8, dtype=torch.float16)
        splitk.matmul_2d(w.t(), a.t(), out, precision="half")
        assert (common.last_config() in runs) == on_runs, common.last_config()
        assert_close(out, w.t().double() @ a.t().double(), torch.float16, None,
                     common.last_config())


def narrow_names(family) -> set:
    """The names of the split-K tiles narrow operands tune on (configs.splitk_narrow_shapes)."""
    shapes = configs.splitk_narrow_shapes(family)
    return {t[0] for t in configs.splitk_tiles(family) if t[1:] in shapes}


def test_narrow_loads_tune_on_the_narrow_tiles_only():
    """Each family tunes operands loaded less than 16 bytes wide on its narrow tiles (and
    tf32 on configs._SPLITK_NARROW_MMA_TILES too) and other operands on the rest
    (configs.narrow_or_wide); untuned, they take the narrow BK."""
    for family in configs.FAMILIES:
        cfgs = configs.splitk_configs(family)
        narrow_tiles = configs.splitk_narrow_tiles(family)
        names = {t[0] for t in narrow_tiles}
        assert names and names <= {t[0] for t in configs.splitk_tiles(family)}
        for narrow in (True, False):
            kept = {configs.config_name(c, family)
                    for c in configs.narrow_or_wide(cfgs, narrow, family)}
            assert kept and (kept <= narrow_names(family) if narrow else not kept & names), \
                (family, kept)
        bks = {t[3] for t in narrow_tiles}
        for narrow in (True, False):
            default = configs.splitk_default_config(family, 8, 4097, 4097, narrow)
            assert (default.kwargs["BK"] in bks) == narrow, (family, default)


@gpu_only
@pytest.mark.parametrize("dtype,precision", [(torch.float16, "half"),
                                             (torch.float32, "tf32"),
                                             (torch.float32, "ieee")])
def test_splitk_tunes_narrow_operands_apart(dtype, precision, monkeypatch):
    """Autotuned (as the suite is not, conftest): rows off 16 bytes run a narrow tile (a
    16-bit B's a tile of its planes, splitk.col_planes); then operands of the same tuning
    buckets in whole 16-byte runs run a tile of the others (the NARROW_LOADS and B_PLANES
    key bits keep them apart: a narrow tile is slow on them, and their tiles spill on
    loads one element at a time)."""
    monkeypatch.setattr(splitk, "AUTOTUNE", True)
    family = configs.family_for(dtype, precision)
    only_narrow = {t[0] for t in configs.splitk_narrow_tiles(family)}
    for n, k, narrow in ((301, 1101, True), (296, 1104, False)):
        a, b = randn(8, k, dtype=dtype), randn(k, n, dtype=dtype)
        assert splitk.narrow_loads(a, b) == narrow
        out = poisoned(8, n, dtype=dtype)
        splitk.matmul_2d(a, b, out, precision=precision)
        ran = common.last_config()
        if splitk.col_planes(a, b):  # 16-bit B's rows off runs: read in planes instead
            assert ran in {t[0] for t in configs._SPLITK_COL_PLANES_TILES}, ran
        else:
            assert ran in narrow_names(family) if narrow else ran not in only_narrow, ran
        assert_close(out, a.double() @ b.double(), dtype,
                     None if precision == "half" else precision, common.last_config())


# The two-warp tf32 split-K tiles run mma.sync on B as laid out: row-major B is their case.
SPLITK_TWO_WARP = [t for t in configs.splitk_tiles("tf32") if t[5] == 2]


@requires_kernels
@pytest.mark.parametrize("precision", ["tf32", "tf32x3"])
@pytest.mark.parametrize("tile", SPLITK_TWO_WARP, ids=[t[0] for t in SPLITK_TWO_WARP])
def test_two_warp_splitk_configs_on_row_major_b(tile, precision):
    """Each two-warp split-K config with a row-major B (nn), K not a whole number of
    slices, and the addmm epilogue."""
    config = pinned_splitk_config("tf32", tile)
    a = randn(SM, SK, dtype=torch.float32)
    b = randn(SK, SN, dtype=torch.float32)
    d = randn(SM, SN, dtype=torch.float32)
    out = poisoned(SM, SN, dtype=torch.float32)
    splitk.matmul_2d(a, b, out, d, alpha=0.5, beta=2.0, precision=precision, config=config)
    ref = 0.5 * (a.double() @ b.double()) + 2.0 * d.double()
    assert_close(out, ref, torch.float32, precision, tile[0])


def test_two_warp_splitk_tiles_exist():
    assert SPLITK_TWO_WARP, "the tf32 family has no two-warp (mma.sync) split-K tile"


@requires_kernels
@pytest.mark.parametrize("m,n,k", [(1, 64, 700), (17, 33, 2000), (64, 48, 129)])
def test_splitk_default_config_is_reproducible(m, n, k):
    """Fixed slice order: two runs give the same bits; an activation rides the epilogue."""
    a, b = randn(m, k), randn(k, n)
    first, second = poisoned(m, n, dtype=torch.float32), poisoned(m, n, dtype=torch.float32)
    splitk.matmul_2d(a, b, first, precision="tf32x3", activation=1)
    splitk.matmul_2d(a, b, second, precision="tf32x3", activation=1)
    assert torch.equal(first, second)
    assert_close(first, torch.relu(a.double() @ b.double()), torch.float32, "tf32x3",
                 "split-K default")


def test_splitk_default_config_fills_the_gpu_with_deep_enough_slices():
    cfg = configs.splitk_default_config("half", 128, 128, 65536)
    tiles = (128 // cfg.kwargs["BM"]) * (128 // cfg.kwargs["BN"])
    assert configs.SPLITK_TARGET_PROGRAMS // 2 < tiles * cfg.kwargs["SPLIT"] \
        <= configs.SPLITK_TARGET_PROGRAMS
    shallow = configs.splitk_default_config("tf32", 16, 64, 200)
    assert shallow.kwargs["SPLIT"] * 2 * shallow.kwargs["BK"] <= 200


# Rows over several row blocks (the last ragged), ragged columns, and K both ragged (masked
# loop) and a multiple of every GEMV tile's loop step (configs.GEMV_MAX_STEP: unmasked).
GM, GN = (37, 4100) if DEVICE == "cuda" else (19, 37)
GEMV_KS = (2 * configs.GEMV_MAX_STEP + 45, 2 * configs.GEMV_MAX_STEP) if DEVICE == "cuda" \
    else (300, configs.GEMV_MAX_STEP)


@requires_kernels
@pytest.mark.parametrize("k", GEMV_KS, ids=["ragged_k", "even_k"])
@pytest.mark.parametrize("tile", configs.GEMV_TILES, ids=[t[0] for t in configs.GEMV_TILES])
def test_every_gemv_config(tile, k):
    """Each GEMV config with a K-major B, a strided output, the addmm epilogue and an
    activation."""
    config = configs.gemv_configs()[configs.GEMV_TILES.index(tile)]
    assert configs.config_name(config, "simt") == tile[0]
    a = randn(GM, k)
    b = randn(GN, k).t()
    d = randn(1, GN)
    out = poisoned(GN, GM, dtype=torch.float32).t()
    gemv.matmul_2d(a, b, out, d, alpha=1.5, beta=-0.5, activation=1, config=config)
    ref = torch.relu(1.5 * (a.double() @ b.double()) - 0.5 * d.double())
    assert_close(out, ref, torch.float32, "ieee", tile[0])


@requires_kernels
@pytest.mark.parametrize("m", [1, 2, gemv.MAX_BM, 2 * gemv.MAX_BM + 3])
def test_gemv_takes_any_strides_and_rows(m):
    """Column-major A, row-major B and a sliced view: slower layouts, same answer; one row
    block or several (the last one ragged); with the untuned default config (the
    interpreter's, or TRITON_GEMM_AUTOTUNE=0)."""
    k, n = (3000, 1000) if DEVICE == "cuda" else (200, 24)
    a = randn(k, m).t()
    b = randn(k, 2 * n)[:, ::2]
    out = poisoned(m, n, dtype=torch.float32)
    gemv.matmul_2d(a, b, out, config=configs.gemv_default_config(m))
    assert_close(out, a.double() @ b.double(), torch.float32, "ieee", f"{m} rows")


def test_gemv_refuses_what_it_cannot_run():
    """16-bit operands: an error naming what it takes and the way out."""
    a, b = torch.empty(2, 8, dtype=torch.float16), torch.empty(8, 4, dtype=torch.float16)
    with pytest.raises(ValueError, match="takes float32 operands.*dispatch.run"):
        gemv.matmul_2d(a, b, torch.empty(2, 4, dtype=a.dtype))


def test_gemv_default_config_by_rows():
    """Few rows take the narrow many-warp tile, more rows a wide one (configs.GEMV_TILES)."""
    names = {t[0] for t in configs.GEMV_TILES}
    few = configs.config_name(configs.gemv_default_config(1), "simt")
    many = configs.config_name(configs.gemv_default_config(gemv.MAX_BM), "simt")
    assert {few, many} <= names and few != many
    assert configs.GEMV_MAX_STEP % (configs.gemv_default_config(1).kwargs["BK"]) == 0


# One row and three (the grid's row axis), ragged columns, K ragged (masked loop) and a
# multiple of every 16-bit GEMV run (configs.GEMV16_MAX_BK: unmasked).
G16_KS = (2 * configs.GEMV16_MAX_BK + 40, 2 * configs.GEMV16_MAX_BK) if DEVICE == "cuda" \
    else (300, configs.GEMV16_MAX_BK)
G16_CASES = [(tile, dtype, rows, k) for tile in configs.GEMV16_TILES
             for dtype, rows in ((torch.float16, 1), (torch.bfloat16, 3)) for k in G16_KS]


@requires_kernels
@pytest.mark.parametrize("tile,dtype,rows,k", G16_CASES,
                         ids=[f"{t[0]}-{str(dt)[6:]}-{r}-{k}" for t, dt, r, k in G16_CASES])
def test_every_gemv16_config(tile, dtype, rows, k):
    """Each 16-bit GEMV config with a K-major B, a strided output, the addmm epilogue and an
    activation."""
    config = configs.gemv16_configs()[configs.GEMV16_TILES.index(tile)]
    assert configs.config_name(config, "half") == tile[0]
    n = GN
    a = randn(rows, k, dtype=dtype)
    b = randn(n, k, dtype=dtype).t()
    d = randn(1, n, dtype=dtype)
    out = poisoned(n, rows, dtype=dtype).t()
    gemv16.matmul_2d(a, b, out, d, alpha=1.5, beta=-0.5, activation=1, config=config)
    ref = torch.relu(1.5 * (a.double() @ b.double()) - 0.5 * d.double())
    assert_close(out, ref, dtype, None, tile[0])


@requires_kernels
def test_gemv16_takes_any_strides():
    """Column-major A, a row-major B sliced every other column: slower layouts, same
    answer, with the untuned default config (the interpreter's, or
    TRITON_GEMM_AUTOTUNE=0)."""
    k, n = (3000, 1000) if DEVICE == "cuda" else (200, 24)
    a = randn(k, 2, dtype=torch.float16).t()
    b = randn(k, 2 * n, dtype=torch.float16)[:, ::2]
    out = poisoned(2, n, dtype=torch.float16)
    gemv16.matmul_2d(a, b, out, config=configs.gemv16_default_config())
    assert_close(out, a.double() @ b.double(), torch.float16, None, "strided")


_GEMV16_COMPILE = """
import json, re, sys, tempfile
from pathlib import Path
sys.path.insert(0, '.')
from perf import sass_audit
from triton_gemm import configs
from triton_gemm.kernels import gemv16
name, dtype, has_d = json.loads(sys.argv[1])
_, bn, bk, warps, stages = next(t for t in configs.GEMV16_TILES if t[0] == name)
ints = ["M", "N", "K", "stride_am", "stride_bn", "stride_cm", "stride_cn", "stride_dm",
        "stride_dn", "M_BUCKET", "N_BUCKET", "K_BUCKET", "LAYOUT"]
sig = {**{p: f"*{dtype}" for p in ("a_ptr", "b_ptr", "c_ptr", "d_ptr")},
       **{i: "i32" for i in ints}, "alpha": "fp32", "beta": "fp32"}
const = {"stride_ak": 1, "stride_bk": 1, "HAS_D": has_d, "ACTIVATION": 0, "EVEN_K": True,
         "GEMV16": True, "BN": bn, "BK": bk, "STAGES": stages}
kernel = sass_audit._compile(gemv16._gemv16_kernel, sig, const,
                             ["a_ptr", "b_ptr", "c_ptr", "d_ptr", "K", "stride_am", "stride_bn"],
                             warps, stages)
with tempfile.TemporaryDirectory() as tmp:
    sass = sass_audit.sass_text(kernel.asm["cubin"], Path(tmp))
    report = sass_audit.ptxas_report(kernel.asm["ptx"], Path(tmp), "sm_90a")
loads = sorted(set(re.findall(r"\\b(LDGSTS[.\\w]*|LDG[.\\w]*)", sass)))
print(json.dumps({"shared": kernel.metadata.shared, "loads": loads, **report}))
"""
# Every config in both dtypes; the one with the most registers with a bias too.
_GEMV16_BUILDS = ([(t[0], dtype, False) for t in configs.GEMV16_TILES
                   for dtype in ("fp16", "bf16")] + [("gh_16x1024_w8_s3", "fp16", True)])


@pytest.mark.parametrize("name,dtype,has_d", _GEMV16_BUILDS,
                         ids=[f"{n}-{d}{'-bias' if b else ''}" for n, d, b in _GEMV16_BUILDS])
def test_gemv16_streams_the_weight_16_bytes_wide_without_spills(name, dtype, has_d):
    """Offline for sm_90a, operands K-contiguous with strides divisible by 16 (as the
    dispatcher sends them): the weight pipelined by 16-byte cp.async
    (LDGSTS.E.BYPASS.128), no loads one element at a time (but the bias's, in the
    epilogue: its stride is not specialised), no spills, within the H100's shared memory
    (kernels/gemv16.py's docstring)."""
    report = offline_build(_GEMV16_COMPILE, name, dtype, has_d)
    assert "LDGSTS.E.BYPASS.128" in report["loads"], report
    assert has_d or not [op for op in report["loads"] if op.endswith("U16")], report
    assert report["spill_stores"] == 0 and report["spill_loads"] == 0, report
    from perf import sass_audit
    assert report["shared"] <= sass_audit.ARCHS["sm_90a"].smem, report


def test_gemv16_refuses_what_it_cannot_run():
    """fp32 or mixed operands: an error naming what it takes and the way out."""
    a, b = torch.empty(1, 8), torch.empty(8, 4)
    with pytest.raises(ValueError, match="float16 or bfloat16 operands.*dispatch.run"):
        gemv16.matmul_2d(a, b, torch.empty(1, 4))
    with pytest.raises(ValueError, match="of one dtype"):
        gemv16.matmul_2d(a.half(), b.bfloat16(), torch.empty(1, 4, dtype=torch.half))


def test_gemv16_prune_keeps_fitting_tiles():
    """Programs no wider than the output and runs no longer than K; the narrowest,
    shortest tile where none fits."""
    cfgs = configs.gemv16_configs()

    def kept(n, k):
        return {configs.config_name(c, "half")
                for c in configs.gemv16_prune(cfgs, {"N": n, "K": k}, family="half")}

    assert kept(8192, 8192) == {t[0] for t in configs.GEMV16_TILES}
    assert all(int(name.split("x")[1].split("_")[0]) <= 512 for name in kept(8192, 600))
    assert kept(1, 64) == {"gh_4x256_w4_s6"}


@gpu_only
def test_launch_fast_path_follows_alignment_and_sizes():
    """Repeat launches skip triton's binder (common.run_kernel): a variant compiled for
    16-byte aligned pointers or K % 16 == 0 must not be reused for operands without."""
    storage = randn(2 * 64 * 64 + 8, dtype=torch.float16)
    b = randn(1, 64, 48, dtype=torch.float16)
    for offset, k in [(0, 64), (1, 64), (0, 64), (3, 64), (0, 63), (0, 64), (8, 48)]:
        a = storage[offset:offset + 64 * k].view(1, 64, k)
        out = poisoned(1, 64, 48, dtype=torch.float16)
        kernel.matmul_3d(a, b[:, :k], out, precision="half")
        assert_close(out, a.double() @ b[:, :k].double(), torch.float16, None,
                     f"offset {offset}, K {k}")


@requires_kernels
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_copy_kernel_zero_fills_and_transposes(dtype):
    """kernels/copy.py, the dispatcher's staging: a column-major source lands row-major in
    the top-left corner of an uninitialised buffer, the rest exactly zero; copying back into
    a poisoned strided view restores the source bit for bit."""
    from triton_gemm.kernels.copy import Job, copy_jobs, padded_job
    src = randn(2, 70, 33, dtype=dtype).transpose(1, 2)      # (2, 33, 70), column-major
    job = padded_job(src, (2, 80, 96))              # 2 x 2 tiles per batch entry
    copy_jobs(job)
    staged = job.dst
    expected = torch.zeros(2, 80, 96, dtype=dtype, device=src.device)
    expected[:, :33, :70] = src
    assert staged.is_contiguous() and torch.equal(staged, expected)
    back = torch.full((2, 70, 33), float("nan"), dtype=dtype, device=src.device).transpose(1, 2)
    copy_jobs(Job(staged[:, :33, :70], back))
    assert torch.equal(back, src)


def _rows_of(width: int, dtype, rows: int = 70, batch: int = 2) -> torch.Tensor:
    """A (batch, rows, width) view of rows `width` elements apart inside a wider buffer
    whose base sits 16 bytes in: strides no multiple of 16 elements, runs whole."""
    run = 16 // torch.empty((), dtype=dtype).element_size()
    buf = randn(batch * rows * width + run, dtype=dtype)
    return buf[run:].view(batch, rows, width)


def test_copy_source_runs_hint_only_what_triton_cannot_see():
    """copy.source_runs: 16-byte runs along the contiguous axis where a stride or the extent
    is not a multiple of 16 elements (fp16 4104, fp32 4100), 8-byte runs below that, none
    where the rows are off 8 bytes or the base is, and 0 where triton specialises."""
    from triton_gemm.kernels.copy import source_runs
    half, single = torch.float16, torch.float32
    assert source_runs(_rows_of(40, half)) == (8, False)           # 80-byte rows
    assert source_runs(_rows_of(40, half).transpose(1, 2)) == (8, True)
    assert source_runs(_rows_of(36, single)) == (4, False)
    assert source_runs(_rows_of(36, half)) == (4, False)           # 72 bytes: 8-byte runs
    assert source_runs(_rows_of(33, half)) == (0, False)           # rows off 8 bytes
    assert source_runs(_rows_of(48, half)) == (0, False)           # triton sees it
    assert source_runs(_rows_of(40, half)[:, :, 1:]) == (0, False)  # base off 16 bytes
    # The batch stride must be whole runs too: matrices 70 x 40 + 4 elements apart.
    spaced = _rows_of(40, half, batch=3).flatten().as_strided((2, 70, 40), (2804, 40, 1))
    assert source_runs(spaced) == (0, False)


@requires_kernels
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("transposed", [False, True])
def test_copy_kernel_exact_from_hinted_runs(dtype, transposed):
    """Sources the copy kernel loads through source_runs' hints (rows 80 or 144 bytes apart,
    a batch of two, read along rows or, transposed, along columns) land bit for bit in a
    poisoned padded buffer, zeros past them, through copy_jobs' first and second slots."""
    from triton_gemm.kernels.copy import Job, copy_jobs, source_runs
    src = _rows_of(40 if dtype == torch.float16 else 36, dtype)
    src = src.transpose(1, 2) if transposed else src
    assert source_runs(src)[0] > 0
    rows, cols = src.shape[1:]
    small = randn(1, 5, 24, dtype=dtype)
    small_dst, first, second = (torch.full(shape, float("nan"), dtype=dtype,
                                           device=src.device)
                                for shape in ((1, 9, 40), (2, rows + 7, cols + 30),
                                              (2, rows + 7, cols + 30)))
    copy_jobs(Job(small, small_dst), Job(src, second))
    copy_jobs(Job(src, first))
    for source, dst in ((small, small_dst), (src, first), (src, second)):
        expected = torch.zeros_like(dst)
        expected[:, :source.shape[1], :source.shape[2]] = source
        assert torch.equal(dst, expected)


@requires_kernels
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("width,k_major", [(3, True), (1, False), (8, False)])
def test_copy_with_strip_stages_a_and_its_partial_products(dtype, width, k_major):
    """copy.copy_jobs with a strip (dispatch's thin column fringe): the padded copy is exact,
    and the partial products, one per 64-column tile of the copy, sum to A @ strip in fp32
    (16-bit inputs: exact products, fp32 sums; fp32 inputs: FMA one column at a time)."""
    from triton_gemm.kernels.copy import copy_jobs, padded_job
    a = randn(1, 70, 150, dtype=dtype)
    if k_major:                                            # a slice of a K-major B
        strip = randn(40, 150, dtype=dtype).T[:, :width]
    else:                                                  # the last columns of a row-major B
        strip = randn(150, 40 + width, dtype=dtype)[:, 40:]
    job = padded_job(a, (1, 70, 192))
    partials = copy_jobs(job, strip=strip)
    staged = job.dst
    expected = torch.zeros(1, 70, 192, dtype=dtype, device=a.device)
    expected[:, :, :150] = a
    assert torch.equal(staged, expected)
    assert partials.shape == (3, 70, width) and partials.dtype == torch.float32
    ref = a[0].double() @ strip.double()
    err = rel_error(partials.double().sum(0), ref)
    assert err <= 1e-6, f"strip partial products: relative error {err:.2e}"
    with pytest.raises(ValueError, match="strip"):
        copy_jobs(padded_job(a.expand(2, -1, -1), (2, 70, 192)), strip=strip)


def _tf32_nearest(x: torch.Tensor) -> torch.Tensor:
    """x (finite float32 values) rounded to the nearest tf32 value, half away from zero, by
    float64 arithmetic: an independent reference for the bit trick. 11 significant bits for
    normal values; below 2^-126 tf32 keeps fp32's subnormal grid less its low 13 bits, a
    step of 2^-136 (rounding subnormals to 11 significant bits, as this once did, misread
    the kernel's correct result for remainders there: about 1 seed in 700)."""
    x64 = x.double()
    _, exponent = torch.frexp(x64)  # |x| in [2^(e-1), 2^e)
    step = torch.ldexp(torch.ones_like(x64), torch.clamp(exponent - 11, min=-136))
    return (torch.sign(x64) * torch.floor(x64.abs() / step + 0.5) * step).float()


@requires_kernels
def test_split_copy_gives_tf32_halves_that_sum_to_the_source():
    """The 3xTF32 staging (copy.split_job): hi is the source rounded to nearest tf32, lo
    the exact remainder, both with zeroed padding; a transposed source lands K-major.
    Values on rounding ties and at the fp32 range's edges included."""
    from triton_gemm.kernels.copy import Job, copy_jobs
    src = randn(2, 70, 33) * torch.logspace(-30, 30, 33, device=DEVICE)
    ties = torch.tensor([1 + 2.0**-11, -(1 + 2.0**-11), 1 + 3 * 2.0**-11, 3.4e38, -1e-30])
    src[0, 0, :5] = ties.to(DEVICE)
    src = src.transpose(1, 2)                               # (2, 33, 70), column-major
    hi = torch.full((2, 40, 80), float("nan"), device=DEVICE)
    lo = torch.full_like(hi, float("nan"))
    copy_jobs(Job(src, hi, lo))
    expected_hi = torch.zeros(2, 40, 80, device=DEVICE)
    expected_hi[:, :33, :70] = _tf32_nearest(src.cpu()).to(DEVICE)
    assert torch.equal(hi, expected_hi)
    assert (hi.view(torch.int32) & 0x1FFF == 0).all()
    assert torch.equal(hi[:, :33, :70] + lo[:, :33, :70], src)
    assert torch.equal(lo[:, 33:], torch.zeros_like(lo[:, 33:]))
    assert torch.equal(lo[:, :, 70:], torch.zeros_like(lo[:, :, 70:]))
    assert (lo[:, :33, :70].abs() <= src.abs() * 2.0**-11).all()
    # Ties round away from zero: 1 + 2^-11 sits halfway between tf32 neighbours.
    assert hi[0, 0, 0].item() == 1 + 2.0**-10 and hi[0, 1, 0].item() == -(1 + 2.0**-10)


@requires_kernels
def test_remainder_copy_holds_what_a_truncating_tensor_core_drops():
    """copy.remainder_job, the lo half of an operand the split kernel reads as given (wgmma
    drops its low 13 bits): x - trunc(x) rounded to nearest tf32, so trunc(x) + lo is x to
    within 2^-21 of it (or half tf32's subnormal step, 2^-137, where the remainder is
    subnormal: x near 1e-35); zero padding, and zero for a non-finite x."""
    from triton_gemm.kernels.copy import copy_jobs, remainder_job
    src = randn(2, 70, 33) * torch.logspace(-30, 30, 33, device=DEVICE)
    src[0, 0, :4] = torch.tensor([float("inf"), float("-inf"), float("nan"),
                                  1 + 2.0**-11 + 2.0**-22]).to(DEVICE)
    src = src.transpose(1, 2)                               # (2, 33, 70), column-major
    job = remainder_job(src, (2, 40, 80))
    copy_jobs(job)
    lo = job.dst.cpu()
    x = src.cpu()
    trunc = (x.view(torch.int32) & ~0x1FFF).view(torch.float32)
    finite = torch.isfinite(x)
    expected = torch.zeros(2, 40, 80)
    expected[:, :33, :70] = torch.where(finite, _tf32_nearest(x - trunc), 0.0)
    assert torch.equal(lo, expected)
    assert (lo.view(torch.int32) & 0x1FFF == 0).all()
    bound = torch.clamp(x[finite].abs() * 2.0**-21, min=2.0**-137)
    assert ((trunc + lo[:, :33, :70] - x)[finite].abs() <= bound).all()
    assert lo[0, 3, 0].item() == 2.0**-11 * (1 + 2.0**-10)  # a tie rounds away from zero


@requires_kernels
def test_split_copy_keeps_infinities_and_nans():
    from triton_gemm.kernels.copy import copy_jobs, split_job
    src = torch.tensor([[[float("inf"), float("-inf"), float("nan"), 1.5]]], device=DEVICE)
    job = split_job(src, (1, 1, 4))
    copy_jobs(job)
    hi, lo = job.dst, job.lo
    assert hi[0, 0, 0].item() == float("inf") and hi[0, 0, 1].item() == float("-inf")
    assert torch.isnan(hi[0, 0, 2]) and hi[0, 0, 3].item() == 1.5
    assert torch.equal(lo, torch.zeros_like(lo))


@requires_kernels
@pytest.mark.parametrize("second", ["padded", "split", "remainder"])
def test_two_copies_share_one_launch_and_match_copies_made_alone(monkeypatch, second):
    """copy.copy_jobs (dispatch.stage's copies of A and B): both operands in one launch,
    the first with a column strip, the second transposed (B's K-major copy) as a plain,
    tf32-halves or remainder copy; each bit for bit what it gives in a launch of its own,
    so the two copies' programs neither overlap nor skip a tile."""
    from triton_gemm.kernels import copy
    a = randn(1, 70, 150)
    b = randn(150, 44)                                     # row-major B, 4 strip columns
    make = {"padded": copy.padded_job, "split": copy.split_job,
            "remainder": copy.remainder_job}[second]
    alone_a = copy.padded_job(a, (1, 70, 192))
    alone_partials = copy.copy_jobs(alone_a, strip=b[:, 40:])
    alone_b = make(b.T[None], (1, 48, 192))                # 1 x 3 tiles past A's 2 x 3
    copy.copy_jobs(alone_b)
    launches = []
    real_launch = copy.launch
    monkeypatch.setattr(copy, "launch",
                        lambda *args, **kwargs: (launches.append(args),
                                                 real_launch(*args, **kwargs)))
    a_job, b_job = copy.padded_job(a, (1, 70, 192)), make(b.T[None], (1, 48, 192))
    for job in (a_job, b_job):
        job.dst.fill_(float("nan"))
        if job.lo is not None:
            job.lo.fill_(float("nan"))
    partials = copy.copy_jobs(a_job, b_job, strip=b[:, 40:])
    assert len(launches) == 1
    assert torch.equal(a_job.dst, alone_a.dst) and torch.equal(partials, alone_partials)
    assert torch.equal(b_job.dst, alone_b.dst)
    assert (b_job.lo is None) == (second != "split")
    if b_job.lo is not None:
        assert torch.equal(b_job.lo, alone_b.lo)
        assert torch.equal(b_job.dst[0, :44, :150] + b_job.lo[0, :44, :150], b.T)
    with pytest.raises(ValueError, match="one or two"):
        copy.copy_jobs(a_job, b_job, a_job)


@requires_kernels
def test_split_copy_refuses_mismatched_outputs():
    from triton_gemm.kernels.copy import Job, copy_jobs
    src = randn(1, 4, 4)
    with pytest.raises(ValueError, match="float32"):
        copy_jobs(Job(src, torch.empty(1, 4, 4, device=DEVICE),
                      torch.empty(1, 4, 4, device=DEVICE).transpose(1, 2)))


M_MAJOR_A_CASES = [(family, tile, dtype, b_k_major)
                   for family in ("half", "half_mid") for tile in configs.persistent_tiles(family)
                   if DEVICE == "cuda" or tile[0] == configs._PERSISTENT_DEFAULT[family]
                   for dtype in (torch.float16, torch.bfloat16) for b_k_major in (False, True)]


@requires_kernels
@pytest.mark.parametrize("family,tile,dtype,b_k_major", M_MAJOR_A_CASES,
                         ids=[f"{t[0]}-{dt}-{'kmajor' if km else 'row'}".replace("torch.", "")
                              for _, t, dt, km in M_MAJOR_A_CASES])
def test_persistent_config_reads_an_m_major_a(family, tile, dtype, b_k_major):
    """A 16-bit A stored M-contiguous (a transposed matrix: X^T of a weight gradient) goes
    through TMA as its (K, M) rows and into the dot transposed: every 16-bit config on the
    GPU (the families' defaults in the interpreter), ragged sizes, both B layouts, a D."""
    m, n, k = (300, 270, 200) if DEVICE == "cuda" else (72, 45, 70)
    config = configs.persistent_configs(family)[configs.persistent_tiles(family).index(tile)]
    with_d = configs.persistent_fits(config, family, True, H100_SMEM, d_row=True)
    a = aligned(k, m, dtype).t()
    b = aligned(n, k, dtype).t() if b_k_major else aligned(k, n, dtype)
    d = randn(n, dtype=dtype) if with_d else None
    out = aligned(m, n, dtype, fill=float("nan"))
    assert persistent.supports(a, b, out, "half") and persistent._a_m_major(a)
    persistent.matmul_2d(a, b, out, d, alpha=-1.0, beta=2.0, precision="half", config=config)
    ref = -(a.double() @ b.double()).cpu()
    if with_d:
        ref += 2.0 * d.double().cpu()
    assert_close(out, ref, dtype, None, f"{tile[0]} M-major A")


@requires_kernels
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_persistent_clamped_tiles_and_an_in_place_epilogue(dtype):
    """Rows past whole tiles run as a last row of tiles moved back inside M (clamped_row),
    overlapping the row before it (columns past whole tiles as before): right with a matrix
    D apart from the output; and where the output is D itself (matmul_2d takes it; the API
    writes an out= sharing an operand's memory through a fresh tensor) the tiles are not
    moved, since an overlapping tile would read D's rows after the one before it
    stored them (the interpreter runs programs one after another, so a moved launch fails
    here)."""
    names = [t[0] for t in configs.persistent_tiles("half_mid")]
    config = configs.persistent_configs("half_mid")[names.index("pm_64x64x128_s6")]
    m, n, k = 64 + 24, 64 + 40, 70  # a second row of tiles, overlapping; a ragged column
    a = aligned(m, k, dtype)
    b = aligned(n, k, dtype).t()
    product = (a.double() @ b.double()).cpu()
    out = aligned(m, n, dtype, fill=float("nan"))
    persistent.matmul_2d(a, b, out, precision="half", config=config)
    assert_close(out, product, dtype, None, "clamped tiles")
    d = aligned(m, n, dtype)
    ref = -product + 2.0 * d.double().cpu()
    out = aligned(m, n, dtype, fill=float("nan"))
    persistent.matmul_2d(a, b, out, d, alpha=-1.0, beta=2.0, precision="half", config=config)
    assert_close(out, ref, dtype, None, "clamped tiles, D apart")
    persistent.matmul_2d(a, b, d, d, alpha=-1.0, beta=2.0, precision="half", config=config)
    assert_close(d, ref, dtype, None, "in place: out is D")


# Operand dtypes and precisions a family runs; fp32 B only K-major (wgmma's rule); "split"
# on staged halves.
FAMILY_RUNS = {"half": [(torch.float16, "half"), (torch.bfloat16, "half")],
               "half_mid": [(torch.float16, "half"), (torch.bfloat16, "half")],
               "tf32": [(torch.float32, "tf32"), (torch.float32, "tf32x3")],
               "split": [(torch.float32, "tf32x3")]}
WARP_SPECIALIZED = [(family, tile) for family in FAMILY_RUNS
                    for tile in configs.persistent_tiles(family) if tile[7:8] == (True,)]


@pytest.mark.skipif(DEVICE != "cuda", reason="warp specialisation is compiled for the GPU only")
@pytest.mark.parametrize("family,tile", WARP_SPECIALIZED, ids=[t[0] for _, t in WARP_SPECIALIZED])
@pytest.mark.parametrize("m,n,k", [(300, 270, 200), (2100, 4100, 136), (1000, 520, 1000),
                                   (128, 4096, 4096)])
def test_warp_specialized_configs_over_shapes(family, tile, m, n, k):
    """Triton's warp specialisation on sm_90 is new: a 128x64x128 warp-specialised tile was
    wrong on a ragged product while right on aligned ones, so each warp-specialised config
    is checked over K tails, several tiles per program, B layouts and with a D."""
    config = configs.persistent_configs(family)[configs.persistent_tiles(family).index(tile)]
    for dtype, precision in FAMILY_RUNS[family]:
        for b_k_major, a_m_major in (((False, False), (True, False), (True, True))
                                     if dtype != torch.float32 else ((True, False),)):
            a = aligned(k, m, dtype).t() if a_m_major else aligned(m, k, dtype)
            b = aligned(n, k, dtype).t() if b_k_major else aligned(k, n, dtype)
            with_d = b_k_major and configs.persistent_fits(config, family, True, H100_SMEM,
                                                           d_row=True)
            d = randn(n, dtype=dtype) if with_d else None
            out = aligned(m, n, dtype, fill=float("nan"))
            ref = -(a.double() @ b.double())
            a, b, lo = staged_halves(a, b) if family == "split" else (a, b, None)
            persistent.matmul_2d(a, b, out, d, alpha=-1.0, beta=2.0, precision=precision,
                                 config=config, lo=lo)
            if with_d:
                ref += 2.0 * d.double()
            assert_close(out, ref, dtype, None if precision == "half" else precision,
                         f"{tile[0]} {dtype} {precision} kmajor={b_k_major} "
                         f"a_m_major={a_m_major}")
