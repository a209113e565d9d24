"""The README's dispatch table ("Which path runs") and the cross-references into the
documentation: the thresholds it names exist, one example of each row plans as the row
says (the H100's 132 SMs, TMA on, its 3352 GB/s), and every section the code and the
documents cite by title exists where they say."""

import importlib
import re
from pathlib import Path

import pytest
import torch

from triton_gemm import dispatch

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
DESIGN = (ROOT / "docs" / "design.md").read_text()
H100 = {"sms": 132, "tma": True, "dram_gbps": 3352}


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start)
    return text[start:end if end >= 0 else None]


def _table_rows() -> dict[int, list[str]]:
    rows = {}
    for line in _section(README, "### Which path runs").splitlines():
        match = re.match(r"\| (\d+) \| (.*) \|$", line)
        if match:
            rows[int(match.group(1))] = [c.strip() for c in match.group(2).split("|")]
    return rows


def _titles(text: str) -> list[str]:
    """Headings and the bold titles that open a list item or paragraph."""
    bold = re.findall(r"^\s*(?:- )?\*\*(.+?)\*\*", text, re.M)
    headings = re.findall(r"^#+ (.+)$", text, re.M)
    return [t.rstrip(".").strip() for t in bold + headings]


def _resolve(name: str):
    """A threshold as the table names it: dispatch's, or module-qualified."""
    if "." not in name:
        return getattr(dispatch, name)
    module, attr = name.rsplit(".", 1)
    for package in ("triton_gemm.kernels.", "triton_gemm."):
        try:
            return getattr(importlib.import_module(package + module), attr)
        except ModuleNotFoundError:
            continue
    raise AssertionError(f"{name}: no module triton_gemm[.kernels].{module}")


def test_table_rows_are_numbered_in_order_and_name_thresholds_that_exist():
    rows = _table_rows()
    assert sorted(rows) == list(range(len(rows))) and len(rows) >= 10
    for number, cells in rows.items():
        assert len(cells) == 4, f"row {number}: {cells}"
        for path in re.findall(r"`(kernels/\w+\.py)", cells[0]):
            assert (ROOT / "triton_gemm" / path).is_file(), f"row {number}: {path}"
        for name in re.findall(r"`([\w.]+)`", cells[2]):
            _resolve(name)
    copies = _section(README, "### Which path runs").split("Before the kernel runs")[1]
    for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", copies):
        _resolve(name)


def _ops(m, n, k, layout="nn", dtype=torch.float16, batch=1):
    """(batch, m, k) A and (batch, k, n) B, each row-major ("n") or transposed ("t")."""
    a = (torch.empty(batch, m, k, dtype=dtype) if layout[0] == "n"
         else torch.empty(batch, k, m, dtype=dtype).transpose(1, 2))
    b = (torch.empty(batch, k, n, dtype=dtype) if layout[1] == "n"
         else torch.empty(batch, n, k, dtype=dtype).transpose(1, 2))
    return a, b


F32 = torch.float32
# One example of each row of the table: (a, b, precision, what the plan must say).
ROW_EXAMPLES = {
    0: (_ops(64, 64, 0), "half", lambda p: p == dispatch.Plan(False, False, False)),
    1: (_ops(8192, 8192, 8192, dtype=F32), "tf32x3", lambda p: p.register_fed),
    2: (_ops(128, 28672, 8192, "nt"), "half", lambda p: p.fed_rows),
    3: (_ops(1, 8192, 8192, "nt"), "half", lambda p: p == dispatch.GEMV),
    4: (_ops(32, 8192, 8192, "nt", F32), "ieee", lambda p: p == dispatch.FMA_TRANSPOSED),
    5: (_ops(64, 8192, 8192, "nt"), "half", lambda p: p == dispatch.TRANSPOSED),
    6: (_ops(2048, 2048, 128, "nt", batch=32), "half", lambda p: p.batched),
    7: (_ops(128, 128, 65536), "half", lambda p: p.split_k and not p.sliced),
    8: (_ops(1024, 1024, 8192), "half", lambda p: p.sliced),
    # Row 1 claims it too; this plan runs where row 1's kernel cannot take the call.
    9: (_ops(4096, 4096, 4096, dtype=F32), "tf32x3", lambda p: p.split_tf32),
    10: (_ops(4096, 4096, 4096, dtype=F32), "tf32", lambda p: p.register_fed),
    11: (_ops(8192, 8192, 256), "half", lambda p: p.pingpong),
    12: (_ops(144, 16384, 4096, "nt"), "half", lambda p: p.tall),
    13: (_ops(1536, 1536, 4096), "half", lambda p: p.wide),
    14: (_ops(4096, 4096, 4096), "half", lambda p: p.persistent and not (
        p.wide or p.tall or p.pingpong or p.register_fed or p.split_tf32)),
    15: (_ops(512, 512, 512), "half", lambda p: p == dispatch.PLAIN),
}


def test_every_row_has_an_example():
    assert sorted(ROW_EXAMPLES) == sorted(_table_rows())


@pytest.mark.parametrize("row", sorted(ROW_EXAMPLES))
def test_row_example_plans_as_the_table_says(row):
    (a, b), precision, says = ROW_EXAMPLES[row]
    p = dispatch.plan(a, b, precision, **H100)
    assert says(p), f"row {row}: {tuple(a.shape)} @ {tuple(b.shape)} {precision}: {p}"


def test_rows_off_hopper_are_those_the_table_lists():
    """Without TMA (an sm_80 GPU) only rows 0, 3, 4, 5, 7 and 15 run; the others' examples
    fall to the plain kernel or split-K."""
    listed = re.search(r"Off\s+Hopper only rows ([\d, and]+) run", README).group(1)
    off_hopper = {int(v) for v in re.findall(r"\d+", listed)}
    for row, ((a, b), precision, says) in ROW_EXAMPLES.items():
        p = dispatch.plan(a, b, precision, sms=108, tma=False)
        assert says(p) == (row in off_hopper), f"row {row} off Hopper: {p}"


# Citations by title: `docs/design.md "Title"` (or `docs/design.md, "Title"`), and the same
# for the README; both documents cite themselves as "Title" with `in docs/design.md`.
CITATION = re.compile(r'(README|docs/design\.md)`?,?\s*(?:#\s*)?"([^"]+)"')


def _citations():
    files = [*ROOT.glob("triton_gemm/**/*.py"), *ROOT.glob("perf/*.py"),
             *ROOT.glob("tests/*.py"), ROOT / "README.md", ROOT / "docs" / "design.md"]
    for path in files:
        if path.name == Path(__file__).name:  # this file names the patterns, not sections
            continue
        for doc, title in CITATION.findall(path.read_text()):
            # A title broken over two lines of a comment or docstring.
            yield path.relative_to(ROOT), doc, re.sub(r"\s*\n\s*#?\s*", " ", title)
    for title in re.findall(r'"([^"]+)" in\s+`docs/design\.md`', README):
        yield "README.md", "docs/design.md", title
    for title in re.findall(r'see "([^"]+)"', DESIGN):  # its own sections
        yield "docs/design.md", "docs/design.md", title


def test_cited_sections_exist():
    titles = {"README": _titles(README), "docs/design.md": _titles(DESIGN)}
    cited = list(_citations())
    assert len(cited) >= 10
    for path, doc, title in cited:
        assert any(t.startswith(title) for t in titles[doc]), f"{path}: {doc} \"{title}\""


def test_design_contents_list_its_entries_and_sections_in_order():
    entries = [re.sub(r"\s+", " ", bold or heading).rstrip(".").strip()
               for bold, heading in re.findall(r"^- \*\*(.+?)\*\*|^## (.+?)$", DESIGN,
                                               re.M | re.S)]
    listed = DESIGN.split("Contents, in the order below")[1].split("\n\n- **")[0]
    assert re.findall(r"^- (.+)$", listed, re.M) == entries
