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

extern "C" __global__ void softmax_rows_f32(const float* x, float* out, int cols) {
    const float* row = x + (long)blockIdx.x * cols;
    float* dst = out + (long)blockIdx.x * cols;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
    m = block_max(m);
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += expf(row[c] - m);
    float inv = 1.0f / block_sum(s);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) dst[c] = expf(row[c] - m) * inv;
}

// Rotate-half RoPE on the leading rotary_dim dims of each head; angles in f32 as the reference.
// One thread per (row, head, pair).
extern "C" __global__ void rope_f32(const float* x, float* out, long rows, int heads, int head_dim, int rotary_dim,
                                    float theta, int first_position, int seq_len) {
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
