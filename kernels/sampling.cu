// The shortlist of a guided top-k draw (engine/src/pipeline/sampling.rs `shortlist` is the same rule
// on the host): one block finds the k-th largest value of a logit pair by radix selection over
// order-preserving keys and writes back only the entries at or above it, so a draw moves a list of
// a few kilobytes to the host instead of the whole vocabulary's logits.

#define SHORTLIST_THREADS 1024
#define FLOOR_VALUE -1e9f

// Larger float, larger key. -0 and +0 share a key: the sampling's comparisons treat them as equal.
__device__ __forceinline__ unsigned order_key(float f) {
    if (f == 0.0f) f = 0.0f;
    unsigned u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// The value an entry is ranked by. Mode 0 (the semantic draw's CFG top-k): the conditional value,
// -inf outside [lo, hi) and `extra`. Mode 1 (a residual codebook): the guided value with NaN and
// -inf as -1e9 and +inf as 1e9, in separately rounded steps as the host computes it (no FMA).
__device__ __forceinline__ float shortlist_value(const float* cond, const float* uncond, int i, int mode,
                                                 float scale, int lo, int hi, int extra) {
    if (mode == 0) return ((i >= lo && i < hi) || i == extra) ? cond[i] : -INFINITY;
    float g = __fadd_rn(uncond[i], __fmul_rn(__fsub_rn(cond[i], uncond[i]), scale));
    if (g != g || g == -INFINITY) return FLOOR_VALUE;
    if (g == INFINITY) return 1e9f;
    return g;
}

// logits [2 * pairs, width] (conditional, unconditional, a pair a block); k <= width. out a pair:
// [count, index[cap], cond[cap], uncond[cap]] with count -1 when the shortlist cannot stand for
// the rows (more than cap entries tie at the threshold, a NaN among mode 0's values, or a
// threshold at the floor of the values).
extern "C" __global__ void __launch_bounds__(SHORTLIST_THREADS)
    shortlist_top_k(const float* __restrict__ logits, int width, int mode, float scale, int k, int lo, int hi,
                    int extra, int cap, float* __restrict__ out) {
    __shared__ unsigned hist[256];
    __shared__ unsigned prefix, remaining;
    __shared__ int count, invalid;
    // A block a pair of rows (a batch's songs), each with its own list.
    logits += (size_t)blockIdx.x * 2 * width;
    out += (size_t)blockIdx.x * (1 + 3 * cap);
    const float* cond = logits;
    const float* uncond = logits + width;
    int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    if (t == 0) {
        prefix = 0u;
        remaining = (unsigned)k;
        count = 0;
        invalid = 0;
    }
    unsigned mask = 0u;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int b = t; b < 256; b += blockDim.x) hist[b] = 0u;
        __syncthreads();
        unsigned want = prefix;
        // Every lane runs every round, so the warp can pool its increments per bin.
        for (int base = 0; base < width; base += blockDim.x) {
            int i = base + t;
            unsigned bin = 256u;
            if (i < width) {
                float v = shortlist_value(cond, uncond, i, mode, scale, lo, hi, extra);
                if (v != v) invalid = 1;
                unsigned key = order_key(v);
                if ((key & mask) == want) bin = (key >> shift) & 255u;
            }
            unsigned peers = __match_any_sync(0xffffffffu, bin);
            if (bin < 256u && lane == __ffs(peers) - 1) atomicAdd(&hist[bin], (unsigned)__popc(peers));
        }
        __syncthreads();
        if (warp == 0) {
            // Lane l holds bins 255 - 8l down to 248 - 8l; the bin where the running count from the
            // top reaches `remaining` holds the k-th largest.
            unsigned r = remaining, c[8], sum = 0u;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                c[j] = hist[255 - 8 * lane - j];
                sum += c[j];
            }
            unsigned inclusive = sum;
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                unsigned below = __shfl_up_sync(0xffffffffu, inclusive, o);
                if (lane >= o) inclusive += below;
            }
            unsigned before = inclusive - sum;
            if (before < r && r <= inclusive) {
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    if (before + c[j] >= r) {
                        prefix = want | ((unsigned)(255 - 8 * lane - j) << shift);
                        remaining = r - before;
                        break;
                    }
                    before += c[j];
                }
            }
        }
        mask |= 255u << shift;
        __syncthreads();
    }
    unsigned threshold = prefix;
    for (int i = t; i < width; i += blockDim.x) {
        float v = shortlist_value(cond, uncond, i, mode, scale, lo, hi, extra);
        if (order_key(v) >= threshold) {
            int slot = atomicAdd(&count, 1);
            if (slot < cap) {
                out[1 + slot] = (float)i;
                out[1 + cap + slot] = cond[i];
                out[1 + 2 * cap + slot] = uncond[i];
            }
        }
    }
    __syncthreads();
    if (t == 0) {
        bool floor = mode == 0 ? threshold <= order_key(-INFINITY) : threshold <= order_key(FLOOR_VALUE);
        out[0] = (invalid || floor || count > cap) ? -1.0f : (float)count;
    }
}

// The draw itself (engine/src/pipeline/sampling.rs `guided_probs` and rng.rs `categorical_at` are
// the same steps on the host, and this follows them operation for operation, each rounded on its
// own: no FMA, our exp rather than the library's), so a draw made here is the host's bit for bit
// and the AR loop need not read the shortlist back between a frame's codebooks.
#define DRAW_MAX 1024

// engine/src/cpu/exp.rs `exp`: Cephes' expf, branch-free.
__device__ __forceinline__ float cephes_exp(float x) {
    const float max_arg = 88.72284f, min_arg = -87.33655f, rounder = 12582912.0f;
    float c = fminf(fmaxf(x, min_arg), max_arg);
    float shifted = __fadd_rn(__fmul_rn(c, 1.44269504088896341f), rounder);
    float n = __fsub_rn(shifted, rounder);
    float r = __fsub_rn(__fsub_rn(c, __fmul_rn(n, 0.6933594f)), __fmul_rn(n, -2.1219444e-4f));
    float p = 1.9875691e-4f;
    p = __fadd_rn(__fmul_rn(p, r), 1.3981999e-3f);
    p = __fadd_rn(__fmul_rn(p, r), 8.333452e-3f);
    p = __fadd_rn(__fmul_rn(p, r), 4.1665796e-2f);
    p = __fadd_rn(__fmul_rn(p, r), 1.6666665e-1f);
    p = __fadd_rn(__fmul_rn(p, r), 0.5f);
    float e_r = __fadd_rn(__fadd_rn(__fmul_rn(__fmul_rn(p, r), r), r), 1.0f);
    int n_int = (int)(__float_as_uint(shifted) - __float_as_uint(rounder));
    int half_n = n_int >> 1;
    float y = __fmul_rn(__fmul_rn(e_r, __uint_as_float((unsigned)(half_n + 127) << 23)),
                        __uint_as_float((unsigned)(n_int - half_n + 127) << 23));
    if (x > max_arg) return INFINITY;
    if (x < min_arg) return 0.0f;
    return y;
}

// A pair a block. Its entries come from `lists` (shortlist_top_k's packing, `cap` a pair) or, where
// `lists` is null, are every entry of the pair's rows of `logits` (width <= DRAW_MAX). Writes the
// drawn index to codes[pair], or -1 where the list cannot stand for the rows (the host draws).
extern "C" __global__ void __launch_bounds__(256)
    draw_guided(const float* __restrict__ logits, int width, const float* __restrict__ lists, int cap, int k,
                float scale, const double* __restrict__ uniforms, float* __restrict__ codes) {
    __shared__ int s_index[DRAW_MAX];
    __shared__ float s_value[DRAW_MAX];
    __shared__ float s_weight[DRAW_MAX];
    __shared__ int s_sorted[DRAW_MAX];
    __shared__ float s_threshold, s_max, s_sum, s_total;
    __shared__ int s_found;
    int pair = blockIdx.x, t = threadIdx.x;
    const float* cond;
    const float* uncond;
    const float* index = nullptr;
    int count;
    if (lists) {
        const float* list = lists + (size_t)pair * (1 + 3 * cap);
        count = (int)list[0];
        index = list + 1;
        cond = list + 1 + cap;
        uncond = list + 1 + 2 * cap;
    } else {
        count = width;
        cond = logits + (size_t)pair * 2 * width;
        uncond = cond + width;
    }
    if (count < 0 || count > DRAW_MAX || (lists && count < k)) {
        if (t == 0) codes[pair] = -1.0f;
        return;
    }
    for (int j = t; j < count; j += blockDim.x) {
        s_index[j] = index ? (int)index[j] : j;
        // The host's `guided_probs`, then `finite`.
        float g = __fadd_rn(uncond[j], __fmul_rn(__fsub_rn(cond[j], uncond[j]), scale));
        if (g != g || g == -INFINITY) g = FLOOR_VALUE;
        else if (g == INFINITY) g = 1e9f;
        s_value[j] = g;
    }
    if (t == 0) s_found = 0;
    __syncthreads();
    // Index order (the indices are distinct): the host sums in it.
    for (int j = t; j < count; j += blockDim.x) {
        int rank = 0;
        for (int i = 0; i < count; i++) rank += s_index[i] < s_index[j];
        s_sorted[rank] = j;
    }
    // The k-th largest (ties counted): the value with fewer than k above it and k or more at or above.
    int kk = min(max(k, 1), count);
    for (int j = t; j < count; j += blockDim.x) {
        int above = 0, at_or_above = 0;
        for (int i = 0; i < count; i++) {
            above += s_value[i] > s_value[j];
            at_or_above += s_value[i] >= s_value[j];
        }
        if (above < kk && kk <= at_or_above) {
            s_threshold = s_value[j];
            s_found = 1;
        }
    }
    __syncthreads();
    if (t == 0) {
        float m = -INFINITY;
        for (int j = 0; j < count; j++) m = fmaxf(m, s_value[j]);
        s_max = m;
    }
    __syncthreads();
    float threshold = s_threshold;
    if (!s_found || (lists && threshold <= FLOOR_VALUE)) {
        if (t == 0) codes[pair] = -1.0f;
        return;
    }
    for (int j = t; j < count; j += blockDim.x) {
        float v = s_value[j];
        s_weight[j] = v < threshold ? 0.0f : cephes_exp(__fsub_rn(v, s_max));
    }
    __syncthreads();
    if (t == 0) {
        float sum = 0.0f;
        for (int r = 0; r < count; r++) sum = __fadd_rn(sum, s_weight[s_sorted[r]]);
        s_sum = sum;
    }
    __syncthreads();
    for (int j = t; j < count; j += blockDim.x) s_weight[j] = __fdiv_rn(s_weight[j], s_sum);
    __syncthreads();
    if (t == 0) {
        float total = 0.0f;
        for (int r = 0; r < count; r++) total = __fadd_rn(total, s_weight[s_sorted[r]]);
        s_total = fmaxf(total, 1e-12f);
    }
    __syncthreads();
    for (int j = t; j < count; j += blockDim.x) s_weight[j] = __fdiv_rn(s_weight[j], s_total);
    __syncthreads();
    if (t == 0) {
        // rng.rs `categorical_at`.
        double total = 0.0;
        for (int r = 0; r < count; r++) total = __dadd_rn(total, (double)s_weight[s_sorted[r]]);
        double target = __dmul_rn(uniforms[pair], total);
        double acc = 0.0;
        int last_positive = 0, drawn = -1;
        for (int r = 0; r < count && drawn < 0; r++) {
            int j = s_sorted[r];
            float w = s_weight[j];
            if (w > 0.0f) {
                acc = __dadd_rn(acc, (double)w);
                last_positive = s_index[j];
                if (acc > target) drawn = s_index[j];
            }
        }
        codes[pair] = (float)(drawn >= 0 ? drawn : last_positive);
    }
}

// ids [n * repeat]: each code of codes [n] (from draw_guided; -1 as 0) plus `offset`, `repeat` times,
// kept below `rows`, the table's.
extern "C" __global__ void drawn_ids(const float* codes, int n, int repeat, unsigned offset, unsigned rows,
                                     unsigned* ids) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * repeat) return;
    float code = codes[i / repeat];
    ids[i] = min((unsigned)(code > 0.0f ? code : 0.0f) + offset, rows - 1u);
}
