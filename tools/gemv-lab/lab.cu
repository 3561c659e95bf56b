// A measuring bench for the decode step's quantized products, built and run on the GPU machine
// with nvcc (tools/gemv-lab/run.sh): the engine's kernels (kernels/gemv_quant.cu, kernels/gemv.cu)
// beside candidate designs, each timed over enough copies of its weights that L2 (50 MB on an
// H200) holds none of them, as in a decode step that reads every layer once. Prints GB/s over the
// bytes read (weights, scales, offsets) and each candidate's distance to the engine's kernel.

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>
#include <cuda_fp16.h>

#undef INFINITY
#include "../../kernels/common.cuh"
#include "../../kernels/gemv.cu"
// The kernels as they were (run.sh puts them in namespace `before`), then as they are.
#include "/tmp/gemv_quant_before.cu"
#undef QROWS
#undef QM
#undef GEMV_Q_FOR
#undef GEMV_Q_ALL
#include "../../kernels/gemv_quant.cu"

#define CHECK(x)                                                                 \
    do {                                                                         \
        cudaError_t e = (x);                                                     \
        if (e != cudaSuccess) {                                                  \
            fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

__global__ void fill_words(unsigned int* p, long n, unsigned int seed) {
    GRID_STRIDE(i, n) {
        unsigned int h = (unsigned int)i * 2654435761u ^ seed;
        h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
        p[i] = h;
    }
}

__global__ void fill_half(unsigned short* p, long n, float base, unsigned int seed) {
    GRID_STRIDE(i, n) {
        unsigned int h = (unsigned int)i * 2246822519u ^ seed;
        h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
        p[i] = f32_to_f16(base * (0.5f + (h & 0xffff) / 65536.0f) * ((h >> 16) & 1 ? 1.0f : -1.0f));
    }
}

__global__ void fill_float(float* p, long n, unsigned int seed) {
    GRID_STRIDE(i, n) {
        unsigned int h = (unsigned int)i * 3266489917u ^ seed;
        h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
        p[i] = ((h & 0xffffff) / 16777216.0f - 0.5f) * 2.0f;
    }
}

__global__ void read_all(const uint4* p, long n, unsigned int* sink) {
    unsigned int acc = 0;
    GRID_STRIDE(i, n) {
        uint4 v = p[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x12345678u) *sink = acc;
}

struct Shape {
    const char* name;
    int k, n;
};

struct Weights {
    int bits, k, n, copies;
    unsigned int* words;
    unsigned short* scales;
    unsigned short* offsets;
    long words_per, groups_per;
    double bytes() const { return words_per * 4.0 + groups_per * 2.0 * (bits == 4 ? 2 : 1); }
    const unsigned int* w(int c) const { return words + c * words_per; }
    const unsigned short* s(int c) const { return scales + c * groups_per; }
    const unsigned short* o(int c) const { return offsets + c * groups_per; }
};

static Weights make(int bits, int k, int n) {
    Weights q;
    q.bits = bits; q.k = k; q.n = n;
    q.words_per = (long)k * n * bits / 32;
    q.groups_per = (long)k * n / 32;
    q.copies = (int)(600e6 / q.bytes()) + 1;
    CHECK(cudaMalloc(&q.words, q.words_per * 4 * q.copies));
    CHECK(cudaMalloc(&q.scales, q.groups_per * 2 * q.copies));
    CHECK(cudaMalloc(&q.offsets, q.groups_per * 2 * q.copies));
    fill_words<<<1024, 256>>>(q.words, q.words_per * q.copies, 7);
    fill_half<<<1024, 256>>>(q.scales, q.groups_per * q.copies, 0.01f, 11);
    fill_half<<<1024, 256>>>(q.offsets, q.groups_per * q.copies, 0.05f, 13);
    CHECK(cudaDeviceSynchronize());
    return q;
}

static void release(Weights& q) {
    cudaFree(q.words); cudaFree(q.scales); cudaFree(q.offsets);
}

static cudaEvent_t e0, e1;
static double copy_ceiling;

template <typename F>
static double time_us(int copies, F launch) {
    for (int i = 0; i < 10; i++) launch(i % copies);
    CHECK(cudaDeviceSynchronize());
    const int reps = 300;
    cudaEventRecord(e0);
    for (int i = 0; i < reps; i++) launch(i % copies);
    cudaEventRecord(e1);
    CHECK(cudaEventSynchronize(e1));
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    CHECK(cudaGetLastError());
    return ms * 1000.0 / reps;
}

static double rel_rms(const std::vector<float>& a, const std::vector<float>& b) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); i++) {
        num += (a[i] - b[i]) * (double)(a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return sqrt(num / den);
}

static std::vector<float> fetch(const float* d, size_t n) {
    std::vector<float> h(n);
    CHECK(cudaMemcpy(h.data(), d, n * 4, cudaMemcpyDeviceToHost));
    return h;
}

static int engine_threads(int bits, int k, int most) {
    int loads = k / (bits == 8 ? 16 : 32);
    int t = (loads + 31) / 32 * 32;
    return t < most ? t : most;
}

int main() {
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    // Ceilings: a 1 GiB device copy (read + written) and a read-only pass over 1 GiB.
    {
        size_t n = 1ul << 30;
        void *a, *b;
        CHECK(cudaMalloc(&a, n));
        CHECK(cudaMalloc(&b, n));
        unsigned int* sink;
        CHECK(cudaMalloc(&sink, 4));
        double copy = time_us(1, [&](int) { cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice); });
        double read = time_us(1, [&](int) { read_all<<<132 * 8, 512>>>((const uint4*)a, n / 16, sink); });
        copy_ceiling = 2 * n / copy / 1e3;
        printf("ceiling: device copy %.0f GB/s (read + written), read-only %.0f GB/s\n", 2 * n / copy / 1e3,
               n / read / 1e3);
        cudaFree(a); cudaFree(b); cudaFree(sink);
    }
    Shape shapes[] = {{"q_proj 4096->4096", 4096, 4096}, {"k_proj 4096->1024", 4096, 1024},
                      {"gate 4096->12288", 4096, 12288}, {"down 12288->4096", 12288, 4096},
                      {"depth 2048->2048", 2048, 2048}};
    const int M = 2;
    float *x, *y_ref, *y, *y2, *y3;
    bf16_t* gain;
    CHECK(cudaMalloc(&x, 8 * 12288 * 4));
    CHECK(cudaMalloc(&y_ref, 8 * 12288 * 4));
    CHECK(cudaMalloc(&y, 8 * 12288 * 4));
    CHECK(cudaMalloc(&y2, 8 * 12288 * 4));
    CHECK(cudaMalloc(&y3, 8 * 12288 * 4));
    CHECK(cudaMalloc(&gain, 12288 * 2));
    fill_float<<<64, 256>>>(x, 8 * 12288, 3);
    {
        std::vector<unsigned short> ones(12288, 0x3f80);
        CHECK(cudaMemcpy(gain, ones.data(), 12288 * 2, cudaMemcpyHostToDevice));
    }
    unsigned int* xq;
    float *xs, *xsum;
    CHECK(cudaMalloc(&xq, 8 * 12288));
    CHECK(cudaMalloc(&xs, 8 * 12288 / 32 * 4));
    CHECK(cudaMalloc(&xsum, 2 * 8 * 12288 / 32 * 4));
    for (int bits : {8, 4}) {
        for (Shape sh : shapes) {
            int k = sh.k, n = sh.n;
            Weights q = make(bits, k, n);
            double mb = q.bytes();
            int t = engine_threads(bits, k, 256);
            auto prepass = [&](bool norm) {
                int threads = k / 4 < 1024 ? k / 4 : 1024;
                quantize_activations<<<M, threads>>>(x, norm ? gain : nullptr, 1e-6f, xq, xs, (float2*)xsum, k, bits);
            };
            double t_pre = time_us(1, [&](int) { prepass(false); });
            auto before = [&](int c) {
                if (bits == 8)
                    before::gemv_q8_m2<<<(n + 3) / 4, t>>>(q.w(c), q.s(c), q.o(c), x, y_ref, M, k, n);
                else
                    before::gemv_q4_m2<<<(n + 3) / 4, t>>>(q.w(c), q.s(c), q.o(c), x, y_ref, M, k, n);
            };
            auto now = [&](int c) {
                if (bits == 8)
                    gemv_q8_m2<<<(n + 7) / 8, t>>>(q.w(c), q.s(c), q.o(c), xq, xs, xsum, y, M, k, n);
                else
                    gemv_q4_m2<<<(n + 7) / 8, t>>>(q.w(c), q.s(c), q.o(c), xq, xs, xsum, y, M, k, n);
            };
            prepass(false);
            double t_before = time_us(q.copies, before), t_now = time_us(q.copies, now);
            double t_both = time_us(q.copies, [&](int c) { prepass(false); now(c); });
            before(0);
            now(0);
            auto ref = fetch(y_ref, (size_t)M * n), got = fetch(y, (size_t)M * n);
            printf("q%d %-20s %6.1f MB  plain   before %7.2f us %5.0f GB/s   now %7.2f us %5.0f GB/s  (%.0f %% of copy)  distance %.2e; prepass %.2f us, both %.2f us\n",
                   bits, sh.name, mb / 1e6, t_before, mb / t_before / 1e3, t_now, mb / t_now / 1e3,
                   100.0 * mb / t_now / 1e3 / copy_ceiling, rel_rms(got, ref), t_pre, t_both);
            if (sh.n == 12288) {
                // SwiGLU with the norm: gate and up are two copies of the weights.
                int t2 = engine_threads(bits, k, 128);
                auto sw_before = [&](int c) {
                    int d = (c + 1) % q.copies;
                    if (bits == 8)
                        before::gemv_swiglu_q8_m2<<<(n + 3) / 4, t2>>>(q.w(c), q.s(c), q.o(c), q.w(d), q.s(d), q.o(d), x, gain, 1e-6f, y_ref, M, k, n);
                    else
                        before::gemv_swiglu_q4_m2<<<(n + 3) / 4, t2>>>(q.w(c), q.s(c), q.o(c), q.w(d), q.s(d), q.o(d), x, gain, 1e-6f, y_ref, M, k, n);
                };
                auto sw_now = [&](int c) {
                    int d = (c + 1) % q.copies;
                    if (bits == 8)
                        gemv_swiglu_q8_m2<<<(n + 3) / 4, t2>>>(q.w(c), q.s(c), q.o(c), q.w(d), q.s(d), q.o(d), xq, xs, xsum, y, M, k, n);
                    else
                        gemv_swiglu_q4_m2<<<(n + 3) / 4, t2>>>(q.w(c), q.s(c), q.o(c), q.w(d), q.s(d), q.o(d), xq, xs, xsum, y, M, k, n);
                };
                prepass(true);
                double a = time_us(q.copies, sw_before), b = time_us(q.copies, sw_now);
                sw_before(0);
                sw_now(0);
                ref = fetch(y_ref, (size_t)M * n);
                got = fetch(y, (size_t)M * n);
                printf("q%d %-20s %6.1f MB  swiglu  before %7.2f us %5.0f GB/s   now %7.2f us %5.0f GB/s  (%.0f %% of copy)  distance %.2e\n",
                       bits, sh.name, 2 * mb / 1e6, a, 2 * mb / a / 1e3, b, 2 * mb / b / 1e3,
                       100.0 * 2 * mb / b / 1e3 / copy_ceiling, rel_rms(got, ref));
            }
            release(q);
        }
        // q, k and v with the norm, as one grid: 4096 + 1024 + 1024 rows of 4096.
        {
            int k = 4096;
            Weights q = make(bits, k, 6144);
            double mb = q.bytes();
            int t = engine_threads(bits, k, 256);
            long wq = (long)4096 * q.words_per / 6144, gq = (long)4096 * q.groups_per / 6144;
            long wk = (long)1024 * q.words_per / 6144, gk = (long)1024 * q.groups_per / 6144;
            auto run = [&](int c, bool now) {
                const unsigned int* w0 = q.w(c); const unsigned short* s0 = q.s(c); const unsigned short* o0 = q.o(c);
                const unsigned int *w1 = w0 + wq, *w2 = w0 + wq + wk;
                const unsigned short *s1 = s0 + gq, *s2 = s0 + gq + gk, *o1 = o0 + gq, *o2 = o0 + gq + gk;
                if (now) {
                    int blocks = 4096 / 8 + 1024 / 8 + 1024 / 8;
                    if (bits == 8) gemv_group3_q8_m2<<<blocks, t>>>(w0, s0, o0, w1, s1, o1, w2, s2, o2, y, y2, y3, xq, xs, xsum, M, k, 4096, 1024, 1024);
                    else gemv_group3_q4_m2<<<blocks, t>>>(w0, s0, o0, w1, s1, o1, w2, s2, o2, y, y2, y3, xq, xs, xsum, M, k, 4096, 1024, 1024);
                } else {
                    int blocks = 4096 / 4 + 1024 / 4 + 1024 / 4;
                    if (bits == 8) before::gemv_group3_q8_m2<<<blocks, t>>>(w0, s0, o0, w1, s1, o1, w2, s2, o2, y_ref, y2, y3, x, gain, 1e-6f, M, k, 4096, 1024, 1024);
                    else before::gemv_group3_q4_m2<<<blocks, t>>>(w0, s0, o0, w1, s1, o1, w2, s2, o2, y_ref, y2, y3, x, gain, 1e-6f, M, k, 4096, 1024, 1024);
                }
            };
            {
                int threads = 1024;
                quantize_activations<<<M, threads>>>(x, gain, 1e-6f, xq, xs, (float2*)xsum, k, bits);
            }
            double a = time_us(q.copies, [&](int c) { run(c, false); });
            double b = time_us(q.copies, [&](int c) { run(c, true); });
            run(0, false);
            run(0, true);
            auto ref = fetch(y_ref, (size_t)M * 4096), got = fetch(y, (size_t)M * 4096);
            printf("q%d %-20s %6.1f MB  qkv     before %7.2f us %5.0f GB/s   now %7.2f us %5.0f GB/s  (%.0f %% of copy)  distance %.2e\n",
                   bits, "q/k/v 4096->6144", mb / 1e6, a, mb / a / 1e3, b, mb / b / 1e3,
                   100.0 * mb / b / 1e3 / copy_ceiling, rel_rms(got, ref));
            release(q);
        }
    }
    // bf16 beside them, the engine's kernel.
    for (Shape sh : shapes) {
        int k = sh.k, n = sh.n;
        long words = (long)k * n / 2;
        double mb = words * 4.0;
        int copies = (int)(600e6 / mb) + 1;
        unsigned int* w;
        CHECK(cudaMalloc(&w, words * 4 * copies));
        fill_words<<<1024, 256>>>(w, words * copies, 5);
        // Keep the bf16 values finite: clear each half's exponent top bit.
        double tb = time_us(copies, [&](int c) {
            gemv_bf16_k8_m2<<<(n + 3) / 4, 256>>>((const bf16_t*)(w + c * words), x, y, k, n);
        });
        printf("bf16 %-20s %6.1f MB  engine     %7.2f us %6.0f GB/s\n", sh.name, mb / 1e6, tb, mb / tb / 1e3);
        cudaFree(w);
    }
    return 0;
}
