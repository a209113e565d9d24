// Step 1, naive: one thread per element of C reads a row of A and a column of B straight
// from global memory. Every element of A is fetched N times and of B M times (only the
// caches help), so the kernel is bound by memory traffic (6.3 TFLOPS on the H100, 4096^3).
// Threads with consecutive x take consecutive columns, so a warp's loads of B coalesce and
// its loads of A are one broadcast.
#include "ladder.cuh"
#include "common.cuh"

namespace naive {

template <int TILE>
__global__ void kernel(int M, int N, int K, float alpha, const float* __restrict__ A,
                       const float* __restrict__ B, float beta, float* C) {
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
    ladder::store1(C, row, col, M, N, acc, alpha, beta);
}

}  // namespace naive

cudaError_t sgemm_naive(LADDER_ARGS) {
    (void)vec;
    constexpr int TILE = 32;
    dim3 grid(ladder::ceil_div(N, TILE), ladder::ceil_div(M, TILE));
    naive::kernel<TILE><<<grid, dim3(TILE, TILE), 0, stream>>>(M, N, K, alpha, A, B, beta, C);
    return cudaGetLastError();
}
