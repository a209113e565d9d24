"""perf/sm90_audit.py: the offline sm_90a compile audit of the tensor-core kernels. Its
checks on made-up rows (each problem found, a clean audit passes), and real runs on a few
configs in a subprocess (triton.compile needs the interpreter off)."""

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perf import sm90_audit  # noqa: E402
from triton_gemm import configs  # noqa: E402

TILE = "pmt_64x64x64"


def _rows(**changes):
    """A clean audit of TILE: every C store and epilogue at the table's size, HGMMA only."""
    rows = []
    for c_tma in (True, False):
        for index, epilogue in enumerate(sm90_audit.EPILOGUES):
            rows.append(dict(kernel="persistent", family="tf32_mid", tile=TILE, bm=64,
                             dtype="fp32", precision="tf32", a_m_major=False, b_layout="k",
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
    assert sm90_audit.problems(df) == []
    assert sm90_audit.smem_table(df) == f'    "{TILE}": {configs.PERSISTENT_SMEM[TILE]},'
    assert "| plain" in sm90_audit.markdown(df) and "| persistent" in sm90_audit.markdown(df)


def test_each_problem_is_found():
    assert "configs.PERSISTENT_SMEM says" in sm90_audit.problems(_rows(shared=1))[0]
    assert "want HGMMA only" in sm90_audit.problems(_rows(mma="HMMA.16816.F32.TF32"))[0]
    assert "want HGMMA only" in sm90_audit.problems(_rows(mma=""))[0]
    mixed = "HGMMA.64x64x8.F32.TF32 HMMA.16816.F32.TF32"
    assert "want HGMMA only" in sm90_audit.problems(_rows(mma=mixed))[0]
    serialised = ("ptxas warning : (C7515) Potential Performance Loss: wgmma.mma_async "
                  "instructions are serialized due to ...")
    assert serialised in sm90_audit.problems(_rows(warnings=serialised))[0]
    # A half-width tail variant larger than what its config is pruned by.
    df = _rows()
    tail = df.iloc[[0]].assign(half_tail=True, shared=df.shared.iloc[0] + 8)
    found = sm90_audit.problems(pd.concat([df, tail], ignore_index=True))
    assert len(found) == 1 and "half-width tail" in found[0]
    # The plain kernel: over the H100's shared memory; under 64 rows, no tensor cores.
    assert "over the H100's" in sm90_audit.problems(_plain(shared=232449))[0]
    assert "no tensor-core instruction" in sm90_audit.problems(_plain(mma=""))[0]


def _audit(tmp_path, *args) -> pd.DataFrame:
    """perf/sm90_audit.py --check *args in a subprocess without the interpreter: it must
    pass; returns its CSV."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, str(ROOT / "perf" / "sm90_audit.py"), *args,
                           "--check", "--out", str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    return pd.read_csv(tmp_path / "sm90_audit.csv", keep_default_na=False)


def test_audit_compiles_a_persistent_family_for_sm90(tmp_path):
    """The tf32_mid family (2 tiles x 3 epilogues x 2 C stores), compiled for sm_90a: the
    check passes (shared sizes as in the table), and the CSV holds HGMMA and registers."""
    df = _audit(tmp_path, "--kernel", "persistent", "--family", "tf32_mid")
    assert len(df) == 2 * 3 * 2 and set(df.tile) == {t[0] for t in
                                                      configs.persistent_tiles("tf32_mid")}
    assert df.mma.str.startswith("HGMMA.64x64x8.F32.TF32").all()
    assert df.registers.between(32, 255).all()
    assert "| tf32_mid" in (tmp_path / "sm90_audit.md").read_text()


def test_audit_compiles_plain_configs_for_sm90(tmp_path):
    """Two plain fp16 configs x 2 B layouts x (no D, a D): 128 rows issue HGMMA, 16 rows
    the older HMMA (wgmma's instruction covers 64 rows)."""
    df = _audit(tmp_path, "--kernel", "plain", "--family", "half", "--tile",
                "h_16x128x128,h_128x128x64")
    assert len(df) == 8 and set(df.b_layout) == {"row", "k"}
    mma = df.groupby("tile").mma.agg(lambda s: " ".join(sorted(set(" ".join(s).split()))))
    assert mma["h_128x128x64"].startswith("HGMMA.") and "HMMA" not in mma["h_128x128x64"]
    assert mma["h_16x128x128"].startswith("HMMA.") and "HGMMA" not in mma["h_16x128x128"]
