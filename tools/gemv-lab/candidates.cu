// Candidate designs of the quantized decode products, beside the engine's (kernels/gemv_quant.cu,
// whose types, q_dot and warp_sum_halving they reuse). lab.cu times both. The candidates differ
// from the engine's gemv_q_rows in three places:
// - PIPE weight loads of each row in flight a thread (the engine: 1), so a thread can own more of
//   a row and a block fewer threads for the same bytes;
// - the block's partial sums always reduced by halving (the engine: only where LEAN);
// - QR weight rows a block (the engine's usual: QROWS, 8): fewer rows need fewer registers (q4's 8 loads
//   of 16 bytes and 16 sums need about 128), so more blocks stay resident, each activation load
//   serving fewer rows.
// Designs that lost and left (their figures in docs/BENCHMARKS.md, session 12): warps owning 1, 2
// or 4 rows whole, with no shared memory; persistent grids, each block taking row group after row
// group.

namespace cand {

template <int BITS, int M, int EPI, int WARPS, int PIPE, bool LEAN = false, int QR = QROWS>
__device__ __forceinline__ void candidate_rows(QMatrix a, QMatrix b, QInput x, const float* __restrict__ residual,
                                            float* __restrict__ y, int m, int k, int n, int row0) {
    constexpr int W = EPI == QEPI_SWIGLU ? 2 : 1;
    constexpr int R = QR / W;
    constexpr int N = W * R * M;
    constexpr int PER = QLayout<BITS>::PER_LOAD;
    __shared__ float partial[WARPS][N];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
    int loads = k / PER, groups = k / 32;
    float acc[N];
#pragma unroll
    for (int f = 0; f < N; f++) acc[f] = 0.0f;
    const uint4* words[W][R];
    const unsigned short* scales[W][R];
    const unsigned short* offsets[W][R];
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
    if (threadIdx.x < loads)
#pragma unroll
        for (int h = 0; h < W; h++)
#pragma unroll
            for (int r = 0; r < R; r++) prefetch_l2(words[h][r] + threadIdx.x);
    pdl_wait();
    pdl_trigger();
    for (int c0 = threadIdx.x; c0 < loads; c0 += PIPE * blockDim.x) {
        uint4 p[PIPE][W][R];
        float s[PIPE][W][R], o[PIPE][W][R];
#pragma unroll
        for (int u = 0; u < PIPE; u++) {
            int c = min(c0 + u * (int)blockDim.x, loads - 1);
            int group = BITS == 8 ? c >> 1 : c;
#pragma unroll
            for (int h = 0; h < W; h++)
#pragma unroll
                for (int r = 0; r < R; r++) {
                    if (LEAN) {
                        // Row r of this block, the last row standing in for rows past the end.
                        int rr = min(r, n - 1 - row0);
                        QMatrix q = h == 0 ? a : b;
                        p[u][h][r] = q.words[(long)row0 * loads + rr * loads + c];
                        s[u][h][r] = f16_to_f32(q.scales[(long)row0 * groups + rr * groups + group]);
                        o[u][h][r] = BITS == 4 ? f16_to_f32(q.offsets[(long)row0 * groups + rr * groups + group]) : 0.0f;
                    } else {
                        p[u][h][r] = words[h][r][c];
                        s[u][h][r] = f16_to_f32(scales[h][r][group]);
                        o[u][h][r] = BITS == 4 ? f16_to_f32(offsets[h][r][group]) : 0.0f;
                    }
                }
        }
#pragma unroll
        for (int u = 0; u < PIPE; u++) {
            int c = c0 + u * (int)blockDim.x;
            if (c >= loads) break;
            int group = BITS == 8 ? c >> 1 : c;
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
                        float d = (float)q_dot<BITS>(p[u][h][r], xa, xb);
                        float extra = BITS == 4 ? o[u][h][r] * tx.x + s[u][h][r] * (7.5f * tx.y) : 0.0f;
                        acc[(h * R + r) * M + i] += d * (s[u][h][r] * sx) + extra;
                    }
            }
        }
    }
    int base = 0, plain = 0;
    warp_sum_halving<N, 16>(acc, lane, base, plain);
    if ((lane & plain) == 0) {
        constexpr int LEFT = N > 32 ? N / 32 : 1;
#pragma unroll
        for (int j = 0; j < LEFT; j++) partial[warp][base + j] = acc[j];
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

template <int BITS, int PIPE>
__global__ void __launch_bounds__(256) gemv(const unsigned int* w, const unsigned short* w_s,
                                            const unsigned short* w_o, QX_ARGS, float* __restrict__ y, int m,
                                            int k, int n) {
    candidate_rows<BITS, 2, QEPI_PLAIN, 8, PIPE>(QM(w), QM(w), QX, nullptr, y, m, k, n, blockIdx.x * QROWS);
}

template <int BITS, int PIPE>
__global__ void __launch_bounds__(128) swiglu(const unsigned int* gate, const unsigned short* gate_s,
                                              const unsigned short* gate_o, const unsigned int* up,
                                              const unsigned short* up_s, const unsigned short* up_o, QX_ARGS,
                                              float* __restrict__ y, int m, int k, int n) {
    candidate_rows<BITS, 2, QEPI_SWIGLU, 4, PIPE>(QM(gate), QM(up), QX, nullptr, y, m, k, n, blockIdx.x * (QROWS / 2));
}

template <int BITS, int PIPE>
__global__ void __launch_bounds__(256) group3(const unsigned int* w0, const unsigned short* w0_s,
                                              const unsigned short* w0_o, const unsigned int* w1,
                                              const unsigned short* w1_s, const unsigned short* w1_o,
                                              const unsigned int* w2, const unsigned short* w2_s,
                                              const unsigned short* w2_o, float* __restrict__ y0,
                                              float* __restrict__ y1, float* __restrict__ y2, QX_ARGS, int m, int k,
                                              int n0, int n1, int n2) {
    int b0 = (n0 + QROWS - 1) / QROWS, b1 = (n1 + QROWS - 1) / QROWS;
    int b = blockIdx.x;
    QMatrix w = b < b0 ? QM(w0) : b < b0 + b1 ? QM(w1) : QM(w2);
    float* y = b < b0 ? y0 : b < b0 + b1 ? y1 : y2;
    int n = b < b0 ? n0 : b < b0 + b1 ? n1 : n2;
    int row0 = (b < b0 ? b : b < b0 + b1 ? b - b0 : b - b0 - b1) * QROWS;
    candidate_rows<BITS, 2, QEPI_PLAIN, 8, PIPE>(w, w, QX, nullptr, y, m, k, n, row0);
}

// Lean, QR rows a block (SwiGLU QR / 2 of each matrix), at least MINB blocks of MAXT threads resident.
template <int BITS, int MINB, int QR = QROWS, int MAXT = 256>
__global__ void __launch_bounds__(MAXT, MINB) gemv_lean(const unsigned int* w, const unsigned short* w_s,
                                                       const unsigned short* w_o, QX_ARGS, float* __restrict__ y,
                                                       int m, int k, int n) {
    candidate_rows<BITS, 2, QEPI_PLAIN, 8, 1, true, QR>(QM(w), QM(w), QX, nullptr, y, m, k, n, blockIdx.x * QR);
}

template <int BITS, int MINB, int QR = QROWS>
__global__ void __launch_bounds__(128, MINB) swiglu_lean(const unsigned int* gate, const unsigned short* gate_s,
                                                         const unsigned short* gate_o, const unsigned int* up,
                                                         const unsigned short* up_s, const unsigned short* up_o,
                                                         QX_ARGS, float* __restrict__ y, int m, int k, int n) {
    candidate_rows<BITS, 2, QEPI_SWIGLU, 4, 1, true, QR>(QM(gate), QM(up), QX, nullptr, y, m, k, n,
                                                         blockIdx.x * (QR / 2));
}

template <int BITS, int MINB, int QR = QROWS, int MAXT = 256>
__global__ void __launch_bounds__(MAXT, MINB) group3_lean(const unsigned int* w0, const unsigned short* w0_s,
                                                         const unsigned short* w0_o, const unsigned int* w1,
                                                         const unsigned short* w1_s, const unsigned short* w1_o,
                                                         const unsigned int* w2, const unsigned short* w2_s,
                                                         const unsigned short* w2_o, float* __restrict__ y0,
                                                         float* __restrict__ y1, float* __restrict__ y2, QX_ARGS,
                                                         int m, int k, int n0, int n1, int n2) {
    int b0 = (n0 + QR - 1) / QR, b1 = (n1 + QR - 1) / QR;
    int b = blockIdx.x;
    QMatrix w = b < b0 ? QM(w0) : b < b0 + b1 ? QM(w1) : QM(w2);
    float* y = b < b0 ? y0 : b < b0 + b1 ? y1 : y2;
    int n = b < b0 ? n0 : b < b0 + b1 ? n1 : n2;
    int row0 = (b < b0 ? b : b < b0 + b1 ? b - b0 : b - b0 - b1) * QR;
    candidate_rows<BITS, 2, QEPI_PLAIN, 8, 1, true, QR>(w, w, QX, nullptr, y, m, k, n, row0);
}

}  // namespace cand
