// The chunks of attention_split.wgsl combined: for each (batch, head), the output is the chunks'
// weighted values rescaled to the largest maximum, over the chunks' rescaled sums of weights.
// One workgroup a (batch, head), a thread a dim.

struct Params {
    tasks: u32,
    head_dim: u32,
    chunks: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> stats: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read> partial: array<f32>;

const LOWEST: f32 = -3.4028235e38;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let task = workgroup_index(wid, nwg);
    if task >= p.tasks {
        return;
    }
    let first_slot = task * p.chunks;
    var m = LOWEST;
    for (var c = 0u; c < p.chunks; c++) {
        m = max(m, stats[2u * (first_slot + c)]);
    }
    var total = 0.0;
    for (var c = 0u; c < p.chunks; c++) {
        total += exp(stats[2u * (first_slot + c)] - m) * stats[2u * (first_slot + c) + 1u];
    }
    let inv = 1.0 / total;
    for (var dim = lid; dim < p.head_dim; dim += 64u) {
        var acc = 0.0;
        for (var c = 0u; c < p.chunks; c++) {
            acc += exp(stats[2u * (first_slot + c)] - m) * partial[(first_slot + c) * p.head_dim + dim];
        }
        y[task * p.head_dim + dim] = acc * inv;
    }
}
