// Shared helpers, prepended to every kernel file before NVRTC compiles it. Self-contained: no CUDA
// headers, so a machine with the NVRTC library but without the toolkit's headers compiles them.
// bf16 travels as the top half of an f32 (unsigned short bits).

typedef unsigned short bf16_t;
#define INFINITY __int_as_float(0x7f800000)

__device__ __forceinline__ float bf16_to_f32(bf16_t b) { return __uint_as_float(((unsigned int)b) << 16); }

// f16 (the quantized formats' scales and offsets) through the conversion unit.
__device__ __forceinline__ float f16_to_f32(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ unsigned short f32_to_f16(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

// Round to nearest even, as torch's .to(bfloat16); NaN stays NaN.
__device__ __forceinline__ bf16_t f32_to_bf16(float f) {
    unsigned int u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (bf16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (bf16_t)(u >> 16);
}

// Elements 4c..4c+3 as f32.
__device__ __forceinline__ float4 load4(const float* p, long c) { return *(const float4*)(p + 4 * c); }
__device__ __forceinline__ float4 load4(const bf16_t* p, long c) {
    uint2 w = *(const uint2*)(p + 4 * c);
    return make_float4(__uint_as_float(w.x << 16), __uint_as_float(w.x & 0xffff0000u), __uint_as_float(w.y << 16),
                       __uint_as_float(w.y & 0xffff0000u));
}

// Four values into elements 0..3 of `p`, rounded to nearest even for bf16.
__device__ __forceinline__ void store4(float* p, float4 v) { *(float4*)p = v; }
__device__ __forceinline__ void store4(bf16_t* p, float4 v) {
    uint2 w;
    w.x = (unsigned)f32_to_bf16(v.x) | ((unsigned)f32_to_bf16(v.y) << 16);
    w.y = (unsigned)f32_to_bf16(v.z) | ((unsigned)f32_to_bf16(v.w) << 16);
    *(uint2*)p = w;
}

// One element as the cache dtype holds it.
__device__ __forceinline__ void store_f(float* p, long i, float v) { p[i] = v; }
__device__ __forceinline__ void store_f(bf16_t* p, long i, float v) { p[i] = f32_to_bf16(v); }

// One thread per element, for grids that may hold fewer threads than elements.
#define GRID_STRIDE(i, n) for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < (n); i += (long)gridDim.x * blockDim.x)

__device__ __forceinline__ float load_f(const float* p, long i) { return p[i]; }
__device__ __forceinline__ float load_f(const bf16_t* p, long i) { return bf16_to_f32(p[i]); }

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum over a block of up to 1024 threads; every thread gets the result.
__device__ float block_sum(float v) {
    __shared__ float partial[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    int warps = (blockDim.x + 31) >> 5;
    v = (threadIdx.x < warps) ? partial[threadIdx.x] : 0.0f;
    if (warp == 0) v = warp_sum(v);
    if (threadIdx.x == 0) partial[0] = v;
    __syncthreads();
    return partial[0];
}

// Largest over a block of up to 1024 threads; every thread gets the result.
__device__ float block_max(float v) {
    __shared__ float partial[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    int warps = (blockDim.x + 31) >> 5;
    v = (threadIdx.x < warps) ? partial[threadIdx.x] : 0.0f;
    if (warp == 0) v = warp_max(v);
    if (threadIdx.x == 0) partial[0] = v;
    __syncthreads();
    return partial[0];
}

// The DiT's GLU of four values and their gates: gate * sigmoid(gate) * value.
__device__ __forceinline__ float4 glu4(const float* value, const float* gate) {
    float o[4];
#pragma unroll
    for (int i = 0; i < 4; i++) o[i] = gate[i] / (1.0f + expf(-gate[i])) * value[i];
    return make_float4(o[0], o[1], o[2], o[3]);
}

// Programmatic dependent launch (sm_90 and later; engine/src/cuda/launch.rs). A kernel launched
// with it may start while the kernel before it on the stream is still running: it must wait
// before it reads or writes anything but weights. Without such a launch, both are no-ops.
__device__ __forceinline__ void pdl_wait() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next kernel, if launched overlapped, start its blocks once every block of this one has
// started.
__device__ __forceinline__ void pdl_trigger() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;");
#endif
}

// Asks for the 128-byte line at `p` to be brought into L2.
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }
