"""Time chosen configs of the persistent, split-K, plain and GEMV kernels on a shape, beside cuBLAS
and the library's own choice: the measurement behind new tiles and dispatch thresholds.

    python perf/tile_probe.py --case 128,4096,4096,nt --precision fp16
    python perf/tile_probe.py --case 128,4096,4096,nt --only persistent
    python perf/tile_probe.py --case 128,4096,4096,nt --only persistent,streamk
    python perf/tile_probe.py --case 128,128,65536 --only splitk --splitk 64,64,128,64,4,4
    python perf/tile_probe.py --case 256,256,32768 --only splitk --graph
    python perf/tile_probe.py --case 16,8192,8192,nt --precision ieee --only gemv --gemv 8,2,2
    python perf/tile_probe.py --case 1,8192,8192,nt --precision bf16 --only gemv16 --rounds 3
    python perf/tile_probe.py --case 64,8192,8192,nt --precision ieee --only splitk --transposed
    python perf/tile_probe.py --case 4096,4096,4096,nt --precision tf32 --only persistent \
        --persistent 128,256,64,8,3,1 --rounds 4

Each config is first checked against float64 on a NaN-poisoned output, then timed with
bench.gpu_median_ms (median, L2 flushed: operands come from memory, as in the report's
eager column), or with --graph replayed from a CUDA graph after the same flush; with
--rounds, every candidate and cuBLAS in turn, round after round (compare configs that way:
see interleaved). Prints microseconds, ratio to cuBLAS and the operand bytes per second,
after the time torch.sum takes to read as many bytes under the same flush. GPU only.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from perf import bench  # noqa: E402
from perf.plans import LIBRARY_PRECISION  # noqa: E402
from perf.suites import Case  # noqa: E402
import triton_gemm  # noqa: E402
from triton_gemm import dispatch  # noqa: E402
from triton_gemm import configs  # noqa: E402
from triton_gemm.kernels import gemv as gemv_kernel  # noqa: E402
from triton_gemm.kernels import gemv16 as gemv16_kernel  # noqa: E402
from triton_gemm.kernels import matmul as plain_kernel  # noqa: E402
from triton_gemm.kernels import persistent as persistent_kernel  # noqa: E402
from triton_gemm.kernels import splitk as splitk_kernel  # noqa: E402
from triton_gemm.kernels import streamk as streamk_kernel  # noqa: E402
from triton_gemm.tolerances import rel_error, tolerance  # noqa: E402

# The tensor-core precisions the three kernels share, tf32x3: the persistent kernel on
# staged tf32 halves (dispatch.SPLIT_TF32), the halves' copy timed apart, and ieee: plain
# kernel SIMT configs (SIMT_PLAIN) only.
PRECISIONS = ("fp16", "bf16", "tf32", "tf32x3", "ieee")

# Candidates, 16-bit operands (fp32 operands halve BK). persistent: (BM, BN, BK, warps,
# stages, epilogue subtile[, warp specialised]); splitk: (BM, BN, BK, SPLIT, warps,
# stages); plain: (BM, BN, BK, warps, stages).
PERSISTENT = [
    (128, 64, 64, 4, 4, False), (128, 64, 64, 4, 6, False), (128, 64, 64, 4, 8, False),
    (128, 64, 128, 4, 4, False), (128, 32, 128, 4, 6, False), (128, 32, 64, 4, 8, False),
    (128, 128, 64, 4, 4, False), (128, 128, 64, 4, 6, False), (128, 128, 64, 8, 4, False),
    (64, 64, 128, 4, 5, False), (64, 128, 64, 4, 6, False),
]
SPLITK = [
    (128, 128, 64, 2, 8, 4), (128, 128, 64, 4, 8, 4), (128, 64, 64, 2, 4, 4),
    (128, 64, 128, 2, 4, 4), (64, 128, 64, 2, 4, 4), (64, 64, 128, 2, 4, 4),
]
PLAIN = [(64, 64, 64, 4, 5), (128, 64, 64, 4, 4), (64, 64, 128, 4, 4), (128, 32, 128, 4, 4)]


# tf32x3 (split) persistent tiles: four fp32 tiles a K step, so BK (given for 16-bit
# operands) is quartered.
SPLIT_PERSISTENT = [(128, 128, 128, 8, 3, True, True), (128, 128, 128, 8, 3, True),
                    (128, 64, 128, 4, 3, False), (128, 64, 64, 4, 4, False)]
BK_DIVISOR = {"fp16": 1, "bf16": 1, "tf32": 2, "tf32x3": 4, "ieee": 1}

# ieee (fp32 FMA) plain-kernel tiles: (BM, BN, BK, warps, stages[, maxnreg]). The tuned
# s_128x128x32 takes 190 registers, one block of 8 warps per SM, and its warps wait on
# shared-memory loads (Nsight Compute, 4096^3: 72.7% issue slots busy against cuBLAS's 88%,
# at fewer instructions than cuBLAS). Capping registers at 128 for two blocks per SM made it
# slower (H100, 4096^3 / 8192^3, us, cuBLAS 2660 / 21475): 128x128x32 w8 s3 3165 / 24967,
# capped 3451 / 27203; 128x128x16 s4 3450 / 27363, capped 3703 / 29190; 128x256x16 3303 /
# 26297; 64x128x16 w4 capped 3616 / 27991. BK 8 does not compile (tl.dot needs K >= 16).
SIMT_PLAIN = [(128, 128, 32, 8, 3), (128, 128, 32, 8, 3, 128), (128, 128, 16, 8, 4, 128),
              (128, 128, 16, 8, 4), (128, 256, 16, 8, 3), (64, 128, 16, 4, 4, 128),
              (128, 64, 32, 4, 3), (64, 128, 32, 4, 3), (64, 64, 32, 4, 3)]


def candidates(precision: str, persistent=None, halves=None, splitk=None,
               plain=None, gemv=None, fma_staged=None,
               transposed=None, planes_off=False) -> list[tuple[str, str, callable]]:
    """(kind, label, fn(a, b, out) -> out) for every candidate config (persistent, splitk,
    plain, gemv: tiles replacing PERSISTENT, SPLITK, PLAIN, configs.GEMV_TILES; 16-bit:
    configs.GEMV16_TILES too). tf32x3:
    persistent split configs on halves ((A hi, A lo), (B hi, B lo)) staged by
    dispatch.stage, and the split-K tiles given; ieee: SIMT_PLAIN, the GEMV configs and the
    split-K tiles given, the SIMT tiles on fma_staged (3-D A, B) where given: the copies
    the library's plan makes; transposed ((W, A^T) 2-D: dispatch.FMA_TRANSPOSED's
    operands): the split-K tiles (the simt family's FMA tiles unless given) run
    C^T = W A^T instead."""
    word = BK_DIVISOR[precision]
    prec = LIBRARY_PRECISION[precision]
    out = []
    if precision == "ieee":
        for bm, bn, bk, w, st, *maxnreg in plain or SIMT_PLAIN:
            cfg = configs._config(("", bm, bn, bk, w, st))
            cfg.maxnreg = maxnreg[0] if maxnreg else None
            out.append(("plain", f"{bm}x{bn}x{bk} w{w} s{st}"
                                 f"{f' r{maxnreg[0]}' if maxnreg else ''}",
                        lambda a, b, c, cfg=cfg: plain_kernel.matmul_3d(
                            *(fma_staged or (a[None], b[None])), c[None], precision=prec,
                            config=cfg)[0]))
        for cfg in ([configs._gemv_config(*t) for t in gemv] if gemv
                    else configs.gemv_configs()):
            out.append(("gemv", configs.config_name(cfg, "simt"),
                        lambda a, b, c, cfg=cfg: gemv_kernel.matmul_2d(a, b, c, config=cfg)))
        if transposed is not None:
            return out + _splitk_candidates(
                splitk or [t[1:] for t in configs._SPLITK_FMA_TILES], word, prec, transposed)
        return out + _splitk_candidates(splitk or (), word, prec, planes_off=planes_off)
    for bm, bn, bk, w, st, sub, *ws in persistent or (
            SPLIT_PERSISTENT if halves else PERSISTENT):
        ws = bool(ws and ws[0])
        cfg = configs.persistent_config(bm, bn, bk // word, w, st, sub, ws)
        if halves:
            (a_hi, a_lo), (b_hi, b_lo) = halves
            fn = (lambda a, b, c, cfg=cfg: persistent_kernel.matmul_2d(
                a_hi[0], b_hi[0], c, config=cfg, lo=(a_lo[0], b_lo[0])))
        else:
            fn = (lambda a, b, c, cfg=cfg: persistent_kernel.matmul_2d(
                a, b, c, precision=prec, config=cfg))
        label = f"{bm}x{bn}x{bk // word} w{w} s{st}{' sub' if sub else ''}{' ws' if ws else ''}"
        out.append(("persistent", label, fn))
        if not (halves or ws):  # the same tile on the stream-K kernel (no warp specialising)
            out.append(("streamk", label, lambda a, b, c, cfg=cfg: streamk_kernel.matmul_2d(
                a, b, c, precision=prec, config=cfg)))
    if prec == "half":  # one program per (row, BN columns): kernels/gemv16.py
        for cfg in configs.gemv16_configs():
            out.append(("gemv16", configs.config_name(cfg, "half"),
                        lambda a, b, c, cfg=cfg: gemv16_kernel.matmul_2d(a, b, c, config=cfg)))
    if transposed is not None:
        # C^T = W A^T on (W, A^T) as given: the split-K tiles, then the plain ones.
        out += _splitk_candidates(splitk or SPLITK, word, prec, transposed)
        for bm, bn, bk, w, st in plain or ():
            cfg = configs._config(("", bm, bn, bk, w, st))
            out.append(("plain", f"C^T {bm}x{bn}x{bk} w{w} s{st}",
                        lambda a, b, c, cfg=cfg, w_=transposed[0], at=transposed[1]:
                        plain_kernel.matmul_3d(w_[None], at[None], c.t()[None],
                                               precision=prec, config=cfg)[0].t()))
        return out
    if halves:
        # Split-K tiles given run tf32x3 split in the K loop on the operands as given
        # (the library's split-K path), BK halved as for tf32.
        return out + _splitk_candidates(splitk or (), BK_DIVISOR["tf32"], prec,
                                        planes_off=planes_off)
    out += _splitk_candidates(splitk or SPLITK, word, prec, planes_off=planes_off)
    for bm, bn, bk, w, st in plain or PLAIN:
        cfg = configs._config(("", bm, bn, bk // word, w, st))
        out.append(("plain", f"{bm}x{bn}x{bk // word} w{w} s{st}",
                    lambda a, b, c, cfg=cfg: plain_kernel.matmul_3d(
                        a[None], b[None], c[None], precision=prec, config=cfg)[0]))
    return out


def _splitk_candidates(tiles, word: int, prec: str, transposed=None,
                       planes_off: bool = False) -> list:
    """transposed: (W, A^T), the split-K tiles run C^T = W A^T (BK as given). planes_off:
    each tile a second time with neither operand read in planes of rows (splitk.ROW_PLANES
    and COL_PLANES off)."""
    out = []
    for bm, bn, bk, split, w, st in tiles:
        bk = bk if transposed else bk // word
        cfg = configs._splitk_config(bm, bn, bk, split, w, st)
        if transposed:
            def fn(a, b, c, cfg=cfg, w_=transposed[0], at=transposed[1]):
                return splitk_kernel.matmul_2d(w_, at, c.t(), precision=prec, config=cfg).t()
        else:
            def fn(a, b, c, cfg=cfg):
                return splitk_kernel.matmul_2d(a, b, c, precision=prec, config=cfg)
        label = f"{'C^T ' if transposed else ''}{bm}x{bn}x{bk} split{split} w{w} s{st}"
        out.append(("splitk", label, fn))
        if planes_off:
            def unplaned(a, b, c, fn=fn):
                with constants(splitk_kernel, ROW_PLANES=False, COL_PLANES=False):
                    return fn(a, b, c)
            out.append(("splitk", f"{label} no planes", unplaned))
    return out


@contextlib.contextmanager
def constants(module, **values):
    """A kernel module's tile constants set to values for the block and put back after it,
    even when the block fails (the Gluon probes' tiles)."""
    saved = {name: getattr(module, name) for name in values}
    for name, value in values.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


def interleaved(fns: dict, timer, rounds: int) -> dict:
    """name -> [rounds timings of fns[name] by timer], timed in turn: every round times each
    candidate once, in the given order. Why not one after another: the lent H100 drifts
    (clocks, power) over a run by more than the gaps a probe looks for. 4096^3 tf32 nt,
    us, one after another: the library's tile 355-356, the same tile pinned 369-373; in four
    interleaved rounds: 353-404 against 358-396, and cuBLAS 342-424 (a probe, not kept,
    eighteenth session): the library's lead was the order, not the tile."""
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            times[name].append(timer(fn))
    return times


def probe(case: Case, precision: str, kinds: set, persistent=None, splitk=None,
          plain=None, gemv=None, transposed=False, graph=False, rounds: int = 1,
          planes_off: bool = False) -> None:
    """graph: time each call replayed from a CUDA graph (bench.cold_graph_ms: GPU time
    only, L2 flushed the same way), not launched eagerly. rounds: interleaved rounds
    (interleaved); each line gives the median of its rounds, and their range."""
    timer = bench.cold_graph_ms if graph else bench.gpu_median_ms
    dtype = bench.DTYPES[precision]
    a, b = bench.make_operands(case, dtype, "cuda")[0]
    m, n, k = case.m, case.n, case.k
    nbytes = (m * k + k * n + m * n) * a.element_size()
    tol = tolerance(dtype, LIBRARY_PRECISION[precision])
    ref = a.double() @ b.double()
    print(f"{case.label} {precision}: {nbytes / 1e6:.0f} MB of operands")
    # The floor under this timing: reading as many bytes as the operands hold after the
    # same L2 flush, by torch's sum (one pass, no writes).
    flat = torch.empty(nbytes // 4, device="cuda", dtype=torch.float32).normal_()
    us = bench.gpu_median_ms(flat.sum) * 1e3
    print(f"  {'reading the operand bytes (torch.sum)':40s} {us:8.1f} us        "
          f"{nbytes / us / 1e6:5.2f} TB/s")
    del flat

    def checked(label, fn):
        """(error, fn() -> C) after one call checked against float64, or None."""
        c = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
        try:
            c = fn(a, b, c)
        except Exception as exc:  # a config that does not compile or fit: say so, go on
            print(f"  {label:40s} failed: {type(exc).__name__}: {str(exc)[:80]}")
            return None
        err = rel_error(c, ref)
        if not err <= tol:
            print(f"  {label:40s} WRONG: rel error {err:.1e} > {tol:.1e}")
            return None
        return err, lambda: fn(a, b, c)

    def cublas():
        with bench.cublas_precision(precision):
            return a @ b
    cublas_error = rel_error(cublas(), ref)
    lib = None if precision in ("fp16", "bf16") else precision
    runs = [("auto", "library", lambda a_, b_, c_: triton_gemm.matmul(a_, b_, precision=lib))]
    halves = None
    if precision == "tf32x3":
        def stage():
            a_hi, b_hi, lo = dispatch.stage(a[None], b[None], dispatch.SPLIT_TF32)
            return (a_hi, lo.a), (b_hi, lo.b)
        halves = stage()
        us = bench.gpu_median_ms(stage) * 1e3
        print(f"  {'staging the halves':40s} {us:8.1f} us")
    fma_staged = None
    plan = (dispatch.plan(a[None], b[None], "ieee", *persistent_kernel.gpu_sms(a.device))
            if precision == "ieee" else dispatch.PLAIN)
    if "plain" in kinds and plan.copies and not plan.split_k:
        # The SIMT tiles on the copies the library makes for them (M-major A, row-major B).
        fma_staged = dispatch.stage(a[None], b[None], plan)
        us = bench.gpu_median_ms(lambda: dispatch.stage(a[None], b[None], plan)) * 1e3
        print(f"  {'staging ' + str(plan):40s} {us:8.1f} us")
    fma_transposed = None
    if transposed and precision != "ieee":
        # C^T = B^T A^T on the operands as given: the weight an M-major (nn) or K-major
        # (nt) first operand, A^T a K-major second one; the split-K tiles on it.
        fma_transposed = (b.t(), a.t())
    elif transposed:
        # dispatch.FMA_TRANSPOSED's operands: the weight as given, A^T copied row-major.
        fma_plan = dispatch.FMA_TRANSPOSED._replace(transposed=False)
        w, at = dispatch.stage(b.t()[None], a.t()[None], fma_plan)
        fma_transposed = (w[0], at[0, :, :m])
        us = bench.gpu_median_ms(lambda: dispatch.stage(b.t()[None], a.t()[None],
                                                        fma_plan)) * 1e3
        print(f"  {'staging A^T row-major':40s} {us:8.1f} us")
    runs += [r for r in candidates(precision, persistent, halves, splitk, plain, gemv,
                                   fma_staged, fma_transposed, planes_off) if r[0] in kinds]
    errors, fns = {"cublas": cublas_error}, {"cublas": cublas}
    for kind, label, fn in runs:
        ok = checked(f"{kind} {label}", fn)
        if ok is not None:
            if kind == "auto":
                label = f"library ({triton_gemm.last_config()})"
            errors[f"{kind} {label}"], fns[f"{kind} {label}"] = ok
    times = {name: sorted(t * 1e3 for t in ts)
             for name, ts in interleaved(fns, timer, rounds).items()}
    base = statistics.median(times["cublas"])
    for name, ts in times.items():
        us = statistics.median(ts)
        spread = f"  [{ts[0]:.1f}-{ts[-1]:.1f}]" if len(ts) > 1 else ""
        print(f"  {name:40s} {us:8.1f} us  {base / us:4.2f}x  {nbytes / us / 1e6:5.2f} TB/s  "
              f"error {errors[name]:.1e}{spread}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", required=True, metavar="M,N,K[,LAYOUT]")
    parser.add_argument("--precision", default="fp16", choices=PRECISIONS)
    parser.add_argument("--only", default="persistent,splitk,plain",
                        help="kernels to try beside the library's choice, comma-separated "
                             "(persistent, streamk: the persistent tiles on the stream-K "
                             "kernel, splitk, plain, gemv, gemv16; auto: none)")
    parser.add_argument("--persistent", action="append", default=None,
                        metavar="BM,BN,BK,WARPS,STAGES,SUBTILE[,WS]",
                        help="persistent tiles to try instead of the built-in list "
                             "(SUBTILE, WS: 0 or 1; BK for 16-bit operands)")
    parser.add_argument("--splitk", action="append", default=None,
                        metavar="BM,BN,BK,SPLIT,WARPS,STAGES",
                        help="split-K tiles to try instead of the built-in list (BK for "
                             "16-bit operands)")
    parser.add_argument("--plain", action="append", default=None,
                        metavar="BM,BN,BK,WARPS,STAGES",
                        help="plain-kernel tiles to try instead of the built-in list (BK for "
                             "16-bit operands)")
    parser.add_argument("--gemv", action="append", default=None, metavar="BN,WARPS,UNROLL",
                        help="GEMV tiles to try instead of configs.GEMV_TILES (ieee)")
    parser.add_argument("--graph", action="store_true",
                        help="time CUDA-graph replays (GPU time only; eager launches of "
                             "~10 us kernels time the host as much as the kernel)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="time every candidate (and cuBLAS) in turn, this many rounds; "
                             "print each one's median and range (interleaved)")
    parser.add_argument("--transposed", action="store_true",
                        help="run the split-K tiles on C^T = W A^T (BK as given): ieee with "
                             "A^T copied row-major (dispatch.FMA_TRANSPOSED), other "
                             "precisions on the operands as given")
    parser.add_argument("--planes-off", action="store_true",
                        help="run each split-K tile a second time with neither operand "
                             "read in planes of rows (splitk.ROW_PLANES, COL_PLANES off)")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")

    def specs(values):
        """Comma-separated integer tiles, or None when none were given."""
        return [tuple(int(v) for v in spec.split(",")) for spec in values or ()] or None
    tiles = specs(args.persistent)
    if tiles:
        tiles = [(*t[:5], bool(t[5]), *(bool(v) for v in t[6:])) for t in tiles]
    if not torch.cuda.is_available():
        print("tile_probe.py needs a CUDA GPU", file=sys.stderr)
        return 2
    for spec in args.case:
        m, n, k, *layout = spec.split(",")
        probe(Case(int(m), int(n), int(k), layout[0] if layout else "nn"), args.precision,
              set(args.only.split(",")), tiles, specs(args.splitk), specs(args.plain),
              specs(args.gemv), args.transposed, args.graph, args.rounds, args.planes_off)
    return 0


if __name__ == "__main__":
    sys.exit(main())
