"""Config tables, pruning and tuning keys (pure Python, no kernel runs)."""

import pytest
import torch

from triton_gemm import configs

H100_SMEM = 232448  # bytes per block (opt-in) reported by torch on the H100


@pytest.mark.parametrize("family", configs.FAMILIES)
def test_every_family_holds_the_seed_tiles_and_unique_configs(family):
    names = [t[0] for t in configs.tiles(family)]
    assert names[:3] == [t[0] for t in configs.SEED_TILES]
    cfgs = configs.configs(family)
    keys = {(tuple(sorted(c.kwargs.items())), c.num_warps, c.num_stages) for c in cfgs}
    assert len(keys) == len(cfgs)
    for cfg, tile in zip(cfgs, configs.tiles(family)):
        assert configs.config_name(cfg, family) == tile[0]
        assert cfg.kwargs["BK"] >= 16  # tl.dot's minimum K on NVIDIA GPUs


def test_seed_2d_thread_tile_is_8x8_per_thread():
    _, bm, bn, _, warps, _ = configs.SEED_TILES[1]
    assert bm * bn // (32 * warps) == 64


def test_select_drops_tiles_that_do_not_fit_shared_memory():
    cfgs = configs.configs("half")
    kept = configs.select(cfgs, 4096, 4096, 4096, elem_bytes=2, smem_limit=H100_SMEM)
    assert kept == cfgs  # every fp16 tile fits the H100
    kept = configs.select(cfgs, 4096, 4096, 4096, elem_bytes=4, smem_limit=H100_SMEM)
    assert all(configs.shared_memory_bytes(c.kwargs["BM"], c.kwargs["BN"], c.kwargs["BK"],
                                           c.num_stages, 4) <= H100_SMEM for c in kept)
    assert len(kept) < len(cfgs)  # 128x256x64 x 3 stages of fp32 does not fit


def test_select_clamps_tiles_to_the_problem_and_keeps_one():
    cfgs = configs.configs("half")
    kept = configs.select(cfgs, 8, 4096, 4096, elem_bytes=2, smem_limit=H100_SMEM)
    assert kept and all(c.kwargs["BM"] <= 16 for c in kept)
    kept = configs.select(cfgs, 1, 1, 1, elem_bytes=2, smem_limit=H100_SMEM)
    assert len(kept) == 1


def test_thin_tiles_are_tuned_only_for_thin_outputs(monkeypatch):
    """plain_prune keeps the thin tiles for outputs of at most THIN_N columns and drops them
    for wider ones, where only the other tiles are tuned; the 16-byte-run tiles among them
    only for an M-major A under the VEC hint."""
    monkeypatch.setattr(configs, "_shared_memory_limit", lambda index: H100_SMEM)
    operand = torch.empty(1, dtype=torch.float16)
    cfgs = configs.configs("half")

    def kept(m, n, k, **meta):
        args = {"a_ptr": operand, "M": m, "N": n, "K": k}
        return {configs.config_name(c, "half")
                for c in configs.plain_prune(cfgs, args, **meta)}
    thin = {t[0] for t in configs._THIN_TILES["half"]}
    runs = {t[0] for t in configs._THIN_RUNS_TILES}
    assert runs and runs <= thin
    assert thin <= kept(8192, configs.THIN_N, 8192, VEC=8, A_M_MAJOR=True)
    assert thin - runs == kept(8192, configs.THIN_N, 8192) & thin
    assert thin - runs == kept(8192, configs.THIN_N, 8192, VEC=0, A_M_MAJOR=True) & thin
    assert thin - runs == kept(8192, configs.THIN_N, 8192, VEC=8, A_M_MAJOR=False) & thin
    assert not thin & kept(8192, configs.THIN_N + 1, 8192)
    assert kept(8192, configs.THIN_N + 1, 8192)


def test_gemv_tiles_are_no_wider_than_the_output():
    """gemv_prune drops programs wider than the output (keeping the narrowest at worst)."""
    cfgs = configs.gemv_configs()

    def widths(n):
        return {c.kwargs["BN"] for c in configs.gemv_prune(cfgs, {"N": n}, family="simt")}
    assert widths(8192) == {t[1] for t in configs.GEMV_TILES}
    assert widths(4) == {2, 4}
    assert widths(1) == {2}


def test_untuned_thin_outputs_take_a_thin_tile():
    for family in ("half", "tf32"):
        wide = configs.config_name(configs.default_config(family, configs.THIN_N + 1), family)
        thin = configs.config_name(configs.default_config(family, configs.THIN_N), family)
        assert wide == configs.config_name(configs.default_config(family), family)
        assert thin in {t[0] for t in configs._THIN_TILES[family]}
    assert configs.default_config("simt", 16) is not None  # no thin tiles: the usual one


def test_no_other_tile_has_a_thin_tiles_shape():
    """without_thin recognises the plain kernel's thin tiles by shape, warps and stages, in
    every family."""
    thin = {t[0] for tiles in configs._THIN_TILES.values() for t in tiles}
    for family in configs.FAMILIES:
        for tile, cfg in zip(configs.tiles(family), configs.configs(family), strict=True):
            is_thin = configs._tile_shape(cfg) in configs._THIN_SHAPES
            assert is_thin == (tile[0] in thin), (family, tile)


@pytest.mark.parametrize("n,expected", [(0, 16), (1, 16), (16, 16), (17, 32), (1000, 1024),
                                        (1024, 1024), (1025, 1280), (2048, 2048),
                                        (3000, 3072), (4096, 4096), (4097, 5120)])
def test_bucket(n, expected):
    assert configs.bucket(n) == expected


def test_family_for():
    assert configs.family_for(torch.float32, "ieee") == "simt"
    assert configs.family_for(torch.float32, "tf32x3") == "tf32"
    assert configs.family_for(torch.bfloat16, "half") == "half"
    with pytest.raises(ValueError, match="unknown config family"):
        configs.tiles("fp8")


class _FakeLauncher:
    """Stands in for a triton kernel or autotuner: records the launches it gets."""

    def __init__(self, tuned=None):
        self.calls, self.best_config, self._tuned = [], None, tuned

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            self.calls.append(kwargs)
            self.best_config = self._tuned
        return run


def test_launch_tunes_once_per_key_then_runs_the_kernel_with_the_tuned_config(monkeypatch):
    from triton_gemm.kernels import common
    # The fakes are launched the interpreter's way (kernel[grid]): no compiled kernels.
    monkeypatch.setattr(common, "INTERPRETER", True)
    monkeypatch.setattr(common, "_chosen", {})
    tuned = configs.configs("half")[0]
    kernel, tuner = _FakeLauncher(), _FakeLauncher(tuned)
    meta = {"HAS_D": False}
    common.launch(kernel, tuner, None, (), meta, None, "half", key=("k1",))
    assert len(tuner.calls) == 1 and not kernel.calls
    assert common.last_config() == configs.config_name(tuned, "half")
    common.launch(kernel, tuner, None, (), meta, None, "half", key=("k1",))
    assert len(tuner.calls) == 1
    assert kernel.calls == [{**meta, **tuned.all_kwargs()}]
    common.launch(kernel, tuner, None, (), meta, None, "half", key=("k2",))  # a new key tunes
    assert len(tuner.calls) == 2
    pinned = configs.configs("half")[1]
    common.launch(kernel, tuner, None, (), meta, pinned, "half", key=("k1",))
    assert kernel.calls[-1] == {**meta, **pinned.all_kwargs()}
    assert common.last_config() == configs.config_name(pinned, "half")


def test_splitk_partials_stay_within_their_budget():
    """Huge K keeps its deep splits; partials that would outweigh a quarter of the operands
    (and 8 MiB) are dropped; nothing fitting leaves the smallest SPLIT; buckets decide.
    The pool operands not read in B's planes tune on (B's planes count their own partials
    below)."""
    cfgs = configs.col_planes_tiles(configs.splitk_configs("half"), 0)

    def splits(m, n, k, elem_bytes=2):
        return {c.kwargs["SPLIT"] for c in configs.splitk_affordable(cfgs, m, n, k, elem_bytes)}

    assert max(splits(128, 128, 65536)) == 128  # 8 MiB of partials: within SPLITK_WORK_FREE
    assert max(splits(256, 256, 32768)) == 32  # s64's 16 MiB > a quarter of 32 MiB
    assert max(splits(256, 256, 32768, 4)) == 64  # fp32 operands: twice the budget
    # Skinny: every split but 128 (its 16 x 28672 partials take 235 MB).
    assert splits(16, 28672, 8192) == {c.kwargs["SPLIT"] for c in cfgs} - {128}
    assert splits(4096, 4096, 1024) == {4}  # nothing fits: the least SPLIT only
    assert splits(4000, 4000, 1000) == splits(4096, 4096, 1024)
    for m, n, k in [(1, 8192, 8192), (64, 64, 65536), (128, 1024, 1024), (200, 300, 5000)]:
        # Never empty, and one answer per tuning key (the workspace is sized by it).
        kept = configs.splitk_affordable(cfgs, m, n, k, 2)
        same_key = (configs.bucket(m), configs.bucket(n), configs.bucket(k))
        assert kept and kept == configs.splitk_affordable(cfgs, *same_key, 2)
    # B in 8 planes: SPLIT x 8 partials of 16 x 28672 (3.7 MB per SPLIT) within a quarter
    # of the operands (118 MB) up to SPLIT 2; at 4096 x 4096, none: the least SPLIT.
    cols = configs.col_planes_tiles(configs.splitk_configs("half"), 8)
    assert {c.kwargs["SPLIT"] for c in configs.splitk_affordable(
        cols, 16, 28672, 8192, 2, b_planes=8)} == {1, 2}
    assert {c.kwargs["SPLIT"] for c in configs.splitk_affordable(
        cols, 4096, 4096, 1024, 2, b_planes=8)} == {1}


def test_persistent_tiles_that_leave_most_sms_idle_are_not_tuned():
    """busy_enough drops tiles whose SM occupancy is far below the best config's (1000^3
    on 132 SMs: 32 tiles of 128x256 against 64 of 128x128) and keeps every tile where all
    of them fill their waves (4096^3), or where the SM count is unknown."""
    cfgs = configs.persistent_configs("half")
    names = {configs.config_name(c, "half") for c in cfgs}

    def kept(m, n, sms):
        return {configs.config_name(c, "half") for c in configs.busy_enough(cfgs, m, n, sms)}
    small = kept(1000, 1000, 132)
    assert small and all("128x128" in name for name in small)
    assert kept(4096, 4096, 132) == names
    assert kept(1000, 1000, None) == names


def test_a_tile_exactly_at_the_occupancy_share_is_tuned():
    """128x11008 on 132 SMs: 86 tiles of 128x128 (86/132) sit exactly on three quarters of
    344 tiles of 64x64 over three waves (344/396); float rounding used to drop them, and
    they were the faster tile there."""
    cfgs = configs.persistent_configs("half_mid")
    kept = {configs.config_name(c, "half_mid")
            for c in configs.busy_enough(cfgs, 128, 11008, 132)}
    assert {"pm_64x64x128_s6", "pm_128x128x64_s6", "pm_128x64x128"} <= kept
    # Below it: 66 tiles of 128x128 (66/132) against 264 of 64x64 in two whole waves.
    fewer = {configs.config_name(c, "half_mid")
             for c in configs.busy_enough(cfgs, 128, 8448, 132)}
    assert "pm_64x64x128_s6" in fewer and "pm_128x128x64_s6" not in fewer


def test_16_bit_products_with_a_wave_of_wide_tiles_tune_only_wide_tiles():
    """wide_when_a_wave keeps only 128x256-sized tiles of the 16-bit family where 128x256
    tiles fill a wave (2048x11008: 688 tiles on 132 SMs), every tile below that (2048^3:
    128 tiles) or where their waves are filled too little, for other families, and where
    the SM count is unknown; the tall 256x128 tile only where it pads the output less
    (N = 128: 128x256 tiles pad half of it)."""
    cfgs = configs.persistent_configs("half")

    def kept(m, n, sms, family="half"):
        return {configs.config_name(c, "half")
                for c in configs.wide_when_a_wave(cfgs, m, n, sms, family)}
    everything = kept(1, 1, None)
    wide = kept(2048, 11008, 132)
    assert wide and all("128x256" in x for x in wide)
    assert kept(8192, 8192, 132) == wide
    narrow = kept(128 * 132 * 2, 128, 132)  # 264 tiles of 128x256, each half padding
    assert "p_256x128x64_sub" in narrow and all(("128x256" in x or "256x128" in x)
                                               for x in narrow)
    assert everything - wide and all(("128x128" in x or "256x128" in x)
                                     for x in everything - wide)
    assert kept(2048, 2048, 132) == everything
    assert kept(2048, 11008, 132, "tf32") == everything
    # A wave of 128x256 tiles and 40 more (512x11008: 172, 0.65 of their waves' slots, under
    # WIDE_MIN_FILL): every tile.
    assert not configs.wide_tiles_filled(512, 11008, 132)
    assert configs.wide_tiles_filled(2048, 11008, 132)
    assert kept(512, 11008, 132) == everything

