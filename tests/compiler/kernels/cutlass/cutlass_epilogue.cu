// A CUTLASS kernel (issue 19): CUTLASS's LinearCombination epilogue functor
// (D = alpha * accumulator + beta * source, f32 math, f16 output through
// cutlass::NumericArrayConverter) over cutlass::Array fragments of 8, as a GEMM
// epilogue applies it. CUTLASS 2.x GEMM kernels (anything that includes
// cutlass/arch/mma.h) cannot go through kcache yet: "mma.h" names both that
// header (cutlass/arch/mma_sm70.h includes it as "mma.h") and the toolkit's
// <mma.h> (cutlass/arch/wmma.h), and NVRTC matches in-memory headers by the
// name as written.
#include <cutlass/epilogue/thread/linear_combination.h>

using Epilogue = cutlass::epilogue::thread::LinearCombination<cutlass::half_t, 8, float, float>;

extern "C" __global__ void cutlass_epilogue(const float* accumulator, const cutlass::half_t* source,
                                            cutlass::half_t* out, float alpha, float beta,
                                            int count) {
  using Accumulators = Epilogue::FragmentAccumulator;
  using Outputs = Epilogue::FragmentOutput;
  Epilogue op(typename Epilogue::Params(alpha, beta));
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * Epilogue::kCount;
  if (i + Epilogue::kCount > count) return;
  Accumulators acc = *reinterpret_cast<const Accumulators*>(accumulator + i);
  Outputs src = *reinterpret_cast<const Outputs*>(source + i);
  *reinterpret_cast<Outputs*>(out + i) = op(acc, src);
}
