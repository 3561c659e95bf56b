// Flash-style attention in f32: one warp per query row, keys and values streamed through shared
// memory in tiles, softmax kept online (running max and sum), so the score matrix never exists.
// Grouped KV heads, an optional causal mask, and a KV cache of fixed capacity per batch entry.
//
// q   [batch * q_len, heads * D]        k, v [batch * kv_cap, kv_heads * D], f32 or bf16 (KV)
// out [batch * q_len, heads * D]        grid (ceil(q_len / WARPS), heads, batch), block 32 * WARPS

#define WARPS 4
#define MAX_PER_LANE 8  // head dims up to 256

template <typename KV>
__device__ __forceinline__ void attention_rows(const float* q, const KV* k, const KV* v, float* out, int q_len,
                                               int kv_len, int kv_cap, int heads, int kv_heads, int head_dim,
                                               int causal, float scale, int tile) {
    extern __shared__ float smem[];
    float* k_tile = smem;
    float* v_tile = smem + tile * head_dim;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int h = blockIdx.y, b = blockIdx.z;
    int kvh = h / (heads / kv_heads);
    int qi = blockIdx.x * WARPS + warp;
    bool active = qi < q_len;
    int per_lane = (head_dim + 31) / 32;  // lane holds dims lane, lane + 32, ... below head_dim
    long q_width = (long)heads * head_dim, kv_width = (long)kv_heads * head_dim;

    // Loops over the per-lane arrays run to the fixed bound with a guard so the arrays stay in
    // registers (a run-time bound would index them dynamically and spill them).
    float qv[MAX_PER_LANE], acc[MAX_PER_LANE];
#pragma unroll
    for (int e = 0; e < MAX_PER_LANE; e++) { qv[e] = 0.0f; acc[e] = 0.0f; }
    if (active)
#pragma unroll
        for (int e = 0; e < MAX_PER_LANE; e++) {
            int d = lane + 32 * e;
            if (d < head_dim) qv[e] = q[((long)b * q_len + qi) * q_width + h * head_dim + d] * scale;
        }
    int visible = active ? (causal ? kv_len - q_len + qi + 1 : kv_len) : 0;
    int last_needed = causal ? min(kv_len, kv_len - q_len + (int)(blockIdx.x * WARPS + WARPS)) : kv_len;
    float m = -INFINITY, l = 0.0f;

    for (int start = 0; start < last_needed; start += tile) {
        int n = min(tile, kv_len - start);
        __syncthreads();
        for (int i = threadIdx.x; i < n * head_dim; i += blockDim.x) {
            int j = i / head_dim, d = i % head_dim;
            long src = ((long)b * kv_cap + start + j) * kv_width + kvh * head_dim + d;
            k_tile[i] = load_f(k, src);
            v_tile[i] = load_f(v, src);
        }
        __syncthreads();
        int limit = min(n, visible - start);
        for (int j = 0; j < limit; j++) {
            float s = 0.0f;
#pragma unroll
            for (int e = 0; e < MAX_PER_LANE; e++) {
                int d = lane + 32 * e;
                if (e < per_lane && d < head_dim) s += qv[e] * k_tile[j * head_dim + d];
            }
            s = warp_sum(s);
            float m_new = fmaxf(m, s);
            float correction = expf(m - m_new);
            float p = expf(s - m_new);
            l = l * correction + p;
#pragma unroll
            for (int e = 0; e < MAX_PER_LANE; e++) {
                int d = lane + 32 * e;
                if (e < per_lane && d < head_dim) acc[e] = acc[e] * correction + p * v_tile[j * head_dim + d];
            }
            m = m_new;
        }
    }
    if (active) {
        float inv = 1.0f / l;
#pragma unroll
        for (int e = 0; e < MAX_PER_LANE; e++) {
            int d = lane + 32 * e;
            if (e < per_lane && d < head_dim) out[((long)b * q_len + qi) * q_width + h * head_dim + d] = acc[e] * inv;
        }
    }
}

#define ATTENTION_ROWS(NAME, KV)                                                                                   \
    extern "C" __global__ void NAME(const float* q, const KV* k, const KV* v, float* out, int q_len, int kv_len,   \
                                    int kv_cap, int heads, int kv_heads, int head_dim, int causal, float scale,    \
                                    int tile) {                                                                    \
        attention_rows<KV>(q, k, v, out, q_len, kv_len, kv_cap, heads, kv_heads, head_dim, causal, scale, tile);  \
    }
ATTENTION_ROWS(attention_f32, float)
ATTENTION_ROWS(attention_kv_bf16, bf16_t)

// Tiled flash attention for head dim 64 (the DiT's): a block holds 64 queries, streams the keys
// and values in tiles of 32 through shared memory, and keeps each row's running max and sum in
// registers. Thread (ty, tx) owns rows 4ty..4ty+3: scores of keys 4tx..4tx+3 of the tile and
// output dims 4tx..4tx+3 and 32+4tx..32+4tx+3; the 8 threads of a row group reduce with shuffles.
// Queries, keys and probabilities sit transposed in shared memory (dim-major, rows padded to keep
// float4 alignment), so each step of the dot products reads a float4 of 4 queries and one of
// 4 keys for 16 multiply-adds: the arithmetic, not shared memory, sets the pace.
// grid (ceil(q_len / 64), heads, batch), block 128.

#define TQ 64
#define TK 32
#define TD 64
#define QPAD (TQ + 4)
#define KPAD (TK + 4)

// One thread's share of a key/value tile of TILE_KEYS rows of head dim 64, in float4 chunks: chunk
// c = threadIdx.x + 128 i is row c / 16, dims 4 (c % 16)..+3. Loaded into registers a tile ahead,
// so the global reads of the next tile are in flight while the current one is multiplied.
#define TILE_KEYS 32
#define TILE_CHUNKS (TILE_KEYS * 16 / 128)

__device__ __forceinline__ void load_kv_tile(const float* __restrict__ k, const float* __restrict__ v, float4* kk,
                                             float4* vv, int b, int k0, int kv_len, int kv_cap, long kv_width,
                                             int kvh) {
#pragma unroll
    for (int i = 0; i < TILE_CHUNKS; i++) {
        int c = threadIdx.x + 128 * i, j = c >> 4, d = 4 * (c & 15), kj = k0 + j;
        kk[i] = vv[i] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (kj < kv_len) {
            long src = ((long)b * kv_cap + kj) * kv_width + kvh * 64 + d;
            kk[i] = *(const float4*)(k + src);
            vv[i] = *(const float4*)(v + src);
        }
    }
}

extern "C" __global__ void __launch_bounds__(128)
    attention_tiled_d64(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                        float* __restrict__ out, int q_len, int kv_len, int kv_cap, int heads, int kv_heads,
                        int causal, float scale) {
    __shared__ __align__(16) float qt[TD][QPAD];
    __shared__ __align__(16) float kt[TD][KPAD];
    __shared__ __align__(16) float vs[TK][TD];
    __shared__ __align__(16) float pt[TK][QPAD];
    int tid = threadIdx.x, tx = tid & 7, ty = tid >> 3;
    int h = blockIdx.y, b = blockIdx.z, kvh = h / (heads / kv_heads);
    int q0 = blockIdx.x * TQ;
    long q_width = (long)heads * TD, kv_width = (long)kv_heads * TD;
    // Thread i loads float4 chunks i, i + 128, ...: chunk c is row c / 16, dims 4 (c % 16)..+3.
    for (int c = tid; c < TQ * TD / 4; c += blockDim.x) {
        int r = c >> 4, d = 4 * (c & 15), qi = q0 + r;
        float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
        if (qi < q_len) x = *(const float4*)(q + ((long)b * q_len + qi) * q_width + h * TD + d);
        qt[d][r] = x.x * scale;
        qt[d + 1][r] = x.y * scale;
        qt[d + 2][r] = x.z * scale;
        qt[d + 3][r] = x.w * scale;
    }
    float m[4], l[4], o[4][8];
    for (int i = 0; i < 4; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
        for (int c = 0; c < 8; c++) o[i][c] = 0.0f;
    }
    int kv_end = causal ? min(kv_len, kv_len - q_len + q0 + TQ) : kv_len;
    float4 next_k[TILE_CHUNKS], next_v[TILE_CHUNKS];
    load_kv_tile(k, v, next_k, next_v, b, 0, kv_len, kv_cap, kv_width, kvh);
    for (int k0 = 0; k0 < kv_end; k0 += TK) {
        __syncthreads();
#pragma unroll
        for (int i = 0; i < TILE_CHUNKS; i++) {
            int c = tid + 128 * i, j = c >> 4, d = 4 * (c & 15);
            kt[d][j] = next_k[i].x;
            kt[d + 1][j] = next_k[i].y;
            kt[d + 2][j] = next_k[i].z;
            kt[d + 3][j] = next_k[i].w;
            *(float4*)&vs[j][d] = next_v[i];
        }
        __syncthreads();
        if (k0 + TK < kv_end) load_kv_tile(k, v, next_k, next_v, b, k0 + TK, kv_len, kv_cap, kv_width, kvh);
        float s[4][4];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) s[i][j] = 0.0f;
#pragma unroll 8
        for (int d = 0; d < TD; d++) {
            float4 a = *(const float4*)&qt[d][4 * ty], bk = *(const float4*)&kt[d][4 * tx];
            float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {bk.x, bk.y, bk.z, bk.w};
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) s[i][j] += av[i] * bv[j];
        }
        for (int i = 0; i < 4; i++) {
            int qi = q0 + 4 * ty + i;
            float row_max = -INFINITY;
            for (int j = 0; j < 4; j++) {
                int kj = k0 + 4 * tx + j;
                bool visible = kj < kv_len && (!causal || kj <= kv_len - q_len + qi);
                if (!visible) s[i][j] = -INFINITY;
                row_max = fmaxf(row_max, s[i][j]);
            }
            for (int off = 1; off < 8; off <<= 1) row_max = fmaxf(row_max, __shfl_xor_sync(0xffffffffu, row_max, off));
            float m_new = fmaxf(m[i], row_max);
            float correction = m_new == -INFINITY ? 1.0f : expf(m[i] - m_new);
            float row_sum = 0.0f;
            for (int j = 0; j < 4; j++) {
                float p = m_new == -INFINITY ? 0.0f : expf(s[i][j] - m_new);
                pt[4 * tx + j][4 * ty + i] = p;
                row_sum += p;
            }
            for (int off = 1; off < 8; off <<= 1) row_sum += __shfl_xor_sync(0xffffffffu, row_sum, off);
            l[i] = l[i] * correction + row_sum;
            for (int c = 0; c < 8; c++) o[i][c] *= correction;
            m[i] = m_new;
        }
        __syncthreads();
#pragma unroll 4
        for (int j = 0; j < TK; j++) {
            float4 lo = *(const float4*)&vs[j][4 * tx], hi = *(const float4*)&vs[j][32 + 4 * tx];
            float4 p4 = *(const float4*)&pt[j][4 * ty];
            float vv[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w}, p[4] = {p4.x, p4.y, p4.z, p4.w};
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int c = 0; c < 8; c++) o[i][c] += p[i] * vv[c];
        }
    }
    for (int i = 0; i < 4; i++) {
        int qi = q0 + 4 * ty + i;
        if (qi < q_len) {
            float inv = 1.0f / l[i];
            float* row = out + ((long)b * q_len + qi) * q_width + h * TD;
            *(float4*)(row + 4 * tx) = make_float4(o[i][0] * inv, o[i][1] * inv, o[i][2] * inv, o[i][3] * inv);
            *(float4*)(row + 32 + 4 * tx) = make_float4(o[i][4] * inv, o[i][5] * inv, o[i][6] * inv, o[i][7] * inv);
        }
    }
}

// The same attention on the tensor cores, for the fast precision policies (TF32 and bf16 DiT): the
// scores and the probability-weighted values are TF32 products (inputs rounded to a 10-bit
// mantissa, f32 accumulation), the softmax stays f32. A warp owns 16 query rows; mma.m16n8k8
// fragments (PTX ISA "Matrix Fragments for mma.m16n8k8" with .tf32): lane = 4g + t holds rows g
// and g + 8, A columns t and t + 4, B row (k) t and t + 4 of column (n) g, and C columns 2t, 2t + 1.
// The probabilities go through shared memory to change from the C layout to the A layout. Strides
// pad the tiles so every fragment load hits 32 different banks.
// grid (ceil(q_len / 64), heads, batch), block 128.

#define MQ 64
#define MK 32
#define MKS 68
#define MVS 72
#define MPS 36

__device__ __forceinline__ unsigned to_tf32(float x) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}

// c += a . b for a 16x8 A, an 8x8 B and a 16x8 f32 C.
__device__ __forceinline__ void mma_tf32(float* c, const unsigned* a, unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

extern "C" __global__ void __launch_bounds__(128)
    attention_mma_d64(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                      float* __restrict__ out, int q_len, int kv_len, int kv_cap, int heads, int kv_heads,
                      int causal, float scale) {
    __shared__ __align__(16) unsigned ks[MK][MKS];
    __shared__ __align__(16) unsigned vs[MK][MVS];
    __shared__ unsigned ps[4][16][MPS];
    int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    int h = blockIdx.y, b = blockIdx.z, kvh = h / (heads / kv_heads);
    int q0 = blockIdx.x * MQ + 16 * warp;
    long q_width = (long)heads * TD, kv_width = (long)kv_heads * TD;
    // A fragments of this warp's 16 scaled queries: qa[kk] covers dims 8kk..8kk+7.
    unsigned qa[8][4];
#pragma unroll
    for (int kk = 0; kk < 8; kk++)
#pragma unroll
        for (int f = 0; f < 4; f++) {
            int qi = q0 + g + 8 * (f & 1), d = 8 * kk + t + 4 * (f >> 1);
            float x = qi < q_len ? q[((long)b * q_len + qi) * q_width + h * TD + d] * scale : 0.0f;
            qa[kk][f] = to_tf32(x);
        }
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, o[8][4];
#pragma unroll
    for (int nd = 0; nd < 8; nd++)
#pragma unroll
        for (int f = 0; f < 4; f++) o[nd][f] = 0.0f;
    int kv_end = causal ? min(kv_len, kv_len - q_len + blockIdx.x * MQ + MQ) : kv_len;
    float4 next_k[TILE_CHUNKS], next_v[TILE_CHUNKS];
    load_kv_tile(k, v, next_k, next_v, b, 0, kv_len, kv_cap, kv_width, kvh);
    for (int k0 = 0; k0 < kv_end; k0 += MK) {
        __syncthreads();
#pragma unroll
        for (int i = 0; i < TILE_CHUNKS; i++) {
            int c = tid + 128 * i, j = c >> 4, d = 4 * (c & 15);
            float4 kk = next_k[i], vv = next_v[i];
            *(uint4*)&ks[j][d] = make_uint4(to_tf32(kk.x), to_tf32(kk.y), to_tf32(kk.z), to_tf32(kk.w));
            *(uint4*)&vs[j][d] = make_uint4(to_tf32(vv.x), to_tf32(vv.y), to_tf32(vv.z), to_tf32(vv.w));
        }
        __syncthreads();
        if (k0 + MK < kv_end) load_kv_tile(k, v, next_k, next_v, b, k0 + MK, kv_len, kv_cap, kv_width, kvh);
        // Scores of keys 8nt..8nt+7 of the tile.
        float s[4][4];
#pragma unroll
        for (int nt = 0; nt < 4; nt++) {
#pragma unroll
            for (int f = 0; f < 4; f++) s[nt][f] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < 8; kk++) mma_tf32(s[nt], qa[kk], ks[8 * nt + g][8 * kk + t], ks[8 * nt + g][8 * kk + t + 4]);
        }
        // Rows g (r = 0: s[.][0..1]) and g + 8 (r = 1: s[.][2..3]); the 4 lanes of a row reduce.
#pragma unroll
        for (int r = 0; r < 2; r++) {
            int qi = q0 + g + 8 * r;
            float row_max = -INFINITY;
#pragma unroll
            for (int nt = 0; nt < 4; nt++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    int kj = k0 + 8 * nt + 2 * t + e;
                    bool visible = kj < kv_len && (!causal || kj <= kv_len - q_len + qi);
                    if (!visible) s[nt][2 * r + e] = -INFINITY;
                    row_max = fmaxf(row_max, s[nt][2 * r + e]);
                }
            row_max = fmaxf(row_max, __shfl_xor_sync(0xffffffffu, row_max, 1));
            row_max = fmaxf(row_max, __shfl_xor_sync(0xffffffffu, row_max, 2));
            float m_new = fmaxf(m[r], row_max);
            float correction = m_new == -INFINITY ? 1.0f : expf(m[r] - m_new);
            float row_sum = 0.0f;
#pragma unroll
            for (int nt = 0; nt < 4; nt++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    float p = m_new == -INFINITY ? 0.0f : expf(s[nt][2 * r + e] - m_new);
                    ps[warp][g + 8 * r][8 * nt + 2 * t + e] = to_tf32(p);
                    row_sum += p;
                }
            row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 1);
            row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 2);
            l[r] = l[r] * correction + row_sum;
#pragma unroll
            for (int nd = 0; nd < 8; nd++) {
                o[nd][2 * r] *= correction;
                o[nd][2 * r + 1] *= correction;
            }
            m[r] = m_new;
        }
        __syncwarp();
#pragma unroll
        for (int kt = 0; kt < MK / 8; kt++) {
            unsigned pa[4] = {ps[warp][g][8 * kt + t], ps[warp][g + 8][8 * kt + t], ps[warp][g][8 * kt + t + 4],
                              ps[warp][g + 8][8 * kt + t + 4]};
#pragma unroll
            for (int nd = 0; nd < 8; nd++) mma_tf32(o[nd], pa, vs[8 * kt + t][8 * nd + g], vs[8 * kt + t + 4][8 * nd + g]);
        }
        __syncwarp();
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        int qi = q0 + g + 8 * r;
        if (qi < q_len) {
            float inv = 1.0f / l[r];
            float* row = out + ((long)b * q_len + qi) * q_width + h * TD;
#pragma unroll
            for (int nd = 0; nd < 8; nd++)
                *(float2*)(row + 8 * nd + 2 * t) = make_float2(o[nd][2 * r] * inv, o[nd][2 * r + 1] * inv);
        }
    }
}

// The DiT's attention under the bf16 and fp8 policies, FlashAttention-2 style on the bf16 tensor
// cores (attention_bf16_d64 below), its queries and keys rotated (rotate-half rotary over the
// leading 2 * rotary_half dims, rope_rows_f32's arithmetic; rotary_half 0: none): q, k and v
// rounded to bf16 (nearest even), the scores and the probability-weighted values bf16 products
// with f32 accumulation, the softmax f32 in base 2 (log2(e) folded into the queries' scale; the
// probabilities rounded to bf16 for their product). No mask. A warp owns 16 query rows;
// mma.m16n8k16 fragments (PTX ISA "Matrix Fragments for mma.m16n8k16" with .bf16): lane = 4g + t
// holds A rows g and g + 8, columns 2t, 2t + 1 and 2t + 8, 2t + 9; B column (n) g, rows (k) 2t,
// 2t + 1 and 2t + 8, 2t + 9; C rows g and g + 8, columns 2t, 2t + 1. A score tile's C fragments are
// the probabilities' A fragments, so they stay in registers. Keys sit in shared memory row-major
// and values transposed (dims by keys), so every B fragment is one 32-bit load, and the 72-wide
// rows put a warp's loads on 32 different banks.

#define BKS 72

// lo in the low half, hi in the high half, each rounded to the nearest bf16 (ties to even).
__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// c += a . b for a 16x16 bf16 A, a 16x8 bf16 B and a 16x8 f32 C.
__device__ __forceinline__ void mma_bf16(float* c, const unsigned* a, unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Element `p` of a rotary pair (a at dim p, b at dim p + half) after rotation by `angle`: the low one
// (`low`) or the high one, as rope_rows_f32 writes them.
__device__ __forceinline__ float rotated(float a, float b, float angle, bool low) {
    float s, c;
    sincosf(angle, &s, &c);
    return low ? a * c - b * s : b * c + a * s;
}


// Single-query attention over a KV cache (the AR decode step), split over the keys so the whole
// GPU works on it, and grouped so each key/value row is read once for the G query heads that share
// it (GQA; G is a template argument, 1, 2, 4 or 8, so the per-head state stays in registers).
// Lane l holds dims 4l..4l+3 of each of the group's G queries (head dim <= 128).
// Grid (splits, kv_heads, batch), block 128 (4 warps): each warp runs an online softmax over every
// 4th key of its split; the block merges its warps and writes, per query head and split, the running
// max, the sum of exponentials and the unnormalised output. The last block of a (batch, KV head) to
// finish (a ticket per pair in `tickets`, all zero between launches) merges the splits of its query
// heads, so a decode step's attention is one launch rather than a split and a merge.

#define DEC_WARPS 4
#define DEC_UNROLL 4

// Called by every block of a (batch, KV head) after it wrote its partials: the last one to arrive
// merges the `splits` partials of query heads [h0, h0 + group) into `out` and resets the ticket.
// A warp merges a head (lane l holds dims 4l..4l+3), so the merge costs a few L2 round trips.
__device__ __forceinline__ void merge_if_last(const float* part_m, const float* part_l, const float* part_acc,
                                              unsigned* ticket, float* __restrict__ out, int b, int h0, int group,
                                              int splits, int live, int heads, int head_dim) {
    __shared__ bool last;
    // The partials must be visible to whichever block merges before the ticket says they exist.
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(ticket, 1u) == (unsigned)(splits - 1);
    __syncthreads();
    if (!last) return;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, d = 4 * lane;
    for (int h = h0 + warp; h < h0 + group; h += DEC_WARPS) {
        long base = ((long)b * heads + h) * splits;
        // __ldcg reads from L2, where the other blocks' partials are.
        float big = -INFINITY;
        // Only the first `live` splits saw keys; the rest wrote nothing.
        for (int s = lane; s < live; s += 32) big = fmaxf(big, __ldcg(part_m + base + s));
        big = warp_max(big);
        float sum = 0.0f;
        float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
        for (int s0 = 0; s0 < live; s0 += 32) {
            int s = s0 + lane;
            float ms = s < live ? __ldcg(part_m + base + s) : -INFINITY;
            // A split that saw no key has m = -inf and contributes nothing.
            float f = ms == -INFINITY ? 0.0f : expf(ms - big);
            if (s < live) sum += f * __ldcg(part_l + base + s);
            int n = min(32, live - s0);
#pragma unroll 8
            for (int j = 0; j < n; j++) {
                float fj = __shfl_sync(0xffffffffu, f, j);
                if (d < head_dim) {
                    float4 a = __ldcg((const float4*)(part_acc + (base + s0 + j) * head_dim + d));
                    acc.x += fj * a.x;
                    acc.y += fj * a.y;
                    acc.z += fj * a.z;
                    acc.w += fj * a.w;
                }
            }
        }
        sum = warp_sum(sum);
        if (d < head_dim)
            *(float4*)(out + ((long)b * heads + h) * head_dim + d) =
                make_float4(acc.x / sum, acc.y / sum, acc.z / sum, acc.w / sum);
    }
    if (threadIdx.x == 0) *ticket = 0u;
}

template <int G, typename KV>
__device__ __forceinline__ void attention_decode_split(const float* __restrict__ q, const KV* __restrict__ k,
                                                       const KV* __restrict__ v, float* __restrict__ part_m,
                                                       float* __restrict__ part_l, float* __restrict__ part_acc,
                                                       unsigned* __restrict__ tickets, float* __restrict__ out,
                                                       int kv_len, int kv_cap, int heads, int kv_heads, int head_dim,
                                                       int split_len, float scale, const int* __restrict__ shift) {
    __shared__ float sm[DEC_WARPS][G];
    __shared__ float sl[DEC_WARPS][G];
    __shared__ float sacc[DEC_WARPS][G][128];
    pdl_wait();
    pdl_trigger();
    // A recorded step's keys end *shift further on; its grid covers the cache's capacity.
    if (shift) kv_len += *shift;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int split = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z, splits = gridDim.x;
    const int group = G;
    int live = min(splits, (kv_len + split_len - 1) / split_len);
    unsigned* ticket = tickets + (long)b * kv_heads + kvh;
    if (split >= live) {
        // Past the keys: this block only counts itself in, so the merge reads the live splits alone.
        merge_if_last(part_m, part_l, part_acc, ticket, out, b, kvh * group, group, splits, live, heads, head_dim);
        return;
    }
    int d = 4 * lane;
    bool has_dims = d < head_dim;
    long q_width = (long)heads * head_dim, kv_width = (long)kv_heads * head_dim;

    float4 qv[G];
    float m[G], l[G];
    float4 acc[G];
#pragma unroll
    for (int g = 0; g < G; g++) {
        qv[g] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (has_dims) {
            float4 t = *(const float4*)(q + (long)b * q_width + (long)(kvh * group + g) * head_dim + d);
            qv[g] = make_float4(t.x * scale, t.y * scale, t.z * scale, t.w * scale);
        }
        m[g] = -INFINITY;
        l[g] = 0.0f;
        acc[g] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    int start = split * split_len, end = min(kv_len, start + split_len);
    // The keys and values of DEC_UNROLL keys are loaded before any is used, so a warp waits for
    // memory once per DEC_UNROLL keys rather than once per key.
    for (int j0 = start + warp; j0 < end; j0 += DEC_WARPS * DEC_UNROLL) {
        float4 ks[DEC_UNROLL], vs[DEC_UNROLL];
#pragma unroll
        for (int u = 0; u < DEC_UNROLL; u++) {
            int j = j0 + u * DEC_WARPS;
            long row = ((long)b * kv_cap + j) * kv_width + (long)kvh * head_dim + d;
            bool load = has_dims && j < end;
            ks[u] = load ? load4(k + row, 0) : make_float4(0.f, 0.f, 0.f, 0.f);
            vs[u] = load ? load4(v + row, 0) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int u = 0; u < DEC_UNROLL; u++) {
            if (j0 + u * DEC_WARPS >= end) break;
            float4 kk = ks[u], vv = vs[u];
            float s[G];
#pragma unroll
            for (int g = 0; g < G; g++) s[g] = qv[g].x * kk.x + qv[g].y * kk.y + qv[g].z * kk.z + qv[g].w * kk.w;
            // The G reductions interleaved, so their shuffles overlap.
#pragma unroll
            for (int o = 16; o > 0; o >>= 1)
#pragma unroll
                for (int g = 0; g < G; g++)
                    if (g < group) s[g] += __shfl_xor_sync(0xffffffffu, s[g], o);
#pragma unroll
            for (int g = 0; g < G; g++) {
                if (g < group) {
                    float m_new = fmaxf(m[g], s[g]);
                    float correction = expf(m[g] - m_new), p = expf(s[g] - m_new);
                    l[g] = l[g] * correction + p;
                    acc[g].x = acc[g].x * correction + p * vv.x;
                    acc[g].y = acc[g].y * correction + p * vv.y;
                    acc[g].z = acc[g].z * correction + p * vv.z;
                    acc[g].w = acc[g].w * correction + p * vv.w;
                    m[g] = m_new;
                }
            }
        }
    }
#pragma unroll
    for (int g = 0; g < G; g++) {
        if (g < group) {
            if (lane == 0) {
                sm[warp][g] = m[g];
                sl[warp][g] = l[g];
            }
            if (has_dims) {
                sacc[warp][g][d] = acc[g].x;
                sacc[warp][g][d + 1] = acc[g].y;
                sacc[warp][g][d + 2] = acc[g].z;
                sacc[warp][g][d + 3] = acc[g].w;
            }
        }
    }
    __syncthreads();
    // Thread t merges dim t of every query head of the group.
    int t = threadIdx.x;
    for (int g = 0; g < group; g++) {
        float big = -INFINITY;
        for (int w = 0; w < DEC_WARPS; w++) big = fmaxf(big, sm[w][g]);
        float sum = 0.0f, merged = 0.0f;
        for (int w = 0; w < DEC_WARPS; w++) {
            // A warp that saw no key has m = -inf and contributes nothing.
            float f = sm[w][g] == -INFINITY ? 0.0f : expf(sm[w][g] - big);
            sum += f * sl[w][g];
            if (t < head_dim) merged += f * sacc[w][g][t];
        }
        long slot = ((long)b * heads + kvh * group + g) * splits + split;
        if (t == 0) {
            part_m[slot] = big;
            part_l[slot] = sum;
        }
        if (t < head_dim) part_acc[slot * head_dim + t] = merged;
    }
    merge_if_last(part_m, part_l, part_acc, ticket, out, b, kvh * group, group, splits, live, heads, head_dim);
}

#define DECODE_SPLIT_FOR_G(G, KV, SUFFIX)                                                                        \
    extern "C" __global__ void __launch_bounds__(DEC_WARPS * 32) attention_decode_g##G##SUFFIX(                   \
        const float* __restrict__ q, const KV* __restrict__ k, const KV* __restrict__ v,                         \
        float* __restrict__ part_m, float* __restrict__ part_l, float* __restrict__ part_acc,                    \
        unsigned* __restrict__ tickets, float* __restrict__ out, int kv_len, int kv_cap, int heads, int kv_heads, \
        int head_dim, int split_len, float scale, const int* __restrict__ shift) {                               \
        attention_decode_split<G, KV>(q, k, v, part_m, part_l, part_acc, tickets, out, kv_len, kv_cap, heads,    \
                                      kv_heads, head_dim, split_len, scale, shift);                              \
    }
DECODE_SPLIT_FOR_G(1, float, _f32)
DECODE_SPLIT_FOR_G(2, float, _f32)
DECODE_SPLIT_FOR_G(4, float, _f32)
DECODE_SPLIT_FOR_G(8, float, _f32)
DECODE_SPLIT_FOR_G(1, bf16_t, _bf16)
DECODE_SPLIT_FOR_G(2, bf16_t, _bf16)
DECODE_SPLIT_FOR_G(4, bf16_t, _bf16)
DECODE_SPLIT_FOR_G(8, bf16_t, _bf16)

// The keys and values of the bf16 attention staged once a call, not by every block of queries:
// keys rotated (rope_rows_f32's arithmetic, as attention_bf16_d64 rotates its queries) and
// rounded to bf16 as [batch][kv head][key][dim], values rounded to bf16 and transposed as
// [batch][kv head][dim][key], both padded with zeros to kv_pad keys (a multiple of 64). A block
// stages 64 keys of one head in shared memory (a thread takes dims 4c + 16i, i = 0..3, of one key,
// which holds each rotary pair), then writes them out in 16-byte rows.
// grid (kv_pad / 64, kv_heads, batch), block 256.
template <int ROTARY_HALF>
__device__ __forceinline__ void attention_stage_kv(const float* __restrict__ k, const float* __restrict__ v,
                                                   unsigned short* __restrict__ ks_out,
                                                   unsigned short* __restrict__ vt_out, int kv_len, int kv_cap,
                                                   int kv_heads, int kv_pad, float theta, int first_position) {
    __shared__ __align__(16) unsigned short ks[64][BKS];
    __shared__ __align__(16) unsigned short vt[TD][BKS];
    __shared__ float inv_freq[32];
    int tid = threadIdx.x, kvh = blockIdx.y, b = blockIdx.z, k0 = 64 * blockIdx.x;
    if (ROTARY_HALF > 0 && tid < ROTARY_HALF)
        inv_freq[tid] = 1.0f / powf(theta, (float)(2 * tid) / (float)(2 * (ROTARY_HALF > 0 ? ROTARY_HALF : 1)));
    __syncthreads();
    long kv_width = (long)kv_heads * TD;
    const float* kb = k + (long)b * kv_cap * kv_width + kvh * TD;
    const float* vb = v + (long)b * kv_cap * kv_width + kvh * TD;
    int j = tid >> 2, c4 = 4 * (tid & 3);
    bool live = k0 + j < kv_len;
    float kx[4][4];
    float4 vx[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float4 x = live ? *(const float4*)(kb + (long)(k0 + j) * kv_width + c4 + 16 * i) : make_float4(0, 0, 0, 0);
        vx[i] = live ? *(const float4*)(vb + (long)(k0 + j) * kv_width + c4 + 16 * i) : make_float4(0, 0, 0, 0);
        kx[i][0] = x.x;
        kx[i][1] = x.y;
        kx[i][2] = x.z;
        kx[i][3] = x.w;
    }
    if (ROTARY_HALF > 0) {
        float pos = (float)(first_position + k0 + j);
        const int step = ROTARY_HALF / 16;
        float rot[4][4];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                if (i >= 2 * step) {
                    rot[i][e] = kx[i][e];
                } else if (i < step) {
                    rot[i][e] = rotated(kx[i][e], kx[i + step][e], pos * inv_freq[c4 + 16 * i + e], true);
                } else {
                    int p = c4 + 16 * (i - step) + e;
                    rot[i][e] = rotated(kx[i - step][e], kx[i][e], pos * inv_freq[p], false);
                }
            }
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int e = 0; e < 4; e++) kx[i][e] = rot[i][e];
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        int d = c4 + 16 * i;
        *(uint2*)&ks[j][d] = make_uint2(pack_bf16(kx[i][0], kx[i][1]), pack_bf16(kx[i][2], kx[i][3]));
        unsigned v01 = pack_bf16(vx[i].x, vx[i].y), v23 = pack_bf16(vx[i].z, vx[i].w);
        vt[d][j] = (unsigned short)(v01 & 0xffffu);
        vt[d + 1][j] = (unsigned short)(v01 >> 16);
        vt[d + 2][j] = (unsigned short)(v23 & 0xffffu);
        vt[d + 3][j] = (unsigned short)(v23 >> 16);
    }
    __syncthreads();
    // 64 rows of 64 values (8 chunks of 16 bytes) each of keys and of values: two chunks a thread.
    long head = (long)b * kv_heads + kvh;
    unsigned short* ko = ks_out + head * kv_pad * TD;
    unsigned short* vo = vt_out + head * TD * kv_pad;
#pragma unroll
    for (int c = tid; c < 64 * 8; c += 256) {
        int row = c >> 3, col = 8 * (c & 7);
        *(uint4*)(ko + (long)(k0 + row) * TD + col) = *(const uint4*)&ks[row][col];
        *(uint4*)(vo + (long)row * kv_pad + k0 + col) = *(const uint4*)&vt[row][col];
    }
}

#define ATTENTION_STAGE_KV(NAME, HALF) \
extern "C" __global__ void __launch_bounds__(256) \
    NAME(const float* __restrict__ k, const float* __restrict__ v, unsigned short* __restrict__ ks_out, \
         unsigned short* __restrict__ vt_out, int kv_len, int kv_cap, int kv_heads, int kv_pad, float theta, \
         int first_position) { \
    attention_stage_kv<HALF>(k, v, ks_out, vt_out, kv_len, kv_cap, kv_heads, kv_pad, theta, first_position); \
}
ATTENTION_STAGE_KV(attention_stage_kv, 0)
ATTENTION_STAGE_KV(attention_stage_kv_rot16, 16)
ATTENTION_STAGE_KV(attention_stage_kv_rot32, 32)

// 16 bytes from global to shared memory without passing through registers (sm_80 on).
__device__ __forceinline__ void copy16_async(void* shared, const void* global) {
    unsigned dst = (unsigned)__cvta_generic_to_shared(shared);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(global));
}
__device__ __forceinline__ void copy_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void copy_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N)); }

// The attention over the keys and values attention_stage_kv staged, in key tiles of 64, each copied
// into shared memory a tile ahead (cp.async, two buffers); the queries rotate as they load. The
// warps of a block share only the tiles, so the result does not depend on BLOCK_WARPS.
// grid (ceil(q_len / (16 BLOCK_WARPS)), heads, batch), block 32 BLOCK_WARPS.
template <int ROTARY_HALF, int BLOCK_WARPS>
__device__ __forceinline__ void attention_bf16_d64(const float* __restrict__ q,
                                                          const unsigned short* __restrict__ ks_in,
                                                          const unsigned short* __restrict__ vt_in,
                                                          float* __restrict__ out, int q_len, int kv_len,
                                                          int kv_pad, int heads, int kv_heads, float scale,
                                                          float theta, int first_position) {
    const int rotary_half = ROTARY_HALF;
    const int BQ = 16 * BLOCK_WARPS, BK = 64, THREADS = 32 * BLOCK_WARPS;
    __shared__ __align__(16) unsigned short ks[2][BK][BKS];
    __shared__ __align__(16) unsigned short vt[2][TD][BKS];
    __shared__ float inv_freq[32];
    int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    int h = blockIdx.y, b = blockIdx.z, kvh = h / (heads / kv_heads);
    long head = (long)b * kv_heads + kvh;
    const unsigned short* kg = ks_in + head * kv_pad * TD;
    const unsigned short* vg = vt_in + head * TD * kv_pad;
    // Tile k0's 64 keys (64 rows of 8 chunks) and their values (64 dims of 8 chunks) into buffer buf.
    auto stage = [&](int k0, int buf) {
#pragma unroll
        for (int c = tid; c < BK * 8; c += THREADS) {
            int row = c >> 3, col = 8 * (c & 7);
            copy16_async(&ks[buf][row][col], kg + (long)(k0 + row) * TD + col);
            copy16_async(&vt[buf][row][col], vg + (long)row * kv_pad + k0 + col);
        }
        copy_async_commit();
    };
    stage(0, 0);
    if (ROTARY_HALF > 0 && tid < ROTARY_HALF)
        inv_freq[tid] = 1.0f / powf(theta, (float)(2 * tid) / (float)(2 * (ROTARY_HALF > 0 ? ROTARY_HALF : 1)));
    __syncthreads();
    int q0 = blockIdx.x * BQ + 16 * warp;
    long q_width = (long)heads * TD;
    float q_scale = scale * 1.44269504088896341f;
    unsigned qa[4][4];
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
#pragma unroll
        for (int f = 0; f < 4; f++) {
            int qi = q0 + g + 8 * (f & 1), d = 16 * kk + 2 * t + 8 * (f >> 1);
            float2 x = make_float2(0.0f, 0.0f);
            if (qi < q_len) {
                const float* row = q + ((long)b * q_len + qi) * q_width + h * TD;
                x = *(const float2*)(row + d);
                if (d < 2 * rotary_half) {
                    bool low = d < rotary_half;
                    int p = low ? d : d - rotary_half;
                    float2 y = *(const float2*)(row + (low ? d + rotary_half : p));
                    float pos = (float)(first_position + qi);
                    float2 a = low ? x : y, bb = low ? y : x;
                    x = make_float2(rotated(a.x, bb.x, pos * inv_freq[p], low),
                                    rotated(a.y, bb.y, pos * inv_freq[p + 1], low));
                }
            }
            qa[kk][f] = pack_bf16(x.x * q_scale, x.y * q_scale);
        }
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, o[8][4];
#pragma unroll
    for (int nd = 0; nd < 8; nd++)
#pragma unroll
        for (int f = 0; f < 4; f++) o[nd][f] = 0.0f;
    for (int k0 = 0, buf = 0; k0 < kv_len; k0 += BK, buf ^= 1) {
        if (k0 + BK < kv_len) {
            stage(k0 + BK, buf ^ 1);
            copy_async_wait<1>();
        } else {
            copy_async_wait<0>();
        }
        __syncthreads();
        float s[BK / 8][4];
#pragma unroll
        for (int nt = 0; nt < BK / 8; nt++) {
#pragma unroll
            for (int f = 0; f < 4; f++) s[nt][f] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < 4; kk++)
                mma_bf16(s[nt], qa[kk], *(const unsigned*)&ks[buf][8 * nt + g][16 * kk + 2 * t],
                         *(const unsigned*)&ks[buf][8 * nt + g][16 * kk + 2 * t + 8]);
        }
        bool tail = k0 + BK > kv_len;
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float row_max = -INFINITY;
#pragma unroll
            for (int nt = 0; nt < BK / 8; nt++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    if (tail && k0 + 8 * nt + 2 * t + e >= kv_len) s[nt][2 * r + e] = -INFINITY;
                    row_max = fmaxf(row_max, s[nt][2 * r + e]);
                }
            row_max = fmaxf(row_max, __shfl_xor_sync(0xffffffffu, row_max, 1));
            row_max = fmaxf(row_max, __shfl_xor_sync(0xffffffffu, row_max, 2));
            float m_new = fmaxf(m[r], row_max);
            float correction = m_new == -INFINITY ? 1.0f : exp2f(m[r] - m_new);
            float row_sum = 0.0f;
#pragma unroll
            for (int nt = 0; nt < BK / 8; nt++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    float p = m_new == -INFINITY ? 0.0f : exp2f(s[nt][2 * r + e] - m_new);
                    s[nt][2 * r + e] = p;
                    row_sum += p;
                }
            row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 1);
            row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 2);
            l[r] = l[r] * correction + row_sum;
#pragma unroll
            for (int nd = 0; nd < 8; nd++) {
                o[nd][2 * r] *= correction;
                o[nd][2 * r + 1] *= correction;
            }
            m[r] = m_new;
        }
#pragma unroll
        for (int kt = 0; kt < BK / 16; kt++) {
            unsigned pa[4] = {pack_bf16(s[2 * kt][0], s[2 * kt][1]), pack_bf16(s[2 * kt][2], s[2 * kt][3]),
                              pack_bf16(s[2 * kt + 1][0], s[2 * kt + 1][1]),
                              pack_bf16(s[2 * kt + 1][2], s[2 * kt + 1][3])};
#pragma unroll
            for (int nd = 0; nd < 8; nd++)
                mma_bf16(o[nd], pa, *(const unsigned*)&vt[buf][8 * nd + g][16 * kt + 2 * t],
                         *(const unsigned*)&vt[buf][8 * nd + g][16 * kt + 2 * t + 8]);
        }
        // The next iteration copies into the other buffer; the one after, into this one.
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        int qi = q0 + g + 8 * r;
        if (qi < q_len) {
            float inv = 1.0f / l[r];
            float* row = out + ((long)b * q_len + qi) * q_width + h * TD;
#pragma unroll
            for (int nd = 0; nd < 8; nd++)
                *(float2*)(row + 8 * nd + 2 * t) = make_float2(o[nd][2 * r] * inv, o[nd][2 * r + 1] * inv);
        }
    }
}

// Blocks of 4 warps (64 queries), four a multiprocessor: against blocks of 8, two a multiprocessor,
// as fast for a CFG pair and 10 % faster for one window on the H200 (docs/BENCHMARKS.md).
#define ATTENTION_BF16(NAME, HALF) \
extern "C" __global__ void __launch_bounds__(128, 4) \
    NAME(const float* __restrict__ q, const unsigned short* __restrict__ ks, const unsigned short* __restrict__ vt, \
         float* __restrict__ out, int q_len, int kv_len, int kv_pad, int heads, int kv_heads, float scale, float theta, \
         int first_position) { \
    attention_bf16_d64<HALF, 4>(q, ks, vt, out, q_len, kv_len, kv_pad, heads, kv_heads, scale, theta, first_position); \
}
ATTENTION_BF16(attention_bf16_d64, 0)
ATTENTION_BF16(attention_bf16_d64_rot16, 16)
ATTENTION_BF16(attention_bf16_d64_rot32, 32)
