"""Compiles the engine's quantized decode products (kernels/gemv_quant.cu with the instantiations
of tools/gemv-lab/engine_shapes.cuh, as the engine hands them to NVRTC) for one architecture and
prints each kernel's registers and spills. Needs no GPU: NVRTC from PyPI is enough.

    python3 -m venv /tmp/nvrtc && /tmp/nvrtc/bin/pip install nvidia-cuda-nvrtc-cu12
    /tmp/nvrtc/bin/python tools/gemv-lab/ptxas_report.py [sm_90]
"""

import ctypes
import pathlib
import re
import sys

import nvidia.cuda_nvrtc

ROOT = pathlib.Path(__file__).resolve().parents[2]


def nvrtc():
    lib_dir = pathlib.Path(nvidia.cuda_nvrtc.__path__[0]) / "lib"
    return ctypes.CDLL(str(sorted(lib_dir.glob("libnvrtc.so.*"))[0]))


def source():
    common = (ROOT / "kernels/common.cuh").read_text()
    body = (ROOT / "kernels/gemv_quant.cu").read_text()
    shapes = (ROOT / "tools/gemv-lab/engine_shapes.cuh").read_text()
    instantiations = "\n".join(line for line in shapes.splitlines() if line.startswith("GEMV_Q_"))
    return f"{common}\n{body}\n{instantiations}\n"


def compile_log(arch):
    lib = nvrtc()
    program = ctypes.c_void_p()
    if lib.nvrtcCreateProgram(ctypes.byref(program), source().encode(), b"gemv_quant.cu", 0, None, None):
        sys.exit("NVRTC could not create the program")
    options = [f"--gpu-architecture={arch}".encode(), b"-default-device", b"--ptxas-options=--verbose"]
    status = lib.nvrtcCompileProgram(program, len(options), (ctypes.c_char_p * len(options))(*options))
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(program, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(program, log)
    if status:
        sys.exit(f"compiling for {arch} failed:\n{log.value.decode()}")
    return log.value.decode()


def main():
    arch = sys.argv[1] if len(sys.argv) > 1 else "sm_90"
    kernels = {}
    kernel = None
    for line in compile_log(arch).splitlines():
        if found := re.search(r"Compiling entry function '(\w+)'", line):
            kernel = found.group(1)
            kernels[kernel] = {}
        elif kernel and (found := re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)):
            kernels[kernel]["spills"] = f"{found.group(1)}/{found.group(2)} bytes"
        elif kernel and (found := re.search(r"Used (\d+) registers", line)):
            kernels[kernel]["registers"] = int(found.group(1))
    print(f"{'kernel':<24} {'registers':>9}  spill stores/loads ({arch})")
    for name in sorted(k for k in kernels if k.startswith("gemv")):
        print(f"{name:<24} {kernels[name].get('registers', '?'):>9}  {kernels[name].get('spills', '?')}")


if __name__ == "__main__":
    main()
