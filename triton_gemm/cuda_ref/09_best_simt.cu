// Step 9, the best SIMT kernel: the warp tiles of the public worklog's best kernel (4 warps
// of 64x64, 8x4 outputs per lane in 1x4 sub-tiles: 12 shared loads feed 128 FMAs, step 7: 8
// for 64) fed by cp.async through 4 shared-memory stages at BK 8. The copies bypass
// registers, so the staging registers of step 7 go to accumulators, and three K tiles are in
// flight while one is computed. SIMT sweep (perf/tune_simt.py, H100, same run as cuBLAS
// SGEMM 51.5 TFLOPS at 4096^3): this 43.5 (0.85x), 3 stages 43.2, the same tiles
// register-staged at BK 16 (the previous step 9) 41.7. Kernel: warp_tile.cuh.
#include "ladder.cuh"
#include "warp_tile.cuh"

cudaError_t sgemm_best_simt(LADDER_ARGS) {
    // BM, BN, BK, WM, WN, WNITER, TM, TN, STAGES, MIN_BLOCKS (2 per SM)
    return warp_tile::launch_async<128, 128, 8, 64, 64, 4, 8, 4, 4, 2>(M, N, K, alpha, A, B,
                                                                      beta, C, vec, stream);
}
