"""Public API of kcache's Bazel rules. Rule code lives in rules/private/."""

load("//rules/private:cuda_kernel.bzl", _CudaKernelInfo = "CudaKernelInfo", _cuda_kernel = "cuda_kernel")

cuda_kernel = _cuda_kernel
CudaKernelInfo = _CudaKernelInfo
