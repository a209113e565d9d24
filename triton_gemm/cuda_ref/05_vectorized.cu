// Step 5, vectorised: step 4's 128x128x8 block with 16-byte (float4) global loads and
// stores, one float4 of A and one of B per thread per K step. The A tile is stored
// transposed (As[k][m]) so a thread's 8 A values for one k are contiguous and load as two
// float4 from shared memory, like the B fragment. Rows are padded by 4 floats: the
// transposing store then spreads a warp over all 32 banks (unpadded, lanes 16 apart hit
// the same bank) and rows stay 16-byte aligned.
#include "ladder.cuh"
#include "common.cuh"

namespace vectorized {

template <int BM, int BN, int BK, int TM, int TN, bool VEC>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
kernel(int M, int N, int K, float alpha, const float* __restrict__ A,
       const float* __restrict__ B, float beta, float* C) {
    constexpr int THREADS = (BM / TM) * (BN / TN), PAD = 4;
    static_assert(BM * BK / 4 == THREADS && BK * BN / 4 == THREADS, "one float4 each");
    __shared__ __align__(16) float As[BK][BM + PAD];
    __shared__ __align__(16) float Bs[BK][BN + PAD];
    const int tid = threadIdx.x;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int t_row = tid / (BN / TN), t_col = tid % (BN / TN);
    const int a_row = tid / (BK / 4), a_col = (tid % (BK / 4)) * 4;
    const int b_row = tid / (BN / 4), b_col = (tid % (BN / 4)) * 4;
    float acc[TM][TN] = {};
    float ra[TM], rb[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
        const float4 a = ladder::load4<VEC>(A, m0 + a_row, k0 + a_col, M, K, K);
        As[a_col + 0][a_row] = a.x;
        As[a_col + 1][a_row] = a.y;
        As[a_col + 2][a_row] = a.z;
        As[a_col + 3][a_row] = a.w;
        *reinterpret_cast<float4*>(&Bs[b_row][b_col]) =
            ladder::load4<VEC>(B, k0 + b_row, n0 + b_col, K, N, N);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; i += 4)
                *reinterpret_cast<float4*>(&ra[i]) =
                    *reinterpret_cast<const float4*>(&As[k][t_row * TM + i]);
#pragma unroll
            for (int j = 0; j < TN; j += 4)
                *reinterpret_cast<float4*>(&rb[j]) =
                    *reinterpret_cast<const float4*>(&Bs[k][t_col * TN + j]);
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
        for (int j = 0; j < TN; j += 4)
            ladder::store4<VEC>(C, m0 + t_row * TM + i, n0 + t_col * TN + j, M, N,
                                make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2],
                                            acc[i][j + 3]),
                                alpha, beta);
}

}  // namespace vectorized

cudaError_t sgemm_vectorized(LADDER_ARGS) {
    constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;
    dim3 grid(ladder::ceil_div(N, BN), ladder::ceil_div(M, BM));
    const int threads = (BM / TM) * (BN / TN);
    if (vec)
        vectorized::kernel<BM, BN, BK, TM, TN, true><<<grid, threads, 0, stream>>>(
            M, N, K, alpha, A, B, beta, C);
    else
        vectorized::kernel<BM, BN, BK, TM, TN, false><<<grid, threads, 0, stream>>>(
            M, N, K, alpha, A, B, beta, C);
    return cudaGetLastError();
}
