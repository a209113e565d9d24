// Step 4, 2-D thread tile: 128x128 block, BK = 8, 256 threads each computing an 8x8 tile of
// C as outer products of an 8-element A fragment and an 8-element B fragment held in
// registers: 16 shared loads feed 64 FMAs (step 3: 9 loads for 8). Global traffic per
// block halves again with the larger block.
#include "ladder.cuh"
#include "common.cuh"

namespace thread_tile_2d {

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
kernel(int M, int N, int K, float alpha, const float* __restrict__ A,
       const float* __restrict__ B, float beta, float* C) {
    constexpr int THREADS = (BM / TM) * (BN / TN);
    static_assert(BM * BK % THREADS == 0 && BK * BN % THREADS == 0, "whole loads per thread");
    __shared__ float As[BM][BK];
    __shared__ float Bs[BK][BN];
    const int tid = threadIdx.x;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int t_row = tid / (BN / TN), t_col = tid % (BN / TN);
    float acc[TM][TN] = {};
    float ra[TM], rb[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int i = 0; i < BM * BK / THREADS; ++i) {
            const int idx = tid + i * THREADS, r = idx / BK, c = idx % BK;
            As[r][c] = (m0 + r < M && k0 + c < K) ? A[(size_t)(m0 + r) * K + k0 + c] : 0.f;
        }
#pragma unroll
        for (int i = 0; i < BK * BN / THREADS; ++i) {
            const int idx = tid + i * THREADS, r = idx / BN, c = idx % BN;
            Bs[r][c] = (k0 + r < K && n0 + c < N) ? B[(size_t)(k0 + r) * N + n0 + c] : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; ++i) ra[i] = As[t_row * TM + i][k];
#pragma unroll
            for (int j = 0; j < TN; ++j) rb[j] = Bs[k][t_col * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += ra[i] * rb[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j)
            ladder::store1(C, m0 + t_row * TM + i, n0 + t_col * TN + j, M, N, acc[i][j], alpha,
                           beta);
}

}  // namespace thread_tile_2d

cudaError_t sgemm_thread_tile_2d(LADDER_ARGS) {
    (void)vec;
    constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;
    dim3 grid(ladder::ceil_div(N, BN), ladder::ceil_div(M, BM));
    thread_tile_2d::kernel<BM, BN, BK, TM, TN><<<grid, (BM / TM) * (BN / TN), 0, stream>>>(
        M, N, K, alpha, A, B, beta, C);
    return cudaGetLastError();
}
