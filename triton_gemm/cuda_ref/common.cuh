// Helpers shared by the ladder's kernels: bounds-checked loads and the alpha/beta epilogue.
#pragma once
#include <cuda_runtime.h>

namespace ladder {

__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Four consecutive elements p[row*ld + col .. col+3], zero outside rows x cols.
// VEC: one 16-byte load; valid when cols % 4 == 0, col % 4 == 0 and p is 16-byte aligned,
// so the vector is either wholly inside or wholly outside the matrix.
template <bool VEC>
__device__ __forceinline__ float4 load4(const float* __restrict__ p, int row, int col,
                                        int rows, int cols, int ld) {
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (row >= rows) return v;
    const float* q = p + (size_t)row * ld + col;
    if (VEC) {
        if (col < cols) v = *reinterpret_cast<const float4*>(q);
    } else {
        if (col + 0 < cols) v.x = q[0];
        if (col + 1 < cols) v.y = q[1];
        if (col + 2 < cols) v.z = q[2];
        if (col + 3 < cols) v.w = q[3];
    }
    return v;
}

// C[row, col] <- alpha * acc + beta * C[row, col], skipped outside M x N; C unread if beta == 0.
__device__ __forceinline__ void store1(float* C, int row, int col, int M, int N, float acc,
                                      float alpha, float beta) {
    if (row < M && col < N) {
        float* c = C + (size_t)row * N + col;
        *c = beta == 0.f ? alpha * acc : alpha * acc + beta * *c;
    }
}

// Four consecutive outputs; VEC as in load4.
template <bool VEC>
__device__ __forceinline__ void store4(float* C, int row, int col, int M, int N, float4 acc,
                                       float alpha, float beta) {
    if (VEC) {
        if (row >= M || col >= N) return;
        float4* c = reinterpret_cast<float4*>(C + (size_t)row * N + col);
        float4 r = make_float4(alpha * acc.x, alpha * acc.y, alpha * acc.z, alpha * acc.w);
        if (beta != 0.f) {
            float4 old = *c;
            r.x += beta * old.x; r.y += beta * old.y; r.z += beta * old.z; r.w += beta * old.w;
        }
        *c = r;
    } else {
        store1(C, row, col + 0, M, N, acc.x, alpha, beta);
        store1(C, row, col + 1, M, N, acc.y, alpha, beta);
        store1(C, row, col + 2, M, N, acc.z, alpha, beta);
        store1(C, row, col + 3, M, N, acc.w, alpha, beta);
    }
}

}  // namespace ladder
