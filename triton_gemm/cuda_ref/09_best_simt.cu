// Step 9, the best SIMT kernel: the double-buffered warp-tiled kernel of step 7 retuned for
// the H100. BK = 16 halves the barriers per FMA; 4 warps of 64x64 with 8x4 outputs per lane
// in 1x4 sub-tiles give each lane 128 accumulators (more FMAs per shared load: 12 loads feed
// 128 FMAs, step 7: 8 loads for 64). 128 threads and ~200 registers allow 2 blocks per SM.
// These are the tiles of the well-known public worklog's best kernel (93.7% of cuBLAS on an
// A6000); the report measures them on the H100. Kernel: warp_tile.cuh.
#include "ladder.cuh"
#include "warp_tile.cuh"

cudaError_t sgemm_best_simt(LADDER_ARGS) {
    // BM, BN, BK, WM, WN, WNITER, TM, TN, DOUBLE_BUFFER, MIN_BLOCKS (2 per SM)
    return warp_tile::launch<128, 128, 16, 64, 64, 4, 8, 4, true, 2>(M, N, K, alpha, A, B, beta, C,
                                                                   vec, stream);
}
