"""Shared memory each persistent-kernel config needs on sm_90, read from triton.compile
(no GPU needed): the figures behind configs.PERSISTENT_SMEM.

    python3 perf/smem_probe.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from triton_gemm import configs  # noqa: E402
from triton_gemm.kernels.persistent import _persistent_kernel  # noqa: E402

SM90 = GPUTarget("cuda", 90, 32)
INT_ARGS = ("M", "N", "K", "stride_cm", "stride_dm", "stride_dn", "M_BUCKET", "N_BUCKET",
            "K_BUCKET", "LAYOUT")


def compile_config(dtype: str, precision: str, tile, has_d: bool, c_tma: bool = True,
                   split: bool = False, half_tail: bool = False, a_m_major: bool = False,
                   d_row: bool = False):
    """Compile one config for sm_90 the way the GPU specialises it: host TMA descriptors
    with the config's block shapes (A row-major, or M-major with a_m_major; B K-major; C's
    without c_tma, the remainders' without split and the tail's without half_tail are
    None), pointers and sizes divisible by 16 (stride_cm not, for a pointer-stored C), and
    (the costly case) a D with unit column stride, one row broadcast with d_row (a bias,
    D_ROW). Returns triton's compiled kernel."""
    _, bm, bn, bk, warps, stages, subtile, *ws = tile
    sig = {"c_ptr": f"*{dtype}", "d_ptr": f"*{dtype}",
           "a_desc": f"tensordesc<{dtype}[{bk}, {bm}]>" if a_m_major
           else f"tensordesc<{dtype}[{bm}, {bk}]>",
           "b_desc": f"tensordesc<{dtype}[{bn}, {bk}]>",
           "c_desc": f"tensordesc<{dtype}[{bm}, {bn // 2 if subtile else bn}]>",
           "alo_desc": f"tensordesc<{dtype}[{bm}, {bk}]>",
           "blo_desc": f"tensordesc<{dtype}[{bn}, {bk}]>",
           "bt_desc": f"tensordesc<{dtype}[{bn // 2}, {bk}]>",
           "ct_desc": f"tensordesc<{dtype}[{bm}, {bn // 4 if subtile else bn // 2}]>"}
    sig.update({name: "i32" for name in INT_ARGS})
    sig.update(alpha="fp32", beta="fp32")
    const = dict(PRECISION=precision, HAS_D=has_d, D_ROW=has_d and d_row, A_M_MAJOR=a_m_major,
                 B_K_MAJOR=True, UPCAST=False, NUM_SMS=132, C_TMA=c_tma, ACTIVATION=0, SPLIT=split,
                 HI_FLUSH_K=64 if split else 0, HALF_TAIL=half_tail,
                 BM=bm, BN=bn, BK=bk, GROUP_M=configs.GROUP_M, EPILOGUE_SUBTILE=subtile,
                 WARP_SPECIALIZE=bool(ws and ws[0]))
    if has_d:
        const["stride_dn"] = 1
    if not c_tma:
        const["c_desc"] = None
        const["ct_desc"] = None
    if not half_tail:
        const.update(bt_desc=None, ct_desc=None)
    if not split:
        const.update(alo_desc=None, blo_desc=None)
    order = list(_persistent_kernel.arg_names)
    signature = {name: ("constexpr" if name in const else sig[name]) for name in order}
    divisible = [n for n in order if n not in const and not n.endswith("_desc")
                 and n not in ("stride_dm", "alpha", "beta") + (() if c_tma else ("stride_cm",))]
    src = ASTSource(_persistent_kernel, signature,
                    constexprs={(order.index(k),): v for k, v in const.items()},
                    attrs={(order.index(n),): [["tt.divisibility", 16]] for n in divisible})
    return triton.compile(src, target=SM90, options={"num_warps": warps, "num_stages": stages})


def shared_bytes(*args, **kwargs) -> int:
    """Shared memory of compile_config(*args, **kwargs), bytes."""
    return compile_config(*args, **kwargs).metadata.shared


def main() -> int:
    # (dtype, precision, split, A M-major): 16-bit A may come M-major (its smem tile
    # transposed; 32-64 bytes more on some tiles).
    half = [("fp16", "tf32", False, False), ("fp16", "tf32", False, True)]
    cases = {"half": half, "half_mid": half,
             "tf32": [("fp32", "tf32", False, False), ("fp32", "tf32x3", False, False)],
             "tf32_mid": [("fp32", "tf32", False, False)],
             "split": [("fp32", "tf32x3", True, False)]}
    print("name: ((TMA-stored C: bytes without D, with D, with a row D), (pointer-stored C: "
          "...))")
    epilogues = ((False, False), (True, False), (True, True))  # (has_d, d_row)
    for family, variants in cases.items():
        for tile in configs.persistent_tiles(family):
            sizes = tuple(tuple(max(shared_bytes(dt, p, tile, has_d, c_tma, split,
                                                 a_m_major=a_m, d_row=d_row)
                                    for dt, p, split, a_m in variants)
                                for has_d, d_row in epilogues)
                          for c_tma in (True, False))
            print(f'    "{tile[0]}": {sizes},')
    return 0


if __name__ == "__main__":
    sys.exit(main())
