// The CUDA SGEMM ladder: C <- alpha * A @ B + beta * C on row-major float32 matrices
// (A: M x K, B: K x N, C: M x N, leading dimensions K, N, N). Every step is one launcher
// with this signature; beta == 0 means C is never read (NaN in C is ignored, as in BLAS).
// `vec` asks for 16-byte loads/stores: only valid when K and N are multiples of 4 and the
// pointers are 16-byte aligned (the Python wrapper checks); otherwise scalar loads are used.
// Each returns the launch's error code.
#pragma once
#include <cuda_runtime_api.h>

#define LADDER_ARGS int M, int N, int K, float alpha, const float* A, const float* B, \
                    float beta, float* C, bool vec, cudaStream_t stream

cudaError_t sgemm_naive(LADDER_ARGS);
cudaError_t sgemm_smem_tiling(LADDER_ARGS);
cudaError_t sgemm_thread_tile_1d(LADDER_ARGS);
cudaError_t sgemm_thread_tile_2d(LADDER_ARGS);
cudaError_t sgemm_vectorized(LADDER_ARGS);
cudaError_t sgemm_warp_tile(LADDER_ARGS);
cudaError_t sgemm_double_buffer(LADDER_ARGS);
cudaError_t sgemm_wmma(LADDER_ARGS);
cudaError_t sgemm_best_simt(LADDER_ARGS);
