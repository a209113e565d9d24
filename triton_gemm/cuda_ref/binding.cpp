// torch binding for the CUDA ladder: tensor checks, device guard and stream, then the
// plain-CUDA launcher. Argument validation with readable messages lives in Python
// (triton_gemm/cuda_ref/__init__.py); these checks only guard against misuse.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/extension.h>

#include <string>
#include <utility>
#include <vector>

#include "ladder.cuh"

namespace {

using Launcher = cudaError_t (*)(int, int, int, float, const float*, const float*, float,
                                 float*, bool, cudaStream_t);

const std::vector<std::pair<std::string, Launcher>>& ladder() {
    static const std::vector<std::pair<std::string, Launcher>> steps = {
        {"naive", sgemm_naive},
        {"smem_tiling", sgemm_smem_tiling},
        {"thread_tile_1d", sgemm_thread_tile_1d},
        {"thread_tile_2d", sgemm_thread_tile_2d},
        {"vectorized", sgemm_vectorized},
        {"warp_tile", sgemm_warp_tile},
        {"double_buffer", sgemm_double_buffer},
        {"wmma", sgemm_wmma},
        {"best_simt", sgemm_best_simt},
    };
    return steps;
}

void check_matrix(const torch::Tensor& t, const char* name) {
    TORCH_CHECK(t.is_cuda() && t.scalar_type() == torch::kFloat32 && t.dim() == 2 &&
                    t.is_contiguous(),
                name, " must be a contiguous 2-D float32 CUDA tensor");
}

}  // namespace

std::vector<std::string> kernel_names() {
    std::vector<std::string> names;
    for (const auto& step : ladder()) names.push_back(step.first);
    return names;
}

// C <- alpha * A @ B + beta * C in place.
void sgemm_into(const std::string& name, torch::Tensor A, torch::Tensor B, torch::Tensor C,
                double alpha, double beta, bool vec) {
    check_matrix(A, "A");
    check_matrix(B, "B");
    check_matrix(C, "C");
    TORCH_CHECK(A.size(1) == B.size(0) && C.size(0) == A.size(0) && C.size(1) == B.size(1),
                "shapes do not match");
    for (const auto& step : ladder()) {
        if (step.first != name) continue;
        const c10::cuda::CUDAGuard guard(A.device());
        const cudaError_t err = step.second(
            static_cast<int>(A.size(0)), static_cast<int>(B.size(1)), static_cast<int>(A.size(1)),
            static_cast<float>(alpha), A.data_ptr<float>(), B.data_ptr<float>(),
            static_cast<float>(beta), C.data_ptr<float>(), vec,
            at::cuda::getCurrentCUDAStream());
        TORCH_CHECK(err == cudaSuccess, "cuda_ref kernel '", name,
                    "' failed to launch: ", cudaGetErrorString(err));
        return;
    }
    TORCH_CHECK(false, "unknown cuda_ref kernel '", name, "'");
}
