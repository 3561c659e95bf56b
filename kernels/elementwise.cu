// Elementwise ops, gathers and layout changes. One thread per output element unless noted.

extern "C" __global__ void add_f32(const float* a, const float* b, float* out, long n) {
    GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

// add_f32 four values a thread, for n / 4 groups of four (16-byte aligned).
extern "C" __global__ void add_f32_x4(const float4* a, const float4* b, float4* out, long quads) {
    GRID_STRIDE(i, quads) {
        float4 x = a[i], y = b[i];
        out[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    }
}

extern "C" __global__ void scale_f32(const float* a, float s, float* out, long n) {
    GRID_STRIDE(i, n) out[i] = a[i] * s;
}

extern "C" __global__ void silu_f32(const float* a, float* out, long n) {
    GRID_STRIDE(i, n) { float x = a[i]; out[i] = x / (1.0f + expf(-x)); }
}

extern "C" __global__ void silu_mul_f32(const float* a, const float* b, float* out, long n) {
    GRID_STRIDE(i, n) { float x = a[i]; out[i] = x / (1.0f + expf(-x)) * b[i]; }
}

extern "C" __global__ void tanh_f32(const float* a, float* out, long n) {
    GRID_STRIDE(i, n) out[i] = tanhf(a[i]);
}

extern "C" __global__ void f32_to_bf16_kernel(const float* a, bf16_t* out, long n) {
    GRID_STRIDE(i, n) out[i] = f32_to_bf16(a[i]);
}

// f32_to_bf16_kernel four values a thread: n4 groups of four, 16-byte aligned.
extern "C" __global__ void f32_to_bf16_x4(const float4* a, uint2* out, long n4) {
    GRID_STRIDE(i, n4) {
        float4 x = a[i];
        out[i] = make_uint2((unsigned)f32_to_bf16(x.x) | ((unsigned)f32_to_bf16(x.y) << 16),
                            (unsigned)f32_to_bf16(x.z) | ((unsigned)f32_to_bf16(x.w) << 16));
    }
}

extern "C" __global__ void bf16_to_f32_kernel(const bf16_t* a, float* out, long n) {
    GRID_STRIDE(i, n) out[i] = bf16_to_f32(a[i]);
}

// out[r, c] += bias[c]
#define ADD_BIAS(NAME, T) \
extern "C" __global__ void NAME(float* y, const T* bias, long rows, int cols) { \
    GRID_STRIDE(i, rows * cols) y[i] += load_f(bias, i % cols); \
}
ADD_BIAS(add_bias_f32, float)
ADD_BIAS(add_bias_bf16, bf16_t)

// The DiT's GLU with its product's bias, for f a multiple of 4: with h = y + bias over rows of 2f,
// out[r, c] = silu(h[r, f + c]) * h[r, c], the arithmetic of add_bias then silu_mul_f32.
// Grid (f / 4 / blockDim, rows): a thread per 4 columns of a row.
extern "C" __global__ void bias_glu_f32(const float* __restrict__ y, const float* __restrict__ bias,
                                        float* __restrict__ out, int f) {
    int c = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
    if (c >= f) return;
    const float* row = y + (long)blockIdx.y * 2 * f;
    float4 v = *(const float4*)(row + c), g = *(const float4*)(row + f + c);
    float4 bv = *(const float4*)(bias + c), bg = *(const float4*)(bias + f + c);
    float value[4] = {v.x + bv.x, v.y + bv.y, v.z + bv.z, v.w + bv.w};
    float gate[4] = {g.x + bg.x, g.y + bg.y, g.z + bg.z, g.w + bg.w};
    *(float4*)(out + (long)blockIdx.y * f + c) = glu4(value, gate);
}

#define EMBEDDING(NAME, T) \
extern "C" __global__ void NAME(const T* table, const unsigned int* ids, float* out, int dim, long n) { \
    GRID_STRIDE(i, n * dim) out[i] = load_f(table, (long)ids[i / dim] * dim + i % dim); \
}
EMBEDDING(embedding_f32, float)
EMBEDDING(embedding_bf16, bf16_t)

// x [rows, cols] -> out [cols, rows], through a 32x33 shared tile.
extern "C" __global__ void transpose_f32(const float* x, float* out, int rows, int cols) {
    __shared__ float tile[32][33];
    int c = blockIdx.x * 32 + threadIdx.x;
    for (int j = threadIdx.y; j < 32; j += blockDim.y) {
        int r = blockIdx.y * 32 + j;
        if (r < rows && c < cols) tile[j][threadIdx.x] = x[(long)r * cols + c];
    }
    __syncthreads();
    int r_out = blockIdx.y * 32 + threadIdx.x;
    for (int j = threadIdx.y; j < 32; j += blockDim.y) {
        int c_out = blockIdx.x * 32 + j;
        if (c_out < cols && r_out < rows) out[(long)c_out * rows + r_out] = tile[threadIdx.x][j];
    }
}

extern "C" __global__ void slice_cols_f32(const float* x, float* out, long rows, int cols, int start, int width) {
    GRID_STRIDE(i, rows * width) out[i] = x[(i / width) * cols + start + i % width];
}

// x + sin(alpha x)^2 / (alpha + 1e-9), one alpha per channel of x [channels, t].
#define SNAKE(NAME, T) \
extern "C" __global__ void NAME(const float* x, const T* alpha, float* out, int channels, long t) { \
    GRID_STRIDE(i, channels * t) { \
        float a = load_f(alpha, i / t); \
        float s = sinf(a * x[i]); \
        out[i] = x[i] + (1.0f / (a + 1e-9f)) * (s * s); \
    } \
}
SNAKE(snake_f32, float)
SNAKE(snake_bf16, bf16_t)

// torch's nearest: identity, exact doubling, else floor(i * (in / out)) in f32.
extern "C" __global__ void resample_nearest_f32(const float* x, float* out, int channels, int t, int out_len) {
    GRID_STRIDE(i, (long)channels * out_len) {
        int c = i / out_len, o = i % out_len;
        int src;
        if (out_len == t) src = o;
        else if (out_len == 2 * t) src = o >> 1;
        else { float scale = (float)t / (float)out_len; src = min((int)floorf((float)o * scale), t - 1); }
        out[i] = x[(long)c * t + src];
    }
}

// colsT[tt, ci * k + j] = x[ci, t0 + tt + j * dilation - padding] (zero outside): the transposed
// im2col matrix of a stride-1 convolution, so the product is a plain `linear`.
extern "C" __global__ void im2col_t_f32(const float* x, float* cols, int c_in, int t, int k, int dilation,
                                        int padding, int t0, int width) {
    long n = (long)width * c_in * k;
    GRID_STRIDE(i, n) {
        int tt = i / (c_in * k), r = i % (c_in * k);
        int ci = r / k, j = r % k;
        int src = t0 + tt + j * dilation - padding;
        cols[i] = (src >= 0 && src < t) ? x[(long)ci * t + src] : 0.0f;
    }
}

// out[co, p] = bias[co] + sum over (j, ti) with ti * stride + j - padding == p of cols[co * k + j, ti]:
// the scatter of a transposed convolution written as a gather.
#define COL2IM(NAME, T) \
extern "C" __global__ void NAME(const float* cols, const T* bias, float* out, int c_out, int k, int t, \
                                int stride, int padding, int t_out) { \
    GRID_STRIDE(i, (long)c_out * t_out) { \
        int co = i / t_out, p = i % t_out; \
        float acc = load_f(bias, co); \
        for (int j = 0; j < k; j++) { \
            int q = p + padding - j; \
            if (q >= 0 && q % stride == 0 && q / stride < t) acc += cols[((long)co * k + j) * t + q / stride]; \
        } \
        out[i] = acc; \
    } \
}
COL2IM(col2im_f32, float)
COL2IM(col2im_bf16, bf16_t)

// Synthetic weights for benchmarks: center + half_width * uniform(-1, 1), from a hash of
// (seed, index), generated where they live.
__device__ __forceinline__ float hash_uniform(unsigned long long seed, long i) {
    unsigned long long z = seed + (unsigned long long)i * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)(z >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f;
}

extern "C" __global__ void fill_uniform_f32(float* out, long n, unsigned long long seed, float center, float half_width) {
    GRID_STRIDE(i, n) out[i] = center + half_width * hash_uniform(seed, i);
}

extern "C" __global__ void fill_uniform_bf16(bf16_t* out, long n, unsigned long long seed, float center, float half_width) {
    GRID_STRIDE(i, n) out[i] = f32_to_bf16(center + half_width * hash_uniform(seed, i));
}

// src [batch * n, cols] into rows [row, row + n) of each batch entry of dst [batch * capacity, cols]
// (a KV cache append) in one launch.
// Rows of f32 into rows [row, row + n) of each batch entry of a cache in dtype C.
#define WRITE_ROWS(NAME, C) \
extern "C" __global__ void NAME(const float* src, C* dst, long total, int n, int cols, int capacity, int row) { \
    GRID_STRIDE(i, total) { \
        long r = i / cols, c = i % cols; \
        long b = r / n, j = r % n; \
        store_f(dst, (b * capacity + row + j) * cols + c, src[i]); \
    } \
}
WRITE_ROWS(write_rows_f32, float)
WRITE_ROWS(write_rows_bf16, bf16_t)

// write_rows for a cache layer's keys and values at once (same shapes); a recorded step's row
// moves by *shift (null: by none).
#define WRITE_KV(NAME, C) \
extern "C" __global__ void NAME(const float* k_src, C* k_dst, const float* v_src, C* v_dst, long total, int n, \
                                int cols, int capacity, int row, const int* shift) { \
    if (shift) row += *shift; \
    GRID_STRIDE(i, total) { \
        long r = i / cols, c = i % cols; \
        long b = r / n, j = r % n; \
        long at = (b * capacity + row + j) * cols + c; \
        store_f(k_dst, at, k_src[i]); \
        store_f(v_dst, at, v_src[i]); \
    } \
}
WRITE_KV(write_kv_f32, float)
WRITE_KV(write_kv_bf16, bf16_t)

// Adds the number of NaN and infinite values of x[0, n) to *count (one atomic per warp).
extern "C" __global__ void count_non_finite_f32(const float* x, long n, unsigned int* count) {
    unsigned int mine = 0;
    GRID_STRIDE(i, n) mine += (__float_as_uint(x[i]) & 0x7f800000u) == 0x7f800000u;
    for (int o = 16; o > 0; o >>= 1) mine += __shfl_xor_sync(0xffffffffu, mine, o);
    if ((threadIdx.x & 31) == 0 && mine) atomicAdd(count, mine);
}
