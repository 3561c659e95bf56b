// Generated from engine/src/cuda/decode_shapes.rs (its `lab_file_is_current` test rewrites it
// with SONGLOOM_WRITE_LAB=1): the decode products' kernels and their launch shapes.


// The decode products' kernels, from engine/src/cuda/decode_shapes.rs.
GEMV_BF16_PLAIN(gemv_bf16_k8_m1, __launch_bounds__(256), 1, 4, 8)
GEMV_BF16_ADD(gemv_add_bf16_k8_m1, __launch_bounds__(256), 1, 4, 8)
GEMV_BF16_SWIGLU(gemv_swiglu_bf16_k8_m1, __launch_bounds__(128), 1, 4, 4)
GEMV_BF16_GROUP3(gemv_group3_bf16_k8_m1, __launch_bounds__(256), 1, 4, 8)
GEMV_BF16_PLAIN(gemv_bf16_k8_m2, __launch_bounds__(256), 2, 4, 8)
GEMV_BF16_ADD(gemv_add_bf16_k8_m2, __launch_bounds__(256), 2, 4, 8)
GEMV_BF16_SWIGLU(gemv_swiglu_bf16_k8_m2, __launch_bounds__(128), 2, 4, 4)
GEMV_BF16_GROUP3(gemv_group3_bf16_k8_m2, __launch_bounds__(256), 2, 4, 8)
GEMV_BF16_PLAIN(gemv_bf16_k8_m3, __launch_bounds__(256), 3, 4, 8)
GEMV_BF16_ADD(gemv_add_bf16_k8_m3, __launch_bounds__(256), 3, 4, 8)
GEMV_BF16_SWIGLU(gemv_swiglu_bf16_k8_m3, __launch_bounds__(128), 3, 4, 4)
GEMV_BF16_GROUP3(gemv_group3_bf16_k8_m3, __launch_bounds__(256), 3, 4, 8)
GEMV_BF16_PLAIN(gemv_bf16_k8_m4, __launch_bounds__(256), 4, 4, 8)
GEMV_BF16_ADD(gemv_add_bf16_k8_m4, __launch_bounds__(256), 4, 4, 8)
GEMV_BF16_SWIGLU(gemv_swiglu_bf16_k8_m4, __launch_bounds__(128), 4, 4, 4)
GEMV_BF16_GROUP3(gemv_group3_bf16_k8_m4, __launch_bounds__(256), 4, 4, 8)
GEMV_BF16_PLAIN(gemv_bf16_k8_m5, __launch_bounds__(256), 5, 4, 8)
GEMV_BF16_ADD(gemv_add_bf16_k8_m5, __launch_bounds__(256), 5, 4, 8)
GEMV_BF16_SWIGLU(gemv_swiglu_bf16_k8_m5, __launch_bounds__(128), 5, 4, 4)
GEMV_BF16_GROUP3(gemv_group3_bf16_k8_m5, __launch_bounds__(256), 5, 4, 8)
GEMV_BF16_PLAIN(gemv_bf16_k8_m6, __launch_bounds__(256), 6, 4, 8)
GEMV_BF16_ADD(gemv_add_bf16_k8_m6, __launch_bounds__(256), 6, 4, 8)
GEMV_BF16_SWIGLU(gemv_swiglu_bf16_k8_m6, __launch_bounds__(128), 6, 4, 4)
GEMV_BF16_GROUP3(gemv_group3_bf16_k8_m6, __launch_bounds__(256), 6, 4, 8)
GEMV_BF16_PLAIN(gemv_bf16_k8_m7, __launch_bounds__(256), 7, 4, 8)
GEMV_BF16_ADD(gemv_add_bf16_k8_m7, __launch_bounds__(256), 7, 4, 8)
GEMV_BF16_SWIGLU(gemv_swiglu_bf16_k8_m7, __launch_bounds__(128), 7, 4, 4)
GEMV_BF16_GROUP3(gemv_group3_bf16_k8_m7, __launch_bounds__(256), 7, 4, 8)
GEMV_BF16_PLAIN(gemv_bf16_k8_m8, __launch_bounds__(256), 8, 4, 8)
GEMV_BF16_ADD(gemv_add_bf16_k8_m8, __launch_bounds__(256), 8, 4, 8)
GEMV_BF16_SWIGLU(gemv_swiglu_bf16_k8_m8, __launch_bounds__(128), 8, 4, 4)
GEMV_BF16_GROUP3(gemv_group3_bf16_k8_m8, __launch_bounds__(256), 8, 4, 8)

// The decode products' kernels, from engine/src/cuda/decode_shapes.rs.
GEMV_Q_PLAIN(gemv_q8_m2, __launch_bounds__(256, 4), 8, 2, 4, true, 8)
GEMV_Q_PLAIN(gemv_q8_m4, __launch_bounds__(256), 8, 4, 4, true, 8)
GEMV_Q_PLAIN(gemv_q8_m8, __launch_bounds__(256), 8, 8, 4, true, 8)
GEMV_Q_ADD(gemv_add_q8_m2, __launch_bounds__(256, 4), 8, 2, 4, true, 8)
GEMV_Q_ADD(gemv_add_q8_m4, __launch_bounds__(256), 8, 4, 4, true, 8)
GEMV_Q_ADD(gemv_add_q8_m8, __launch_bounds__(256), 8, 8, 4, true, 8)
GEMV_Q_SWIGLU(gemv_swiglu_q8_m2, __launch_bounds__(128, 4), 8, 2, 4, true, 4)
GEMV_Q_SWIGLU(gemv_swiglu_q8_m4, __launch_bounds__(128), 8, 4, 4, true, 4)
GEMV_Q_SWIGLU(gemv_swiglu_q8_m8, __launch_bounds__(128), 8, 8, 4, true, 4)
GEMV_Q_GROUP3(gemv_group3_q8_m2, __launch_bounds__(256, 3), 8, 2, 8, true, 8)
GEMV_Q_GROUP3(gemv_group3_q8_m4, __launch_bounds__(256), 8, 4, 8, true, 8)
GEMV_Q_GROUP3(gemv_group3_q8_m8, __launch_bounds__(256), 8, 8, 8, true, 8)
GEMV_Q_PLAIN(gemv_q4_m2, __launch_bounds__(128, 6), 4, 2, 4, true, 8)
GEMV_Q_PLAIN(gemv_q4_m4, __launch_bounds__(128), 4, 4, 4, true, 8)
GEMV_Q_PLAIN(gemv_q4_m8, __launch_bounds__(128), 4, 8, 4, true, 8)
GEMV_Q_ADD(gemv_add_q4_m2_short, __launch_bounds__(128, 8), 4, 2, 2, true, 4)
GEMV_Q_ADD(gemv_add_q4_m4_short, __launch_bounds__(128), 4, 4, 2, true, 4)
GEMV_Q_ADD(gemv_add_q4_m8_short, __launch_bounds__(128), 4, 8, 2, true, 4)
GEMV_Q_ADD(gemv_add_q4_m2, __launch_bounds__(128, 6), 4, 2, 4, true, 8)
GEMV_Q_ADD(gemv_add_q4_m4, __launch_bounds__(128), 4, 4, 4, true, 8)
GEMV_Q_ADD(gemv_add_q4_m8, __launch_bounds__(128), 4, 8, 4, true, 8)
GEMV_Q_SWIGLU(gemv_swiglu_q4_m2, __launch_bounds__(128, 6), 4, 2, 2, true, 4)
GEMV_Q_SWIGLU(gemv_swiglu_q4_m4, __launch_bounds__(128), 4, 4, 2, true, 4)
GEMV_Q_SWIGLU(gemv_swiglu_q4_m8, __launch_bounds__(128), 4, 8, 2, true, 4)
GEMV_Q_GROUP3(gemv_group3_q4_m2, __launch_bounds__(128, 6), 4, 2, 4, true, 8)
GEMV_Q_GROUP3(gemv_group3_q4_m4, __launch_bounds__(128), 4, 4, 4, true, 8)
GEMV_Q_GROUP3(gemv_group3_q4_m8, __launch_bounds__(128), 4, 8, 4, true, 8)

// Rows of at most this many 16-byte loads are short.
#define ENGINE_SHORT_ROW_LOADS 128

// Each kernel's launch (engine/src/cuda/decode_shapes.rs, DecodeShape): weight bits (16:
// bf16), family (0 plain, 1 residual-add, 2 SwiGLU, 3 q/k/v), activation rows, rows a
// block (SwiGLU: of each matrix), row lengths (0 any, 1 short, 2 long), most threads, and
// loads a thread on a short and on a long row (0: every thread of the bounds).
struct EngineShape {
    const char* name;
    int bits, family, m, rows_per_block, rows, most_threads, short_loads, long_loads;
};
static const EngineShape ENGINE_SHAPES[] = {
    {"gemv_bf16_k8_m1", 16, 0, 1, 4, 0, 256, 0, 0},
    {"gemv_add_bf16_k8_m1", 16, 1, 1, 4, 0, 256, 0, 0},
    {"gemv_swiglu_bf16_k8_m1", 16, 2, 1, 4, 0, 128, 0, 0},
    {"gemv_group3_bf16_k8_m1", 16, 3, 1, 4, 0, 256, 0, 0},
    {"gemv_bf16_k8_m2", 16, 0, 2, 4, 0, 256, 0, 0},
    {"gemv_add_bf16_k8_m2", 16, 1, 2, 4, 0, 256, 0, 0},
    {"gemv_swiglu_bf16_k8_m2", 16, 2, 2, 4, 0, 128, 0, 0},
    {"gemv_group3_bf16_k8_m2", 16, 3, 2, 4, 0, 256, 0, 0},
    {"gemv_bf16_k8_m3", 16, 0, 3, 4, 0, 256, 0, 0},
    {"gemv_add_bf16_k8_m3", 16, 1, 3, 4, 0, 256, 0, 0},
    {"gemv_swiglu_bf16_k8_m3", 16, 2, 3, 4, 0, 128, 0, 0},
    {"gemv_group3_bf16_k8_m3", 16, 3, 3, 4, 0, 256, 0, 0},
    {"gemv_bf16_k8_m4", 16, 0, 4, 4, 0, 256, 0, 0},
    {"gemv_add_bf16_k8_m4", 16, 1, 4, 4, 0, 256, 0, 0},
    {"gemv_swiglu_bf16_k8_m4", 16, 2, 4, 4, 0, 128, 0, 0},
    {"gemv_group3_bf16_k8_m4", 16, 3, 4, 4, 0, 256, 0, 0},
    {"gemv_bf16_k8_m5", 16, 0, 5, 4, 0, 256, 0, 0},
    {"gemv_add_bf16_k8_m5", 16, 1, 5, 4, 0, 256, 0, 0},
    {"gemv_swiglu_bf16_k8_m5", 16, 2, 5, 4, 0, 128, 0, 0},
    {"gemv_group3_bf16_k8_m5", 16, 3, 5, 4, 0, 256, 0, 0},
    {"gemv_bf16_k8_m6", 16, 0, 6, 4, 0, 256, 0, 0},
    {"gemv_add_bf16_k8_m6", 16, 1, 6, 4, 0, 256, 0, 0},
    {"gemv_swiglu_bf16_k8_m6", 16, 2, 6, 4, 0, 128, 0, 0},
    {"gemv_group3_bf16_k8_m6", 16, 3, 6, 4, 0, 256, 0, 0},
    {"gemv_bf16_k8_m7", 16, 0, 7, 4, 0, 256, 0, 0},
    {"gemv_add_bf16_k8_m7", 16, 1, 7, 4, 0, 256, 0, 0},
    {"gemv_swiglu_bf16_k8_m7", 16, 2, 7, 4, 0, 128, 0, 0},
    {"gemv_group3_bf16_k8_m7", 16, 3, 7, 4, 0, 256, 0, 0},
    {"gemv_bf16_k8_m8", 16, 0, 8, 4, 0, 256, 0, 0},
    {"gemv_add_bf16_k8_m8", 16, 1, 8, 4, 0, 256, 0, 0},
    {"gemv_swiglu_bf16_k8_m8", 16, 2, 8, 4, 0, 128, 0, 0},
    {"gemv_group3_bf16_k8_m8", 16, 3, 8, 4, 0, 256, 0, 0},
    {"gemv_q8_m2", 8, 0, 2, 4, 0, 256, 2, 2},
    {"gemv_q8_m4", 8, 0, 4, 4, 0, 256, 2, 2},
    {"gemv_q8_m8", 8, 0, 8, 4, 0, 256, 2, 2},
    {"gemv_add_q8_m2", 8, 1, 2, 4, 0, 256, 2, 2},
    {"gemv_add_q8_m4", 8, 1, 4, 4, 0, 256, 2, 2},
    {"gemv_add_q8_m8", 8, 1, 8, 4, 0, 256, 2, 2},
    {"gemv_swiglu_q8_m2", 8, 2, 2, 4, 0, 128, 1, 1},
    {"gemv_swiglu_q8_m4", 8, 2, 4, 4, 0, 128, 1, 1},
    {"gemv_swiglu_q8_m8", 8, 2, 8, 4, 0, 128, 1, 1},
    {"gemv_group3_q8_m2", 8, 3, 2, 8, 0, 256, 1, 1},
    {"gemv_group3_q8_m4", 8, 3, 4, 8, 0, 256, 1, 1},
    {"gemv_group3_q8_m8", 8, 3, 8, 8, 0, 256, 1, 1},
    {"gemv_q4_m2", 4, 0, 2, 4, 0, 128, 1, 4},
    {"gemv_q4_m4", 4, 0, 4, 4, 0, 128, 1, 4},
    {"gemv_q4_m8", 4, 0, 8, 4, 0, 128, 1, 4},
    {"gemv_add_q4_m2_short", 4, 1, 2, 2, 1, 128, 2, 2},
    {"gemv_add_q4_m4_short", 4, 1, 4, 2, 1, 128, 2, 2},
    {"gemv_add_q4_m8_short", 4, 1, 8, 2, 1, 128, 2, 2},
    {"gemv_add_q4_m2", 4, 1, 2, 4, 2, 128, 4, 4},
    {"gemv_add_q4_m4", 4, 1, 4, 4, 2, 128, 4, 4},
    {"gemv_add_q4_m8", 4, 1, 8, 4, 2, 128, 4, 4},
    {"gemv_swiglu_q4_m2", 4, 2, 2, 2, 0, 128, 2, 2},
    {"gemv_swiglu_q4_m4", 4, 2, 4, 2, 0, 128, 2, 2},
    {"gemv_swiglu_q4_m8", 4, 2, 8, 2, 0, 128, 2, 2},
    {"gemv_group3_q4_m2", 4, 3, 2, 4, 0, 128, 2, 2},
    {"gemv_group3_q4_m4", 4, 3, 4, 4, 0, 128, 2, 2},
    {"gemv_group3_q4_m8", 4, 3, 8, 4, 0, 128, 2, 2},
};
