// The decode-step products (M <= 8 activation rows) against quantized weights (engine/src/quant.rs),
// as integer dot products. The input is first quantized (quantize_activations, one small launch):
// per group of 32, int8 with an f32 scale (the group's largest magnitude / 127) and the group's f32
// sum for q4's offset (with what the rounding lost from it), the RMSNorm that precedes a product
// applied on the way. A 16-byte weight load (16 q8 weights, or a group of 32 q4 weights) then meets
// its activation bytes in four dp4a a row (q8) or eight (q4: a word's even nibbles masked out, its
// odd ones shifted down; the activations of each 8 are stored as [0, 2, 4, 6, 1, 3, 5, 7] to
// match). An activation costs one byte to read instead of four, and an instruction does four
// multiply-adds; the CPU (engine/src/cpu/quant_dot.rs) computes the same integers. The shape of
// kernels/gemv.cu otherwise: a block owns a few weight rows, its threads split the row length, the
// fused residual-add, SwiGLU and grouped q/k/v forms. Made for at most 2, 4 or 8 activation rows
// (M, a template argument, so the accumulators stay in registers), with the actual count m <= M as
// a guard. Each kernel's rows a block, threads and launch bounds come from the launch-shape table
// (engine/src/cuda/decode_shapes.rs, at the end of this file).

// Weight rows a block usually owns (SwiGLU: 4 of each matrix).
#define QROWS 8
#define QEPI_PLAIN 0
#define QEPI_ADD 1
#define QEPI_SWIGLU 2

// One quantized matrix: its words, and a scale (and, for q4, an offset) per group of 32.
struct QMatrix {
    const uint4* words;
    const unsigned short* scales;
    const unsigned short* offsets;
};

template <int BITS>
struct QLayout {
    // Weights a 16-byte load holds.
    static constexpr int PER_LOAD = BITS == 8 ? 16 : 32;
};

// x[m, k] quantized for the products of a BITS-bit weight: blocks (row, part), each part a block's
// threads' worth of the row (down's 12288 in three parts: one pass each instead of three passes
// of one block), RMS-normalised first with `g` (null: not; each part sums the row's squares itself). Writes the int8 values (q4's order), a scale per group (NaN for a group
// holding a non-finite value) and each group's sum with the part of it the rounding lost (for q4's
// offset and centring, below). Eight threads a group, four values a thread.
extern "C" __global__ void __launch_bounds__(1024) quantize_activations(const float* __restrict__ x,
                                                                      const bf16_t* __restrict__ g, float eps,
                                                                      unsigned int* __restrict__ xq,
                                                                      float* __restrict__ xs,
                                                                      float2* __restrict__ xsum, int k, int bits) {
    const float4* row = (const float4*)(x + (long)blockIdx.x * k);
    int quads = k / 4;
    pdl_wait();
    float inv = 1.0f;
    if (g) {
        float ss = 0.0f;
        for (int j = threadIdx.x; j < quads; j += blockDim.x) {
            float4 f = row[j];
            ss += f.x * f.x + f.y * f.y + f.z * f.z + f.w * f.w;
        }
        inv = rsqrtf(block_sum(ss) / k + eps);
    }
    pdl_trigger();
    // Whole warps run every pass (the shuffles need them); `live` guards loads and stores.
    for (int base = blockIdx.y * blockDim.x; base < quads; base += gridDim.y * blockDim.x) {
        int qd = base + threadIdx.x;
        bool live = qd < quads;
        float4 f = live ? row[qd] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        float v[4] = {f.x * inv, f.y * inv, f.z * inv, f.w * inv};
        if (g && live) {
            uint2 u = *(const uint2*)(g + qd * 4);
            v[0] *= __uint_as_float(u.x << 16);
            v[1] *= __uint_as_float(u.x & 0xffff0000u);
            v[2] *= __uint_as_float(u.y << 16);
            v[3] *= __uint_as_float(u.y & 0xffff0000u);
        }
        float amax = fmaxf(fmaxf(fabsf(v[0]), fabsf(v[1])), fmaxf(fabsf(v[2]), fabsf(v[3])));
        float total = (v[0] + v[1]) + (v[2] + v[3]);
        // NaN compares false, so a non-finite value makes the group's scale NaN.
        int finite = fabsf(v[0]) <= 3.402823466e38f && fabsf(v[1]) <= 3.402823466e38f &&
                     fabsf(v[2]) <= 3.402823466e38f && fabsf(v[3]) <= 3.402823466e38f;
#pragma unroll
        for (int o = 1; o < 8; o <<= 1) {
            amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
            total += __shfl_xor_sync(0xffffffffu, total, o);
            finite &= __shfl_xor_sync(0xffffffffu, finite, o);
        }
        float to_q = finite && amax > 0.0f ? 127.0f / amax : 0.0f;
        unsigned int q[4];
        int qsum = 0;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int r = (int)rintf(v[j] * to_q);
            qsum += r;
            q[j] = (unsigned int)r & 0xffu;
        }
#pragma unroll
        for (int o = 1; o < 8; o <<= 1) qsum += __shfl_xor_sync(0xffffffffu, qsum, o);
        unsigned int word;
        if (bits == 8) {
            word = q[0] | q[1] << 8 | q[2] << 16 | q[3] << 24;
        } else {
            // Of each 8 values the even thread holds [0, 4) and stores [0, 2, 4, 6]; the odd one
            // holds [4, 8) and stores [1, 3, 5, 7]; each hands the other the two it needs.
            bool odd = qd & 1;
            unsigned int give = odd ? (q[0] | q[2] << 8) : (q[1] | q[3] << 8);
            unsigned int got = __shfl_xor_sync(0xffffffffu, give, 1);
            word = odd ? (got | q[1] << 16 | q[3] << 24) : (q[0] | q[2] << 8 | got << 16);
        }
        if (live) {
            long at = (long)blockIdx.x * quads + qd;
            xq[at] = word;
            if ((qd & 7) == 0) {
                float scale = finite ? amax / 127.0f : __int_as_float(0x7fc00000);
                xs[at >> 3] = scale;
                // The group's sum, and what rounding took from it.
                xsum[at >> 3] = make_float2(total, total - scale * (float)qsum);
            }
        }
    }
}

// The integer dot of one weight load with its activations (xa, and xb for q4's second 16 bytes).
template <int BITS>
__device__ __forceinline__ int q_dot(uint4 p, uint4 xa, uint4 xb) {
    if (BITS == 8) {
        int d = __dp4a((int)p.x, (int)xa.x, 0);
        d = __dp4a((int)p.y, (int)xa.y, d);
        d = __dp4a((int)p.z, (int)xa.z, d);
        return __dp4a((int)p.w, (int)xa.w, d);
    }
    const unsigned int low = 0x0f0f0f0fu;
    int d = __dp4a((int)(p.x & low), (int)xa.x, 0);
    d = __dp4a((int)((p.x >> 4) & low), (int)xa.y, d);
    d = __dp4a((int)(p.y & low), (int)xa.z, d);
    d = __dp4a((int)((p.y >> 4) & low), (int)xa.w, d);
    d = __dp4a((int)(p.z & low), (int)xb.x, d);
    d = __dp4a((int)((p.z >> 4) & low), (int)xb.y, d);
    d = __dp4a((int)(p.w & low), (int)xb.z, d);
    return __dp4a((int)((p.w >> 4) & low), (int)xb.w, d);
}

// Quantized activations (quantize_activations' output).
struct QInput {
    const uint4* q;
    const float* scales;
    const float2* sums;
};

// Sums each of N values over the warp's lanes by halving: each of the 5 shuffle steps hands half
// of a lane's remaining values to its partner (while more than one is left, then plain butterfly
// steps), so N sums take about N shuffles instead of 5 N. Afterwards v[j] (j < max(N / 32, 1))
// holds the warp's total of value `base + j`; lanes differing only in the bits of `plain` hold the
// same totals.
template <int N, int O>
__device__ __forceinline__ void warp_sum_halving(float* v, int lane, int& base, int& plain) {
    if constexpr (O > 0) {
        if constexpr (N > 1) {
            constexpr int H = N / 2;
            bool high = lane & O;
#pragma unroll
            for (int j = 0; j < H; j++) {
                float keep = high ? v[j + H] : v[j];
                float send = high ? v[j] : v[j + H];
                v[j] = keep + __shfl_xor_sync(0xffffffffu, send, O);
            }
            if (high) base += H;
            warp_sum_halving<H, O / 2>(v, lane, base, plain);
        } else {
            v[0] += __shfl_xor_sync(0xffffffffu, v[0], O);
            plain |= O;
            warp_sum_halving<1, O / 2>(v, lane, base, plain);
        }
    }
}

// Rows [row0, row0 + R) of y[M, n] (and, for SwiGLU, of the second matrix), R = ROWS (SwiGLU: ROWS
// / 2 of each matrix), the block's threads splitting the row. LEAN addresses every row from the
// block's first (one base pointer, fewer registers, so more blocks stay resident under the kernel's
// launch bounds) and reduces the sums by halving; q4's kernels, whose 8 loads and 16 sums need
// about 128 registers, spill that way unless the block owns at most 4 rows. WARPS: the most warps
// a block has (their partial sums' room in shared memory).
template <int BITS, int M, int EPI, int WARPS, bool LEAN = false, int ROWS = QROWS>
__device__ __forceinline__ void gemv_q_rows(QMatrix a, QMatrix b, QInput x, const float* __restrict__ residual,
                                            float* __restrict__ y, int m, int k, int n, int row0) {
    constexpr int W = EPI == QEPI_SWIGLU ? 2 : 1;
    constexpr int R = ROWS / W;
    constexpr int N = W * R * M;
    constexpr int PER = QLayout<BITS>::PER_LOAD;
    __shared__ float partial[WARPS][N];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
    int loads = k / PER, groups = k / 32;
    // acc[(h * R + r) * M + i]: matrix h, row r, activation row i.
    float acc[N];
#pragma unroll
    for (int f = 0; f < N; f++) acc[f] = 0.0f;
    const uint4* words[W][R];
    const unsigned short* scales[W][R];
    const unsigned short* offsets[W][R];
    if (!LEAN)
#pragma unroll
        for (int r = 0; r < R; r++) {
            long row = min(row0 + r, n - 1);
            words[0][r] = a.words + row * loads;
            scales[0][r] = a.scales + row * groups;
            offsets[0][r] = BITS == 4 ? a.offsets + row * groups : a.scales;
            if (EPI == QEPI_SWIGLU) {
                words[W - 1][r] = b.words + row * loads;
                scales[W - 1][r] = b.scales + row * groups;
                offsets[W - 1][r] = BITS == 4 ? b.offsets + row * groups : b.scales;
            }
        }
    // Launched overlapped, the block fetches its first weights into L2 while the kernel before
    // it drains; the activations are that kernel's output, read only after the wait.
    if (threadIdx.x < loads)
#pragma unroll
        for (int h = 0; h < W; h++)
#pragma unroll
            for (int r = 0; r < R; r++) {
                long row = min(row0 + r, n - 1);
                prefetch_l2((h == 0 ? a : b).words + row * loads + threadIdx.x);
            }
    pdl_wait();
    pdl_trigger();
    for (int c = threadIdx.x; c < loads; c += blockDim.x) {
        uint4 p[W][R];
        float s[W][R], o[W][R];
        int group = BITS == 8 ? c >> 1 : c;
#pragma unroll
        for (int h = 0; h < W; h++)
#pragma unroll
            for (int r = 0; r < R; r++) {
                if (LEAN) {
                    // Row r of the block, its last row standing in for rows past the end.
                    int rr = min(r, n - 1 - row0);
                    QMatrix q = h == 0 ? a : b;
                    p[h][r] = q.words[(long)row0 * loads + rr * loads + c];
                    s[h][r] = f16_to_f32(q.scales[(long)row0 * groups + rr * groups + group]);
                    o[h][r] = BITS == 4 ? f16_to_f32(q.offsets[(long)row0 * groups + rr * groups + group]) : 0.0f;
                } else {
                    p[h][r] = words[h][r][c];
                    s[h][r] = f16_to_f32(scales[h][r][group]);
                    o[h][r] = BITS == 4 ? f16_to_f32(offsets[h][r][group]) : 0.0f;
                }
            }
#pragma unroll
        for (int i = 0; i < M; i++) {
            if (i >= m) break;
            const uint4* xr = x.q + (long)i * (k / 16) + (BITS == 8 ? c : 2 * c);
            uint4 xa = xr[0], xb = BITS == 4 ? xr[1] : xa;
            float sx = x.scales[(long)i * groups + group];
            float2 tx = BITS == 4 ? x.sums[(long)i * groups + group] : make_float2(0.0f, 0.0f);
#pragma unroll
            for (int h = 0; h < W; h++)
#pragma unroll
                for (int r = 0; r < R; r++) {
                    float d = (float)q_dot<BITS>(p[h][r], xa, xb);
                    // q4: (s q + o) . x ~ s q . x^ + o sum(x) + 7.5 s (sum(x) - sum(x^)): the
                    // nibbles' rounding error counted about their middle, as if they were centred.
                    float extra = BITS == 4 ? o[h][r] * tx.x + s[h][r] * (7.5f * tx.y) : 0.0f;
                    acc[(h * R + r) * M + i] += d * (s[h][r] * sx) + extra;
                }
        }
    }
    if (LEAN) {
        int base = 0, plain = 0;
        warp_sum_halving<N, 16>(acc, lane, base, plain);
        if ((lane & plain) == 0) {
            constexpr int LEFT = N > 32 ? N / 32 : 1;
#pragma unroll
            for (int j = 0; j < LEFT; j++) partial[warp][base + j] = acc[j];
        }
    } else {
#pragma unroll
        for (int f = 0; f < N; f++) {
            float v = warp_sum(acc[f]);
            if (lane == 0) partial[warp][f] = v;
        }
    }
    __syncthreads();
    for (int t = threadIdx.x; t < R * M; t += blockDim.x) {
        int r = t / M, i = t % M;
        float sum[W];
#pragma unroll
        for (int h = 0; h < W; h++) {
            sum[h] = 0.0f;
#pragma unroll
            for (int wi = 0; wi < WARPS; wi++)
                if (wi < warps) sum[h] += partial[wi][(h * R + r) * M + i];
        }
        long out = (long)i * n + row0 + r;
        if (row0 + r < n && i < m) {
            if (EPI == QEPI_PLAIN) y[out] = sum[0];
            if (EPI == QEPI_ADD) y[out] = residual[out] + sum[0];
            if (EPI == QEPI_SWIGLU) y[out] = sum[0] / (1.0f + expf(-sum[0])) * sum[W - 1];
        }
    }
}

// The kernels, a macro a family. A matrix is passed as its words, scales and offsets (q8 passes its
// scales again as offsets, unread), the input as quantize_activations wrote it. Each kernel is one
// line of the launch-shape table (engine/src/cuda/decode_shapes.rs), which appends the lines to
// this file for NVRTC (and writes them for tools/gemv-lab): NAME, its launch bounds, then BITS, M,
// the weight rows a block owns (SwiGLU: of each matrix), LEAN and the warps the block's partial
// sums have room for. The host launches each from the same table.
#define QM(w) QMatrix{(const uint4*)w, w##_s, w##_o}
#define QX QInput{(const uint4*)xq, xs, (const float2*)xsum}
#define QX_ARGS const unsigned int* __restrict__ xq, const float* __restrict__ xs, const float* __restrict__ xsum
#define GEMV_Q_PLAIN(NAME, BOUNDS, BITS, M, ROWS, LEAN, WARPS)                                                \
    extern "C" __global__ void BOUNDS NAME(const unsigned int* w, const unsigned short* w_s,                  \
                                           const unsigned short* w_o, QX_ARGS, float* __restrict__ y, int m, \
                                           int k, int n) {                                                    \
        gemv_q_rows<BITS, M, QEPI_PLAIN, WARPS, LEAN, ROWS>(QM(w), QM(w), QX, nullptr, y, m, k, n,           \
                                                             blockIdx.x * ROWS);                              \
    }
#define GEMV_Q_ADD(NAME, BOUNDS, BITS, M, ROWS, LEAN, WARPS)                                                  \
    extern "C" __global__ void BOUNDS NAME(const unsigned int* w, const unsigned short* w_s,                  \
                                           const unsigned short* w_o, QX_ARGS,                                \
                                           const float* __restrict__ residual, float* __restrict__ y, int m,  \
                                           int k, int n) {                                                    \
        gemv_q_rows<BITS, M, QEPI_ADD, WARPS, LEAN, ROWS>(QM(w), QM(w), QX, residual, y, m, k, n,            \
                                                           blockIdx.x * ROWS);                                \
    }
#define GEMV_Q_SWIGLU(NAME, BOUNDS, BITS, M, ROWS, LEAN, WARPS)                                               \
    extern "C" __global__ void BOUNDS NAME(                                                                   \
        const unsigned int* gate, const unsigned short* gate_s, const unsigned short* gate_o,                 \
        const unsigned int* up, const unsigned short* up_s, const unsigned short* up_o, QX_ARGS,              \
        float* __restrict__ y, int m, int k, int n) {                                                         \
        gemv_q_rows<BITS, M, QEPI_SWIGLU, WARPS, LEAN, 2 * ROWS>(QM(gate), QM(up), QX, nullptr, y, m, k, n,  \
                                                                  blockIdx.x * ROWS);                         \
    }
#define GEMV_Q_GROUP3(NAME, BOUNDS, BITS, M, ROWS, LEAN, WARPS)                                               \
    extern "C" __global__ void BOUNDS NAME(                                                                   \
        const unsigned int* w0, const unsigned short* w0_s, const unsigned short* w0_o, const unsigned int* w1, \
        const unsigned short* w1_s, const unsigned short* w1_o, const unsigned int* w2,                       \
        const unsigned short* w2_s, const unsigned short* w2_o, float* __restrict__ y0, float* __restrict__ y1, \
        float* __restrict__ y2, QX_ARGS, int m, int k, int n0, int n1, int n2) {                              \
        int b0 = (n0 + ROWS - 1) / ROWS, b1 = (n1 + ROWS - 1) / ROWS;                                         \
        int b = blockIdx.x;                                                                                   \
        QMatrix w = b < b0 ? QM(w0) : b < b0 + b1 ? QM(w1) : QM(w2);                                          \
        float* y = b < b0 ? y0 : b < b0 + b1 ? y1 : y2;                                                       \
        int n = b < b0 ? n0 : b < b0 + b1 ? n1 : n2;                                                          \
        int row0 = (b < b0 ? b : b < b0 + b1 ? b - b0 : b - b0 - b1) * ROWS;                                 \
        gemv_q_rows<BITS, M, QEPI_PLAIN, WARPS, LEAN, ROWS>(w, w, QX, nullptr, y, m, k, n, row0);            \
    }
