"""Writes cases/<name>/case.json (+ files on disk for relative includes)."""
import json, os, shutil
H = os.path.dirname(os.path.abspath(__file__))
C = os.path.join(H, "cases")
CCCL = "/usr/local/cuda/include/cccl"
CUDA = "/usr/local/cuda/include"
CUT = "/opt/kcache-cutlass/cutlass_library/source/include"
import glob
CUPY = glob.glob("/opt/kcache-cupy/lib/python3*/site-packages/cupy/_core/include")[0]
cases = {}
def case(name, src, options, name_exprs=(), headers=None, files=None, progname="@kernel.cu", mutate=None):
    cases[name] = dict(src=src, options=list(options), name_exprs=list(name_exprs),
                       headers=headers or {}, name=progname, files=files or {}, mutate=mutate)

case("saxpy_sm80_relname", r'''extern "C" __global__ void saxpy(float a, const float* x, float* y, int n){
 int i = blockIdx.x*blockDim.x+threadIdx.x; if(i<n) y[i]=a*x[i]+y[i];}''', ["-arch=sm_80"], progname="prog.cu")
case("saxpy_compute90_ptx", r'''extern "C" __global__ void saxpy(float a, const float* x, float* y, int n){
 int i = blockIdx.x*blockDim.x+threadIdx.x; if(i<n) y[i]=a*x[i]+y[i];}''', ["-arch=compute_90", "--use_fast_math"])
case("template_nameexpr", r'''template<typename T, int N> __global__ void scale(T* x, T a){
 int i = blockIdx.x*blockDim.x+threadIdx.x; if(i<N) x[i]*=a; }
namespace ns { template<class T> __global__ void fill(T* x, T v, int n){ for(int i=threadIdx.x;i<n;i+=blockDim.x) x[i]=v; } }
__device__ int gcount;''', ["--std=c++17", "-arch=sm_90"],
 ["scale<float, 256>", "scale<double,128>", "ns::fill<int>", "&gcount", "ns::fill<unsigned long long>"])
case("default_device_lineinfo", r'''#include <cuda/std/cmath>
float helper(float x){ return cuda::std::sqrt(x)+1.f; }
extern "C" __global__ void k(float* x){ x[threadIdx.x]=helper(x[threadIdx.x]); }''', ["-default-device", "-lineinfo", "-arch=sm_80", "--std=c++17", "-I" + CCCL])
case("debug_G", r'''extern "C" __global__ void k(int* x){ int s=0; for(int i=0;i<threadIdx.x;i++) s+=i*i; x[threadIdx.x]=s; }''', ["-G", "-arch=sm_80"])
case("dopt_on", r'''extern "C" __global__ void k(int* x){ x[threadIdx.x]*=3; }''', ["-dopt=on", "-arch=sm_90", "-lineinfo"])
case("cub_block_reduce", r'''#include <cub/block/block_reduce.cuh>
template<int BLOCK> __global__ void bsum(const float* in, float* out){
 using BR = cub::BlockReduce<float, BLOCK>; __shared__ typename BR::TempStorage t;
 float v = in[blockIdx.x*BLOCK+threadIdx.x]; float s = BR(t).Sum(v); if(threadIdx.x==0) out[blockIdx.x]=s; }''',
 ["--std=c++17", "-arch=sm_80", "-I" + CCCL], ["bsum<128>", "bsum<256>"])
case("cub_block_scan_radix", r'''#include <cub/block/block_scan.cuh>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_load.cuh>
#include <cub/block/block_store.cuh>
extern "C" __global__ void scan_sort(int* d){
 using BS = cub::BlockScan<int,128>; using RS = cub::BlockRadixSort<int,128,4>;
 __shared__ union { typename BS::TempStorage s; typename RS::TempStorage r; } t;
 int items[4]; cub::LoadDirectBlocked(threadIdx.x, d, items);
 RS(t.r).Sort(items); __syncthreads(); BS(t.s).InclusiveSum(items, items);
 cub::StoreDirectBlocked(threadIdx.x, d, items); }''', ["--std=c++17", "-arch=sm_90", "-I" + CCCL])
case("cub_warp_reduce_fp16", r'''#include <cuda_fp16.h>
#include <cub/warp/warp_reduce.cuh>
extern "C" __global__ void wr(const __half* in, float* out){
 using WR = cub::WarpReduce<float>; __shared__ typename WR::TempStorage t[4];
 float v = __half2float(in[threadIdx.x]); float s = WR(t[threadIdx.x/32]).Sum(v);
 if(threadIdx.x%32==0) out[threadIdx.x/32]=s; }''', ["--std=c++17", "-arch=sm_80", "-I" + CCCL, "-I" + CUDA])
case("libcu_atomic_ref", r'''#include <cuda/atomic>
#include <cuda/std/array>
#include <cuda/std/utility>
extern "C" __global__ void k(int* c){ cuda::atomic_ref<int, cuda::thread_scope_device> r(*c);
 cuda::std::array<int,4> a{1,2,3,4}; int s=0; for(auto v:a) s+=v; r.fetch_add(s, cuda::std::memory_order_relaxed); }''',
 ["--std=c++17", "-arch=sm_90", "-I" + CCCL])
case("cuda_barrier_pipeline", r'''#include <cuda/barrier>
#include <cuda/pipeline>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void k(const float* g, float* o){
 __shared__ float s[256];
 auto block = cg::this_thread_block();
 __shared__ cuda::pipeline_shared_state<cuda::thread_scope_block, 2> st;
 auto p = cuda::make_pipeline(block, &st);
 p.producer_acquire(); cuda::memcpy_async(block, s, g + blockIdx.x*256, sizeof(float)*256, p); p.producer_commit();
 p.consumer_wait(); o[blockIdx.x*256+threadIdx.x] = s[threadIdx.x]*2; p.consumer_release(); }''',
 ["--std=c++17", "-arch=sm_80", "-I" + CCCL, "-I" + CUDA])
case("cuda_barrier_arrive", r'''#include <cuda/barrier>
extern "C" __global__ void k(int* o){
 __shared__ cuda::barrier<cuda::thread_scope_block> bar;
 if(threadIdx.x==0) init(&bar, blockDim.x); __syncthreads();
 auto tok = bar.arrive(); o[threadIdx.x]=1; bar.wait(cuda::std::move(tok)); }''', ["--std=c++20", "-arch=sm_90", "-I" + CCCL])
case("coop_groups_reduce", r'''#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;
extern "C" __global__ void k(const int* in, int* out){
 auto tb = cg::this_thread_block(); auto w = cg::tiled_partition<32>(tb);
 int v = cg::reduce(w, in[threadIdx.x], cg::plus<int>()); if(w.thread_rank()==0) atomicAdd(out, v); }''',
 ["--std=c++17", "-arch=sm_80", "-I" + CCCL, "-I" + CUDA])
case("wmma_half", r'''#include <mma.h>
using namespace nvcuda;
extern "C" __global__ void k(const half* a, const half* b, float* c){
 wmma::fragment<wmma::matrix_a,16,16,16,half,wmma::row_major> fa;
 wmma::fragment<wmma::matrix_b,16,16,16,half,wmma::col_major> fb;
 wmma::fragment<wmma::accumulator,16,16,16,float> fc;
 wmma::fill_fragment(fc,0.f); wmma::load_matrix_sync(fa,a,16); wmma::load_matrix_sync(fb,b,16);
 wmma::mma_sync(fc,fa,fb,fc); wmma::store_matrix_sync(c,fc,16,wmma::mem_row_major); }''',
 ["-arch=sm_80", "-I" + CUDA, "--std=c++17"])
case("mma_inline_ptx", r'''extern "C" __global__ void k(const unsigned* A, const unsigned* B, float* C){
 float d[4]={0,0,0,0}; unsigned a[4]={A[0],A[1],A[2],A[3]}, b[2]={B[0],B[1]};
 asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
  : "+f"(d[0]),"+f"(d[1]),"+f"(d[2]),"+f"(d[3]) : "r"(a[0]),"r"(a[1]),"r"(a[2]),"r"(a[3]),"r"(b[0]),"r"(b[1]));
 for(int i=0;i<4;i++) C[threadIdx.x*4+i]=d[i]; }''', ["-arch=sm_80"])
case("bf16_fp8_sm90", r'''#include <cuda_bf16.h>
#include <cuda_fp8.h>
extern "C" __global__ void k(const __nv_bfloat162* a, __nv_fp8_e4m3* o, float s){
 __nv_bfloat162 v = __hmul2(a[threadIdx.x], __float2bfloat162_rn(s));
 o[threadIdx.x] = __nv_fp8_e4m3(__low2float(v)+__high2float(v)); }''', ["-arch=sm_90", "-I" + CUDA, "--std=c++17"])
case("half2_fast_math", r'''#include <cuda_fp16.h>
extern "C" __global__ void gelu(__half2* x, int n){ int i=blockIdx.x*blockDim.x+threadIdx.x; if(i>=n) return;
 float2 f=__half22float2(x[i]); f.x=0.5f*f.x*(1.f+tanhf(0.79788456f*(f.x+0.044715f*f.x*f.x*f.x)));
 f.y=0.5f*f.y*(1.f+tanhf(0.79788456f*(f.y+0.044715f*f.y*f.y*f.y))); x[i]=__float22half2_rn(f); }''',
 ["-arch=sm_80", "--use_fast_math", "-I" + CUDA])
case("defines_many", r'''#ifndef BLOCK
#error need BLOCK
#endif
#define STR2(x) #x
#define STR(x) STR2(x)
extern "C" __global__ void k(float* x){ __shared__ float s[BLOCK]; s[threadIdx.x]=x[threadIdx.x]*SCALE;
 __syncthreads(); x[threadIdx.x]=s[BLOCK-1-threadIdx.x]; }
static_assert(sizeof(STR(NAME))>1, "");''', ["-DBLOCK=256", "-D", "SCALE=2.5f", "--define-macro=NAME=hello", "-UFOO", "-arch=sm_80"])
case("compile_error", r'''template<class T> __global__ void k(T* x){ x[0] = undefined_symbol<T>; }
template __global__ void k<float>(float*);''', ["-arch=sm_80"])
case("warning_log", r'''extern "C" __global__ void k(int* x){ int unused; int y = 3; x[0] = (unsigned)y < -1; }''', ["-arch=sm_80", "-Wall"])
# in-memory headers (CuPy/Jitify style)
case("inmem_headers", r'''#include "my/vec.cuh"
#include <cfg.h>
extern "C" __global__ void k(Vec<float,4>* v){ v[threadIdx.x] = v[threadIdx.x] * CFG_SCALE; }''',
 ["-arch=sm_90", "--std=c++17"], headers={"my/vec.cuh": "#pragma once\ntemplate<class T,int N> struct Vec{T d[N]; __device__ Vec operator*(T s) const { Vec r; for(int i=0;i<N;i++) r.d[i]=d[i]*s; return r;} };\n",
 "cfg.h": "#pragma once\n#define CFG_SCALE 3.0f\n"})
# relative includes on disk, #pragma once, __has_include, mutation
case("relative_includes", r'''#include "inc/a.cuh"
#include "inc/a.cuh"
#if __has_include("inc/optional.cuh")
#include "inc/optional.cuh"
#endif
#if __has_include(<nonexistent_header_xyz.h>)
#error nope
#endif
extern "C" __global__ void k(float* x){ x[threadIdx.x] = a_fn(x[threadIdx.x]) + OPT; }''',
 ["-arch=sm_80", "-Iinc2", "--std=c++17"], progname="prog.cu",
 files={"inc/a.cuh": "#pragma once\n#include \"b.cuh\"\n__device__ float a_fn(float x){ return b_fn(x)*2.f; }\n",
        "inc/b.cuh": "#pragma once\n#include <c.cuh>\n__device__ float b_fn(float x){ return x+C_VAL; }\n",
        "inc2/c.cuh": "#pragma once\n#define C_VAL 1.0f\n",
        "inc/optional.cuh": "#define OPT 5.0f\n"},
 mutate=[["inc2/c.cuh", "#pragma once\n#define C_VAL 7.0f\n"], ["inc/optional.cuh", None]])
case("file_macro", r'''#include "inc/where.cuh"
extern "C" __global__ void k(char* o){ const char* f = WHERE; int i=0; while(f[i]) { o[i]=f[i]; i++; } o[i]=__LINE__; }''',
 ["-arch=sm_80", "-I."], files={"inc/where.cuh": "#define WHERE __FILE__\n"})
# CuTe / CUTLASS
case("cute_copy", r'''#include <cute/tensor.hpp>
using namespace cute;
extern "C" __global__ void k(float* g, float* o){
 auto layout = make_layout(make_shape(Int<32>{}, Int<8>{}));
 Tensor t = make_tensor(make_gmem_ptr(g), layout); Tensor u = make_tensor(make_gmem_ptr(o), layout);
 for(int i=threadIdx.x;i<size(t);i+=blockDim.x) u(i)=t(i)*2.f; }''',
 ["--std=c++17", "-arch=sm_80", "-default-device", "-I" + CUT, "-I" + CCCL, "-I" + CUDA, "-DCUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL=0"])
case("cute_gemm_sm80_mma", r'''#include <cute/tensor.hpp>
#include <cute/atom/mma_atom.hpp>
using namespace cute;
template<class TA> __global__ void gemm(TA const* A, TA const* B, float* C){
 using MMA = TiledMMA<MMA_Atom<SM80_16x8x16_F32F16F16F32_TN>, Layout<Shape<_2,_2,_1>>>;
 Tensor gA = make_tensor(make_gmem_ptr(A), make_layout(make_shape(_32{}, _16{}), LayoutRight{}));
 Tensor gB = make_tensor(make_gmem_ptr(B), make_layout(make_shape(_32{}, _16{}), LayoutRight{}));
 Tensor gC = make_tensor(make_gmem_ptr(C), make_layout(make_shape(_32{}, _32{}), LayoutRight{}));
 MMA mma; auto thr = mma.get_slice(threadIdx.x);
 auto tA = thr.partition_fragment_A(gA); auto tB = thr.partition_fragment_B(gB); auto tC = thr.partition_fragment_C(gC);
 copy(thr.partition_A(gA), tA); copy(thr.partition_B(gB), tB); clear(tC); cute::gemm(mma, tA, tB, tC); copy(tC, thr.partition_C(gC)); }''',
 ["--std=c++17", "-arch=sm_80", "-default-device", "-I" + CUT, "-I" + CCCL, "-I" + CUDA], ["gemm<cute::half_t>"])
case("cutlass_kernel_gemm", r'''#include <cutlass/cutlass.h>
#include <cutlass/gemm/kernel/default_gemm.h>
#include <cutlass/gemm/threadblock/threadblock_swizzle.h>
#include <cutlass/epilogue/thread/linear_combination.h>
using Kern = typename cutlass::gemm::kernel::DefaultGemm<
  cutlass::half_t, cutlass::layout::RowMajor, 8, cutlass::half_t, cutlass::layout::ColumnMajor, 8,
  float, cutlass::layout::RowMajor, float, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
  cutlass::gemm::GemmShape<128,128,32>, cutlass::gemm::GemmShape<64,64,32>, cutlass::gemm::GemmShape<16,8,16>,
  cutlass::epilogue::thread::LinearCombination<float, 4, float, float>,
  cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, 3, false, cutlass::arch::OpMultiplyAdd>::GemmKernel;
extern "C" __global__ void __launch_bounds__(Kern::kThreadCount) gemm_kernel(typename Kern::Params p){
 extern __shared__ int smem[]; Kern op; op(p, *reinterpret_cast<typename Kern::SharedStorage*>(smem)); }''',
 ["--std=c++17", "-arch=sm_80", "-default-device", "-I" + CUT, "-I" + CCCL, "-I" + CUDA, "-DCUTLASS_NAMESPACE=cutlass", "-w"])
case("cutlass_numeric_conv", r'''#include <cutlass/numeric_types.h>
#include <cutlass/numeric_conversion.h>
#include <cutlass/array.h>
extern "C" __global__ void k(const float* in, cutlass::bfloat16_t* out){
 cutlass::NumericArrayConverter<cutlass::bfloat16_t, float, 8> cv; cutlass::Array<float,8> a;
 for(int i=0;i<8;i++) a[i]=in[threadIdx.x*8+i]; auto b = cv(a); for(int i=0;i<8;i++) out[threadIdx.x*8+i]=b[i]; }''',
 ["--std=c++17", "-arch=sm_90", "-default-device", "-I" + CUT, "-I" + CCCL, "-I" + CUDA])
# CuPy-header kernels (CuPy-style options)
CUPYOPTS = ["-arch=sm_90", "--std=c++17", "-I" + CUPY, "-I" + CUPY + "/cupy/_cccl/libcudacxx", "-I" + CUPY + "/cupy/_cccl/cub", "-I" + CUPY + "/cupy/_cccl/thrust", "-I" + CUDA, "-DCUPY_USE_BINARY_DATA"]
case("cupy_carray_elementwise", r'''#include <cupy/complex.cuh>
#include <cupy/carray.cuh>
#include <cupy/atomics.cuh>
typedef float in0_type; typedef complex<double> out0_type;
extern "C" __global__ void cupy_add(const CArray<in0_type, 1, true, true> _raw_in0, CArray<out0_type, 1, true, true> _raw_out0, CIndexer<1, true> _ind){
 CUPY_FOR(i, _ind.size()) { _ind.set(i); const in0_type in0 = _raw_in0[_ind.get()]; out0_type &out0 = _raw_out0[_ind.get()];
 out0 = out0_type(in0) * exp(out0_type(0, in0)); } }''', CUPYOPTS)
case("cupy_reduction_fp16", r'''#include <cupy/carray.cuh>
#include <cupy/float16.cuh>
#define REDUCE(a, b) (a + b)
#define _REDUCE(_offset) if (_tid < _offset) { _type_reduce _a = _sdata[_tid], _b = _sdata[(_tid + _offset)]; _sdata[_tid] = REDUCE(_a, _b); }
typedef float _type_reduce; typedef float16 type_in0_raw;
extern "C" __global__ void cupy_sum(CArray<type_in0_raw, 1> _raw_in0, CArray<float, 1> _raw_out0, CIndexer<1> _in_ind, CIndexer<1> _out_ind, int _block_stride){
 __shared__ _type_reduce _sdata[512]; unsigned int _tid = threadIdx.x; _type_reduce _s = 0;
 for (ptrdiff_t _i = _tid; _i < _in_ind.size(); _i += 512) { _in_ind.set(_i); _s = REDUCE(_s, (_type_reduce)_raw_in0[_in_ind.get()]); }
 _sdata[_tid] = _s; __syncthreads(); for (int off = 256; off > 0; off >>= 1) { _REDUCE(off); __syncthreads(); }
 if (_tid == 0) _raw_out0[0] = _sdata[0]; }''', CUPYOPTS)
case("cupy_cub_in_bundle", r'''#include <cupy/carray.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_load.cuh>
extern "C" __global__ void cupy_cub_sum(const float* x, float* y, long long n){
 typedef cub::BlockReduce<float, 512> BR; __shared__ typename BR::TempStorage t;
 float v = 0; for (long long i = threadIdx.x; i < n; i += 512) v += x[i]; float s = BR(t).Sum(v); if (threadIdx.x==0) *y = s; }''', CUPYOPTS)
case("cupy_thrust_complex", r'''#include <thrust/complex.h>
extern "C" __global__ void k(thrust::complex<float>* z){ z[threadIdx.x] = thrust::exp(z[threadIdx.x]) + thrust::conj(z[threadIdx.x]); }''', CUPYOPTS)
case("cuda_std_mdspan_span", r'''#include <cuda/std/span>
#include <cuda/std/mdspan>
#include <cuda/std/functional>
#include <cuda/std/tuple>
extern "C" __global__ void k(float* d, int n){
 cuda::std::mdspan<float, cuda::std::extents<int, 16, cuda::std::dynamic_extent>> m(d, 16);
 cuda::std::span<float> s(d, n); auto t = cuda::std::make_tuple(1, 2.f);
 m(threadIdx.x % 16, 0) = cuda::std::get<1>(t) + s.size() + cuda::std::plus<float>{}(1.f, 2.f); }''',
 ["--std=c++20", "-arch=sm_90", "-I" + CCCL])
case("thrust_functional_tuple", r'''#include <thrust/tuple.h>
#include <thrust/functional.h>
#include <thrust/pair.h>
template<class T> __global__ void k(T* x){ auto t = thrust::make_tuple(x[0], x[1]); thrust::maximum<T> m;
 x[threadIdx.x] = m(thrust::get<0>(t), thrust::get<1>(t)); }''', ["--std=c++17", "-arch=sm_80", "-I" + CCCL, "-I" + CUDA], ["k<float>", "k<int>"])
case("has_include_cccl_guard", r'''#if __has_include(<cuda/std/version>)
#include <cuda/std/version>
#define HAVE 1
#else
#define HAVE 0
#endif
extern "C" __global__ void k(int* o){ o[0] = HAVE * _LIBCUDACXX_CUDA_API_VERSION; }''', ["--std=c++17", "-arch=sm_90", "-I" + CCCL])
case("extra_options", r'''extern "C" __global__ void __launch_bounds__(128) k(float* x){ x[threadIdx.x] = __fdividef(x[threadIdx.x], 3.f); }''',
 ["--gpu-architecture=sm_90", "-ftz=true", "-prec-div=false", "-fmad=true", "--extra-device-vectorization", "-maxrregcount=64", "-Xptxas=-v"])
case("relocatable_rdc", r'''extern __device__ int other(int); __device__ int mine(int x){ return x*2; }
extern "C" __global__ void k(int* x){ x[threadIdx.x] = mine(x[threadIdx.x]); }''', ["-rdc=true", "-arch=sm_80"])
case("lto_dlto", r'''extern "C" __global__ void k(int* x){ x[threadIdx.x] += 1; }''', ["-dlto", "-arch=sm_90"])
case("no_name_program", r'''extern "C" __global__ void k(int* x){ x[threadIdx.x] += 1; }''', ["-arch=sm_80"], progname=None)

case("curand_philox", r'''#include <curand_kernel.h>
extern "C" __global__ void k(float* o, unsigned long long seed){ curandStatePhilox4_32_10_t s;
 curand_init(seed, threadIdx.x, 0, &s); float4 v = curand_uniform4(&s); o[threadIdx.x] = v.x+v.y+v.z+v.w; }''',
 ["-arch=sm_80", "--std=c++17", "-I" + CUDA, "-I" + CCCL, "-default-device"])
case("cub_block_histogram", r'''#include <cub/block/block_histogram.cuh>
extern "C" __global__ void h(const unsigned char* d, unsigned int* bins){
 using BH = cub::BlockHistogram<unsigned char, 128, 4, 256>; __shared__ typename BH::TempStorage t; __shared__ unsigned int sb[256];
 unsigned char items[4]; for(int i=0;i<4;i++) items[i]=d[threadIdx.x*4+i]; BH(t).Histogram(items, sb); __syncthreads();
 for(int i=threadIdx.x;i<256;i+=128) atomicAdd(&bins[i], sb[i]); }''', ["--std=c++17", "-arch=sm_90", "-I" + CCCL])
case("cuda_std_complex_shfl", r'''#include <cuda/std/complex>
template<class T> __device__ T warp_sum(T v){ for(int o=16;o>0;o>>=1) v += __shfl_down_sync(0xffffffff, v, o); return v; }
extern "C" __global__ void k(cuda::std::complex<float>* z, float* o){ auto a = cuda::std::abs(z[threadIdx.x]*cuda::std::exp(z[threadIdx.x]));
 float s = warp_sum(a); if((threadIdx.x&31)==0) o[threadIdx.x>>5]=s; }''', ["--std=c++17", "-arch=sm_80", "-I" + CCCL])
case("cg_memcpy_async_grid", r'''#include <cooperative_groups.h>
#include <cooperative_groups/memcpy_async.h>
namespace cg = cooperative_groups;
extern "C" __global__ void k(const float* g, float* o, int n){ extern __shared__ float s[];
 auto b = cg::this_thread_block(); cg::memcpy_async(b, s, g + blockIdx.x*blockDim.x, sizeof(float)*blockDim.x); cg::wait(b);
 o[blockIdx.x*blockDim.x+threadIdx.x] = s[blockDim.x-1-threadIdx.x]; }''', ["--std=c++17", "-arch=sm_90", "-I" + CCCL, "-I" + CUDA])
case("atomics_fp16_bf16", r'''#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void k(__half* a, __nv_bfloat16* b, const float* x){ atomicAdd(a, __float2half(x[threadIdx.x])); atomicAdd(b, __float2bfloat16(x[threadIdx.x])); }''',
 ["-arch=sm_90", "-I" + CUDA])

if os.path.exists(C): shutil.rmtree(C)
for n, c in cases.items():
    d = os.path.join(C, n); os.makedirs(d)
    for p, t in c.pop("files").items():
        os.makedirs(os.path.dirname(os.path.join(d, p)) or d, exist_ok=True); open(os.path.join(d, p), "w").write(t)
    json.dump(c, open(os.path.join(d, "case.json"), "w"), indent=1)
print(len(cases), "cases")
