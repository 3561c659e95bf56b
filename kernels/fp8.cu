// The DiT's block products under --precision fp8 (engine/src/cuda/fp8.rs; the format is
// engine/src/fp8.rs): rows encoded as e4m3 with one f32 scale each, and the products' finish.
// The encoding is written out rather than taken from the cvt instruction, so that the file
// compiles for every architecture and encodes exactly as the host's encode_e4m3 (tests/kernels).

// The e4m3 code nearest x (ties to even), saturated to +-448; NaN gives NaN's code.
__device__ __forceinline__ unsigned char encode_e4m3(float x) {
    unsigned int sign = signbit(x) ? 0x80u : 0u;
    if (isnan(x)) return 0x7f;
    float a = fabsf(x);
    if (a >= 448.0f) return (unsigned char)(sign | 0x7eu);
    // Below the smallest normal (2^-6) the codes are multiples of 2^-9.
    if (a < 0.015625f) return (unsigned char)(sign | (unsigned int)rintf(a * 512.0f));
    unsigned int bits = __float_as_uint(a);
    int exponent = (int)(bits >> 23) - 127;
    unsigned int mantissa = bits & 0x7fffffu;
    unsigned int kept = mantissa >> 20, rest = mantissa & 0xfffffu, half = 0x80000u;
    unsigned int code = ((unsigned int)(exponent + 7) << 3) | kept;
    if (rest > half || (rest == half && (kept & 1u))) code += 1;  // a carry steps the exponent
    return (unsigned char)(sign | min(code, 0x7eu));
}


__device__ __forceinline__ float max_abs4(float m, float4 v) {
    return fmaxf(m, fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
}

// One block a row of `cols` values: its scale (its largest magnitude over 448; 1 for a row of
// zeros or one without a finite maximum) and its codes, `padded_cols` of them, zero past `cols`.
// Rows of whole fours are read four values and written four codes at a time.
template <typename T>
__device__ void quantize_row(const T* x, unsigned char* codes, float* scales, int cols, int padded_cols) {
    long r = blockIdx.x;
    const T* row = x + r * cols;
    bool fours = (cols & 3) == 0;
    float m = 0.0f;
    if (fours) {
        for (int c = 4 * threadIdx.x; c < cols; c += 4 * blockDim.x) m = max_abs4(m, load4(row, c >> 2));
    } else {
        for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, fabsf(load_f(row, c)));
    }
    m = block_max(m);
    float scale = (m > 0.0f && isfinite(m)) ? m / 448.0f : 1.0f;
    unsigned char* out = codes + r * padded_cols;
    if (fours) {
        for (int c = 4 * threadIdx.x; c < padded_cols; c += 4 * blockDim.x) {
            unsigned word = 0;
            if (c < cols) {
                float4 v = load4(row, c >> 2);
                word = encode_e4m3(v.x / scale) | (unsigned)encode_e4m3(v.y / scale) << 8 |
                       (unsigned)encode_e4m3(v.z / scale) << 16 | (unsigned)encode_e4m3(v.w / scale) << 24;
            }
            *(unsigned*)(out + c) = word;
        }
    } else {
        for (int c = threadIdx.x; c < padded_cols; c += blockDim.x) {
            out[c] = c < cols ? encode_e4m3(load_f(row, c) / scale) : 0;
        }
    }
    if (threadIdx.x == 0) scales[r] = scale;
}

extern "C" __global__ void quantize_rows_e4m3_f32(const float* x, unsigned char* codes, float* scales, int cols,
                                                  int padded_cols) {
    quantize_row(x, codes, scales, cols, padded_cols);
}

extern "C" __global__ void quantize_rows_e4m3_bf16(const bf16_t* x, unsigned char* codes, float* scales, int cols,
                                                   int padded_cols) {
    quantize_row(x, codes, scales, cols, padded_cols);
}

// y[r, c] = d[r * ld + c], times row_scales[r] * col_scales[c] where cuBLASLt did not apply the
// scales (`apply`), plus bias[c] (bias null: none); d is a product written with padded rows, ld of
// them, or null for y itself. grid (rows, ceil(cols / 1024)), block 256: four columns a thread.
extern "C" __global__ void fp8_finish(const float* d, float* y, const float* row_scales, const float* col_scales,
                                      const float* bias, int rows, int cols, int ld, int apply) {
    if (d == nullptr) d = y;
    long r = blockIdx.x;
    int c = 4 * (blockIdx.y * blockDim.x + threadIdx.x);
    if (r >= rows || c >= cols) return;
    const float* src = d + r * ld;
    float* dst = y + r * (long)cols;
    float rs = apply ? row_scales[r] : 1.0f;
    if ((cols & 3) == 0 && (ld & 3) == 0) {
        float4 v = *(const float4*)(src + c);
        if (apply) {
            float4 cs = *(const float4*)(col_scales + c);
            v = make_float4(v.x * rs * cs.x, v.y * rs * cs.y, v.z * rs * cs.z, v.w * rs * cs.w);
        }
        if (bias) {
            float4 bb = *(const float4*)(bias + c);
            v = make_float4(v.x + bb.x, v.y + bb.y, v.z + bb.z, v.w + bb.w);
        }
        *(float4*)(dst + c) = v;
    } else {
        for (int e = 0; e < 4 && c + e < cols; e++) {
            float v = src[c + e];
            if (apply) v = v * rs * col_scales[c + e];
            if (bias) v = v + bias[c + e];
            dst[c + e] = v;
        }
    }
}

// kernels/elementwise.cu's bias_glu_f32 on an FP8 product [rows, 2f], scaled first by its row and
// column scales where cuBLASLt did not (`apply`). grid (ceil(f / 1024), rows), block 256.
extern "C" __global__ void fp8_bias_glu(const float* __restrict__ y, const float* __restrict__ bias,
                                        float* __restrict__ out, const float* __restrict__ row_scales,
                                        const float* __restrict__ col_scales, int f, int apply) {
    int c = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
    if (c >= f) return;
    long r = blockIdx.y;
    const float* row = y + r * 2 * f;
    float4 v = *(const float4*)(row + c), g = *(const float4*)(row + f + c);
    if (apply) {
        float rs = row_scales[r];
        float4 cv = *(const float4*)(col_scales + c), cg = *(const float4*)(col_scales + f + c);
        v = make_float4(v.x * rs * cv.x, v.y * rs * cv.y, v.z * rs * cv.z, v.w * rs * cv.w);
        g = make_float4(g.x * rs * cg.x, g.y * rs * cg.y, g.z * rs * cg.z, g.w * rs * cg.w);
    }
    float4 bv = *(const float4*)(bias + c), bg = *(const float4*)(bias + f + c);
    float value[4] = {v.x + bv.x, v.y + bv.y, v.z + bv.z, v.w + bv.w};
    float gate[4] = {g.x + bg.x, g.y + bg.y, g.z + bg.z, g.w + bg.w};
    *(float4*)(out + r * f + c) = glu4(value, gate);
}
