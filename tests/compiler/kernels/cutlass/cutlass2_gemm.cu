// A CUTLASS 2.x device GEMM (f16 in, f32 accumulate, tensor cores, Sm80 tiles),
// its Params built in a wrapper kernel: the "mma.h" spelling CUTLASS 2.x uses
// for both its own cutlass/arch/mma.h and the toolkit's WMMA header (issue 27).
#include <cutlass/cutlass.h>
#include <cutlass/numeric_types.h>
#include <cutlass/layout/matrix.h>
#include <cutlass/gemm/kernel/default_gemm.h>
#include <cutlass/epilogue/thread/linear_combination.h>
#include <cutlass/gemm/threadblock/threadblock_swizzle.h>

using Kernel = typename cutlass::gemm::kernel::DefaultGemm<
    cutlass::half_t, cutlass::layout::RowMajor, 8,
    cutlass::half_t, cutlass::layout::ColumnMajor, 8,
    float, cutlass::layout::RowMajor, float,
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<128, 128, 32>, cutlass::gemm::GemmShape<64, 64, 32>,
    cutlass::gemm::GemmShape<16, 8, 16>,
    cutlass::epilogue::thread::LinearCombination<float, 4, float, float>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, 3, false,
    cutlass::arch::OpMultiplyAdd>::GemmKernel;

// C (m x n, row-major, f32) = alpha * A (m x k, row-major) * B (k x n,
// column-major) + beta * C; grid (ceil(m/128), ceil(n/128)), Kernel::kThreadCount
// threads, cutlass2_gemm_smem() bytes of dynamic shared memory.
extern "C" __global__ void __launch_bounds__(Kernel::kThreadCount)
cutlass2_gemm(int m, int n, int k, cutlass::half_t const* A, cutlass::half_t const* B, float* C,
              float alpha, float beta) {
  cutlass::gemm::GemmCoord problem(m, n, k);
  cutlass::gemm::GemmCoord grid = cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>()
      .get_tiled_shape(problem, {128, 128, 32}, 1);
  typename Kernel::Params params(
      problem, grid,
      typename Kernel::Mma::IteratorA::TensorRef(const_cast<cutlass::half_t*>(A),
                                                 cutlass::layout::RowMajor(k)),
      typename Kernel::Mma::IteratorB::TensorRef(const_cast<cutlass::half_t*>(B),
                                                 cutlass::layout::ColumnMajor(k)),
      typename Kernel::Epilogue::OutputTileIterator::TensorRef(C, cutlass::layout::RowMajor(n)),
      typename Kernel::Epilogue::OutputTileIterator::TensorRef(C, cutlass::layout::RowMajor(n)),
      typename Kernel::Epilogue::OutputOp::Params(alpha, beta));
  extern __shared__ int smem[];
  Kernel op;
  op(params, *reinterpret_cast<typename Kernel::SharedStorage*>(smem));
}

// The dynamic shared memory cutlass2_gemm needs, for the launcher.
extern "C" __global__ void cutlass2_gemm_smem(int* bytes) {
  *bytes = static_cast<int>(sizeof(typename Kernel::SharedStorage));
}
