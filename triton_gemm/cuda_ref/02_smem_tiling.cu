// Step 2, shared-memory tiling: a 32x32 block stages 32x32 tiles of A and B in shared
// memory along K, so each global element is read once per block instead of once per thread:
// global traffic drops by the tile width (32x). The inner product now reads shared memory,
// which becomes the limit (one FMA per two shared loads).
// Bank use: As[ty][k] is one broadcast per warp, Bs[k][tx] 32 consecutive words, so no
// conflicts and no padding needed.
#include "ladder.cuh"
#include "common.cuh"

namespace smem_tiling {

template <int TILE>
__global__ void kernel(int M, int N, int K, float alpha, const float* __restrict__ A,
                       const float* __restrict__ B, float beta, float* C) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        // Zero-fill outside the matrix so edge tiles need no special inner loop.
        As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    ladder::store1(C, row, col, M, N, acc, alpha, beta);
}

}  // namespace smem_tiling

cudaError_t sgemm_smem_tiling(LADDER_ARGS) {
    (void)vec;
    constexpr int TILE = 32;
    dim3 grid(ladder::ceil_div(N, TILE), ladder::ceil_div(M, TILE));
    smem_tiling::kernel<TILE><<<grid, dim3(TILE, TILE), 0, stream>>>(M, N, K, alpha, A, B, beta,
                                                                      C);
    return cudaGetLastError();
}
