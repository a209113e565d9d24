// Step 9, the best SIMT kernel: step 7's warp tiles widened to the public worklog's 4 warps
// of 64x64, 8x16 outputs per lane in two 8x8 sub-tiles (24 shared-memory words feed 128
// FMAs a K step; step 7: 16 for 64), fed by cp.async through 4 shared-memory stages at BK 8.
// The copies bypass registers, so the staging registers of step 7 go to accumulators and
// three K tiles are in flight while one is computed. Copy coordinates are computed once, not
// per copy (Nsight Compute, four 8x4 sub-tiles per lane: 1257 -> 1167 instructions per warp
// and K tile; cuBLAS 1158), and the lane's fragments are double-buffered in registers across
// K steps and tiles, so shared-memory latency hides behind the previous step's FMAs.
// SIMT sweep (perf/tune_simt.py, H100, same run, cuBLAS SGEMM 51.5 / 51.3 TFLOPS at 4096^3 /
// 8192^3): this 48.1 / 48.1; four 8x4 sub-tiles per lane (the tiles before) 47.1 / 47.6;
// 3 stages 45.8 at 8192^3; BK 16 in 3-4 stages 45.1-45.2 / 46.3-46.8. Before the copies were
// hoisted, the 8x4 sub-tiles gave 43.9 (0.85x of cuBLAS). Kernel: warp_tile.cuh.
#include "ladder.cuh"
#include "warp_tile.cuh"

cudaError_t sgemm_best_simt(LADDER_ARGS) {
    // BM, BN, BK, WM, WN, WNITER, TM, TN, STAGES, MIN_BLOCKS (2 per SM), GROUP (raster
    // order), PREFETCH (register fragments double-buffered)
    return warp_tile::launch_async<128, 128, 8, 64, 64, 2, 8, 8, 4, 2, 1, true>(
        M, N, K, alpha, A, B, beta, C, vec, stream);
}
