// Step 3, 1-D thread tile: each thread computes TM = 8 outputs of one column, so a value of
// B read from shared memory is reused TM times from a register. Shared loads per FMA fall
// from 2 to (1 + 1/TM); block 64x64, BK = 8, 512 threads, each loading exactly one element
// of the A tile and one of the B tile per K step.
#include "ladder.cuh"
#include "common.cuh"

namespace thread_tile_1d {

template <int BM, int BN, int BK, int TM>
__global__ void __launch_bounds__(BM * BN / TM)
kernel(int M, int N, int K, float alpha, const float* __restrict__ A,
       const float* __restrict__ B, float beta, float* C) {
    static_assert(BM * BK == BM * BN / TM && BN * BK == BM * BN / TM,
                  "one A and one B element per thread per K step");
    __shared__ float As[BM][BK];
    __shared__ float Bs[BK][BN];
    const int tid = threadIdx.x;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int a_row = tid / BK, a_col = tid % BK;
    const int b_row = tid / BN, b_col = tid % BN;
    const int t_row = tid / BN, t_col = tid % BN;  // this thread's TM rows start at t_row*TM
    float acc[TM] = {};
    for (int k0 = 0; k0 < K; k0 += BK) {
        As[a_row][a_col] = (m0 + a_row < M && k0 + a_col < K)
                               ? A[(size_t)(m0 + a_row) * K + k0 + a_col] : 0.f;
        Bs[b_row][b_col] = (k0 + b_row < K && n0 + b_col < N)
                               ? B[(size_t)(k0 + b_row) * N + n0 + b_col] : 0.f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float b = Bs[k][t_col];
#pragma unroll
            for (int i = 0; i < TM; ++i) acc[i] += As[t_row * TM + i][k] * b;
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i)
        ladder::store1(C, m0 + t_row * TM + i, n0 + t_col, M, N, acc[i], alpha, beta);
}

}  // namespace thread_tile_1d

cudaError_t sgemm_thread_tile_1d(LADDER_ARGS) {
    (void)vec;
    constexpr int BM = 64, BN = 64, BK = 8, TM = 8;
    dim3 grid(ladder::ceil_div(N, BN), ladder::ceil_div(M, BM));
    thread_tile_1d::kernel<BM, BN, BK, TM><<<grid, BM * BN / TM, 0, stream>>>(
        M, N, K, alpha, A, B, beta, C);
    return cudaGetLastError();
}
