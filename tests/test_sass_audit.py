"""perf/sass_audit.py: the offline compile audit of the tensor-core kernels (sm_90a, and
the plain kernel on sm_80). Its checks on made-up rows (each problem found, a clean audit
passes), and real runs on a few configs in a subprocess (triton.compile needs the
interpreter off)."""

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perf import sass_audit  # noqa: E402
from triton_gemm import configs  # noqa: E402

TILE = "pmt_64x64x64_s6"


def _rows(**changes):
    """A clean audit of TILE: every C store and epilogue at the table's size, HGMMA only."""
    rows = []
    for c_tma in (True, False):
        for index, epilogue in enumerate(sass_audit.EPILOGUES):
            rows.append(dict(arch="sm_90a", kernel="persistent", family="tf32_mid", tile=TILE,
                             bm=64, dtype="fp32", precision="tf32", a_layout="row", b_layout="k",
                             epilogue=epilogue, c_tma=c_tma, half_tail=False,
                             shared=configs.PERSISTENT_SMEM[TILE][int(not c_tma)][index],
                             registers=128, spill_stores=0, spill_loads=0, warnings="",
                             mma="HGMMA.64x64x8.F32.TF32"))
    rows[0].update(changes)
    return pd.DataFrame(rows)


def _plain(**changes):
    """_rows() and one clean plain-kernel row of 16 rows (HMMA: wgmma needs 64)."""
    plain = dict(_rows().iloc[0], kernel="plain", family="half", tile="h_16x128x128", bm=16,
                 dtype="fp16", precision="half", b_layout="row", epilogue="none", c_tma=False,
                 shared=110592, mma="HMMA.16816.F32")
    return pd.concat([_rows(), pd.DataFrame([{**plain, **changes}])], ignore_index=True)


def test_a_clean_audit_passes_and_prints_the_table_as_configs_holds_it():
    df = _plain()
    assert sass_audit.problems(df) == []
    assert sass_audit.smem_table(df) == f'    "{TILE}": {configs.PERSISTENT_SMEM[TILE]},'
    assert "| plain" in sass_audit.markdown(df) and "| persistent" in sass_audit.markdown(df)


def test_each_problem_is_found():
    assert "configs.PERSISTENT_SMEM says" in sass_audit.problems(_rows(shared=1))[0]
    assert "want HGMMA only" in sass_audit.problems(_rows(mma="HMMA.16816.F32.TF32"))[0]
    assert "want HGMMA only" in sass_audit.problems(_rows(mma=""))[0]
    mixed = "HGMMA.64x64x8.F32.TF32 HMMA.16816.F32.TF32"
    assert "want HGMMA only" in sass_audit.problems(_rows(mma=mixed))[0]
    # As ptxas 12.8 prints it: an info line, not a warning.
    serialised = ("ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async "
                  "instructions are serialized due to non wgmma instructions defining "
                  "accumulator registers of a wgmma between start and end of the pipeline "
                  "stage in the function '_matmul_kernel'")
    log = f"ptxas info    : Compiling entry function '_matmul_kernel'\n{serialised}\n"
    assert sass_audit.notes(log) == serialised.strip()
    assert serialised in sass_audit.problems(_rows(warnings=serialised))[0]
    # Known serialised plain tiles pass (KNOWN_SERIALISED); the same note elsewhere fails.
    _, tile, dtype = min(known for known in sass_audit.KNOWN_SERIALISED if known[0] == "plain")
    assert sass_audit.problems(_plain(warnings=serialised, tile=tile, dtype=dtype)) == []
    assert sass_audit.problems(_plain(warnings=serialised))
    # A half-width tail variant larger than what its config is pruned by.
    df = _rows()
    tail = df.iloc[[0]].assign(half_tail=True, shared=df.shared.iloc[0] + 8)
    found = sass_audit.problems(pd.concat([df, tail], ignore_index=True))
    assert len(found) == 1 and "half-width tail" in found[0]
    # The plain kernel: over the H100's shared memory; under 64 rows, no tensor cores.
    assert "over sm_90a's 232448" in sass_audit.problems(_plain(shared=232449))[0]
    assert "no tensor-core instruction" in sass_audit.problems(_plain(mma=""))[0]


def _audit(tmp_path, arch, *args) -> pd.DataFrame:
    """perf/sass_audit.py --arch arch --check *args in a subprocess without the
    interpreter: it must pass; returns its CSV."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, str(ROOT / "perf" / "sass_audit.py"), "--arch",
                           arch, *args, "--check", "--out", str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / f"{arch}.md").read_text().startswith("# triton_gemm's tensor-core")
    return pd.read_csv(tmp_path / f"{arch}.csv", keep_default_na=False)


def test_audit_compiles_a_persistent_family_for_sm90(tmp_path):
    """The tf32_mid family (each tile x 2 C stores x 3 epilogues on a row-major A, 2 on A
    as planes of rows: no matrix D there), compiled for sm_90a: the check passes (shared
    sizes as in the table), and the CSV holds HGMMA of the tile's width and registers."""
    df = _audit(tmp_path, "sm_90a", "--kernel", "persistent", "--family", "tf32_mid")
    tiles = configs.persistent_tiles("tf32_mid")
    assert len(df) == len(tiles) * 2 * (3 + 2) and set(df.tile) == {t[0] for t in tiles}
    assert set(df.a_layout) == {"row", "planes"}
    assert set(df[df.a_layout == "planes"].epilogue) == {"none", "d_row"}
    for name, _, bn, *_ in tiles:
        assert df[df.tile == name].mma.str.startswith(f"HGMMA.64x{bn}x8.F32.TF32").all(), name
    assert df.registers.between(32, 255).all()
    assert "| tf32_mid" in (tmp_path / "sm_90a.md").read_text()


def test_audit_compiles_plain_configs_for_sm90(tmp_path):
    """Two plain fp16 configs x 2 B layouts x (no D, a D): 128 rows issue HGMMA, 16 rows
    the older HMMA (wgmma's instruction covers 64 rows)."""
    df = _audit(tmp_path, "sm_90a", "--kernel", "plain", "--family", "half", "--tile",
                "h_16x128x128,h_128x128x64")
    assert len(df) == 8 and set(df.b_layout) == {"row", "k"}
    mma = df.groupby("tile").mma.agg(lambda s: " ".join(sorted(set(" ".join(s).split()))))
    assert mma["h_128x128x64"].startswith("HGMMA.") and "HMMA" not in mma["h_128x128x64"]
    assert mma["h_16x128x128"].startswith("HMMA.") and "HGMMA" not in mma["h_16x128x128"]


def test_audit_compiles_plain_configs_for_sm80(tmp_path):
    """On the A100 every tile takes mma.sync (HMMA): no wgmma before Hopper."""
    df = _audit(tmp_path, "sm_80", "--family", "tf32", "--tile", "t_128x128x32,t_16x128x64")
    assert len(df) == 2 * 2 * 2 * 2 and set(df.arch) == {"sm_80"}  # tf32, tf32x3
    assert df.mma.str.fullmatch(r"HMMA\.1688\.F32\.TF32").all()


def test_audit_refuses_the_persistent_kernel_on_sm80():
    with pytest.raises(ValueError, match="sm_80 compiles only the plain kernel"):
        sass_audit.audit(["persistent"], ["half"], arch="sm_80")
