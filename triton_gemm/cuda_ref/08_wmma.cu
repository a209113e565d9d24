// Step 8, WMMA tensor cores: the structure of step 7 (warp tiles, double buffering) with
// the FMAs replaced by nvcuda::wmma 16x16x16 products. Tiles of A and B are converted from
// fp32 to half while being staged into shared memory; accumulation stays fp32, so the
// error is that of fp16 operands (compare with cuBLAS fp16, not SGEMM). 128x128x32 block,
// 8 warps of 64x32 (4x2 fragments). Rows are padded by 8 halves (16 bytes): WMMA's ldm must
// be a multiple of 8 and the padding staggers rows across banks.
#include <cuda_fp16.h>
#include <mma.h>

#include "ladder.cuh"
#include "common.cuh"

namespace wmma_tc {

using namespace nvcuda;

template <bool VEC>
__global__ void __launch_bounds__(256)
kernel(int M, int N, int K, float alpha, const float* __restrict__ A,
       const float* __restrict__ B, float beta, float* C) {
    constexpr int BM = 128, BN = 128, BK = 32, WM = 64, WN = 32, PADH = 8, THREADS = 256;
    constexpr int FM = WM / 16, FN = WN / 16;
    constexpr int A_LOADS = BM * BK / 4 / THREADS, B_LOADS = BK * BN / 4 / THREADS;
    __shared__ __align__(32) half As[2][BM][BK + PADH];
    __shared__ __align__(32) half Bs[2][BK][BN + PADH];
    __shared__ __align__(32) float scratch[THREADS / 32][16 * 16];

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int wrow = (warp / (BN / WN)) * WM, wcol = (warp % (BN / WN)) * WN;

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM][FN];
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.f);

    float4 a_next[A_LOADS], b_next[B_LOADS];
    auto fetch = [&](int k0) {
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) {
            const int idx = tid + i * THREADS;
            a_next[i] = ladder::load4<VEC>(A, m0 + idx / (BK / 4), k0 + (idx % (BK / 4)) * 4,
                                           M, K, K);
        }
#pragma unroll
        for (int i = 0; i < B_LOADS; ++i) {
            const int idx = tid + i * THREADS;
            b_next[i] = ladder::load4<VEC>(B, k0 + idx / (BN / 4), n0 + (idx % (BN / 4)) * 4,
                                           K, N, N);
        }
    };
    auto stash = [&](int s) {
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) {
            const int idx = tid + i * THREADS;
            half* dst = &As[s][idx / (BK / 4)][(idx % (BK / 4)) * 4];
            dst[0] = __float2half(a_next[i].x);
            dst[1] = __float2half(a_next[i].y);
            dst[2] = __float2half(a_next[i].z);
            dst[3] = __float2half(a_next[i].w);
        }
#pragma unroll
        for (int i = 0; i < B_LOADS; ++i) {
            const int idx = tid + i * THREADS;
            half* dst = &Bs[s][idx / (BN / 4)][(idx % (BN / 4)) * 4];
            dst[0] = __float2half(b_next[i].x);
            dst[1] = __float2half(b_next[i].y);
            dst[2] = __float2half(b_next[i].z);
            dst[3] = __float2half(b_next[i].w);
        }
    };
    auto compute = [&](int s) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa[FM];
        wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> fb[FN];
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
#pragma unroll
            for (int i = 0; i < FM; ++i)
                wmma::load_matrix_sync(fa[i], &As[s][wrow + i * 16][kk], BK + PADH);
#pragma unroll
            for (int j = 0; j < FN; ++j)
                wmma::load_matrix_sync(fb[j], &Bs[s][kk][wcol + j * 16], BN + PADH);
#pragma unroll
            for (int i = 0; i < FM; ++i)
#pragma unroll
                for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
        }
    };

    const int tiles = ladder::ceil_div(K, BK);
    if (tiles > 0) {
        fetch(0);
        stash(0);
    }
    __syncthreads();
    for (int t = 0; t < tiles; ++t) {
        const bool more = t + 1 < tiles;
        if (more) fetch((t + 1) * BK);
        compute(t % 2);
        if (more) stash((t + 1) % 2);
        __syncthreads();
    }

    // Epilogue through a per-warp 16x16 scratch tile, so the alpha/beta update and the edge
    // checks are ordinary per-lane code: each lane writes two float4 of the fragment.
    float* tile = scratch[warp];
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) {
            wmma::store_matrix_sync(tile, acc[i][j], 16, wmma::mem_row_major);
            __syncwarp();
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int q = lane * 2 + e, r = q / 4, c = (q % 4) * 4;
                ladder::store4<VEC>(C, m0 + wrow + i * 16 + r, n0 + wcol + j * 16 + c, M, N,
                                    *reinterpret_cast<const float4*>(&tile[r * 16 + c]), alpha,
                                    beta);
            }
            __syncwarp();
        }
}

}  // namespace wmma_tc

cudaError_t sgemm_wmma(LADDER_ARGS) {
    dim3 grid(ladder::ceil_div(N, 128), ladder::ceil_div(M, 128));
    if (vec)
        wmma_tc::kernel<true><<<grid, 256, 0, stream>>>(M, N, K, alpha, A, B, beta, C);
    else
        wmma_tc::kernel<false><<<grid, 256, 0, stream>>>(M, N, K, alpha, A, B, beta, C);
    return cudaGetLastError();
}
