// Row-wise norms and softmax: one block per row.

#define RMS_NORM(NAME, T) \
extern "C" __global__ void NAME(const float* x, const T* w, float* out, int cols, float eps) { \
    const float* row = x + (long)blockIdx.x * cols; \
    float* dst = out + (long)blockIdx.x * cols; \
    float ss = 0.0f; \
    for (int c = threadIdx.x; c < cols; c += blockDim.x) ss += row[c] * row[c]; \
    float inv = rsqrtf(block_sum(ss) / cols + eps); \
    for (int c = threadIdx.x; c < cols; c += blockDim.x) dst[c] = row[c] * inv * load_f(w, c); \
}
RMS_NORM(rms_norm_f32, float)
RMS_NORM(rms_norm_bf16, bf16_t)

// The same for rows a multiple of 4 long, up to 16384: each thread keeps its (at most 4) float4
// chunks of the row in registers between the two passes, and the block is sized to the row, so a
// decode step's [2, 4096] norm runs 1024 threads a row and a head norm of 128 one warp a row.
#define RMS_VEC 4
#define RMS_NORM_VEC(NAME, T) \
extern "C" __global__ void NAME(const float* __restrict__ x, const T* __restrict__ w, float* __restrict__ out, \
                                int cols, float eps) { \
    pdl_wait(); \
    pdl_trigger(); \
    const float* row = x + (long)blockIdx.x * cols; \
    float* dst = out + (long)blockIdx.x * cols; \
    int chunks = cols >> 2; \
    float4 v[RMS_VEC]; \
    float ss = 0.0f; \
    _Pragma("unroll") for (int i = 0; i < RMS_VEC; i++) { \
        int c = threadIdx.x + i * blockDim.x; \
        v[i] = c < chunks ? load4(row, c) : make_float4(0.f, 0.f, 0.f, 0.f); \
        ss += v[i].x * v[i].x + v[i].y * v[i].y + v[i].z * v[i].z + v[i].w * v[i].w; \
    } \
    float inv = rsqrtf(block_sum(ss) / cols + eps); \
    _Pragma("unroll") for (int i = 0; i < RMS_VEC; i++) { \
        int c = threadIdx.x + i * blockDim.x; \
        if (c < chunks) { \
            float4 g = load4(w, c); \
            *(float4*)(dst + 4 * c) = make_float4(v[i].x * inv * g.x, v[i].y * inv * g.y, v[i].z * inv * g.z, \
                                                  v[i].w * inv * g.w); \
        } \
    } \
}
RMS_NORM_VEC(rms_norm_vec_f32, float)
RMS_NORM_VEC(rms_norm_vec_bf16, bf16_t)

#define LAYER_NORM(NAME, T) \
extern "C" __global__ void NAME(const float* x, const T* w, const T* b, float* out, int cols, float eps) { \
    const float* row = x + (long)blockIdx.x * cols; \
    float* dst = out + (long)blockIdx.x * cols; \
    float s = 0.0f; \
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += row[c]; \
    float mean = block_sum(s) / cols; \
    float v = 0.0f; \
    for (int c = threadIdx.x; c < cols; c += blockDim.x) { float d = row[c] - mean; v += d * d; } \
    float inv = rsqrtf(block_sum(v) / cols + eps); \
    for (int c = threadIdx.x; c < cols; c += blockDim.x) dst[c] = (row[c] - mean) * inv * load_f(w, c) + load_f(b, c); \
}
LAYER_NORM(layer_norm_f32, float)
LAYER_NORM(layer_norm_bf16, bf16_t)

// LAYER_NORM for rows of whole fours (16-byte aligned): four values a load, the row read from L1
// in the second and third passes.
#define LAYER_NORM4(NAME, T) \
extern "C" __global__ void NAME(const float* x, const T* w, const T* b, float* out, int cols, float eps) { \
    const float* row = x + (long)blockIdx.x * cols; \
    float* dst = out + (long)blockIdx.x * cols; \
    int quads = cols >> 2; \
    float s = 0.0f; \
    for (int c = threadIdx.x; c < quads; c += blockDim.x) { \
        float4 v = load4(row, c); \
        s += (v.x + v.y) + (v.z + v.w); \
    } \
    float mean = block_sum(s) / cols; \
    float var = 0.0f; \
    for (int c = threadIdx.x; c < quads; c += blockDim.x) { \
        float4 v = load4(row, c); \
        float a = v.x - mean, bb = v.y - mean, cc = v.z - mean, d = v.w - mean; \
        var += (a * a + bb * bb) + (cc * cc + d * d); \
    } \
    float inv = rsqrtf(block_sum(var) / cols + eps); \
    for (int c = threadIdx.x; c < quads; c += blockDim.x) { \
        float4 v = load4(row, c), ww = load4(w, c), bi = load4(b, c); \
        *(float4*)(dst + 4 * c) = make_float4((v.x - mean) * inv * ww.x + bi.x, (v.y - mean) * inv * ww.y + bi.y, \
                                              (v.z - mean) * inv * ww.z + bi.z, (v.w - mean) * inv * ww.w + bi.w); \
    } \
}
LAYER_NORM4(layer_norm4_f32, float)
LAYER_NORM4(layer_norm4_bf16, bf16_t)

// Rotate-half RoPE on the leading rotary_dim dims of each head; angles in f32 as the reference.
// One thread per (row, head, pair). A recorded step's positions move by *shift (null: by none).
extern "C" __global__ void rope_f32(const float* x, float* out, long rows, int heads, int head_dim, int rotary_dim,
                                    float theta, int first_position, int seq_len, const int* shift) {
    if (shift) first_position += *shift;
    int half = rotary_dim / 2;
    long width = (long)heads * head_dim;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < rows * width; i += (long)gridDim.x * blockDim.x) {
        long row = i / width;
        int d = i % head_dim;
        long head_base = i - d;
        if (d >= rotary_dim) { out[i] = x[i]; continue; }
        int pair = d < half ? d : d - half;
        float inv_freq = 1.0f / powf(theta, (float)(2 * pair) / (float)rotary_dim);
        float angle = (float)(first_position + row % seq_len) * inv_freq;
        float s, c;
        sincosf(angle, &s, &c);
        float a = x[head_base + pair], b = x[head_base + pair + half];
        out[i] = d < half ? a * c - b * s : b * c + a * s;
    }
}

// rope_f32's rotation with a block a row: the row's angles (one a pair of dims, shared by every
// head) computed once into shared memory, then every head's dims from them; the same arithmetic,
// so the same bits. Rotary dims up to 256.
extern "C" __global__ void rope_rows_f32(const float* x, float* out, int heads, int head_dim, int rotary_dim,
                                         float theta, int first_position, int seq_len, const int* shift) {
    __shared__ float sines[128], cosines[128];
    if (shift) first_position += *shift;
    int half = rotary_dim / 2;
    long row = blockIdx.x, width = (long)heads * head_dim;
    for (int pair = threadIdx.x; pair < half; pair += blockDim.x) {
        float inv_freq = 1.0f / powf(theta, (float)(2 * pair) / (float)rotary_dim);
        float angle = (float)(first_position + row % seq_len) * inv_freq;
        sincosf(angle, &sines[pair], &cosines[pair]);
    }
    __syncthreads();
    const float* in = x + row * width;
    float* o = out + row * width;
    for (int i = threadIdx.x; i < width; i += blockDim.x) {
        int d = i % head_dim;
        if (d >= rotary_dim) {
            o[i] = in[i];
            continue;
        }
        int pair = d < half ? d : d - half;
        int base = i - d;
        float a = in[base + pair], b = in[base + pair + half], c = cosines[pair], s = sines[pair];
        o[i] = d < half ? a * c - b * s : b * c + a * s;
    }
}

// One decoder layer's attention inputs in one launch (Qwen3, head dim 128, full rotary): per-head
// RMSNorm of the queries and keys (rms_norm_vec's arithmetic), then rotate-half rotary (rope_f32's;
// lane l holds dims 4l..4l+3, whose partners d +- 64 sit in lane l ^ 16); the queries go to
// `q_out`, the keys and the values are appended to the layer's cache at `row` (in the cache's
// dtype C: f32, or bf16 rounded to nearest even). One warp per (row, head) over the query heads,
// then the KV heads; rows are batch-major, n per batch entry. A recorded step's position and cache
// row move by *shift (null: by none).
#define QK_NORM_ROPE_APPEND(NAME, T, C) \
extern "C" __global__ void NAME(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v, \
                                const T* __restrict__ q_norm, const T* __restrict__ k_norm, float* __restrict__ q_out, \
                                C* __restrict__ keys, C* __restrict__ values, int rows, int heads, int kv_heads, \
                                float eps, float theta, int first_position, int n, int capacity, int row, \
                                const int* __restrict__ shift) { \
    pdl_wait(); \
    pdl_trigger(); \
    if (shift) { \
        first_position += *shift; \
        row += *shift; \
    } \
    int unit = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31; \
    int per_row = heads + kv_heads; \
    if (unit >= rows * per_row) return; \
    int r = unit / per_row, head = unit % per_row; \
    bool is_q = head < heads; \
    int h = is_q ? head : head - heads; \
    int width = (is_q ? heads : kv_heads) * 128; \
    long src = (long)r * width + h * 128 + 4 * lane; \
    float4 x = *(const float4*)((is_q ? q : k) + src); \
    float ss = warp_sum(x.x * x.x + x.y * x.y + x.z * x.z + x.w * x.w); \
    float inv = rsqrtf(ss / 128 + eps); \
    float4 g = is_q ? load4(q_norm, lane) : load4(k_norm, lane); \
    float nv[4] = {x.x * inv * g.x, x.y * inv * g.y, x.z * inv * g.z, x.w * inv * g.w}; \
    float position = (float)(first_position + r % n); \
    float result[4]; \
    _Pragma("unroll") for (int e = 0; e < 4; e++) { \
        float partner = __shfl_xor_sync(0xffffffffu, nv[e], 16); \
        int pair = (4 * lane + e) & 63; \
        float inv_freq = 1.0f / powf(theta, (float)(2 * pair) / 128.0f); \
        float s, c; \
        sincosf(position * inv_freq, &s, &c); \
        result[e] = lane < 16 ? nv[e] * c - partner * s : nv[e] * c + partner * s; \
    } \
    float4 out = make_float4(result[0], result[1], result[2], result[3]); \
    if (is_q) { \
        *(float4*)(q_out + src) = out; \
    } else { \
        long at = ((long)(r / n) * capacity + row + r % n) * width + h * 128 + 4 * lane; \
        store4(keys + at, out); \
        store4(values + at, *(const float4*)(v + src)); \
    } \
}
QK_NORM_ROPE_APPEND(qk_norm_rope_append128_f32, float, float)
QK_NORM_ROPE_APPEND(qk_norm_rope_append128_bf16, bf16_t, float)
QK_NORM_ROPE_APPEND(qk_norm_rope_append128_f32_kv_bf16, float, bf16_t)
QK_NORM_ROPE_APPEND(qk_norm_rope_append128_bf16_kv_bf16, bf16_t, bf16_t)
