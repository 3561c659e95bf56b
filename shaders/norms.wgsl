// RMSNorm (`op` 0: `x / sqrt(mean(x^2) + eps) * weight`) and LayerNorm (`op` 1, with `bias`) over
// the last dimension: one workgroup a row, the sums reduced in workgroup memory. `weight(i)` and
// `bias(i)` read the parameters' format; RMSNorm binds the weight twice.

struct Params {
    rows: u32,
    dim: u32,
    eps: f32,
    op: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

const THREADS: u32 = 256u;
var<workgroup> partial: array<f32, THREADS>;

// The sum of every thread's `v`, seen by all of them.
fn workgroup_sum(lid: u32, v: f32) -> f32 {
    partial[lid] = v;
    workgroupBarrier();
    for (var stride = THREADS / 2u; stride > 0u; stride = stride / 2u) {
        if lid < stride {
            partial[lid] = partial[lid] + partial[lid + stride];
        }
        workgroupBarrier();
    }
    let total = partial[0];
    workgroupBarrier();
    return total;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = workgroup_index(wid, nwg);
    if row >= p.rows {
        return;
    }
    let base = row * p.dim;
    let n = f32(p.dim);
    if p.op == 0u {
        var squares = 0.0;
        for (var i = lid; i < p.dim; i += THREADS) {
            let v = x[base + i];
            squares += v * v;
        }
        let inv = 1.0 / sqrt(workgroup_sum(lid, squares) / n + p.eps);
        for (var i = lid; i < p.dim; i += THREADS) {
            y[base + i] = x[base + i] * inv * weight(i);
        }
        return;
    }
    var sum = 0.0;
    for (var i = lid; i < p.dim; i += THREADS) {
        sum += x[base + i];
    }
    let mean = workgroup_sum(lid, sum) / n;
    var deviations = 0.0;
    for (var i = lid; i < p.dim; i += THREADS) {
        let d = x[base + i] - mean;
        deviations += d * d;
    }
    let inv = 1.0 / sqrt(workgroup_sum(lid, deviations) / n + p.eps);
    for (var i = lid; i < p.dim; i += THREADS) {
        y[base + i] = (x[base + i] - mean) * inv * weight(i) + bias(i);
    }
}
