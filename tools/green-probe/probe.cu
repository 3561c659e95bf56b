// Which kernels a stream of a CUDA green context can run, with the primary context current: a
// function of a module loaded into the primary context (as the engine loads its kernels), a
// context-independent kernel (cuLibraryLoadData), and cuBLAS. Each line says launched or the
// driver's error. Built and run on the GPU machine:
//     nvcc -O2 -o /tmp/probe tools/green-probe/probe.cu -lcuda -lcublas && /tmp/probe 64
#include <cublas_v2.h>
#include <cuda.h>
#include <cstdio>
#include <cstdlib>

// Fills a buffer with 1.0, one thread an entry.
static const char* PTX =
    ".version 7.0\n.target sm_70\n.address_size 64\n"
    ".visible .entry fill(.param .u64 p, .param .u32 n) {\n"
    " .reg .b32 r<5>; .reg .b64 rd<4>; .reg .pred q;\n"
    " ld.param.u64 rd1, [p]; ld.param.u32 r1, [n];\n"
    " mov.u32 r2, %tid.x; mov.u32 r3, %ctaid.x; mov.u32 r4, %ntid.x; mad.lo.s32 r2, r3, r4, r2;\n"
    " setp.ge.u32 q, r2, r1; @q ret;\n"
    " cvta.to.global.u64 rd2, rd1; mul.wide.u32 rd3, r2, 4; add.s64 rd2, rd2, rd3;\n"
    " mov.b32 r3, 0f3F800000; st.global.u32 [rd2], r3; ret; }\n";

static const char* name(CUresult r) {
    const char* s = nullptr;
    cuGetErrorName(r, &s);
    return s ? s : "?";
}

#define CHECK(x)                                                                \
    do {                                                                        \
        CUresult r_ = (x);                                                      \
        if (r_ != CUDA_SUCCESS) {                                               \
            printf("%s failed: %s\n", #x, name(r_));                            \
            exit(1);                                                            \
        }                                                                       \
    } while (0)

static void report(const char* what, CUresult launched, CUstream s, CUdeviceptr buf, int n) {
    if (launched != CUDA_SUCCESS) {
        printf("%s: launch refused, %s\n", what, name(launched));
        return;
    }
    CUresult done = cuStreamSynchronize(s);
    float host[4] = {0, 0, 0, 0};
    cuMemcpyDtoH(host, buf, sizeof(host));
    printf("%s: %s, first value %g\n", what, done == CUDA_SUCCESS ? "ran" : name(done), host[0]);
    cuMemsetD32(buf, 0, n);
}

int main(int argc, char** argv) {
    unsigned sms = argc > 1 ? atoi(argv[1]) : 64;
    CHECK(cuInit(0));
    CUdevice dev;
    CHECK(cuDeviceGet(&dev, 0));
    CUcontext primary;
    CHECK(cuDevicePrimaryCtxRetain(&primary, dev));
    CHECK(cuCtxSetCurrent(primary));
    int n = 1 << 20;
    CUdeviceptr buf;
    CHECK(cuMemAlloc(&buf, n * sizeof(float)));
    CHECK(cuMemsetD32(buf, 0, n));

    CUdevResource whole, part, rest;
    CHECK(cuDeviceGetDevResource(dev, &whole, CU_DEV_RESOURCE_TYPE_SM));
    unsigned groups = 1;
    CHECK(cuDevSmResourceSplitByCount(&part, &groups, &whole, &rest, 0, sms));
    CUdevResourceDesc desc;
    CHECK(cuDevResourceGenerateDesc(&desc, &part, 1));
    CUgreenCtx green;
    CHECK(cuGreenCtxCreate(&green, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM));
    CUstream gs;
    CHECK(cuGreenCtxStreamCreate(&gs, green, CU_STREAM_NON_BLOCKING, 0));
    printf("green context of %u of %u SMs; the primary context current\n", part.sm.smCount, whole.sm.smCount);

    void* args[] = {&buf, &n};
    CUmodule module;
    CUfunction fn;
    CHECK(cuModuleLoadData(&module, PTX));
    CHECK(cuModuleGetFunction(&fn, module, "fill"));
    report("module function, primary stream", cuLaunchKernel(fn, n / 256, 1, 1, 256, 1, 1, 0, 0, args, 0), 0, buf, n);
    report("module function, green stream", cuLaunchKernel(fn, n / 256, 1, 1, 256, 1, 1, 0, gs, args, 0), gs, buf, n);

    CUlibrary library;
    CUkernel kernel;
    CHECK(cuLibraryLoadData(&library, PTX, nullptr, nullptr, 0, nullptr, nullptr, 0));
    CHECK(cuLibraryGetKernel(&kernel, library, "fill"));
    report("library kernel, green stream",
           cuLaunchKernel((CUfunction)kernel, n / 256, 1, 1, 256, 1, 1, 0, gs, args, 0), gs, buf, n);

    cublasHandle_t blas;
    cublasCreate(&blas);
    cublasSetStream(blas, (cudaStream_t)gs);
    CUdeviceptr a, c;
    CHECK(cuMemAlloc(&a, 256 * 256 * sizeof(float)));
    CHECK(cuMemAlloc(&c, 256 * 256 * sizeof(float)));
    CHECK(cuMemsetD32(a, 0x3f800000, 256 * 256));
    float one = 1.0f, zero = 0.0f;
    cublasStatus_t st = cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, 256, 256, 256, &one, (float*)a, 256, (float*)a,
                                    256, &zero, (float*)c, 256);
    CUresult done = cuStreamSynchronize(gs);
    float v = 0;
    cuMemcpyDtoH(&v, c, sizeof(v));
    printf("cuBLAS sgemm, green stream: status %d, %s, c[0] = %g (256 expected)\n", (int)st, name(done), v);
    return 0;
}
