#!/usr/bin/env python3
"""Issue 19 on a GPU: the CuTe GEMM and the CUTLASS epilogue
(tests/compiler/kernels/cutlass/) from three images each, kcache's lean cubin,
NVRTC's own (--no-lean) and nvcc's (`nvcc -cubin -arch=sm_90 -std=c++17`).

For every image: results against a host reference (NumPy) and against the
other images, the kernel time (CUDA events, median of RUNS launches after a
warm-up), and for the CuTe images whether cuModuleGetGlobal finds the user's
unreferenced `cuda::my::knob` (`_ZN4cuda2my4knobE`, initialised to 11). Load
times come from bench/runtime_cubin_load.py on the same files.

    runtime_cutlass_lean.py DIR   (DIR holds cute_{lean,nvrtc,nvcc}.cubin,
                                   cutlass_{lean,nvrtc,nvcc}.cubin and
                                   cutlass2_{lean,nvrtc,nvcc}.cubin; the CuTe
                                   ones may be left out)

The CUTLASS 2.x GEMM (cutlass2_gemm.cu, issue 27) the same way: results against
NumPy and between the images, kernel times, and its load time per image
(interleaved) with each one's ratio to nvcc's.
"""
import statistics
import sys
import time

import cupy as cp
import numpy as np

import os

RUNS = 50
ROUNDS = 3  # kernel times: the images take turns, ROUNDS times, so no image always runs first
IMAGES = tuple(os.environ.get("IMAGES", "lean,nvrtc,nvcc").split(","))


def kernel_ms(launch):
    launch()
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(RUNS):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        launch()
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end))
    return statistics.median(times)


def interleaved_ms(launches):
    """Median kernel time per image, the images taking turns ROUNDS times."""
    samples = {image: [] for image in launches}
    for _ in range(ROUNDS):
        for image, launch in launches.items():
            samples[image].append(kernel_ms(launch))
    return {image: statistics.median(s) for image, s in samples.items()}


def cute(folder):
    m, n, k = 1024, 1024, 512
    rng = np.random.default_rng(19)
    a = rng.integers(-4, 5, size=(m, k)).astype(np.float16) / np.float16(4)
    b = rng.integers(-4, 5, size=(n, k)).astype(np.float16) / np.float16(4)
    want = a.astype(np.float64) @ b.astype(np.float64).T  # exact in f32 too: small sums of quarters
    da, db = cp.asarray(a), cp.asarray(b)
    results, launches, rows = {}, {}, {}
    print("| CuTe GEMM image | max abs error vs host | kernel (median) | cuModuleGetGlobal knob |")
    print("|---|---|---|---|")
    for image in IMAGES:
        mod = cp.RawModule(path=f"{folder}/cute_{image}.cubin")
        f = mod.get_function("cute_gemm")
        dc = cp.zeros((m, n), dtype=cp.float32)

        launches[image] = (lambda f=f, dc=dc: f((m // 32, n // 32), (128,),
                                                 (da, db, dc, np.int32(m), np.int32(n), np.int32(k))))
        launches[image]()
        cp.cuda.Device().synchronize()
        got = cp.asnumpy(dc)
        results[image] = got
        try:
            ptr = mod.get_global("_ZN4cuda2my4knobE")
            knob = int(cp.ndarray((1,), dtype=cp.int32, memptr=ptr).get()[0])
            found = f"found, value {knob}"
        except Exception as e:  # the unsound lean-v1 gave CUDA_ERROR_NOT_FOUND here
            found = f"{type(e).__name__}: {e}"
        rows[image] = (float(np.max(np.abs(got.astype(np.float64) - want))), found)
    times = interleaved_ms(launches)
    for image in IMAGES:
        err, found = rows[image]
        print(f"| {image} | {err:g} | {times[image] * 1000:.1f} us | {found} |")
    for image in (i for i in IMAGES if i != "lean"):
        same = np.array_equal(results["lean"], results[image])
        print(f"lean vs {image}: {'bit-identical' if same else 'DIFFERENT'}")


def cutlass(folder):
    count = 8 * 256 * 1024
    rng = np.random.default_rng(91)
    acc = rng.standard_normal(count).astype(np.float32)
    src = rng.standard_normal(count).astype(np.float16)
    alpha, beta = np.float32(1.5), np.float32(-0.75)
    # LinearCombination computes fma(alpha, acc, beta * src) in f32 (one rounding; beta * src is
    # exact), then rounds to f16: the same in f64 (exact here), then f32, then f16.
    exact = np.float64(alpha) * acc.astype(np.float64) + np.float64(beta) * src.astype(np.float64)
    want = exact.astype(np.float32).astype(np.float16)
    dacc, dsrc = cp.asarray(acc), cp.asarray(src)
    results, launches, rows = {}, {}, {}
    print("| CUTLASS epilogue image | elements equal to host | max abs error | kernel (median) |")
    print("|---|---|---|---|")
    for image in IMAGES:
        f = cp.RawModule(path=f"{folder}/cutlass_{image}.cubin").get_function("cutlass_epilogue")
        dout = cp.zeros(count, dtype=cp.float16)

        launches[image] = (lambda f=f, dout=dout: f((count // 8 // 256,), (256,),
                                                    (dacc, dsrc, dout, alpha, beta, np.int32(count))))
        launches[image]()
        cp.cuda.Device().synchronize()
        got = cp.asnumpy(dout)
        results[image] = got
        equal = int(np.sum(got == want))
        err = float(np.max(np.abs(got.astype(np.float32) - want.astype(np.float32))))
        rows[image] = (equal, err)
    times = interleaved_ms(launches)
    for image in IMAGES:
        equal, err = rows[image]
        print(f"| {image} | {equal:,} of {count:,} | {err:g} | {times[image] * 1000:.1f} us |")
    for image in (i for i in IMAGES if i != "lean"):
        same = np.array_equal(results["lean"].view(np.uint16), results[image].view(np.uint16))
        print(f"lean vs {image}: {'bit-identical' if same else 'DIFFERENT'}")


def cutlass2(folder):
    """The CUTLASS 2.x GEMM (issue 27): C = A @ B^T in f32, f16 inputs."""
    m, n, k = 1024, 1024, 512
    rng = np.random.default_rng(27)
    a = rng.integers(-4, 5, size=(m, k)).astype(np.float16) / np.float16(4)
    b = rng.integers(-4, 5, size=(n, k)).astype(np.float16) / np.float16(4)  # B column-major
    want = a.astype(np.float64) @ b.astype(np.float64).T  # exact in f32 too
    da, db = cp.asarray(a), cp.asarray(b)
    results, launches, rows = {}, {}, {}
    print("| CUTLASS 2.x GEMM image | max abs error vs host | kernel (median) | shared memory |")
    print("|---|---|---|---|")
    for image in (i for i in IMAGES if os.path.exists(f"{folder}/cutlass2_{i}.cubin")):
        mod = cp.RawModule(path=f"{folder}/cutlass2_{image}.cubin")
        f = mod.get_function("cutlass2_gemm")
        smem_out = cp.zeros(1, dtype=cp.int32)
        mod.get_function("cutlass2_gemm_smem")((1,), (1,), (smem_out,))
        smem = int(smem_out.get()[0])
        f.max_dynamic_shared_size_bytes = smem
        dc = cp.zeros((m, n), dtype=cp.float32)
        launches[image] = (lambda f=f, dc=dc: f(
            ((m + 127) // 128, (n + 127) // 128), (128,),
            (np.int32(m), np.int32(n), np.int32(k), da, db, dc, np.float32(1), np.float32(0)),
            shared_mem=smem))
        launches[image]()
        cp.cuda.Device().synchronize()
        got = cp.asnumpy(dc)
        results[image] = got
        rows[image] = (float(np.max(np.abs(got.astype(np.float64) - want))), smem)
    times = interleaved_ms(launches)
    for image in launches:
        err, smem = rows[image]
        print(f"| {image} | {err:g} | {times[image] * 1000:.1f} us | {smem:,} B |")
    for image in (i for i in launches if i != "lean"):
        same = np.array_equal(results["lean"], results[image])
        print(f"lean vs {image}: {'bit-identical' if same else 'DIFFERENT'}")


LOAD_RUNS = 50


def cutlass2_load(folder):
    """The CUTLASS 2.x GEMM's load (cuModuleLoadData + cuModuleGetFunction +
    cuModuleUnload, through CuPy's driver bindings) for every image, the images
    taking turns LOAD_RUNS times after a warm-up, and each median's ratio to
    nvcc's: the lean-v3 goal is lean/nvcc <= 1."""
    drv = cp.cuda.driver
    images = {i: open(f"{folder}/cutlass2_{i}.cubin", "rb").read()
              for i in IMAGES if os.path.exists(f"{folder}/cutlass2_{i}.cubin")}

    def load(data):
        module = drv.moduleLoadData(data)
        drv.moduleGetFunction(module, "cutlass2_gemm")
        drv.moduleUnload(module)

    times = {i: [] for i in images}
    for data in images.values():
        load(data)
    for _ in range(LOAD_RUNS):
        for image, data in images.items():
            start = time.perf_counter()
            load(data)
            times[image].append((time.perf_counter() - start) * 1e6)
    medians = {i: statistics.median(t) for i, t in times.items()}
    base = medians.get("nvcc")
    print(f"| CUTLASS 2.x GEMM image | load (median of {LOAD_RUNS}, interleaved) | / nvcc's |")
    print("|---|---|---|")
    for image, us in medians.items():
        ratio = f"{us / base:.2f}x" if base else "-"
        print(f"| {image} | {us:.0f} us | {ratio} |")


def main():
    folder = sys.argv[1]
    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, "
          f"driver {cp.cuda.runtime.driverGetVersion()}")
    if os.path.exists(f"{folder}/cute_lean.cubin"):
        cute(folder)
        cutlass(folder)
    cutlass2(folder)
    cutlass2_load(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
