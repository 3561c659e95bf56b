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
