// The decode-step products (M <= 8 activation rows) against quantized weights (engine/src/quant.rs):
// the shape of kernels/gemv.cu (a block owns 4 weight rows, its warps split the row length, 16-byte
// weight loads, the fused residual-add, SwiGLU and grouped q/k/v forms, the optional input RMSNorm),
// with the weights unpacked in registers. A 16-byte load holds 16 q8 weights (half a group of 32)
// or 32 q4 weights (a group); each load's partial sum of q * x is scaled once, and for q4 the
// group's offset multiplies the sum of the activations. Bytes become floats by the exponent trick
// (a byte in the low mantissa of 2^23, minus 2^23), two instructions a weight and no conversion unit.
// A block has at most 8 warps (4 for SwiGLU) and is launched with as many threads as a row has
// loads, rounded up to a warp, when that is fewer. Rows must be whole loads long: k a multiple of 16 (q8) or 32 (q4). The kernels are made for at
// most 2, 4 or 8 activation rows (M, a template argument, so the accumulators stay in registers)
// and take the actual count m <= M as a guard, which keeps NVRTC's work to three instances.

#define QROWS 4
#define QEPI_PLAIN 0
#define QEPI_ADD 1
#define QEPI_SWIGLU 2

__device__ __forceinline__ float qf16(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

// One quantized matrix: its words, and a scale (and, for q4, an offset) per group of 32.
struct QMatrix {
    const uint4* words;
    const unsigned short* scales;
    const unsigned short* offsets;
};

template <int BITS>
struct QLayout {
    // Weights a 16-byte load holds, and loads a group spans.
    static constexpr int PER_LOAD = BITS == 8 ? 16 : 32;
    static constexpr int LOADS_PER_GROUP = BITS == 8 ? 2 : 1;
};

// Sum over the load's weights of q * x (q as stored: signed for q8, 0..15 for q4), and for q4 the
// sum of x; `x` holds the load's PER_LOAD activations.
template <int BITS>
__device__ __forceinline__ void q_dot(uint4 p, const float* x, float& qx, float& sx) {
    unsigned int w[4] = {p.x, p.y, p.z, p.w};
    if (BITS == 8) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            // Bytes biased to unsigned, each put under the exponent of 2^23: 2^23 + q + 128.
            unsigned int b = w[i] ^ 0x80808080u;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                float q = __uint_as_float(__byte_perm(b, 0x4b000000u, 0x7540 + j)) - 8388736.0f;
                qx += q * x[i * 4 + j];
            }
        }
    } else {
#pragma unroll
        for (int i = 0; i < 4; i++) {
#pragma unroll
            for (int j = 0; j < 8; j++) {
                float q = __uint_as_float(((w[i] >> (4 * j)) & 0xfu) | 0x4b000000u) - 8388608.0f;
                float v = x[i * 8 + j];
                qx += q * v;
                sx += v;
            }
        }
    }
}

// Rows [row0, row0 + 4) of y[M, n] (and, for SwiGLU, of the second matrix). With NORM, the input
// is RMS-normalised on the way, as in kernels/gemv.cu.
template <int BITS, int M, int EPI, int WARPS, bool NORM>
__device__ __forceinline__ void gemv_q_rows(QMatrix a, QMatrix b, const float* __restrict__ x,
                                            const float* __restrict__ residual, const bf16_t* __restrict__ g,
                                            float eps, float* __restrict__ y, int m, int k, int n, int row0) {
    constexpr int W = EPI == QEPI_SWIGLU ? 2 : 1;
    constexpr int PER = QLayout<BITS>::PER_LOAD;
    __shared__ float partial[WARPS][W][QROWS][M];
    __shared__ float partial_ss[WARPS][M];
    float ss[M];
#pragma unroll
    for (int i = 0; i < M; i++) ss[i] = 0.0f;
    // WARPS is the most a block has; a block of short rows is launched with fewer threads (as many
    // as the row has loads), so none of them idles.
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
    int loads = k / PER, groups = k / 32;
    float acc[W][QROWS][M];
#pragma unroll
    for (int h = 0; h < W; h++)
#pragma unroll
        for (int r = 0; r < QROWS; r++)
#pragma unroll
            for (int i = 0; i < M; i++) acc[h][r][i] = 0.0f;
    const uint4* words[W][QROWS];
    const unsigned short* scales[W][QROWS];
    const unsigned short* offsets[W][QROWS];
#pragma unroll
    for (int r = 0; r < QROWS; r++) {
        long row = min(row0 + r, n - 1);
        QMatrix m0 = a;
        words[0][r] = m0.words + row * loads;
        scales[0][r] = m0.scales + row * groups;
        offsets[0][r] = BITS == 4 ? m0.offsets + row * groups : m0.scales;
        if (EPI == QEPI_SWIGLU) {
            words[W - 1][r] = b.words + row * loads;
            scales[W - 1][r] = b.scales + row * groups;
            offsets[W - 1][r] = BITS == 4 ? b.offsets + row * groups : b.scales;
        }
    }
    if (warp * 32 + lane < loads)
#pragma unroll
        for (int h = 0; h < W; h++)
#pragma unroll
            for (int r = 0; r < QROWS; r++) prefetch_l2(words[h][r] + warp * 32 + lane);
    pdl_wait();
    pdl_trigger();
    for (int c = warp * 32 + lane; c < loads; c += warps * 32) {
        uint4 p[W][QROWS];
        float s[W][QROWS], o[W][QROWS];
        int group = c / QLayout<BITS>::LOADS_PER_GROUP;
#pragma unroll
        for (int h = 0; h < W; h++)
#pragma unroll
            for (int r = 0; r < QROWS; r++) {
                p[h][r] = words[h][r][c];
                s[h][r] = qf16(scales[h][r][group]);
                o[h][r] = BITS == 4 ? qf16(offsets[h][r][group]) : 0.0f;
            }
        float gv[PER];
        if (NORM) {
            const uint4* g4 = (const uint4*)(g + (long)c * PER);
#pragma unroll
            for (int q = 0; q < PER / 8; q++) {
                uint4 u = g4[q];
                gv[q * 8 + 0] = __uint_as_float(u.x << 16); gv[q * 8 + 1] = __uint_as_float(u.x & 0xffff0000u);
                gv[q * 8 + 2] = __uint_as_float(u.y << 16); gv[q * 8 + 3] = __uint_as_float(u.y & 0xffff0000u);
                gv[q * 8 + 4] = __uint_as_float(u.z << 16); gv[q * 8 + 5] = __uint_as_float(u.z & 0xffff0000u);
                gv[q * 8 + 6] = __uint_as_float(u.w << 16); gv[q * 8 + 7] = __uint_as_float(u.w & 0xffff0000u);
            }
        }
#pragma unroll
        for (int i = 0; i < M; i++) {
            if (i >= m) break;
            float xv[PER];
            const float4* xr = (const float4*)(x + (long)i * k + (long)c * PER);
#pragma unroll
            for (int q = 0; q < PER / 4; q++) {
                float4 v = xr[q];
                xv[q * 4] = v.x; xv[q * 4 + 1] = v.y; xv[q * 4 + 2] = v.z; xv[q * 4 + 3] = v.w;
            }
            if (NORM) {
#pragma unroll
                for (int j = 0; j < PER; j++) {
                    ss[i] += xv[j] * xv[j];
                    xv[j] *= gv[j];
                }
            }
#pragma unroll
            for (int h = 0; h < W; h++)
#pragma unroll
                for (int r = 0; r < QROWS; r++) {
                    float qx = 0.0f, sx = 0.0f;
                    q_dot<BITS>(p[h][r], xv, qx, sx);
                    acc[h][r][i] += s[h][r] * qx + (BITS == 4 ? o[h][r] * sx : 0.0f);
                }
        }
    }
#pragma unroll
    for (int h = 0; h < W; h++)
#pragma unroll
        for (int r = 0; r < QROWS; r++)
#pragma unroll
            for (int i = 0; i < M; i++) {
                float v = warp_sum(acc[h][r][i]);
                if (lane == 0) partial[warp][h][r][i] = v;
            }
    if (NORM)
#pragma unroll
        for (int i = 0; i < M; i++) {
            float v = warp_sum(ss[i]);
            if (lane == 0) partial_ss[warp][i] = v;
        }
    __syncthreads();
    int t = threadIdx.x;
    if (t < QROWS * M) {
        int r = t / M, i = t % M;
        float sum[W];
#pragma unroll
        for (int h = 0; h < W; h++) {
            sum[h] = 0.0f;
#pragma unroll
            for (int wi = 0; wi < WARPS; wi++)
                if (wi < warps) sum[h] += partial[wi][h][r][i];
        }
        if (NORM) {
            float total = 0.0f;
#pragma unroll
            for (int wi = 0; wi < WARPS; wi++)
                if (wi < warps) total += partial_ss[wi][i];
            float inv = rsqrtf(total / k + eps);
#pragma unroll
            for (int h = 0; h < W; h++) sum[h] *= inv;
        }
        long out = (long)i * n + row0 + r;
        if (row0 + r < n && i < m) {
            if (EPI == QEPI_PLAIN) y[out] = sum[0];
            if (EPI == QEPI_ADD) y[out] = residual[out] + sum[0];
            if (EPI == QEPI_SWIGLU) y[out] = sum[0] / (1.0f + expf(-sum[0])) * sum[W - 1];
        }
    }
}

// The kernels of one format and row count. A matrix is passed as its words, scales and offsets (q8
// passes its scales again as offsets, unread).
#define QM(w) QMatrix{(const uint4*)w, w##_s, w##_o}
#define GEMV_Q_FOR(BITS, M)                                                                                       \
    extern "C" __global__ void __launch_bounds__(256) gemv_q##BITS##_m##M(                                        \
        const unsigned int* w, const unsigned short* w_s, const unsigned short* w_o, const float* __restrict__ x, \
        float* __restrict__ y, int m, int k, int n) {                                                            \
        gemv_q_rows<BITS, M, QEPI_PLAIN, 8, false>(QM(w), QM(w), x, x, nullptr, 0.0f, y, m, k, n,                \
                                                   blockIdx.x * QROWS);                                          \
    }                                                                                                             \
    extern "C" __global__ void __launch_bounds__(256) gemv_add_q##BITS##_m##M(                                    \
        const unsigned int* w, const unsigned short* w_s, const unsigned short* w_o, const float* __restrict__ x, \
        const float* __restrict__ residual, float* __restrict__ y, int m, int k, int n) {                        \
        gemv_q_rows<BITS, M, QEPI_ADD, 8, false>(QM(w), QM(w), x, residual, nullptr, 0.0f, y, m, k, n,          \
                                                 blockIdx.x * QROWS);                                            \
    }                                                                                                             \
    extern "C" __global__ void __launch_bounds__(128) gemv_swiglu_q##BITS##_m##M(                                 \
        const unsigned int* gate, const unsigned short* gate_s, const unsigned short* gate_o,                    \
        const unsigned int* up, const unsigned short* up_s, const unsigned short* up_o,                          \
        const float* __restrict__ x, const bf16_t* __restrict__ g, float eps, float* __restrict__ y, int m,      \
        int k, int n) {                                                                                           \
        if (g)                                                                                                    \
            gemv_q_rows<BITS, M, QEPI_SWIGLU, 4, true>(QM(gate), QM(up), x, x, g, eps, y, m, k, n,                \
                                                       blockIdx.x * QROWS);                                      \
        else                                                                                                      \
            gemv_q_rows<BITS, M, QEPI_SWIGLU, 4, false>(QM(gate), QM(up), x, x, g, eps, y, m, k, n,               \
                                                        blockIdx.x * QROWS);                                     \
    }                                                                                                             \
    extern "C" __global__ void __launch_bounds__(256) gemv_group3_q##BITS##_m##M(                                 \
        const unsigned int* w0, const unsigned short* w0_s, const unsigned short* w0_o, const unsigned int* w1,  \
        const unsigned short* w1_s, const unsigned short* w1_o, const unsigned int* w2,                          \
        const unsigned short* w2_s, const unsigned short* w2_o, float* __restrict__ y0, float* __restrict__ y1,  \
        float* __restrict__ y2, const float* __restrict__ x, const bf16_t* __restrict__ g, float eps, int m,     \
        int k, int n0, int n1, int n2) {                                                                         \
        int b0 = (n0 + QROWS - 1) / QROWS, b1 = (n1 + QROWS - 1) / QROWS;                                         \
        int b = blockIdx.x;                                                                                       \
        QMatrix w = b < b0 ? QM(w0) : b < b0 + b1 ? QM(w1) : QM(w2);                                              \
        float* y = b < b0 ? y0 : b < b0 + b1 ? y1 : y2;                                                           \
        int n = b < b0 ? n0 : b < b0 + b1 ? n1 : n2;                                                              \
        int row0 = (b < b0 ? b : b < b0 + b1 ? b - b0 : b - b0 - b1) * QROWS;                                     \
        if (g)                                                                                                    \
            gemv_q_rows<BITS, M, QEPI_PLAIN, 8, true>(w, w, x, x, g, eps, y, m, k, n, row0);                     \
        else                                                                                                      \
            gemv_q_rows<BITS, M, QEPI_PLAIN, 8, false>(w, w, x, x, g, eps, y, m, k, n, row0);                    \
    }

#define GEMV_Q_ALL(BITS) GEMV_Q_FOR(BITS, 2) GEMV_Q_FOR(BITS, 4) GEMV_Q_FOR(BITS, 8)

GEMV_Q_ALL(8)
GEMV_Q_ALL(4)
