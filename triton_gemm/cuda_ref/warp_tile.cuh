// The warp-tiled kernel shared by steps 6 (warp tiles), 7 (+ double buffering) and 9 (the
// best SIMT kernel, other tile sizes). A block of BM x BN is split into warp tiles of
// WM x WN; a warp walks its tile in WMITER x WNITER sub-tiles, each lane computing TM x TN
// outputs per sub-tile. Lanes of a warp read neighbouring shared-memory words (few bank
// conflicts), and warps map onto the SM's four schedulers with register fragments reused
// across sub-tiles.
// DOUBLE_BUFFER: two shared-memory stages; the next K tile is fetched into registers before
// the current one is computed and written to the other stage afterwards, so global latency
// hides behind the FMAs and one barrier per K step suffices.
// MIN_BLOCKS: blocks per SM the register allocation must allow (__launch_bounds__). Without
// it ptxas gave step 7's vector path 133 registers: 256 threads x 136 (allocation unit 8)
// exceed half of the SM's 65536, so one block ran per SM instead of two.
#pragma once
#include "common.cuh"

namespace warp_tile {

template <int BM, int BN, int BK, int WM, int WN, int WNITER, int TM, int TN,
          bool DOUBLE_BUFFER, int MIN_BLOCKS, bool VEC>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
kernel(int M, int N, int K, float alpha, const float* __restrict__ A,
       const float* __restrict__ B, float beta, float* C) {
    constexpr int THREADS = (BM / WM) * (BN / WN) * 32;
    constexpr int WMITER = (WM * WN) / (32 * TM * TN * WNITER);
    constexpr int WSUBM = WM / WMITER, WSUBN = WN / WNITER;
    constexpr int STAGES = DOUBLE_BUFFER ? 2 : 1, PAD = 4;
    constexpr int A_LOADS = BM * BK / 4 / THREADS, B_LOADS = BK * BN / 4 / THREADS;
    static_assert(WMITER >= 1 && (WSUBM / TM) * (WSUBN / TN) == 32, "sub-tile = 32 lanes");
    static_assert(A_LOADS * THREADS * 4 == BM * BK && B_LOADS * THREADS * 4 == BK * BN,
                  "whole float4 loads per thread");
    static_assert(TM % 4 == 0 && TN % 4 == 0, "fragments load as float4");
    __shared__ __align__(16) float As[STAGES][BK][BM + PAD];
    __shared__ __align__(16) float Bs[STAGES][BK][BN + PAD];

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int wrow = (warp / (BN / WN)) * WM, wcol = (warp % (BN / WN)) * WN;
    const int lrow = (lane / (WSUBN / TN)) * TM, lcol = (lane % (WSUBN / TN)) * TN;

    float acc[WMITER * TM][WNITER * TN] = {};
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
            const int idx = tid + i * THREADS, r = idx / (BK / 4), c = (idx % (BK / 4)) * 4;
            As[s][c + 0][r] = a_next[i].x;
            As[s][c + 1][r] = a_next[i].y;
            As[s][c + 2][r] = a_next[i].z;
            As[s][c + 3][r] = a_next[i].w;
        }
#pragma unroll
        for (int i = 0; i < B_LOADS; ++i) {
            const int idx = tid + i * THREADS;
            *reinterpret_cast<float4*>(&Bs[s][idx / (BN / 4)][(idx % (BN / 4)) * 4]) = b_next[i];
        }
    };
    auto compute = [&](int s) {
        float ra[WMITER * TM], rb[WNITER * TN];
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
                for (int i = 0; i < TM; i += 4)
                    *reinterpret_cast<float4*>(&ra[wm * TM + i]) = *reinterpret_cast<const float4*>(
                        &As[s][k][wrow + wm * WSUBM + lrow + i]);
#pragma unroll
            for (int wn = 0; wn < WNITER; ++wn)
#pragma unroll
                for (int j = 0; j < TN; j += 4)
                    *reinterpret_cast<float4*>(&rb[wn * TN + j]) = *reinterpret_cast<const float4*>(
                        &Bs[s][k][wcol + wn * WSUBN + lcol + j]);
#pragma unroll
            for (int i = 0; i < WMITER * TM; ++i)
#pragma unroll
                for (int j = 0; j < WNITER * TN; ++j) acc[i][j] += ra[i] * rb[j];
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
        if (DOUBLE_BUFFER) {
            if (more) fetch((t + 1) * BK);
            compute(t % STAGES);
            if (more) stash((t + 1) % STAGES);
            __syncthreads();
        } else {
            compute(0);
            __syncthreads();
            if (more) {
                fetch((t + 1) * BK);
                stash(0);
            }
            __syncthreads();
        }
    }

#pragma unroll
    for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int wn = 0; wn < WNITER; ++wn)
#pragma unroll
                for (int j = 0; j < TN; j += 4) {
                    const float* a = &acc[wm * TM + i][wn * TN + j];
                    ladder::store4<VEC>(C, m0 + wrow + wm * WSUBM + lrow + i,
                                        n0 + wcol + wn * WSUBN + lcol + j, M, N,
                                        make_float4(a[0], a[1], a[2], a[3]), alpha, beta);
                }
}

template <int BM, int BN, int BK, int WM, int WN, int WNITER, int TM, int TN,
          bool DOUBLE_BUFFER, int MIN_BLOCKS>
cudaError_t launch(int M, int N, int K, float alpha, const float* A, const float* B,
                   float beta, float* C, bool vec, cudaStream_t stream) {
    constexpr int THREADS = (BM / WM) * (BN / WN) * 32;
    dim3 grid(ladder::ceil_div(N, BN), ladder::ceil_div(M, BM));
    if (vec)
        kernel<BM, BN, BK, WM, WN, WNITER, TM, TN, DOUBLE_BUFFER, MIN_BLOCKS, true>
            <<<grid, THREADS, 0, stream>>>(M, N, K, alpha, A, B, beta, C);
    else
        kernel<BM, BN, BK, WM, WN, WNITER, TM, TN, DOUBLE_BUFFER, MIN_BLOCKS, false>
            <<<grid, THREADS, 0, stream>>>(M, N, K, alpha, A, B, beta, C);
    return cudaGetLastError();
}

}  // namespace warp_tile
