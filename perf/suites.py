"""Shape suites of the report. A case is (M, N, K, layout): layout "nn" multiplies row-major
A and B; "nt" takes B as the transpose of a row-major (N, K) weight, as linear() does; "tn"
takes A as the transpose of a row-major (K, M) matrix (a weight gradient's X^T); "tt" both
transposed; "pad" gives A and B leading dimensions padded past K and N (unaligned
strides). batch > 1: a batch of that many products, each operand (batch, rows, columns) in
the layout ("nn" or "nt")."""

from __future__ import annotations

from typing import NamedTuple


class Case(NamedTuple):
    m: int
    n: int
    k: int
    layout: str = "nn"
    batch: int = 1

    @property
    def label(self) -> str:
        tail = "" if self.layout == "nn" else f" {self.layout}"
        head = "" if self.batch == 1 else f"{self.batch} x "
        return f"{head}{self.m}x{self.n}x{self.k}{tail}"


LAYOUTS = ("nn", "nt", "tn", "tt", "pad")

# N x K of common transformer projections (Llama-7B attention and MLP, Llama-70B MLP).
LLM_WEIGHTS = ((4096, 4096), (11008, 4096), (4096, 11008), (28672, 8192), (8192, 28672))

SUITES = {
    "square": tuple(Case(s, s, s) for s in (512, 1024, 2048, 4096, 6144, 8192)),
    "llm": tuple(Case(m, n, k, "nt") for m in (16, 128, 2048, 8192) for n, k in LLM_WEIGHTS),
    # 4104: 16-byte rows that TMA takes but that sit off the 32-byte sectors (dispatch
    # PITCH_PAD_MIN_MN), unlike 4097 and 4099 (not even 16-byte rows).
    # 8192x384 nt: a linear layer of 384 outputs, which 256-wide tiles cover a quarter empty
    # (dispatch.WIDE).
    "odd": (Case(4097, 4097, 4097), Case(1000, 1000, 1000), Case(4093, 4091, 4099),
            Case(127, 8191, 509), Case(4096, 4096, 4096, "pad"), Case(3000, 3000, 3000, "pad"),
            Case(4104, 4104, 4104), Case(8192, 384, 4096, "nt")),
    # A short prefill (a few sequences) against the same weights: rows that pad 64- and
    # 128-row tiles by an eighth to a half (dispatch.TALL).
    "prefill": tuple(Case(m, n, k, "nt") for m in (96, 144, 160, 192) for n, k in LLM_WEIGHTS),
    # Row-major weights too (x @ W): aligned (16x8192x8192, run transposed), rows of
    # 16-byte runs that are not 16 elements (4104, the split-K kernel's vector hints) and
    # rows off 8 bytes (4097, its narrow tiles, one element at a time).
    "skinny": tuple(Case(m, 8192, 8192, "nt") for m in (1, 2, 4, 8, 16, 32, 64))
              + (Case(16, 28672, 8192, "nt"), Case(16, 8192, 8192), Case(8, 4104, 4104),
                 Case(8, 4097, 4097)),
    # Every operand layout at the square headline sizes: fp32 tensor-core dots read their
    # operands K-major only (dispatch stages copies), so speed depends on the layout.
    "layouts": tuple(Case(s, s, s, layout) for s in (4096, 8192)
                     for layout in ("nn", "nt", "tn", "tt")),
    # 65535: rows of A off 16 bytes, run as given (dispatch.SPLITK_AS_GIVEN_MAX_MN).
    "splitk": (Case(128, 128, 65536), Case(64, 64, 65536), Case(256, 256, 32768),
               Case(128, 128, 16384), Case(128, 128, 65535)),
    # Batches (bmm): attention's scores q @ k^T (heads x seq x seq over the head dimension,
    # K-major keys) and attn @ V, at Llama-7B's 32 heads of 128 and smaller; a batch of
    # square products, one of 16-byte rows off a 32-byte sector (1000), one of 384
    # columns (3 x 128: 256-wide tiles would cover 512; batched.TALL), and three over a K
    # of 256-1024 (16-bit ones run ping-pong: dispatch.PINGPONG).
    "batched": (Case(2048, 2048, 128, "nt", 32), Case(2048, 128, 2048, "nn", 32),
                Case(4096, 4096, 128, "nt", 8), Case(1024, 1024, 64, "nt", 16),
                Case(2048, 2048, 2048, "nn", 8), Case(1000, 1000, 1000, "nn", 32),
                Case(2048, 384, 2048, "nn", 16), Case(1024, 1024, 512, "nn", 16),
                Case(2048, 2048, 1024, "nn", 8), Case(2048, 2048, 256, "nn", 8)),
    # Mid-size outputs (a few waves of tiles or fewer) over a long K: too large for split-K,
    # too small for the tiles that feed Hopper best (dispatch.K_MAJOR_MID_MIN_K).
    "mid": (Case(768, 768, 4096), Case(1024, 1024, 2048), Case(1024, 1024, 8192),
            Case(1536, 1536, 4096), Case(1024, 4096, 4096), Case(4096, 256, 8192),
            Case(4096, 1024, 4096, "nt")),
    # Large outputs over a short K (a model of hidden size 128-1024, a low-rank adapter's
    # up-projection, or a K-sliced layer): each tile's epilogue weighs against few K steps
    # (16-bit ones run ping-pong: dispatch.PINGPONG; K = 64, an adapter of rank 64, on fast
    # memory only: PINGPONG_FAST_MEMORY_MIN_K).
    "shortk": (Case(4096, 4096, 1024, "nt"), Case(8192, 8192, 1024, "nt"),
               Case(8192, 4096, 512), Case(8192, 8192, 256, "nt"), Case(4096, 4096, 256),
               Case(8192, 8192, 128, "nt"), Case(8192, 8192, 64, "nt")),
}

# --quick: a few shapes that still show the ladder, every precision, and an odd size.
QUICK = (Case(4096, 4096, 4096), Case(8192, 8192, 8192), Case(4097, 4097, 4097),
         Case(16, 8192, 8192, "nt"))

# Without a GPU, the Triton interpreter runs these (seconds each).
INTERPRETER = (Case(64, 64, 64), Case(33, 65, 47), Case(17, 40, 31, "nt"),
               Case(48, 24, 40, "pad"))


def cases(suite_names) -> list[Case]:
    """The union of the named suites, in order, without repeats."""
    out: list[Case] = []
    for name in suite_names:
        if name not in SUITES:
            raise ValueError(f"unknown suite {name!r}; choose from {sorted(SUITES)}")
        out += [c for c in SUITES[name] if c not in out]
    return out
