// Scaled dot-product attention with grouped KV heads, one workgroup a (batch, head, query): the
// keys are visited in tiles of 64 with an online softmax, so no score matrix is kept. Each thread
// scores one key of a tile, then owns up to four output dims (head_dim at most 256). With
// `causal`, query i sees the first kv_len - q_len + i + 1 keys.

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
// The keys `k(i)` and the values `v(i)` are read through generated readers (f32 or bf16).

const TILE: u32 = 64u;
const DIMS: u32 = 4u;
// The lowest f32, where a running maximum starts (WGSL has no infinite constant).
const LOWEST: f32 = -3.4028235e38;
var<workgroup> query: array<f32, 256>;
var<workgroup> scores: array<f32, TILE>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let task = workgroup_index(wid, nwg);
    if task >= p.tasks {
        return;
    }
    let d = p.head_dim;
    let qi = task % p.q_len;
    let h = (task / p.q_len) % p.heads;
    let b = task / (p.q_len * p.heads);
    let kvh = h / (p.heads / p.kv_heads);
    let q_row = (b * p.q_len + qi) * p.heads * d + h * d;
    for (var i = lid; i < d; i += TILE) {
        query[i] = q[q_row + i];
    }
    workgroupBarrier();
    var visible = p.kv_len;
    if p.causal != 0u {
        visible = p.kv_len - p.q_len + qi + 1u;
    }
    let kv_width = p.kv_heads * d;
    let kv_base = b * p.kv_capacity * kv_width + kvh * d;
    var running_max = LOWEST;
    var total = 0.0;
    var acc = array<f32, DIMS>(0.0, 0.0, 0.0, 0.0);
    for (var t0 = 0u; t0 < visible; t0 += TILE) {
        let j = t0 + lid;
        var s = LOWEST;
        if j < visible {
            let key = kv_base + j * kv_width;
            var dot = 0.0;
            for (var i = 0u; i < d; i++) {
                dot += query[i] * k(key + i);
            }
            s = dot * p.scale;
        }
        scores[lid] = s;
        workgroupBarrier();
        let count = min(TILE, visible - t0);
        var tile_max = running_max;
        for (var jj = 0u; jj < count; jj++) {
            tile_max = max(tile_max, scores[jj]);
        }
        let correction = exp(running_max - tile_max);
        total *= correction;
        for (var c = 0u; c < DIMS; c++) {
            acc[c] *= correction;
        }
        for (var jj = 0u; jj < count; jj++) {
            let weight = exp(scores[jj] - tile_max);
            total += weight;
            let value = kv_base + (t0 + jj) * kv_width;
            for (var c = 0u; c < DIMS; c++) {
                let dim = lid + c * TILE;
                if dim < d {
                    acc[c] += weight * v(value + dim);
                }
            }
        }
        running_max = tile_max;
        workgroupBarrier();
    }
    let inv = 1.0 / total;
    for (var c = 0u; c < DIMS; c++) {
        let dim = lid + c * TILE;
        if dim < d {
            y[q_row + dim] = acc[c] * inv;
        }
    }
}
