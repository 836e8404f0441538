// A CuTe tensor-core GEMM (issue 19): C (M x N, row-major, f32) = A (M x K,
// row-major, f16) * B^T (B: N x K, row-major, f16), one 32x32 tile per block of
// 128 threads through SM80_16x8x16_F32F16F16F32_TN atoms. M and N must be
// multiples of 32, K of 16. Compiled by NVRTC with -default-device (CuTe's
// host-device functions are not all annotated) and by nvcc as it is.
#include <cute/tensor.hpp>

using namespace cute;

// A user's own variable in namespace cuda: the lean pass must keep it, and
// cuModuleGetGlobal must find it by its mangled name, _ZN4cuda2my4knobE, though
// nothing in the kernel references it.
namespace cuda {
namespace my {
__device__ int knob = 11;
}  // namespace my
}  // namespace cuda

extern "C" __global__ void cute_gemm(const half_t* A, const half_t* B, float* C, int M, int N,
                                     int K) {
  Tensor mA = make_tensor(make_gmem_ptr(A), make_shape(M, K), make_stride(K, Int<1>{}));
  Tensor mB = make_tensor(make_gmem_ptr(B), make_shape(N, K), make_stride(K, Int<1>{}));
  Tensor mC = make_tensor(make_gmem_ptr(C), make_shape(M, N), make_stride(N, Int<1>{}));

  TiledMMA mma = make_tiled_mma(SM80_16x8x16_F32F16F16F32_TN{}, Layout<Shape<_2, _2, _1>>{},
                                Tile<_32, _32, _16>{});
  auto tiler = make_shape(Int<32>{}, Int<32>{}, Int<16>{});
  auto coord = make_coord(blockIdx.x, blockIdx.y, _);
  Tensor gA = local_tile(mA, tiler, coord, Step<_1, X, _1>{});  // (32, 16, k)
  Tensor gB = local_tile(mB, tiler, coord, Step<X, _1, _1>{});  // (32, 16, k)
  Tensor gC = local_tile(mC, tiler, coord, Step<_1, _1, X>{});  // (32, 32)

  ThrMMA thr = mma.get_slice(threadIdx.x);
  Tensor tCgA = thr.partition_A(gA);
  Tensor tCgB = thr.partition_B(gB);
  Tensor tCgC = thr.partition_C(gC);
  Tensor tCrA = thr.partition_fragment_A(gA(_, _, 0));
  Tensor tCrB = thr.partition_fragment_B(gB(_, _, 0));
  Tensor tCrC = thr.make_fragment_C(tCgC);
  clear(tCrC);
  for (int k = 0; k < size<3>(tCgA); ++k) {
    copy(tCgA(_, _, _, k), tCrA);
    copy(tCgB(_, _, _, k), tCrB);
    gemm(mma, tCrA, tCrB, tCrC);
  }
  copy(tCrC, tCgC);
}
