// y[i, n] = sum_k x[i, k] * w[n, k] for a few activation rows (M <= 8): the decode-step products,
// bound by reading the weights once. One warp per weight row; 16-byte loads of bf16 weights.

#define MAX_M 8

extern "C" __global__ void gemv_bf16(const bf16_t* w, const float* x, float* y, int m, int k, int n) {
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (warp >= n) return;
    const bf16_t* row = w + (long)warp * k;
    float acc[MAX_M];
    for (int i = 0; i < MAX_M; i++) acc[i] = 0.0f;
    if ((k & 7) == 0) {
        const uint4* row8 = (const uint4*)row;
        for (int c = lane; c < k / 8; c += 32) {
            uint4 packed = row8[c];
            unsigned int words[4] = {packed.x, packed.y, packed.z, packed.w};
            float wv[8];
            for (int j = 0; j < 4; j++) {
                wv[2 * j] = __uint_as_float(words[j] << 16);
                wv[2 * j + 1] = __uint_as_float(words[j] & 0xffff0000u);
            }
            for (int i = 0; i < m; i++) {
                const float4* xr = (const float4*)(x + (long)i * k + c * 8);
                float4 a = xr[0], b = xr[1];
                acc[i] += wv[0] * a.x + wv[1] * a.y + wv[2] * a.z + wv[3] * a.w + wv[4] * b.x + wv[5] * b.y + wv[6] * b.z + wv[7] * b.w;
            }
        }
    } else {
        for (int c = lane; c < k; c += 32) {
            float wv = bf16_to_f32(row[c]);
            for (int i = 0; i < m; i++) acc[i] += wv * x[(long)i * k + c];
        }
    }
    for (int i = 0; i < m; i++) {
        float s = warp_sum(acc[i]);
        if (lane == 0) y[(long)i * n + warp] = s;
    }
}
