// Decode attention (one query a (batch, head)) over a long cache, split over the keys: one
// workgroup a (batch, KV head, chunk of 64 keys) scores its keys for every query head of the group
// that shares the KV head, so each key and value is read once for all of them, and writes its
// chunk's running maximum, sum of weights and weighted values; attention_merge.wgsl combines the
// chunks. Against one workgroup a (batch, head) walking every key in turn, the keys spread over
// as many workgroups as there are chunks.

struct Params {
    tasks: u32,
    heads: u32,
    kv_heads: u32,
    head_dim: u32,
    kv_len: u32,
    kv_capacity: u32,
    chunks: u32,
    scale: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
// Per (batch, head, chunk): the maximum score and the sum of the weights (`stats`, two values),
// and the weighted sum of the values (`partial`, head_dim values).
@group(0) @binding(2) var<storage, read_write> stats: array<f32>;
@group(0) @binding(9) var<storage, read_write> partial: array<f32>;
// The keys `k(i)`/`k4(i)` and the values `v(i)` are read through generated readers (f32 or bf16).

const CHUNK: u32 = 64u;
// Query heads a KV head serves at most, and output dims a thread owns at most (head_dim <= 256).
const GROUP: u32 = 8u;
const DIMS: u32 = 4u;
const LOWEST: f32 = -3.4028235e38;
var<workgroup> queries: array<vec4<f32>, 512>;
var<workgroup> weights: array<f32, 512>;
var<workgroup> maxima: array<f32, GROUP>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let task = workgroup_index(wid, nwg);
    if task >= p.tasks {
        return;
    }
    let d = p.head_dim;
    let d4 = d / 4u;
    let per_kv = p.heads / p.kv_heads;
    let chunk = task % p.chunks;
    let kvh = (task / p.chunks) % p.kv_heads;
    let b = task / (p.chunks * p.kv_heads);
    // The group's queries, head kvh * per_kv + g of batch b.
    for (var i = lid; i < per_kv * d4; i += CHUNK) {
        let g = i / d4;
        let at = (b * p.heads + kvh * per_kv + g) * d + 4u * (i % d4);
        queries[i] = vec4<f32>(q[at], q[at + 1u], q[at + 2u], q[at + 3u]);
    }
    workgroupBarrier();
    let kv_width = p.kv_heads * d;
    let kv_base = b * p.kv_capacity * kv_width + kvh * d;
    let first_key = chunk * CHUNK;
    let count = min(CHUNK, p.kv_len - first_key);
    // Thread lid scores key first_key + lid for every query of the group.
    if lid < count {
        let key = kv_base + (first_key + lid) * kv_width;
        var dots = array<f32, GROUP>(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
        for (var i = 0u; i < d4; i++) {
            let kv4 = k4(key + 4u * i);
            for (var g = 0u; g < GROUP; g++) {
                if g < per_kv {
                    dots[g] += dot(queries[g * d4 + i], kv4);
                }
            }
        }
        for (var g = 0u; g < per_kv; g++) {
            weights[g * CHUNK + lid] = dots[g] * p.scale;
        }
    }
    workgroupBarrier();
    if lid < per_kv {
        var m = LOWEST;
        for (var j = 0u; j < count; j++) {
            m = max(m, weights[lid * CHUNK + j]);
        }
        maxima[lid] = m;
    }
    workgroupBarrier();
    if lid < count {
        for (var g = 0u; g < per_kv; g++) {
            weights[g * CHUNK + lid] = exp(weights[g * CHUNK + lid] - maxima[g]);
        }
    }
    workgroupBarrier();
    // Thread lid owns dims lid, lid + 64, ... of every query of the group.
    var acc: array<f32, 32>;
    for (var j = 0u; j < count; j++) {
        let value = kv_base + (first_key + j) * kv_width;
        for (var c = 0u; c < DIMS; c++) {
            let dim = lid + c * CHUNK;
            if dim < d {
                let x = v(value + dim);
                for (var g = 0u; g < GROUP; g++) {
                    if g < per_kv {
                        acc[g * DIMS + c] += weights[g * CHUNK + j] * x;
                    }
                }
            }
        }
    }
    for (var g = 0u; g < per_kv; g++) {
        let slot = (b * p.heads + kvh * per_kv + g) * p.chunks + chunk;
        for (var c = 0u; c < DIMS; c++) {
            let dim = lid + c * CHUNK;
            if dim < d {
                partial[slot * d + dim] = acc[g * DIMS + c];
            }
        }
        if lid == 0u {
            var total = 0.0;
            for (var j = 0u; j < count; j++) {
                total += weights[g * CHUNK + j];
            }
            stats[2u * slot] = maxima[g];
            stats[2u * slot + 1u] = total;
        }
    }
}
