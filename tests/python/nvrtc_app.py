"""A Python program that compiles one kernel with NVRTC through ctypes, as a
user without CuPy or cuda.core would: create, compile for sm_90, get the PTX.
Prints the PTX's size; exits non-zero with NVRTC's error and log if a step
fails."""

import ctypes
import sys

SOURCE = b"""
extern "C" __global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
"""

nvrtc = ctypes.CDLL("libnvrtc.so.13")
nvrtc.nvrtcGetErrorString.restype = ctypes.c_char_p


def check(result, step, program=None):
    if result == 0:
        return
    log = b""
    if program is not None:
        size = ctypes.c_size_t()
        if nvrtc.nvrtcGetProgramLogSize(program, ctypes.byref(size)) == 0:
            buffer = ctypes.create_string_buffer(size.value)
            nvrtc.nvrtcGetProgramLog(program, buffer)
            log = buffer.value
    sys.exit("%s failed: %s\n%s" % (step, nvrtc.nvrtcGetErrorString(result).decode(), log.decode()))


program = ctypes.c_void_p()
check(nvrtc.nvrtcCreateProgram(ctypes.byref(program), SOURCE, b"scale.cu", 0, None, None),
      "nvrtcCreateProgram")
options = (ctypes.c_char_p * 1)(b"-arch=sm_90")
check(nvrtc.nvrtcCompileProgram(program, 1, options), "nvrtcCompileProgram", program)
size = ctypes.c_size_t()
check(nvrtc.nvrtcGetPTXSize(program, ctypes.byref(size)), "nvrtcGetPTXSize")
ptx = ctypes.create_string_buffer(size.value)
check(nvrtc.nvrtcGetPTX(program, ptx), "nvrtcGetPTX")
if b".entry scale" not in ptx.value:
    sys.exit("the PTX has no .entry scale")
nvrtc.nvrtcDestroyProgram(ctypes.byref(program))
print("ptx %d bytes" % size.value)
