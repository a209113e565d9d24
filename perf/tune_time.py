"""How long the first call of a new shape key takes (autotuning and compilation included),
and whether a second process reuses the tuned choice instead of tuning again (GPU only).

    python perf/tune_time.py [--case M,N,K[,LAYOUT]] [--precision fp16,bf16,tf32] [--out DIR]

Each case runs in two fresh processes that share one empty TRITON_CACHE_DIR (a temporary
directory, removed afterwards): the first starts with neither compiled kernels nor tuning
results, the worst case for a user; the second should find both on disk. Each process
times its first call (to the end of the GPU work) and then a second call of the same key.
The tuning log (TRITON_PRINT_AUTOTUNING) says which kernels tuned and over how many configs.
Writes tune_time.csv and tune_time.md under --out when given.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from perf.bench import DTYPES  # noqa: E402

# The child: one call of a fresh key timed to the end of its GPU work, then a second call.
CHILD = """
import json, sys, time, torch, triton_gemm as tg
m, n, k, layout, precision, dtype = json.loads(sys.argv[1])
dtype = getattr(torch, dtype)
a = torch.randn(m, k, device="cuda", dtype=dtype)
b = (torch.randn(n, k, device="cuda", dtype=dtype).t() if layout == "nt"
     else torch.randn(k, n, device="cuda", dtype=dtype))
call = (lambda: tg.matmul(a, b)) if dtype != torch.float32 else (
    lambda: tg.matmul(a, b, precision=precision))
times = []
for _ in range(2):
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = call()
    torch.cuda.synchronize()
    times.append(time.perf_counter() - start)
ref = a.double() @ b.double()
err = ((out.double() - ref).norm() / ref.norm()).item()
print("RESULT", json.dumps({"first_s": times[0], "second_s": times[1], "rel_error": err,
                            "configs": {str(key): name for key, name
                                        in tg.tuned_configs().items()}}))
"""

# "Triton autotuning for function _persistent_kernel,\nwith key as (...),\nfinished after
# 12.34s,\nbest config selected: ..." (triton 3.6, TRITON_PRINT_AUTOTUNING=1).
TUNE_LINE = re.compile(r"Triton autotuning for function (\w+).*?finished after ([\d.]+)s",
                       re.S)

DEFAULT_CASES = ["4096,4096,4096", "8192,8192,8192", "4096,4096,4096,nt"]


def run_child(case: tuple, precision: str, cache_dir: str) -> dict:
    m, n, k, layout = case
    dtype = str(DTYPES[precision]).split(".")[1]
    env = dict(os.environ, TRITON_CACHE_DIR=cache_dir, TRITON_PRINT_AUTOTUNING="1",
               TRITON_GEMM_AUTOTUNE="1", TRITON_GEMM_TUNE_CACHE="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    res = subprocess.run([sys.executable, "-c", CHILD,
                          json.dumps([m, n, k, layout, precision, dtype])],
                         env=env, capture_output=True, text=True, timeout=900)
    if res.returncode != 0:
        raise RuntimeError(f"{case} {precision}: child failed\n{res.stderr[-2000:]}")
    result = json.loads(res.stdout.split("RESULT", 1)[1])
    tunes = TUNE_LINE.findall(res.stdout)
    result["tuned"] = [f"{name} {float(s):.1f}s" for name, s in tunes]
    result["tuning_s"] = sum(float(s) for _, s in tunes)
    return result


def measure(case: tuple, precision: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="triton_gemm_tune_") as cache_dir:
        first = run_child(case, precision, cache_dir)
        again = run_child(case, precision, cache_dir)
    m, n, k, layout = case
    return {
        "shape": f"{m}x{n}x{k}", "layout": layout, "precision": precision,
        "first_call_s": round(first["first_s"], 2),
        "autotune_s": round(first["tuning_s"], 2),
        "tuned": "; ".join(first["tuned"]),
        "same_key_again_s": round(first["second_s"], 4),
        "second_process_first_call_s": round(again["first_s"], 2),
        "second_process_tuned": "; ".join(again["tuned"]) or "nothing",
        "same_choice": first["configs"] == again["configs"],
        "config": "; ".join(sorted(set(first["configs"].values()))),
        "rel_error": first["rel_error"],
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", default=None, metavar="M,N,K[,LAYOUT]")
    parser.add_argument("--precision", default="fp16,bf16,tf32")
    parser.add_argument("--out", default=None, help="folder for tune_time.csv / .md")
    args = parser.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        print("tune_time.py needs a CUDA GPU", file=sys.stderr)
        return 2
    rows = []
    for spec in args.case or DEFAULT_CASES:
        m, n, k, *layout = spec.split(",")
        case = (int(m), int(n), int(k), layout[0] if layout else "nn")
        for precision in args.precision.split(","):
            row = measure(case, precision)
            print(json.dumps(row), flush=True)
            rows.append(row)
    table = pd.DataFrame(rows)
    print(table.drop(columns=["tuned", "config"]).to_string(index=False))
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        table.to_csv(out / "tune_time.csv", index=False)
        (out / "tune_time.md").write_text(table.to_markdown(index=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
