// The quantized weight formats of engine/src/quant.rs on the device: quantizing (bit for bit as
// the host does it, so a checkpoint quantized on either side is the same), dequantizing, and the
// embedding gather. Groups of 32 weights; q8: int8 with an f16 scale, 4 a word; q4: uint4 with an
// f16 scale and offset, 8 a word.

#define QGROUP 32
// f16 NaN as half::f16::NAN writes it, for the scale of a group that holds a non-finite weight.
#define F16_NAN 0x7e00

// Weight i of a q8 or q4 tensor, dequantized.
__device__ __forceinline__ float q8_weight(const unsigned int* words, const unsigned short* scales, long i) {
    int q = (signed char)((words[i >> 2] >> (8 * (i & 3))) & 0xff);
    return (float)q * f16_to_f32(scales[i / QGROUP]);
}

__device__ __forceinline__ float q4_weight(const unsigned int* words, const unsigned short* scales,
                                           const unsigned short* offsets, long i) {
    int q = (words[i >> 3] >> (4 * (i & 7))) & 0xf;
    return (float)q * f16_to_f32(scales[i / QGROUP]) + f16_to_f32(offsets[i / QGROUP]);
}

// One thread per group of `src` (f32 or bf16): its scale and its weights' words.
#define QUANTIZE(NAME, T)                                                                                  \
    extern "C" __global__ void quantize_q8_##NAME(const T* src, unsigned int* words, unsigned short* scales, \
                                                  long groups) {                                          \
        GRID_STRIDE(g, groups) {                                                                           \
            float v[QGROUP];                                                                               \
            float amax = 0.0f;                                                                             \
            bool finite = true;                                                                            \
            for (int j = 0; j < QGROUP; j++) {                                                             \
                v[j] = load_f(src, g * QGROUP + j);                                                        \
                finite = finite && (__float_as_uint(v[j]) & 0x7f800000u) != 0x7f800000u;                  \
                amax = fmaxf(amax, fabsf(v[j]));                                                           \
            }                                                                                              \
            unsigned short scale = finite ? f32_to_f16(amax / 127.0f) : (unsigned short)F16_NAN;          \
            float s = f16_to_f32(scale);                                                                   \
            scales[g] = scale;                                                                             \
            for (int w = 0; w < QGROUP / 4; w++) {                                                         \
                unsigned int word = 0;                                                                     \
                for (int b = 0; b < 4; b++) {                                                              \
                    int q = (finite && s > 0.0f) ? (int)fminf(fmaxf(rintf(v[w * 4 + b] / s), -127.0f), 127.0f) \
                                                 : 0;                                                      \
                    word |= ((unsigned int)q & 0xffu) << (8 * b);                                          \
                }                                                                                          \
                words[g * (QGROUP / 4) + w] = word;                                                        \
            }                                                                                              \
        }                                                                                                  \
    }                                                                                                      \
    extern "C" __global__ void quantize_q4_##NAME(const T* src, unsigned int* words, unsigned short* scales, \
                                                  unsigned short* offsets, long groups) {                 \
        GRID_STRIDE(g, groups) {                                                                           \
            float v[QGROUP];                                                                               \
            float lo = INFINITY, hi = -INFINITY;                                                           \
            bool finite = true;                                                                            \
            for (int j = 0; j < QGROUP; j++) {                                                             \
                v[j] = load_f(src, g * QGROUP + j);                                                        \
                finite = finite && (__float_as_uint(v[j]) & 0x7f800000u) != 0x7f800000u;                  \
                lo = fminf(lo, v[j]);                                                                      \
                hi = fmaxf(hi, v[j]);                                                                      \
            }                                                                                              \
            unsigned short scale = finite ? f32_to_f16((hi - lo) / 15.0f) : (unsigned short)F16_NAN;      \
            unsigned short offset = finite ? f32_to_f16(lo) : (unsigned short)F16_NAN;                    \
            float s = f16_to_f32(scale), o = f16_to_f32(offset);                                           \
            scales[g] = scale;                                                                             \
            offsets[g] = offset;                                                                           \
            for (int w = 0; w < QGROUP / 8; w++) {                                                         \
                unsigned int word = 0;                                                                     \
                for (int b = 0; b < 8; b++) {                                                              \
                    int q = (finite && s > 0.0f) ? (int)fminf(fmaxf(rintf((v[w * 8 + b] - o) / s), 0.0f), 15.0f) \
                                                 : 0;                                                      \
                    word |= (unsigned int)q << (4 * b);                                                    \
                }                                                                                          \
                words[g * (QGROUP / 8) + w] = word;                                                        \
            }                                                                                              \
        }                                                                                                  \
    }
QUANTIZE(f32, float)
QUANTIZE(bf16, bf16_t)

// Dequantized into f32 or bf16, one thread per weight.
extern "C" __global__ void dequantize_q8_f32(const unsigned int* words, const unsigned short* scales, float* out,
                                             long n) {
    GRID_STRIDE(i, n) out[i] = q8_weight(words, scales, i);
}
// To bf16 (a larger product's weights, kernels' tiles of 8): eight weights a thread, read as one
// or two words and written as one 16-byte store; n is whole groups, so whole eights.
extern "C" __global__ void dequantize_q8_bf16(const unsigned int* words, const unsigned short* scales, bf16_t* out,
                                              long n) {
    GRID_STRIDE(e, n / 8) {
        uint2 w = ((const uint2*)words)[e];
        float s = f16_to_f32(scales[e / (QGROUP / 8)]);
        unsigned int packed[4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            unsigned int word = j < 2 ? w.x : w.y;
            int lo = (signed char)((word >> (16 * (j & 1))) & 0xff), hi = (signed char)((word >> (16 * (j & 1) + 8)) & 0xff);
            packed[j] = (unsigned int)f32_to_bf16((float)lo * s) | (unsigned int)f32_to_bf16((float)hi * s) << 16;
        }
        ((uint4*)out)[e] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
    }
}
extern "C" __global__ void dequantize_q4_f32(const unsigned int* words, const unsigned short* scales,
                                             const unsigned short* offsets, float* out, long n) {
    GRID_STRIDE(i, n) out[i] = q4_weight(words, scales, offsets, i);
}
extern "C" __global__ void dequantize_q4_bf16(const unsigned int* words, const unsigned short* scales,
                                              const unsigned short* offsets, bf16_t* out, long n) {
    GRID_STRIDE(e, n / 8) {
        unsigned int word = words[e];
        float s = f16_to_f32(scales[e / (QGROUP / 8)]), o = f16_to_f32(offsets[e / (QGROUP / 8)]);
        unsigned int packed[4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int lo = (word >> (8 * j)) & 0xf, hi = (word >> (8 * j + 4)) & 0xf;
            packed[j] = (unsigned int)f32_to_bf16((float)lo * s + o) | (unsigned int)f32_to_bf16((float)hi * s + o) << 16;
        }
        ((uint4*)out)[e] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
    }
}

// Rows `ids` of a quantized table [vocab, dim] into out [ids, dim], as f32.
extern "C" __global__ void embedding_q8(const unsigned int* words, const unsigned short* scales, const unsigned int* ids,
                                        float* out, int dim, long n) {
    GRID_STRIDE(i, n * dim) out[i] = q8_weight(words, scales, (long)ids[i / dim] * dim + i % dim);
}
extern "C" __global__ void embedding_q4(const unsigned int* words, const unsigned short* scales,
                                        const unsigned short* offsets, const unsigned int* ids, float* out, int dim,
                                        long n) {
    GRID_STRIDE(i, n * dim) out[i] = q4_weight(words, scales, offsets, (long)ids[i / dim] * dim + i % dim);
}
