// y[i, n] = sum_k x[i, k] * w[n, k] for a few activation rows (M <= 8): the decode-step products,
// bound by reading the weights once. One warp per weight row; 16-byte loads of bf16 weights, four
// in flight per lane so the memory system stays busy.

#define MAX_M 8

__device__ __forceinline__ void dot8(uint4 packed, const float* __restrict__ x, int m, int k, int col,
                                     float* acc) {
    float wv[8];
    wv[0] = __uint_as_float(packed.x << 16); wv[1] = __uint_as_float(packed.x & 0xffff0000u);
    wv[2] = __uint_as_float(packed.y << 16); wv[3] = __uint_as_float(packed.y & 0xffff0000u);
    wv[4] = __uint_as_float(packed.z << 16); wv[5] = __uint_as_float(packed.z & 0xffff0000u);
    wv[6] = __uint_as_float(packed.w << 16); wv[7] = __uint_as_float(packed.w & 0xffff0000u);
    // Unrolled over the fixed bound with a guard, so `acc` stays in registers (a loop to the
    // run-time `m` would index it dynamically and spill it to local memory).
#pragma unroll
    for (int i = 0; i < MAX_M; i++) {
        if (i < m) {
            const float4* xr = (const float4*)(x + (long)i * k + col);
            float4 a = xr[0], b = xr[1];
            acc[i] += wv[0] * a.x + wv[1] * a.y + wv[2] * a.z + wv[3] * a.w + wv[4] * b.x + wv[5] * b.y + wv[6] * b.z + wv[7] * b.w;
        }
    }
}

extern "C" __global__ void gemv_bf16(const bf16_t* __restrict__ w, const float* __restrict__ x, float* __restrict__ y,
                                     int m, int k, int n) {
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (warp >= n) return;
    const bf16_t* row = w + (long)warp * k;
    float acc[MAX_M];
#pragma unroll
    for (int i = 0; i < MAX_M; i++) acc[i] = 0.0f;
    if ((k & 7) == 0) {
        const uint4* row8 = (const uint4*)row;
        int chunks = k / 8;
        int c = lane;
        for (; c + 96 < chunks; c += 128) {
            uint4 p0 = row8[c], p1 = row8[c + 32], p2 = row8[c + 64], p3 = row8[c + 96];
            dot8(p0, x, m, k, c * 8, acc);
            dot8(p1, x, m, k, (c + 32) * 8, acc);
            dot8(p2, x, m, k, (c + 64) * 8, acc);
            dot8(p3, x, m, k, (c + 96) * 8, acc);
        }
        for (; c < chunks; c += 32) dot8(row8[c], x, m, k, c * 8, acc);
    } else {
        for (int c = lane; c < k; c += 32) {
            float wv = bf16_to_f32(row[c]);
#pragma unroll
            for (int i = 0; i < MAX_M; i++)
                if (i < m) acc[i] += wv * x[(long)i * k + c];
        }
    }
#pragma unroll
    for (int i = 0; i < MAX_M; i++) {
        if (i < m) {
            float s = warp_sum(acc[i]);
            if (lane == 0) y[(long)i * n + warp] = s;
        }
    }
}

// The same products for weights whose rows are a multiple of 8 long (every decode product): a
// block owns a few weight rows (ROWS) and splits the row length between its warps, so each
// activation load serves ROWS rows. M (the activation rows) is a template argument so the
// accumulators stay in registers. Variants fuse what follows the product in a decode step: the
// residual add, and SwiGLU's `silu(gate) * up` (the block reads the same rows of both weights); a
// grouped launch runs the q, k and v projections of one input as one grid. Each kernel's rows a
// block and threads come from the launch-shape table (engine/src/cuda/decode_shapes.rs, at the end
// of this file).

#define EPI_PLAIN 0
#define EPI_ADD 1
#define EPI_SWIGLU 2

__device__ __forceinline__ float dot8_bf16(uint4 q, float4 a, float4 b) {
    return __uint_as_float(q.x << 16) * a.x + __uint_as_float(q.x & 0xffff0000u) * a.y +
           __uint_as_float(q.y << 16) * a.z + __uint_as_float(q.y & 0xffff0000u) * a.w +
           __uint_as_float(q.z << 16) * b.x + __uint_as_float(q.z & 0xffff0000u) * b.y +
           __uint_as_float(q.w << 16) * b.z + __uint_as_float(q.w & 0xffff0000u) * b.w;
}

// Rows [row0, row0 + ROWS) of y[M, n] (and, for SwiGLU, of the second weight `w2`). With NORM, the
// input is RMS-normalised on the way (weight `g`, bf16): the block sees every element of each
// input row anyway, so it sums their squares in the same pass and scales the dot products by
// 1/rms at the end, which saves the separate norm's launch and pass.
template <int M, int EPI, int GEMV_WARPS, bool NORM, int GEMV_ROWS>
__device__ __forceinline__ void gemv_rows(const bf16_t* __restrict__ w, const bf16_t* __restrict__ w2,
                                          const float* __restrict__ x, const float* __restrict__ residual,
                                          const bf16_t* __restrict__ g, float eps, float* __restrict__ y, int k,
                                          int n, int row0) {
    constexpr int W = EPI == EPI_SWIGLU ? 2 : 1;
    __shared__ float partial[GEMV_WARPS][W][GEMV_ROWS][M];
    __shared__ float partial_ss[GEMV_WARPS][M];
    float ss[M];
#pragma unroll
    for (int i = 0; i < M; i++) ss[i] = 0.0f;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int chunks = k >> 3;
    float acc[W][GEMV_ROWS][M];
#pragma unroll
    for (int h = 0; h < W; h++)
#pragma unroll
        for (int r = 0; r < GEMV_ROWS; r++)
#pragma unroll
            for (int i = 0; i < M; i++) acc[h][r][i] = 0.0f;
    const uint4* rows[W][GEMV_ROWS];
#pragma unroll
    for (int r = 0; r < GEMV_ROWS; r++) {
        long offset = (long)min(row0 + r, n - 1) * k;
        rows[0][r] = (const uint4*)(w + offset);
        if (EPI == EPI_SWIGLU) rows[W - 1][r] = (const uint4*)(w2 + offset);
    }
    // Launched overlapped, the block fetches the weights of its first pass into L2 while the
    // kernel before it drains; the input is that kernel's output, read only after the wait.
    if (warp * 32 + lane < chunks)
#pragma unroll
        for (int h = 0; h < W; h++)
#pragma unroll
            for (int r = 0; r < GEMV_ROWS; r++) prefetch_l2(rows[h][r] + warp * 32 + lane);
    pdl_wait();
    pdl_trigger();
#pragma unroll 2
    for (int c = warp * 32 + lane; c < chunks; c += GEMV_WARPS * 32) {
        uint4 p[W][GEMV_ROWS];
#pragma unroll
        for (int h = 0; h < W; h++)
#pragma unroll
            for (int r = 0; r < GEMV_ROWS; r++) p[h][r] = rows[h][r][c];
        float4 ga, gb;
        if (NORM) {
            uint4 q = ((const uint4*)g)[c];
            ga = make_float4(__uint_as_float(q.x << 16), __uint_as_float(q.x & 0xffff0000u), __uint_as_float(q.y << 16),
                             __uint_as_float(q.y & 0xffff0000u));
            gb = make_float4(__uint_as_float(q.z << 16), __uint_as_float(q.z & 0xffff0000u), __uint_as_float(q.w << 16),
                             __uint_as_float(q.w & 0xffff0000u));
        }
#pragma unroll
        for (int i = 0; i < M; i++) {
            const float4* xr = (const float4*)(x + (long)i * k + c * 8);
            float4 a = xr[0], b = xr[1];
            if (NORM) {
                ss[i] += a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w + b.x * b.x + b.y * b.y + b.z * b.z + b.w * b.w;
                a = make_float4(a.x * ga.x, a.y * ga.y, a.z * ga.z, a.w * ga.w);
                b = make_float4(b.x * gb.x, b.y * gb.y, b.z * gb.z, b.w * gb.w);
            }
#pragma unroll
            for (int h = 0; h < W; h++)
#pragma unroll
                for (int r = 0; r < GEMV_ROWS; r++) acc[h][r][i] += dot8_bf16(p[h][r], a, b);
        }
    }
#pragma unroll
    for (int h = 0; h < W; h++)
#pragma unroll
        for (int r = 0; r < GEMV_ROWS; r++)
#pragma unroll
            for (int i = 0; i < M; i++) {
                float s = warp_sum(acc[h][r][i]);
                if (lane == 0) partial[warp][h][r][i] = s;
            }
    if (NORM)
#pragma unroll
        for (int i = 0; i < M; i++) {
            float s = warp_sum(ss[i]);
            if (lane == 0) partial_ss[warp][i] = s;
        }
    __syncthreads();
    int t = threadIdx.x;
    if (t < GEMV_ROWS * M) {
        int r = t / M, i = t % M;
        float s[W];
#pragma unroll
        for (int h = 0; h < W; h++) {
            s[h] = 0.0f;
#pragma unroll
            for (int wi = 0; wi < GEMV_WARPS; wi++) s[h] += partial[wi][h][r][i];
        }
        if (NORM) {
            float total = 0.0f;
#pragma unroll
            for (int wi = 0; wi < GEMV_WARPS; wi++) total += partial_ss[wi][i];
            float inv = rsqrtf(total / k + eps);
#pragma unroll
            for (int h = 0; h < W; h++) s[h] *= inv;
        }
        long out = (long)i * n + row0 + r;
        if (row0 + r < n) {
            if (EPI == EPI_PLAIN) y[out] = s[0];
            if (EPI == EPI_ADD) y[out] = residual[out] + s[0];
            // silu(g) * u, as silu_mul_f32 computes it.
            if (EPI == EPI_SWIGLU) y[out] = s[0] / (1.0f + expf(-s[0])) * s[W - 1];
        }
    }
}

// The kernels, a macro a family, each kernel one line of the launch-shape table
// (engine/src/cuda/decode_shapes.rs), which appends the lines to this file for NVRTC: NAME, its
// launch bounds, then M, the weight rows a block owns (SwiGLU: of each weight) and its warps (the
// block's partial sums' room). SwiGLU and the grouped q/k/v launch take an optional RMSNorm weight
// `g` (null: none), the input norm that precedes them in every decoder layer.
#define GEMV_BF16_PLAIN(NAME, BOUNDS, M, ROWS, WARPS)                                                         \
    extern "C" __global__ void BOUNDS NAME(const bf16_t* __restrict__ w, const float* __restrict__ x,         \
                                           float* __restrict__ y, int k, int n) {                             \
        gemv_rows<M, EPI_PLAIN, WARPS, false, ROWS>(w, w, x, x, w, 0.0f, y, k, n, blockIdx.x * ROWS);        \
    }
#define GEMV_BF16_ADD(NAME, BOUNDS, M, ROWS, WARPS)                                                           \
    extern "C" __global__ void BOUNDS NAME(const bf16_t* __restrict__ w, const float* __restrict__ x,         \
                                           const float* __restrict__ residual, float* __restrict__ y, int k,  \
                                           int n) {                                                           \
        gemv_rows<M, EPI_ADD, WARPS, false, ROWS>(w, w, x, residual, w, 0.0f, y, k, n, blockIdx.x * ROWS);   \
    }
#define GEMV_BF16_SWIGLU(NAME, BOUNDS, M, ROWS, WARPS)                                                        \
    extern "C" __global__ void BOUNDS NAME(const bf16_t* __restrict__ gate, const bf16_t* __restrict__ up,    \
                                           const float* __restrict__ x, const bf16_t* __restrict__ g,         \
                                           float eps, float* __restrict__ y, int k, int n) {                  \
        if (g)                                                                                                \
            gemv_rows<M, EPI_SWIGLU, WARPS, true, ROWS>(gate, up, x, x, g, eps, y, k, n, blockIdx.x * ROWS);  \
        else                                                                                                  \
            gemv_rows<M, EPI_SWIGLU, WARPS, false, ROWS>(gate, up, x, x, g, eps, y, k, n, blockIdx.x * ROWS); \
    }
#define GEMV_BF16_GROUP3(NAME, BOUNDS, M, ROWS, WARPS)                                                        \
    extern "C" __global__ void BOUNDS NAME(                                                                   \
        const bf16_t* __restrict__ w0, const bf16_t* __restrict__ w1, const bf16_t* __restrict__ w2,         \
        float* __restrict__ y0, float* __restrict__ y1, float* __restrict__ y2, const float* __restrict__ x,  \
        const bf16_t* __restrict__ g, float eps, int k, int n0, int n1, int n2) {                            \
        int b0 = (n0 + ROWS - 1) / ROWS, b1 = (n1 + ROWS - 1) / ROWS;                                         \
        int b = blockIdx.x;                                                                                   \
        const bf16_t* w = b < b0 ? w0 : b < b0 + b1 ? w1 : w2;                                                \
        float* y = b < b0 ? y0 : b < b0 + b1 ? y1 : y2;                                                       \
        int n = b < b0 ? n0 : b < b0 + b1 ? n1 : n2;                                                          \
        int row0 = (b < b0 ? b : b < b0 + b1 ? b - b0 : b - b0 - b1) * ROWS;                                 \
        if (g)                                                                                                \
            gemv_rows<M, EPI_PLAIN, WARPS, true, ROWS>(w, w, x, x, g, eps, y, k, n, row0);                    \
        else                                                                                                  \
            gemv_rows<M, EPI_PLAIN, WARPS, false, ROWS>(w, w, x, x, g, eps, y, k, n, row0);                   \
    }
