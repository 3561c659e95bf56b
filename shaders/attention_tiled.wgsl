// Scaled dot-product attention for many queries (the DiT's windows, a prefill), grouped KV heads,
// head dim at most 128: one workgroup a (batch, head, block of 16 queries). The block's queries
// are staged once, then the keys and values go by in tiles of 16 through workgroup memory, so each
// is read once for the 16 queries; the scores of a tile are computed once each, a thread a row
// keeps that row's online softmax (running maximum and sum), and each thread accumulates 16 of
// the output's dims for one query (four neighbouring dims in each run of 32, so the lanes of a
// query read neighbouring values). With `causal`, query i sees the first kv_len - q_len + i + 1
// keys. The keys `k(i)` and the values `v(i)` are read through generated readers (f32 or bf16).
// The staged queries and keys are rows of MAX_D + 4 and the scores rows of BK + 1: the lanes that
// read the same column of different rows then read different banks of workgroup memory.

struct Params {
    tasks: u32,
    q_len: u32,
    kv_len: u32,
    kv_capacity: u32,
    heads: u32,
    kv_heads: u32,
    head_dim: u32,
    causal: u32,
    scale: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

const BQ: u32 = 16u;
const BK: u32 = 16u;
const MAX_D: u32 = 128u;
// A staged query's or key's row (padded by four words, so a row's vec4s stay aligned), and a
// tile's row of scores (padded by one).
const QK_ROW: u32 = 132u;
const SS_ROW: u32 = 17u;
// Dims of one query a thread accumulates: 128 threads, eight a query.
const SLOTS: u32 = 16u;
// The lowest f32, where a running maximum starts and a masked score sits.
const LOWEST: f32 = -3.4028235e38;
var<workgroup> qs: array<f32, 2112>;
var<workgroup> ks: array<f32, 2112>;
var<workgroup> vs: array<f32, 2048>;
// A tile's scores, then their exponentials, [BQ][SS_ROW].
var<workgroup> ss: array<f32, 272>;
var<workgroup> row_max: array<f32, 16>;
var<workgroup> row_sum: array<f32, 16>;
var<workgroup> row_scale: array<f32, 16>;

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let task = workgroup_index(wid, nwg);
    if task >= p.tasks {
        return;
    }
    let d = p.head_dim;
    let blocks = (p.q_len + BQ - 1u) / BQ;
    let q0 = (task % blocks) * BQ;
    let h = (task / blocks) % p.heads;
    let b = task / (blocks * p.heads);
    let kvh = h / (p.heads / p.kv_heads);
    let kv_width = p.kv_heads * d;
    let kv_base = b * p.kv_capacity * kv_width + kvh * d;
    for (var e = lid; e < BQ * d; e += 128u) {
        let r = e / d;
        var value = 0.0;
        if q0 + r < p.q_len {
            value = q[((b * p.q_len + q0 + r) * p.heads + h) * d + e % d] * p.scale;
        }
        qs[r * QK_ROW + e % d] = value;
    }
    if lid < BQ {
        row_max[lid] = LOWEST;
        row_sum[lid] = 0.0;
    }
    // The keys the block's last query sees.
    var last = p.kv_len;
    if p.causal != 0u {
        last = min(p.kv_len, p.kv_len - p.q_len + q0 + BQ);
    }
    let row = lid / 8u;
    let slot = lid % 8u;
    var acc: array<f32, SLOTS>;
    for (var t0 = 0u; t0 < last; t0 += BK) {
        workgroupBarrier();
        for (var e = lid; e < BK * d; e += 128u) {
            let j = e / d;
            var key = 0.0;
            var value = 0.0;
            if t0 + j < p.kv_len {
                let at = kv_base + (t0 + j) * kv_width + e % d;
                key = k(at);
                value = v(at);
            }
            ks[j * QK_ROW + e % d] = key;
            vs[j * MAX_D + e % d] = value;
        }
        workgroupBarrier();
        for (var e = lid; e < BQ * BK; e += 128u) {
            let r = e / BK;
            let key = t0 + e % BK;
            var visible = p.kv_len;
            if p.causal != 0u {
                visible = p.kv_len - p.q_len + q0 + r + 1u;
            }
            var s = LOWEST;
            if key < min(visible, p.kv_len) {
                var dot = 0.0;
                for (var c = 0u; c < d; c++) {
                    dot += qs[r * QK_ROW + c] * ks[(e % BK) * QK_ROW + c];
                }
                s = dot;
            }
            ss[r * SS_ROW + e % BK] = s;
        }
        workgroupBarrier();
        if lid < BQ {
            var tile_max = row_max[lid];
            for (var j = 0u; j < BK; j++) {
                tile_max = max(tile_max, ss[lid * SS_ROW + j]);
            }
            let correction = exp(row_max[lid] - tile_max);
            var sum = row_sum[lid] * correction;
            for (var j = 0u; j < BK; j++) {
                let s = ss[lid * SS_ROW + j];
                var weight = 0.0;
                if s > LOWEST {
                    weight = exp(s - tile_max);
                }
                ss[lid * SS_ROW + j] = weight;
                sum += weight;
            }
            row_max[lid] = tile_max;
            row_sum[lid] = sum;
            row_scale[lid] = correction;
        }
        workgroupBarrier();
        let correction = row_scale[row];
        for (var i = 0u; i < SLOTS; i++) {
            let c = 4u * slot + 32u * (i / 4u) + i % 4u;
            var a = acc[i] * correction;
            if c < d {
                for (var j = 0u; j < BK; j++) {
                    a += ss[row * SS_ROW + j] * vs[j * MAX_D + c];
                }
            }
            acc[i] = a;
        }
    }
    workgroupBarrier();
    if q0 + row < p.q_len {
        let inv = 1.0 / row_sum[row];
        for (var i = 0u; i < SLOTS; i++) {
            let c = 4u * slot + 32u * (i / 4u) + i % 4u;
            if c < d {
                y[((b * p.q_len + q0 + row) * p.heads + h) * d + c] = acc[i] * inv;
            }
        }
    }
}
