// Step 6, warp tiles: the 128x128x8 block of step 5 split into 8 warp tiles of 64x32; each
// warp walks its tile in 2x2 sub-tiles of 32x16 with 4x4 outputs per lane. A warp's
// shared-memory reads now cover 32 consecutive rows/columns instead of scattered thread
// tiles, and its fragments stay in registers across sub-tiles. Kernel: warp_tile.cuh.
#include "ladder.cuh"
#include "warp_tile.cuh"

cudaError_t sgemm_warp_tile(LADDER_ARGS) {
    // BM, BN, BK, WM, WN, WNITER, TM, TN, DOUBLE_BUFFER, MIN_BLOCKS (2 per SM)
    return warp_tile::launch<128, 128, 8, 64, 32, 2, 4, 4, false, 2>(M, N, K, alpha, A, B, beta, C,
                                                                   vec, stream);
}
