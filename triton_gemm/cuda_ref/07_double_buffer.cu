// Step 7, double buffering: step 6 with two shared-memory stages. The next K tile is
// fetched from global memory into registers before the current tile is computed and stored
// into the other stage afterwards: the load latency hides behind BK steps of FMAs, and the
// K loop needs one barrier per step instead of two. BK 16 (step 6: 8) halves the barriers
// per FMA again; with registers capped for 2 blocks per SM the SIMT sweep (tune_simt.py,
// H100, cuBLAS SGEMM 51.5 TFLOPS in the same run) measured 41.8 TFLOPS at 4096^3, against
// 40.5 at BK 8. Kernel: warp_tile.cuh.
#include "ladder.cuh"
#include "warp_tile.cuh"

cudaError_t sgemm_double_buffer(LADDER_ARGS) {
    // BM, BN, BK, WM, WN, WNITER, TM, TN, DOUBLE_BUFFER, MIN_BLOCKS (2 per SM)
    return warp_tile::launch<128, 128, 16, 64, 32, 2, 4, 4, true, 2>(M, N, K, alpha, A, B, beta, C,
                                                                  vec, stream);
}
