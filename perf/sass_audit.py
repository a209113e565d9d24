"""Offline audit of triton_gemm's machine code (no GPU needed): every tensor-core config of
the persistent kernel and of the plain kernel, with each epilogue and operand variant the
dispatcher launches, compiled by triton for the H100 (sm_90a) the way the GPU specialises
it, or the plain kernel's for the A100 (sm_80), then read back:

- shared memory (triton's metadata): the persistent kernel's against the table
  configs.PERSISTENT_SMEM that its tuner prunes by (a stale entry lets a config launch
  that does not fit); the plain kernel's against the GPU's opt-in limit;
- registers and spill bytes (ptxas -v on triton's PTX, with triton's own ptxas flags);
- the tensor-core instructions in the SASS (cuobjdump): HGMMA is Hopper's wgmma, HMMA the
  older mma.sync at about half its rate. wgmma works on 64 rows per warpgroup, so plain
  tiles under 64 rows (the decode-style 16 and 32) take HMMA;
- ptxas warnings (e.g. C7515: wgmmas serialised).

    python3 perf/sass_audit.py [--arch sm_90a|sm_80] [--kernel persistent,plain]
                               [--family half,tf32] [--tile h_128x256x64,...] [--check]
                               [--table] [--out DIR]

Writes <arch>.csv and <arch>.md to DIR (default perf/results/sass-offline/).
--check exits 1 when a persistent config's shared memory differs from the table, a plain
config does not fit the GPU, on sm_90a a config of 64 rows or more issues anything but
HGMMA, a config issues no tensor-core instruction, or ptxas serialises wgmmas; --table
prints configs.PERSISTENT_SMEM as measured (after a kernel change, paste it over the old
one).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

import pandas as pd
import triton
from tqdm import tqdm
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from triton_gemm import configs  # noqa: E402
from triton_gemm.kernels.matmul import _matmul_kernel  # noqa: E402
from triton_gemm.kernels.persistent import (CLAMP_PLANES, HALF_TAIL_FAMILIES,  # noqa: E402
                                            HALF_TAIL_MIN_BN, PLANE_SHIFT_BYTES,
                                            _persistent_kernel)



class Arch(NamedTuple):
    target: GPUTarget
    smem: int          # bytes of shared memory per block (opt-in)
    wgmma: bool        # Hopper's warpgroup MMA (HGMMA) exists
    kernels: tuple     # the kernels that compile for it (TMA needs sm_90)


ARCHS = {"sm_90a": Arch(GPUTarget("cuda", 90, 32), 232448, True, ("persistent", "plain")),
         "sm_80": Arch(GPUTarget("cuda", 80, 32), 166912, False, ("plain",))}
INT_ARGS = ("M", "N", "K", "stride_cm", "stride_dm", "stride_dn", "M_BUCKET", "N_BUCKET",
            "K_BUCKET", "LAYOUT")


def _compile(kernel, signature: dict, const: dict, divisible, warps: int, stages: int,
             arch: str = "sm_90a"):
    """triton.compile of kernel for arch: signature maps the non-constexpr arguments to
    their types, const the constexprs (and arguments fixed as constants), divisible the
    arguments specialised as multiples of 16."""
    order = list(kernel.arg_names)
    sig = {name: ("constexpr" if name in const else signature[name]) for name in order}
    src = ASTSource(kernel, sig, constexprs={(order.index(k),): v for k, v in const.items()},
                    attrs={(order.index(n),): [["tt.divisibility", 16]] for n in divisible})
    return triton.compile(src, target=ARCHS[arch].target,
                          options={"num_warps": warps, "num_stages": stages})


def compile_config(dtype: str, precision: str, tile, has_d: bool, c_tma: bool = True,
                   split: bool = False, half_tail: bool = False, a_m_major: bool = False,
                   d_row: bool = False, planes: bool = False):
    """Compile one config for sm_90 the way the GPU specialises it: host TMA descriptors
    with the config's block shapes (A row-major, M-major with a_m_major, or read as two
    planes of rows with planes, its C's descriptor too: persistent.a_planes; B K-major; C's
    without c_tma, the remainders' without split and the tail's without half_tail are
    None), pointers and sizes divisible by 16 (stride_cm not, for a pointer-stored C), and
    (the costly case) a D with unit column stride, one row broadcast with d_row (a bias,
    D_ROW). Returns triton's compiled kernel."""
    _, bm, bn, bk, warps, stages, subtile, *ws = tile
    sig = {"c_ptr": f"*{dtype}", "d_ptr": f"*{dtype}",
           "a_desc": f"tensordesc<{dtype}[{bk}, {bm}]>" if a_m_major
           else f"tensordesc<{dtype}[{'1, ' * planes}{bm}, {bk}]>",
           "b_desc": f"tensordesc<{dtype}[{bn}, {bk}]>",
           "c_desc": f"tensordesc<{dtype}[{'1, ' * planes}{bm}, {bn // 2 if subtile else bn}]>",
           "alo_desc": f"tensordesc<{dtype}[{bm}, {bk}]>",
           "blo_desc": f"tensordesc<{dtype}[{bn}, {bk}]>",
           "bt_desc": f"tensordesc<{dtype}[{bn // 2}, {bk}]>",
           "ct_desc": f"tensordesc<{dtype}[{bm}, {bn // 4 if subtile else bn // 2}]>"}
    sig.update({name: "i32" for name in INT_ARGS})
    sig.update(alpha="fp32", beta="fp32")
    const = dict(PRECISION=precision, HAS_D=has_d, D_ROW=has_d and d_row, A_M_MAJOR=a_m_major,
                 B_K_MAJOR=True, UPCAST=False, NUM_SMS=132, C_TMA=c_tma, ACTIVATION=0, SPLIT=split,
                 HI_FLUSH_K=64 if split else 0, HALF_TAIL=half_tail,
                 A_PLANES=2 if planes else 1, INT64=False,
                 K_SHIFT=(PLANE_SHIFT_BYTES // (4 if dtype == "fp32" else 2)
                          if planes else 0),
                 BM=bm, BN=bn, BK=bk, GROUP_M=configs.GROUP_M, EPILOGUE_SUBTILE=subtile,
                 WARP_SPECIALIZE=bool(ws and ws[0]), DEPENDENT=True, TRIGGER=False,
                 CLAMP=not a_m_major and (CLAMP_PLANES or not planes))
    if has_d:
        const["stride_dn"] = 1
    if not c_tma:
        const["c_desc"] = None
        const["ct_desc"] = None
    if not half_tail:
        const.update(bt_desc=None, ct_desc=None)
    if not split:
        const.update(alo_desc=None, blo_desc=None)
    divisible = [n for n in _persistent_kernel.arg_names if n not in const
                 and not n.endswith("_desc")
                 and n not in ("stride_dm", "alpha", "beta") + (() if c_tma else ("stride_cm",))]
    return _compile(_persistent_kernel, sig, const, divisible, warps, stages)


def compile_plain(dtype: str, precision: str, config, b_k_major: bool, has_d: bool,
                  arch: str = "sm_90a"):
    """Compile one plain-kernel config for arch as the GPU specialises aligned operands: A
    K-contiguous, B K-contiguous (b_k_major) or N-contiguous, C row-major, D (has_d) a row
    of unit column stride, sizes and other strides multiples of 16, no VEC hint."""
    unit = ["stride_ak", "stride_cn", "stride_dn", "stride_bk" if b_k_major else "stride_bn"]
    const = dict(PRECISION=precision, HAS_D=has_d, UPCAST=False, INT64=False, ACTIVATION=0,
                 VEC=0, A_M_MAJOR=False, B_K_MAJOR=b_k_major, DEPENDENT=arch == "sm_90a",
                 BESIDE=False,
                 **config.kwargs, **dict.fromkeys(unit, 1))
    sig = {name: f"*{dtype}" if name.endswith("_ptr") else "fp32" if name in ("alpha", "beta")
           else "i32" for name in _matmul_kernel.arg_names}
    divisible = [n for n in _matmul_kernel.arg_names if n not in const and sig[n] != "fp32"
                 and n not in ("stride_db", "stride_dm")]  # a row D: 0
    return _compile(_matmul_kernel, sig, const, divisible, config.num_warps, config.num_stages,
                    arch)


# (dtype, precision, split, A layout) each persistent family's launches compile. 16-bit
# operands pass "tf32", which tl.dot ignores for them (common.dot_precision); A comes
# M-major ("m") only for them, and bf16 and fp16 take the same shared memory, so bf16's
# M-major A and planes of rows (persistent.a_planes) are left out.
_HALF = [("fp16", "tf32", False, "row"), ("fp16", "tf32", False, "m"),
         ("bf16", "tf32", False, "row"), ("fp16", "tf32", False, "planes")]
VARIANTS = {
    "half": _HALF,
    "half_mid": _HALF,
    "tf32": [("fp32", "tf32", False, "row"), ("fp32", "tf32x3", False, "row"),
             ("fp32", "tf32", False, "planes")],
    "tf32_mid": [("fp32", "tf32", False, "row"), ("fp32", "tf32", False, "planes")],
    "split": [("fp32", "tf32x3", True, "row")],
}
EPILOGUES = {"none": (False, False), "d": (True, False), "d_row": (True, True)}
# The plain kernel's tensor-core families (simt is FMA) and their (dtype, precision); bf16
# compiles as fp16 does.
PLAIN_VARIANTS = {"half": [("fp16", "tf32")], "tf32": [("fp32", "tf32"), ("fp32", "tf32x3")]}
KERNELS = ("persistent", "plain")
_SERIALISED = re.compile(r"C75\d\d.*wgmma.*serializ", re.IGNORECASE)
# (kernel, tile, dtype) whose wgmmas ptxas serialises (C7514 / C7515) and that --check lets
# pass, known since ptxas_report read ptxas's "info" lines (forty-fifth session; it had kept
# only lines saying "warning", these come as info, so no row ever showed them). Plain-kernel
# tiles, K-major B (tf32: 128x128x32 on 8 warps, 194 registers, and 256x128x32; the seed
# ladder's warp tile) and h_128x256x64 with a D (255 registers, spilling): on Hopper the
# persistent kernels take the single products these tiles would; the plain kernel runs
# batched products and tunes among them. The 3xTF32 split kernel's tiles that are not
# warp-specialised (C7514: the flush every HI_FLUSH_K reads the hi accumulator between
# wgmmas); its warp-specialised ps_128x128x32_sub_ws, which large products tune to (1201 us
# against 1286 unspecialised at 4096^3, configs), is not serialised. The plain tf32 tiles
# cost (H100, batched tf32 with a K-major B, as q @ k^T, CUDA-graph time after the flush,
# us, a probe, forty-fifth session): 8 x 1024^3 t_128x128x32 88.4 against 71.2 on its 4-warp
# twin, t_256x128x32 77.7, seed warp tile 139.1; the tuner took t_128x256x32 (67.3; cuBLAS
# 64.8), as at 16 x 2048x2048x128 (151.1; 187.0 / 170.8 / 169.8 / 207.9; cuBLAS 119.3) and 4 x
# 2048^3 (220.8; 306.0 / 247.8 / 261.9 / 500.2; cuBLAS 203.4). Any other serialised kernel
# fails the check.
KNOWN_SERIALISED = {("plain", "h_128x256x64", "fp16"), ("plain", "t_128x128x32", "fp32"),
                    ("plain", "t_256x128x32", "fp32"),
                    ("plain", "seed_warp_tile_double_buffer", "fp32"),
                    ("persistent", "ps_128x128x32_sub", "fp32"),
                    ("persistent", "ps_128x64x32", "fp32"),
                    ("persistent", "ps_128x64x16", "fp32")}


def _shown(dtype: str, precision: str) -> str:
    """The precision a row names: "half" for 16-bit operands, as dispatch does."""
    return precision if dtype == "fp32" else "half"


def persistent_cases(families):
    """One dict per compile: every tile x variant x epilogue x C store x half-width tail
    (the tail only where the family runs one: HALF_TAIL_FAMILIES, BN >= HALF_TAIL_MIN_BN;
    never with planes of rows, nor those with a matrix D)."""
    for family in families:
        for tile in configs.persistent_tiles(family):
            for dtype, precision, split, a_layout in VARIANTS[family]:
                tails = (False, True) if (family in HALF_TAIL_FAMILIES and a_layout != "planes"
                                          and tile[2] >= HALF_TAIL_MIN_BN.value) else (False,)
                for epilogue, (has_d, d_row) in EPILOGUES.items():
                    if a_layout == "planes" and has_d and not d_row:
                        continue  # a matrix D runs A as one plane (persistent.a_planes)
                    for c_tma in (True, False):
                        for half_tail in tails:
                            args = (dtype, precision, tile, has_d, c_tma, split, half_tail,
                                    a_layout == "m", d_row, a_layout == "planes")
                            yield dict(kernel="persistent", family=family, tile=tile[0],
                                       bm=tile[1], dtype=dtype,
                                       precision=_shown(dtype, precision),
                                       a_layout=a_layout, b_layout="k", epilogue=epilogue,
                                       c_tma=c_tma, half_tail=half_tail,
                                       _compile=lambda args=args: compile_config(*args))


def plain_cases(families, arch: str):
    """One dict per compile: every plain config x variant x B layout x (no D, a D)."""
    for family in families:
        for config in configs.configs(family):
            for dtype, precision in PLAIN_VARIANTS[family]:
                for b_k_major in (False, True):
                    for has_d in (False, True):
                        args = (dtype, precision, config, b_k_major, has_d, arch)
                        yield dict(kernel="plain", family=family,
                                   tile=configs.config_name(config, family),
                                   bm=config.kwargs["BM"], dtype=dtype,
                                   precision=_shown(dtype, precision),
                                   a_layout="row", b_layout="k" if b_k_major else "row",
                                   epilogue="d" if has_d else "none", c_tma=False,
                                   half_tail=False, _compile=lambda args=args: compile_plain(*args))


def ptxas_report(ptx: str, workdir: Path, arch: str, maxnreg: int | None = None) -> dict:
    """Registers, spill bytes and warnings of ptxas -v on ptx, as triton invokes it
    (maxnreg: the kernel's register cap, triton's --maxrregcount)."""
    src = workdir / "kernel.ptx"
    src.write_text(ptx)
    cap = [f"--maxrregcount={maxnreg}"] if maxnreg else []
    done = subprocess.run([triton.knobs.nvidia.ptxas.path, "-lineinfo", "-v", *cap,
                           f"--gpu-name={arch}", str(src), "-o", str(workdir / "kernel.o")],
                          capture_output=True, text=True, check=True)
    log = done.stdout + done.stderr
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    return {"registers": int(re.search(r"Used (\d+) registers", log).group(1)),
            "spill_stores": int(spills.group(1)), "spill_loads": int(spills.group(2)),
            "warnings": notes(log)}


def notes(log: str) -> str:
    """ptxas -v's warnings and its notes of serialised wgmmas (C7515, an "info" line), one
    string."""
    return "; ".join(line.strip() for line in log.splitlines()
                     if "warning" in line.lower() or _SERIALISED.search(line))


def mma_instructions(cubin: bytes, workdir: Path) -> str:
    """The distinct tensor-core opcodes of a cubin's SASS, e.g. 'HGMMA.64x256x16.F32'."""
    return " ".join(sorted(set(re.findall(r"\b[HI]G?MMA\.[\w.]+",
                                          sass_text(cubin, workdir)))))


def sass_text(cubin: bytes, workdir: Path) -> str:
    """A cubin's SASS, as cuobjdump prints it."""
    path = workdir / "kernel.cubin"
    path.write_bytes(cubin)
    return subprocess.run([triton.knobs.nvidia.cuobjdump.path, "-sass", str(path)],
                          capture_output=True, text=True, check=True).stdout


def compile_gluon(kernel, signature: dict, constexprs: dict, options: dict,
                  arch: str = "sm_90a"):
    """triton.compile of a Gluon kernel for arch: signature maps the non-constexpr
    arguments to their types (a host TMA descriptor as tensordesc<dtype[block],layout>);
    pointer and integer arguments specialised as multiples of 16."""
    from triton.experimental.gluon._runtime import GluonASTSource
    order = list(kernel.arg_names)
    src = GluonASTSource(
        kernel, {name: "constexpr" if name in constexprs else signature[name] for name in order},
        constexprs={(order.index(name),): value for name, value in constexprs.items()},
        attrs={(order.index(name),): [["tt.divisibility", 16]] for name in order
               if name in signature and not signature[name].startswith("tensordesc")})
    return triton.compile(src, target=ARCHS[arch].target, options=options)


_HGMMA = re.compile(r"HGMMA\.\S+ R\d+, R(\d+),")
_DEST = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][\w.]*) R(\d+)\b")


def wgmma_register_hazards(sass: str) -> list:
    """Instructions that write a register a register-fed wgmma (HGMMA with its A operand in
    R_n .. R_n+3) may still be reading: issued after the HGMMA and before a WARPGROUP.DEPBAR
    retires its group (gsb0 ends a group; DEPBAR.LE N leaves the newest N running). Read
    in program order, which for a loop body is the order it runs; empty when none."""
    running, group, found = [], set(), []
    for line in sass.splitlines():
        hgmma = _HGMMA.search(line)
        if hgmma:
            group |= set(range(int(hgmma.group(1)), int(hgmma.group(1)) + 4))
            if "gsb0" in line:
                running.append(group)
                group = set()
            continue
        depbar = re.search(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x([0-9a-f]+)", line)
        if depbar:
            keep = int(depbar.group(1), 16)
            running = running[len(running) - keep:] if keep else []
            continue
        dest = _DEST.match(line)
        if dest and not dest.group(1).startswith(("ST", "BAR", "RED")):
            width = {"64": 2, "128": 4}.get(dest.group(1).rsplit(".", 1)[-1], 1)
            written = set(range(int(dest.group(2)), int(dest.group(2)) + width))
            if any(written & g for g in running + [group]):
                found.append(" ".join(re.sub(r"/\*\s*0x[0-9a-f]+\s*\*/", "", line).split()))
    return found


def _gluon_descriptor(block: list, dtype: str, batched: bool) -> str:
    """A Gluon kernel's host TMA descriptor argument type for an offline compile: dtype
    (fp32, fp16, bf16) boxes of block, with a product dimension of 1 first when batched,
    in the NVMMA shared layout the launches give it (register_fed._descriptor)."""
    from triton.experimental.gluon import language as gl
    gl_dtype = {"fp32": gl.float32, "fp16": gl.float16, "bf16": gl.bfloat16}[dtype]
    block = [1] * batched + list(block)
    layout = gl.NVMMASharedLayout.get_default_for(block, gl_dtype)
    return f"tensordesc<{dtype}[{', '.join(map(str, block))}],{layout!r}>"


def register_fed_report(out_t: bool, arch: str = "sm_90a", ctas: int = 1,
                        x_smem: bool = False, dtype: str = "fp32",
                        batched: bool = False, rows: bool = False) -> dict:
    """kernels/register_fed.py compiled for arch (C^T stored with out_t, else C; ctas CTAs
    a cluster; x_smem: X K-major in shared memory, its nt mode; dtype: operands' and
    output's, fp32 (tf32) or with x_smem fp16 / bf16; batched: its 3-D descriptors, a batch
    of products, as bmm launches it; rows: rows_2d's tile, ROWS_BQ Y rows in ROWS_STAGES
    slots): shared memory, ptxas's registers,
    spills and warnings under the kernel's register cap, its tensor-core opcodes,
    wgmma_register_hazards of its SASS, and with clusters its PTX's multicast loads, remote
    arrives and whether its shared memory lies where the kernel's PTX strings address it
    (register_fed._check_offsets)."""
    from triton_gemm.kernels import register_fed as rf
    elem = 4 if dtype == "fp32" else 2
    bq, stages = (rf.ROWS_BQ, rf.ROWS_STAGES) if rows else (rf.BQ, rf.STAGES)
    constexprs = {**rf.kernel_constexprs(out_t, ctas, x_smem, elem, bq, stages),
                  "BATCHED": batched}
    bk = constexprs["BK"]
    y_block = [bq // ctas, bk]
    x_block = [rf.BP, bk] if x_smem else [bk, rf.BP]
    c_block = [bq // 8, rf.BP] if out_t else [rf.BP, bq // 8]

    def desc(block):
        return _gluon_descriptor(block, dtype, batched)
    signature = {"x_desc": desc(x_block), "y_desc": desc(y_block), "c_desc": desc(c_block),
                 "P": "i32", "Q": "i32", "K": "i32", "BATCH": "i32"}
    kernel = compile_gluon(rf._register_fed_kernel, signature, constexprs,
                           {"num_warps": rf.WARPS, "maxnreg": rf.MAX_REGISTERS}, arch)
    with tempfile.TemporaryDirectory() as tmp:
        sass = sass_text(kernel.asm["cubin"], Path(tmp))
        report = ptxas_report(kernel.asm["ptx"], Path(tmp), arch, rf.MAX_REGISTERS)
    ptx = kernel.asm["ptx"]
    extra = {}
    if ctas > 1:
        try:
            rf._check_offsets(ptx, ctas, elem, bq, stages)
            extra["offsets_ok"] = True
        except RuntimeError:
            extra["offsets_ok"] = False
        extra["multicast_loads"] = ptx.count(".multicast::cluster [")
        extra["remote_arrives"] = ptx.count("mbarrier.arrive.shared::cluster.b64")
        extra["gpu_membars"] = sass.count("MEMBAR.ALL.GPU")
    return {"shared": kernel.metadata.shared, **report,
            "mma": " ".join(sorted(set(re.findall(r"\b[HI]G?MMA\.[\w.]+", sass)))),
            "a_registers": sorted({int(r) for r in _HGMMA.findall(sass)}),
            "hazards": wgmma_register_hazards(sass), **extra}


def audit(kernels, families, tiles=None, arch: str = "sm_90a") -> pd.DataFrame:
    """One row per compile of the given kernels' families for arch (families a kernel lacks
    are skipped), only the named tiles if tiles is given."""
    if set(kernels) - set(ARCHS[arch].kernels):
        raise ValueError(f"{arch} compiles only the {', '.join(ARCHS[arch].kernels)} kernel")
    todo = []
    if "persistent" in kernels:
        todo += persistent_cases([f for f in families if f in VARIANTS])
    if "plain" in kernels:
        todo += plain_cases([f for f in families if f in PLAIN_VARIANTS], arch)
    todo = [case for case in todo if tiles is None or case["tile"] in tiles]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in tqdm(todo, desc=f"compiling for {arch}", disable=None):  # no bar off a tty
            kernel = case.pop("_compile")()
            rows.append({"arch": arch, **case, "shared": kernel.metadata.shared,
                         **ptxas_report(kernel.asm["ptx"], Path(tmp), arch),
                         "mma": mma_instructions(kernel.asm["cubin"], Path(tmp))})
    return pd.DataFrame(rows)


_TABLE_KEYS = ["tile", "c_tma", "epilogue"]


def measured_smem(df: pd.DataFrame) -> pd.Series:
    """Shared bytes per persistent tile, C store and epilogue as configs.PERSISTENT_SMEM
    holds them: the largest variant's, without the half-width tail (which must fit within
    it)."""
    rows = df[(df.kernel == "persistent") & ~df.half_tail]
    return rows.groupby(_TABLE_KEYS)["shared"].max()


def smem_table(df: pd.DataFrame) -> str:
    """configs.PERSISTENT_SMEM's entries as measured, in its format."""
    measured = measured_smem(df)
    lines = []
    for tile in dict.fromkeys(df.tile[df.kernel == "persistent"]):
        sizes = tuple(tuple(int(measured[tile, c_tma, epilogue]) for epilogue in EPILOGUES)
                      for c_tma in (True, False))
        lines.append(f'    "{tile}": {sizes},')
    return "\n".join(lines)


def problems(df: pd.DataFrame) -> list[str]:
    """What --check fails on (see the module docstring)."""
    found = []
    measured = measured_smem(df)
    for (tile, c_tma, epilogue), shared in measured.items():
        entry = configs.PERSISTENT_SMEM[tile][int(not c_tma)][list(EPILOGUES).index(epilogue)]
        if entry != shared:
            found.append(f"{tile} C {'TMA' if c_tma else 'pointer'} D {epilogue}: "
                         f"{shared} bytes of shared memory, configs.PERSISTENT_SMEM says {entry}")
    tails = df[(df.kernel == "persistent") & df.half_tail]
    with_tail = tails.merge(measured.rename("table"), on=_TABLE_KEYS)
    for row in with_tail[with_tail.shared > with_tail.table].itertuples():
        found.append(f"{row.tile} with its half-width tail takes {row.shared} bytes, more than "
                     f"the {row.table} it is pruned by")
    for row in df.itertuples():
        what = (f"{row.kernel} {row.tile} {row.dtype} {row.precision} B {row.b_layout} "
                f"D {row.epilogue}")
        arch = ARCHS[row.arch]
        if row.kernel == "plain" and row.shared > arch.smem:
            found.append(f"{what}: {row.shared} bytes of shared memory, over {row.arch}'s "
                         f"{arch.smem}")
        if (arch.wgmma and row.bm >= 64
                and ("HGMMA" not in row.mma or "HMMA" in row.mma)):
            found.append(f"{what}: tensor-core instructions {row.mma or 'none'}, want HGMMA only")
        elif "MMA" not in row.mma:
            found.append(f"{what}: no tensor-core instruction")
        if (_SERIALISED.search(row.warnings)
                and (row.kernel, row.tile, row.dtype) not in KNOWN_SERIALISED):
            found.append(f"{what}: {row.warnings}")
    return found


def markdown(df: pd.DataFrame) -> str:
    """One row per kernel, tile and variant: the worst case over its epilogues, C stores,
    B layouts and tails, and which of those cases spill."""
    keys = ["kernel", "family", "tile", "dtype", "precision", "a_layout"]

    def spilling(stores: pd.Series) -> str:
        cases = df.loc[stores.index]
        return ", ".join(
            "/".join([row.epilogue] + (["B row"] if row.b_layout == "row" else [])
                     + (["ptr C"] if row.kernel == "persistent" and not row.c_tma else [])
                     + (["tail"] if row.half_tail else []))
            for row in cases[stores > 0].itertuples())

    summary = df.groupby(keys, sort=False).agg(
        shared_max=("shared", "max"), registers_max=("registers", "max"),
        spill_max=("spill_stores", "max"), spilling=("spill_stores", spilling),
        mma=("mma", lambda s: " ".join(sorted(set(" ".join(s).split())))),
        warnings=("warnings", lambda s: "; ".join(sorted({w for w in s if w}))))
    arch = df.arch.iloc[0]
    return (f"# triton_gemm's tensor-core kernels on {arch}, compiled offline\n\n"
            f"triton {triton.__version__}, ptxas {triton.knobs.nvidia.ptxas.version}, "
            f"`python3 perf/sass_audit.py --arch {arch}`. Each row is the worst case over a "
            "config's epilogues (none, a D, a one-row D), C stores (persistent: TMA or "
            "pointer), B layouts (plain: row-major or K-major) and half-width tail; "
            "`spilling` names the cases that spill registers.\n\n"
            + summary.reset_index().to_markdown(index=False) + "\n")


def _csv_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="perf/sass_audit.py",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="sm_90a", choices=list(ARCHS))
    parser.add_argument("--kernel", default="",
                        help=f"comma-separated kernels, of {', '.join(KERNELS)} (default: "
                             "those the arch compiles)")
    parser.add_argument("--family", default=",".join(dict.fromkeys([*VARIANTS, *PLAIN_VARIANTS])),
                        help="comma-separated config families (default: all)")
    parser.add_argument("--tile", default="",
                        help="comma-separated config names, e.g. h_128x256x64 (default: all)")
    parser.add_argument("--check", action="store_true", help="exit 1 on a problem found")
    parser.add_argument("--table", action="store_true",
                        help="print configs.PERSISTENT_SMEM's entries as measured")
    parser.add_argument("--out", type=Path, default=ROOT / "perf" / "results" / "sass-offline")
    args = parser.parse_args(argv)
    arch = ARCHS[args.arch]
    kernels = _csv_list(args.kernel) or list(arch.kernels)
    families = _csv_list(args.family)
    unknown = sorted(set(kernels) - set(arch.kernels)) + sorted(
        set(families) - set(VARIANTS) - set(PLAIN_VARIANTS))
    if unknown:
        parser.error(f"unknown kernel or family for {args.arch}: {', '.join(unknown)}")
    df = audit(kernels, families, set(_csv_list(args.tile)) or None, args.arch)
    if df.empty:
        parser.error("no config of these kernels and families has such a name")
    args.out.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out / f"{args.arch}.csv", index=False)
    (args.out / f"{args.arch}.md").write_text(markdown(df))
    if args.table:
        print(smem_table(df))
    found = problems(df)
    print("\n".join(found) or "no problems found", f"\nwritten to {args.out}")
    return 1 if found and args.check else 0


if __name__ == "__main__":
    sys.exit(main())


def pingpong_report(a_t: bool = False, b_t: bool = True, dtype: str = "fp16",
                    batched: bool = False, tile=None, has_d: bool = False,
                    activation: int = 0, arch: str = "sm_90a") -> dict:
    """kernels/pingpong.py compiled for arch (A stored M-major with a_t, B K-major with b_t;
    batched: 3-D descriptors; tile: (BM, BN, BK, STAGES, CHUNKS), default the dtype's;
    has_d: a bias row in the epilogue; activation: an epilogue.ACTIVATIONS code): shared
    memory, ptxas's registers, spills and warnings under the kernel's register cap, and its
    tensor-core opcodes."""
    from triton_gemm.kernels import pingpong as pp
    bm, bn, bk, stages, chunks = tile or (pp.TF32_TILE if dtype == "fp32" else pp.TILE)

    def desc(block):
        return _gluon_descriptor(block, dtype, batched)
    signature = {"a_desc": desc([bk, bm] if a_t else [bm, bk]),
                 "b_desc": desc([bn, bk] if b_t else [bk, bn]),
                 "c_desc": desc([bm, bn // chunks]), "d_ptr": f"*{dtype}", "M": "i32",
                 "N": "i32", "K": "i32", "BATCH": "i32", "stride_db": "i32",
                 "stride_dn": "i32", "alpha": "fp32", "beta": "fp32"}
    constexprs = {"BM": bm, "BN": bn, "BK": bk, "STAGES": stages, "GROUP_M": pp.GROUP_M,
                  "A_T": a_t, "B_T": b_t, "BATCHED": batched, "HAS_D": has_d,
                  "ACTIVATION": activation, "LOADER_REGS": pp.LOADER_REGS,
                  "MMA_REGS": pp.MMA_REGS}
    kernel = compile_gluon(pp._pingpong_kernel, signature, constexprs,
                           {"num_warps": pp.WARPS, "maxnreg": pp.MAX_REGISTERS}, arch)
    with tempfile.TemporaryDirectory() as tmp:
        sass = sass_text(kernel.asm["cubin"], Path(tmp))
        report = ptxas_report(kernel.asm["ptx"], Path(tmp), arch, pp.MAX_REGISTERS)
    return {"shared": kernel.metadata.shared, **report,
            "mma": " ".join(sorted(set(re.findall(r"\b[HI]G?MMA\.[\w.]+", sass)))),
            "setmaxnreg": sorted(set(re.findall(r"setmaxnreg\.\w+\.sync\.aligned\.u32\s+(\d+)",
                                                kernel.asm["ptx"])))}
