// A measuring bench for the decode step's quantized products, built and run on the GPU machine
// with nvcc (tools/gemv-lab/run.sh): the engine's kernels (kernels/gemv_quant.cu, kernels/gemv.cu)
// beside candidate designs (candidates.cu), each timed over enough copies of its weights that L2
// (50 MB on an H200) holds none of them, as in a decode step that reads every layer once. Each is
// timed three ways: launched plainly, one after another; chained as the decode step launches its
// kernels (programmatic dependent launch: the next kernel's blocks start, and fetch their first
// weights, while the one before drains); and that chain captured as a CUDA graph and replayed, the
// device's own time without the host's issue of each launch (which a short product takes longer
// than it runs). Prints GB/s over the bytes read (weights, scales, offsets), the share of the
// device-copy ceiling, and each candidate's distance to the engine.

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>
#include <cuda_fp16.h>

#undef INFINITY
#include "../../kernels/common.cuh"
#include "../../kernels/gemv.cu"
#include "../../kernels/gemv_quant.cu"
#include "engine_shapes.cuh"
#include "candidates.cu"

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
static cudaStream_t stream;
static double copy_ceiling;

// One launch on the lab's stream, chained (programmatic dependent launch) or not.
template <typename... Params, typename... Args>
static void launch(bool chained, void (*kernel)(Params...), dim3 grid, int threads, Args... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = dim3(threads);
    cfg.stream = stream;
    cudaLaunchAttribute attr = {};
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = chained ? 1 : 0;
    CHECK(cudaLaunchKernelEx(&cfg, kernel, ((Params)args)...));
}

template <typename F>
static double time_us(int copies, F launch) {
    for (int i = 0; i < 10; i++) launch(i % copies);
    CHECK(cudaDeviceSynchronize());
    const int reps = 300;
    cudaEventRecord(e0, stream);
    for (int i = 0; i < reps; i++) launch(i % copies);
    cudaEventRecord(e1, stream);
    CHECK(cudaEventSynchronize(e1));
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    CHECK(cudaGetLastError());
    return ms * 1000.0 / reps;
}

// The same chained launches captured into a CUDA graph and replayed once: the device's time
// without the host's cost of issuing each launch (which a short product can take longer than
// running: the quantization pass alone times at the host's rate of 3.5-4 us a launch chained).
template <typename F>
static double time_graph_us(int copies, F launch) {
    const int reps = 300;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < reps; i++) launch(i % copies);
    CHECK(cudaStreamEndCapture(stream, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphLaunch(exec, stream));
    CHECK(cudaStreamSynchronize(stream));
    float best = 1e30f;
    for (int t = 0; t < 3; t++) {
        cudaEventRecord(e0, stream);
        CHECK(cudaGraphLaunch(exec, stream));
        cudaEventRecord(e1, stream);
        CHECK(cudaEventSynchronize(e1));
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        best = ms < best ? ms : best;
    }
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
    CHECK(cudaGetLastError());
    return best * 1000.0 / reps;
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
    CHECK(cudaStreamSynchronize(stream));
    CHECK(cudaMemcpy(h.data(), d, n * 4, cudaMemcpyDeviceToHost));
    return h;
}

// Threads a block of the engine's quantized kernels runs with for `per_thread` loads of a row a
// thread, at most `most` (engine/src/cuda/decode_shapes.rs, DecodeShape::threads).
static int engine_threads(int bits, int k, int most, int per_thread = 1) {
    int loads = k / (bits == 8 ? 16 : 32) / per_thread;
    int t = (loads + 31) / 32 * 32;
    return t < 32 ? 32 : t < most ? t : most;
}

// The engine's launch shape of kernel `name` (engine/src/cuda/decode_shapes.rs, written to
// engine_shapes.cuh): its rows a block (SwiGLU: of each matrix) and its threads over rows of k.
static const EngineShape& engine_shape(const char* name) {
    for (const EngineShape& s : ENGINE_SHAPES)
        if (strcmp(s.name, name) == 0) return s;
    fprintf(stderr, "no engine kernel %s in engine_shapes.cuh\n", name);
    exit(1);
}
static int engine_threads_of(const char* name, int k) {
    const EngineShape& s = engine_shape(name);
    int loads = k / (s.bits == 8 ? 16 : s.bits == 4 ? 32 : 8);
    int per = loads <= ENGINE_SHORT_ROW_LOADS ? s.short_loads : s.long_loads;
    return per == 0 ? s.most_threads : engine_threads(s.bits, k, s.most_threads, per);
}
static int engine_rows(const char* name) { return engine_shape(name).rows_per_block; }

typedef void (*PlainKernel)(const unsigned int*, const unsigned short*, const unsigned short*, const unsigned int*,
                            const float*, const float*, float*, int, int, int);
typedef void (*SwigluKernel)(const unsigned int*, const unsigned short*, const unsigned short*, const unsigned int*,
                             const unsigned short*, const unsigned short*, const unsigned int*, const float*,
                             const float*, float*, int, int, int);
typedef void (*Group3Kernel)(const unsigned int*, const unsigned short*, const unsigned short*, const unsigned int*,
                             const unsigned short*, const unsigned short*, const unsigned int*, const unsigned short*,
                             const unsigned short*, float*, float*, float*, const unsigned int*, const float*,
                             const float*, int, int, int, int, int);

// A kernel to time: the engine's, or a candidate with its loads in flight a row and threads, and
// the weight rows a block owns (SwiGLU's: of each matrix).
template <typename K>
struct Variant {
    const char* name;
    K kernel;
    int threads;
    int rows = 8;
    int blocks(int n) const { return (n + rows - 1) / rows; }
};

static void report(int bits, const char* shape, const char* form, double bytes, const char* name, int threads,
                   double plain, double chained, double graph, double distance) {
    auto share = [&](double us) { return 100.0 * bytes / us / 1e3 / copy_ceiling; };
    printf("q%d %-20s %-7s %6.1f MB  %-18s T=%3d  plain %6.2f us (%3.0f %%)  chained %6.2f us (%3.0f %%)  graph %6.2f us "
           "%5.0f GB/s (%3.0f %%)  distance %.1e\n",
           bits, shape, form, bytes / 1e6, name, threads, plain, share(plain), chained, share(chained), graph,
           bytes / graph / 1e3, share(graph), distance);
}

int main() {
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    // Ceilings: a 1 GiB device copy (read + written) and a read-only pass over 1 GiB.
    {
        size_t n = 1ul << 30;
        void *a, *b;
        CHECK(cudaMalloc(&a, n));
        CHECK(cudaMalloc(&b, n));
        unsigned int* sink;
        CHECK(cudaMalloc(&sink, 4));
        double copy = time_us(1, [&](int) { cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, stream); });
        double read = time_us(1, [&](int) { read_all<<<132 * 8, 512, 0, stream>>>((const uint4*)a, n / 16, sink); });
        copy_ceiling = 2 * n / copy / 1e3;
        printf("ceiling: device copy %.0f GB/s (read + written), read-only %.0f GB/s\n", 2 * n / copy / 1e3,
               n / read / 1e3);
        cudaFree(a); cudaFree(b); cudaFree(sink);
    }
    Shape shapes[] = {{"q_proj 4096->4096", 4096, 4096}, {"k_proj 4096->1024", 4096, 1024},
                      {"gate 4096->12288", 4096, 12288}, {"down 12288->4096", 12288, 4096},
                      {"depth down 6144->4096", 6144, 4096}};
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
    CHECK(cudaDeviceSynchronize());
    for (int bits : {8, 4}) {
        for (Shape sh : shapes) {
            int k = sh.k, n = sh.n, loads = k / (bits == 8 ? 16 : 32);
            Weights q = make(bits, k, n);
            double mb = q.bytes();
            const char* plain = bits == 8 ? "gemv_q8_m2" : "gemv_q4_m2";
            int te = engine_threads_of(plain, k), re = engine_rows(plain);
            auto prepass = [&](bool chained, bool norm) {
                int threads = k / 4 < 1024 ? k / 4 : 1024;
                launch(chained, quantize_activations, dim3(M, k / 4 / threads), threads, x, norm ? gain : nullptr, 1e-6f, xq, xs,
                       (float2*)xsum, k, bits);
            };
            prepass(false, false);
            std::vector<Variant<PlainKernel>> variants = {
                {"engine", bits == 8 ? gemv_q8_m2 : gemv_q4_m2, te, re}};
            if (bits == 4) {
                // Threads for `per` loads of a row a thread, at most `most`.
                auto tt = [&](int per, int most) { return engine_threads(4, k, most, per); };
                for (int per : {1, 2, 4}) {
                    variants.push_back({"4 rows, (128, 6)", cand::gemv_lean<4, 6, 4, 128>, tt(per, 128), 4});
                    variants.push_back({"2 rows, (128, 8)", cand::gemv_lean<4, 8, 2, 128>, tt(per, 128), 2});
                }
            }
            launch(false, variants[0].kernel, (n + re - 1) / re, te, q.w(0), q.s(0), q.o(0), xq, xs, xsum, y_ref, M, k,
                   n);
            auto ref = fetch(y_ref, (size_t)M * n);
            for (auto& v : variants) {
                int grid = v.blocks(n);
                auto run = [&](bool chained) {
                    return time_us(q.copies, [&](int c) {
                        launch(chained, v.kernel, grid, v.threads, q.w(c), q.s(c), q.o(c), xq, xs, xsum, y,
                               M, k, n);
                    });
                };
                double plain = run(false), chained = run(true);
                double graph = time_graph_us(q.copies, [&](int c) {
                    launch(true, v.kernel, grid, v.threads, q.w(c), q.s(c), q.o(c), xq, xs, xsum, y, M, k, n);
                });
                launch(false, v.kernel, grid, v.threads, q.w(0), q.s(0), q.o(0), xq, xs, xsum, y, M, k, n);
                report(bits, sh.name, "plain", mb, v.name, v.threads, plain, chained, graph,
                       rel_rms(fetch(y, (size_t)M * n), ref));
            }
            if (bits == 4 && loads <= 128) {
                // The engine's residual-add kernel for such rows (o_proj's), a zero residual added.
                const char* add = "gemv_add_q4_m2_short";
                int t = engine_threads_of(add, k), rows = engine_rows(add), grid = (n + rows - 1) / rows;
                auto go = [&](bool chained, int c) {
                    launch(chained, gemv_add_q4_m2_short, grid, t, q.w(c), q.s(c), q.o(c), xq, xs, xsum,
                           (const float*)y2, y, M, k, n);
                };
                CHECK(cudaMemset(y2, 0, (size_t)M * n * 4));
                double plain = time_us(q.copies, [&](int c) { go(false, c); });
                double chained = time_us(q.copies, [&](int c) { go(true, c); });
                double graph = time_graph_us(q.copies, [&](int c) { go(true, c); });
                go(false, 0);
                report(bits, sh.name, "add", mb, "engine short", t, plain, chained, graph,
                       rel_rms(fetch(y, (size_t)M * n), ref));
            }
            {
                double pre = time_us(1, [&](int) { prepass(true, false); });
                double both = time_us(q.copies, [&](int c) {
                    prepass(true, false);
                    launch(true, variants[0].kernel, (n + re - 1) / re, te, q.w(c), q.s(c), q.o(c), xq, xs, xsum, y, M, k,
                           n);
                });
                double pre_graph = time_graph_us(1, [&](int) { prepass(true, false); });
                double both_graph = time_graph_us(q.copies, [&](int c) {
                    prepass(true, false);
                    launch(true, variants[0].kernel, (n + re - 1) / re, te, q.w(c), q.s(c), q.o(c), xq, xs, xsum, y, M, k,
                           n);
                });
                printf("q%d %-20s loads a row %d; the activations' quantization alone, chained %.2f us, graph %.2f us; "
                       "engine + it, chained %.2f us, graph %.2f us\n",
                       bits, sh.name, loads, pre, pre_graph, both, both_graph);
            }
            if (sh.n == 12288) {
                // SwiGLU with the norm: gate and up are two copies of the weights.
                prepass(false, true);
                int t2 = engine_threads(bits, k, 128);
                const char* swiglu = bits == 8 ? "gemv_swiglu_q8_m2" : "gemv_swiglu_q4_m2";
                std::vector<Variant<SwigluKernel>> sw = {{"engine", bits == 8 ? gemv_swiglu_q8_m2 : gemv_swiglu_q4_m2,
                                                          engine_threads_of(swiglu, k), engine_rows(swiglu)}};
                if (bits == 4)
                    for (int half : {t2, engine_threads(bits, k / 2, 128), engine_threads(bits, k / 4, 128)})
                        sw.push_back({"8 rows, 4 blocks", cand::swiglu_lean<4, 4, 8>, half, 4});
                auto go = [&](Variant<SwigluKernel>& v, bool chained, int c, float* out) {
                    int d = (c + 1) % q.copies;
                    launch(chained, v.kernel, v.blocks(n), v.threads, q.w(c), q.s(c), q.o(c), q.w(d),
                           q.s(d), q.o(d), xq, xs, xsum, out, M, k, n);
                };
                go(sw[0], false, 0, y_ref);
                ref = fetch(y_ref, (size_t)M * n);
                for (auto& v : sw) {
                    double plain = time_us(q.copies, [&](int c) { go(v, false, c, y); });
                    double chained = time_us(q.copies, [&](int c) { go(v, true, c, y); });
                    double graph = time_graph_us(q.copies, [&](int c) { go(v, true, c, y); });
                    go(v, false, 0, y);
                    report(bits, sh.name, "swiglu", 2 * mb, v.name, v.threads, plain, chained, graph,
                           rel_rms(fetch(y, (size_t)M * n), ref));
                }
            }
            release(q);
        }
        // q, k and v with the norm, as one grid: 4096 + 1024 + 1024 rows of 4096.
        {
            int k = 4096;
            Weights q = make(bits, k, 6144);
            double mb = q.bytes();
            long wq = (long)4096 * q.words_per / 6144, gq = (long)4096 * q.groups_per / 6144;
            long wk = (long)1024 * q.words_per / 6144, gk = (long)1024 * q.groups_per / 6144;
            const char* group3 = bits == 8 ? "gemv_group3_q8_m2" : "gemv_group3_q4_m2";
            std::vector<Variant<Group3Kernel>> g3 = {
                {"engine", bits == 8 ? gemv_group3_q8_m2 : gemv_group3_q4_m2, engine_threads_of(group3, k),
                 engine_rows(group3)}};
            if (bits == 4)
                for (int per : {1, 2, 4}) {
                    int t = engine_threads(4, k, 128, per);
                    g3.push_back({"4 rows, (128, 6)", cand::group3_lean<4, 6, 4, 128>, t, 4});
                }
            auto go = [&](Variant<Group3Kernel>& v, bool chained, int c, float* out) {
                const unsigned int* w0 = q.w(c); const unsigned short* s0 = q.s(c); const unsigned short* o0 = q.o(c);
                const unsigned int *w1 = w0 + wq, *w2 = w0 + wq + wk;
                const unsigned short *s1 = s0 + gq, *s2 = s0 + gq + gk, *o1 = o0 + gq, *o2 = o0 + gq + gk;
                int blocks = (4096 + 1024 + 1024) / v.rows;
                launch(chained, v.kernel, blocks, v.threads, w0, s0, o0, w1, s1, o1, w2, s2, o2, out, y2, y3, xq, xs,
                       xsum, M, k, 4096, 1024, 1024);
            };
            launch(false, quantize_activations, dim3(M, 1), 1024, x, gain, 1e-6f, xq, xs, (float2*)xsum, k, bits);
            go(g3[0], false, 0, y_ref);
            auto ref = fetch(y_ref, (size_t)M * 4096);
            for (auto& v : g3) {
                double plain = time_us(q.copies, [&](int c) { go(v, false, c, y); });
                double chained = time_us(q.copies, [&](int c) { go(v, true, c, y); });
                double graph = time_graph_us(q.copies, [&](int c) { go(v, true, c, y); });
                go(v, false, 0, y);
                report(bits, "q/k/v 4096->6144", "qkv", mb, v.name, v.threads, plain, chained, graph,
                       rel_rms(fetch(y, (size_t)M * 4096), ref));
            }
            release(q);
        }
    }
    // bf16 beside them, the engine's kernel.
    for (Shape sh : shapes) {
        int k = sh.k, n = sh.n;
        int tb = engine_threads_of("gemv_bf16_k8_m2", k), rb = engine_rows("gemv_bf16_k8_m2");
        long words = (long)k * n / 2;
        double mb = words * 4.0;
        int copies = (int)(600e6 / mb) + 1;
        unsigned int* w;
        CHECK(cudaMalloc(&w, words * 4 * copies));
        fill_words<<<1024, 256>>>(w, words * copies, 5);
        CHECK(cudaDeviceSynchronize());
        auto run = [&](bool chained) {
            return time_us(copies, [&](int c) {
                launch(chained, gemv_bf16_k8_m2, (n + rb - 1) / rb, tb, (const bf16_t*)(w + c * words), (const float*)x, y, k, n);
            });
        };
        double plain = run(false), chained = run(true);
        double graph = time_graph_us(copies, [&](int c) {
            launch(true, gemv_bf16_k8_m2, (n + rb - 1) / rb, tb, (const bf16_t*)(w + c * words), (const float*)x, y, k, n);
        });
        printf("bf16 %-20s %6.1f MB  engine  plain %6.2f us %5.0f GB/s  chained %6.2f us %5.0f GB/s  graph %6.2f us "
               "%5.0f GB/s (%3.0f %%)\n",
               sh.name, mb / 1e6, plain, mb / plain / 1e3, chained, mb / chained / 1e3, graph, mb / graph / 1e3,
               100.0 * mb / graph / 1e3 / copy_ceiling);
        cudaFree(w);
    }
    return 0;
}
