#!/usr/bin/env bash
# Compile every CUDA ladder source for sm_90 (no GPU needed): a syntax or type error fails CI.
set -euo pipefail
src="$(dirname "$0")/../triton_gemm/cuda_ref"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
for f in "$src"/*.cu; do
    nvcc -arch=sm_90 -O3 -std=c++17 -I"$src" -c "$f" -o "$out/$(basename "$f").o"
    echo "nvcc ok: $(basename "$f")"
done
