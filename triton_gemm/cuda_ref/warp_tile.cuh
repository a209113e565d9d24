// The warp-tiled kernel shared by steps 6 (warp tiles), 7 (+ double buffering) and 9 (the
// best SIMT kernel, other tile sizes). A block of BM x BN is split into warp tiles of
// WM x WN; a warp walks its tile in WMITER x WNITER sub-tiles, each lane computing TM x TN
// outputs per sub-tile. Lanes of a warp read neighbouring shared-memory words (few bank
// conflicts), and warps map onto the SM's four schedulers with register fragments reused
// across sub-tiles.
// DOUBLE_BUFFER: two shared-memory stages; the next K tile is fetched into registers before
// the current one is computed and written to the other stage afterwards, so global latency
// hides behind the FMAs and one barrier per K step suffices.
// MIN_BLOCKS: blocks per SM the register allocation must allow (__launch_bounds__): a block
// of 256 threads must stay within 128 registers for two blocks to share an SM's 65536.
#pragma once
#include "common.cuh"

namespace warp_tile {

// Where each lane's outputs sit in the block tile, and the two steps every variant shares:
// one K tile of outer products out of shared memory, and the alpha/beta epilogue.
template <int BM, int BN, int BK, int WM, int WN, int WNITER, int TM, int TN>
struct Tiling {
    static constexpr int THREADS = (BM / WM) * (BN / WN) * 32;
    static constexpr int WMITER = (WM * WN) / (32 * TM * TN * WNITER);
    static constexpr int WSUBM = WM / WMITER, WSUBN = WN / WNITER, PAD = 4;
    static_assert(WMITER >= 1 && (WSUBM / TM) * (WSUBN / TN) == 32, "sub-tile = 32 lanes");
    static_assert(TM % 4 == 0 && TN % 4 == 0, "fragments load as float4");
    using Acc = float[WMITER * TM][WNITER * TN];

    int wrow, wcol, lrow, lcol;

    __device__ __forceinline__ explicit Tiling(int tid) {
        const int warp = tid / 32, lane = tid % 32;
        wrow = (warp / (BN / WN)) * WM;
        wcol = (warp % (BN / WN)) * WN;
        lrow = (lane / (WSUBN / TN)) * TM;
        lcol = (lane % (WSUBN / TN)) * TN;
    }

    using FragA = float[WMITER * TM];
    using FragB = float[WNITER * TN];

    // The lane's A and B fragments of step k of a K tile. As is stored k-major (As[k][m]) so
    // a lane's TM rows are consecutive words and load as float4.
    __device__ __forceinline__ void load(const float (*As)[BM + PAD], const float (*Bs)[BN + PAD],
                                         int k, FragA& ra, FragB& rb) const {
#pragma unroll
        for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
            for (int i = 0; i < TM; i += 4)
                *reinterpret_cast<float4*>(&ra[wm * TM + i]) =
                    *reinterpret_cast<const float4*>(&As[k][wrow + wm * WSUBM + lrow + i]);
#pragma unroll
        for (int wn = 0; wn < WNITER; ++wn)
#pragma unroll
            for (int j = 0; j < TN; j += 4)
                *reinterpret_cast<float4*>(&rb[wn * TN + j]) =
                    *reinterpret_cast<const float4*>(&Bs[k][wcol + wn * WSUBN + lcol + j]);
    }

    // acc += the outer product of one step's fragments.
    __device__ __forceinline__ static void fma(const FragA& ra, const FragB& rb, Acc& acc) {
#pragma unroll
        for (int i = 0; i < WMITER * TM; ++i)
#pragma unroll
            for (int j = 0; j < WNITER * TN; ++j) acc[i][j] += ra[i] * rb[j];
    }

    // acc += As^T-tile x Bs-tile over BK steps.
    __device__ __forceinline__ void compute(const float (*As)[BM + PAD],
                                            const float (*Bs)[BN + PAD], Acc& acc) const {
        FragA ra;
        FragB rb;
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            load(As, Bs, k, ra, rb);
            fma(ra, rb, acc);
        }
    }

    template <bool VEC>
    __device__ __forceinline__ void store(float* C, int m0, int n0, int M, int N, const Acc& acc,
                                          float alpha, float beta) const {
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
};

template <int BM, int BN, int BK, int WM, int WN, int WNITER, int TM, int TN,
          bool DOUBLE_BUFFER, int MIN_BLOCKS, bool VEC>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
kernel(int M, int N, int K, float alpha, const float* __restrict__ A,
       const float* __restrict__ B, float beta, float* C) {
    using T = Tiling<BM, BN, BK, WM, WN, WNITER, TM, TN>;
    constexpr int THREADS = T::THREADS, PAD = T::PAD, STAGES = DOUBLE_BUFFER ? 2 : 1;
    constexpr int A_LOADS = BM * BK / 4 / THREADS, B_LOADS = BK * BN / 4 / THREADS;
    static_assert(A_LOADS * THREADS * 4 == BM * BK && B_LOADS * THREADS * 4 == BK * BN,
                  "whole float4 loads per thread");
    __shared__ __align__(16) float As[STAGES][BK][BM + PAD];
    __shared__ __align__(16) float Bs[STAGES][BK][BN + PAD];

    const int tid = threadIdx.x;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const T tile(tid);

    typename T::Acc acc = {};
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
            tile.compute(As[t % STAGES], Bs[t % STAGES], acc);
            if (more) stash((t + 1) % STAGES);
            __syncthreads();
        } else {
            tile.compute(As[0], Bs[0], acc);
            __syncthreads();
            if (more) {
                fetch((t + 1) * BK);
                stash(0);
            }
            __syncthreads();
        }
    }
    tile.template store<VEC>(C, m0, n0, M, N, acc, alpha, beta);
}

// The block's tile coordinates. Blocks start roughly in launch order (x fastest); GROUP > 1
// renumbers them so consecutive blocks walk GROUP block-rows column by column, and the
// blocks in flight together share rows of A and columns of B in L2 (Triton's grouped
// ordering). GROUP 1: row-major raster, the grid as launched. On the H100 grouping gained
// nothing for step 9 (SIMT sweep, 8x4 sub-tiles, groups of 8: 47.3 TFLOPS against 47.3 at
// 4096^3 and 8192^3; before the copies were hoisted, groups of 4-16 43.2-43.3 against 43.5):
// L2 is not what holds it below cuBLAS.
template <int GROUP>
__device__ __forceinline__ void block_coords(int& bm, int& bn) {
    if (GROUP == 1) {
        bm = blockIdx.y;
        bn = blockIdx.x;
        return;
    }
    const int id = blockIdx.y * gridDim.x + blockIdx.x, per_group = GROUP * gridDim.x;
    const int first = (id / per_group) * GROUP;
    const int rows = min(static_cast<int>(gridDim.y) - first, GROUP);
    bm = first + (id % per_group) % rows;
    bn = (id % per_group) / rows;
}

// cp.async (sm_80+): global -> shared copies that bypass registers. src_bytes 0 writes zeros,
// which is how tiles past the matrix edge are filled; src must still be a valid address.
__device__ __forceinline__ void cp_async4(float* dst, const float* src, bool inside) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(src),
                 "r"(inside ? 4 : 0));
}
__device__ __forceinline__ void cp_async16(float* dst, const float* src, bool inside) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src),
                 "r"(inside ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING));
}

// The warp-tiled kernel fed by cp.async through STAGES shared-memory stages: no staging
// registers (the register-staged kernel spends BM*BK/THREADS + BK*BN/THREADS of them), and
// STAGES - 1 tiles in flight while one is computed. A is copied one word at a time into its
// k-major (transposed) place, since a 16-byte copy cannot transpose; B moves 16 bytes per
// copy when VEC allows. One barrier per K tile: a stage is refilled only after every warp
// has passed the barrier that follows its last use.
template <int BM, int BN, int BK, int WM, int WN, int WNITER, int TM, int TN, int STAGES,
          int MIN_BLOCKS, int GROUP, bool PREFETCH, bool VEC>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
async_kernel(int M, int N, int K, float alpha, const float* __restrict__ A,
             const float* __restrict__ B, float beta, float* C) {
    using T = Tiling<BM, BN, BK, WM, WN, WNITER, TM, TN>;
    constexpr int THREADS = T::THREADS, PAD = T::PAD;
    constexpr int A_WORDS = BM * BK / THREADS, B_VECS = BK * BN / 4 / THREADS;
    static_assert(STAGES >= 2, "one stage computes while the next lands");
    static_assert(A_WORDS * THREADS == BM * BK && B_VECS * THREADS * 4 == BK * BN,
                  "whole copies per thread");
    // Dynamic shared memory: stages of BK 16 pass the 48 KB a static array may take.
    extern __shared__ __align__(16) float smem[];
    auto As = reinterpret_cast<float (*)[BK][BM + PAD]>(smem);
    auto Bs = reinterpret_cast<float (*)[BK][BN + PAD]>(smem + STAGES * BK * (BM + PAD));

    const int tid = threadIdx.x;
    int bm, bn;
    block_coords<GROUP>(bm, bn);
    const int m0 = bm * BM, n0 = bn * BN;
    const T tile(tid);
    typename T::Acc acc = {};

    // Copy coordinates are fixed for the whole K loop, so a copy costs a few integer ops:
    // computed per copy they took 174 of the 1257 instructions a warp issued per K tile, now
    // 1167 (Nsight Compute, H100, 4096^3, step 9's 8x4 sub-tiles; cuBLAS SGEMM 1158). Element
    // offsets fit 32 bits: the wrapper keeps every matrix below 2^31 elements, and rows past M
    // wrap harmlessly in unsigned arithmetic. A copy outside the matrix reads nothing and is
    // given offset 0 regardless.
    static_assert(THREADS % BK == 0 && THREADS % (BN / 4) == 0, "fixed copy columns");
    constexpr int A_ROW_STEP = THREADS / BK, B_ROW_STEP = THREADS / (BN / 4);
    // A: consecutive lanes take consecutive k of one row (32-byte global segments), and the
    // k-major shared addresses k * (BM + PAD) + row spread over the banks.
    const int a_row = tid / BK, a_k = tid % BK, a_rows_left = M - m0 - a_row;
    const unsigned a_base = static_cast<unsigned>(m0 + a_row) * K + a_k;
    const unsigned a_step = static_cast<unsigned>(A_ROW_STEP) * K;
    const int b_row = tid / (BN / 4), b_col = (tid % (BN / 4)) * 4;

    auto issue = [&](int k0, int s) {
        const bool a_k_inside = k0 + a_k < K;
#pragma unroll
        for (int i = 0; i < A_WORDS; ++i) {
            const bool inside = a_k_inside && i * A_ROW_STEP < a_rows_left;
            const unsigned off = a_base + i * a_step + k0;
            cp_async4(&As[s][a_k][a_row + i * A_ROW_STEP], A + (inside ? off : 0u), inside);
        }
#pragma unroll
        for (int i = 0; i < B_VECS; ++i) {
            const int r = b_row + i * B_ROW_STEP, row = k0 + r, col = n0 + b_col;
            const unsigned off = static_cast<unsigned>(row) * N + col;
            if (VEC) {
                const bool inside = row < K && col < N;
                cp_async16(&Bs[s][r][b_col], B + (inside ? off : 0u), inside);
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const bool inside = row < K && col + j < N;
                    cp_async4(&Bs[s][r][b_col + j], B + (inside ? off + j : 0u), inside);
                }
            }
        }
    };

    const int tiles = ladder::ceil_div(K, BK);
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < tiles) issue(s * BK, s);
        cp_async_commit();  // empty groups keep the count that cp_async_wait relies on
    }
    if (!PREFETCH) {
        for (int t = 0; t < tiles; ++t) {
            cp_async_wait<STAGES - 2>();  // this thread's copies of tile t have landed
            __syncthreads();              // everyone's have; and stage (t - 1) % STAGES is free
            const int next = t + STAGES - 1;
            if (next < tiles) issue(next * BK, next % STAGES);
            cp_async_commit();
            tile.compute(As[t % STAGES], Bs[t % STAGES], acc);
        }
    } else if (tiles > 0) {
        // Fragments double-buffered in registers: step k + 1's are loaded before step k's
        // FMAs, and across tiles too: the last step of tile t waits for tile t + 1 and loads
        // its first fragments, so no warp starts a tile stalled on shared-memory latency.
        static_assert(BK % 2 == 0, "fragment buffers alternate within a tile");
        typename T::FragA ra[2];
        typename T::FragB rb[2];
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        tile.load(As[0], Bs[0], 0, ra[0], rb[0]);
        for (int t = 0; t < tiles; ++t) {
            const int next = t + STAGES - 1;  // its stage was last read before the barrier
            if (next < tiles) issue(next * BK, next % STAGES);
            cp_async_commit();
#pragma unroll
            for (int k = 0; k < BK; ++k) {
                if (k + 1 < BK) {
                    tile.load(As[t % STAGES], Bs[t % STAGES], k + 1, ra[(k + 1) % 2],
                              rb[(k + 1) % 2]);
                } else if (t + 1 < tiles) {
                    cp_async_wait<STAGES - 2>();  // tile t + 1 has landed, for everyone
                    __syncthreads();
                    tile.load(As[(t + 1) % STAGES], Bs[(t + 1) % STAGES], 0, ra[0], rb[0]);
                }
                T::fma(ra[k % 2], rb[k % 2], acc);
            }
        }
    }
    tile.template store<VEC>(C, m0, n0, M, N, acc, alpha, beta);
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

template <int BM, int BN, int BK, int WM, int WN, int WNITER, int TM, int TN, int STAGES,
          int MIN_BLOCKS, int GROUP = 1, bool PREFETCH = false>
cudaError_t launch_async(int M, int N, int K, float alpha, const float* A, const float* B,
                         float beta, float* C, bool vec, cudaStream_t stream) {
    constexpr int THREADS = (BM / WM) * (BN / WN) * 32, PAD = Tiling<BM, BN, BK, WM, WN,
                                                                     WNITER, TM, TN>::PAD;
    constexpr int SMEM = STAGES * BK * (BM + BN + 2 * PAD) * static_cast<int>(sizeof(float));
    const dim3 grid(ladder::ceil_div(N, BN), ladder::ceil_div(M, BM));
    const auto kernel = vec
        ? async_kernel<BM, BN, BK, WM, WN, WNITER, TM, TN, STAGES, MIN_BLOCKS, GROUP, PREFETCH,
                       true>
        : async_kernel<BM, BN, BK, WM, WN, WNITER, TM, TN, STAGES, MIN_BLOCKS, GROUP, PREFETCH,
                       false>;
    if (SMEM > 48 * 1024) {  // above 48 KB a kernel must opt in, per device
        const cudaError_t err =
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM);
        if (err != cudaSuccess) return err;
    }
    kernel<<<grid, THREADS, SMEM, stream>>>(M, N, K, alpha, A, B, beta, C);
    return cudaGetLastError();
}

}  // namespace warp_tile
