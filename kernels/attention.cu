// Flash-style attention in f32: one warp per query row, keys and values streamed through shared
// memory in tiles, softmax kept online (running max and sum), so the score matrix never exists.
// Grouped KV heads, an optional causal mask, and a KV cache of fixed capacity per batch entry.
//
// q   [batch * q_len, heads * D]        k, v [batch * kv_cap, kv_heads * D]
// out [batch * q_len, heads * D]        grid (ceil(q_len / WARPS), heads, batch), block 32 * WARPS

#define WARPS 4
#define MAX_PER_LANE 8  // head dims up to 256

extern "C" __global__ void attention_f32(const float* q, const float* k, const float* v, float* out, int q_len,
                                         int kv_len, int kv_cap, int heads, int kv_heads, int head_dim, int causal,
                                         float scale, int tile) {
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

    float qv[MAX_PER_LANE], acc[MAX_PER_LANE];
    for (int e = 0; e < MAX_PER_LANE; e++) { qv[e] = 0.0f; acc[e] = 0.0f; }
    if (active)
        for (int e = 0; e < per_lane; e++) {
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
            k_tile[i] = k[src];
            v_tile[i] = v[src];
        }
        __syncthreads();
        int limit = min(n, visible - start);
        for (int j = 0; j < limit; j++) {
            float s = 0.0f;
            for (int e = 0; e < per_lane; e++) {
                int d = lane + 32 * e;
                if (d < head_dim) s += qv[e] * k_tile[j * head_dim + d];
            }
            s = warp_sum(s);
            float m_new = fmaxf(m, s);
            float correction = expf(m - m_new);
            float p = expf(s - m_new);
            l = l * correction + p;
            for (int e = 0; e < per_lane; e++) {
                int d = lane + 32 * e;
                if (d < head_dim) acc[e] = acc[e] * correction + p * v_tile[j * head_dim + d];
            }
            m = m_new;
        }
    }
    if (active) {
        float inv = 1.0f / l;
        for (int e = 0; e < per_lane; e++) {
            int d = lane + 32 * e;
            if (d < head_dim) out[((long)b * q_len + qi) * q_width + h * head_dim + d] = acc[e] * inv;
        }
    }
}
