// Two f32 tensors of one shape in, one out: a sum, or SiLU of the first times the second.

struct Params {
    n: u32,
    op: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

const ADD: u32 = 0u;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = workgroup_index(wid, nwg) * 256u + lid;
    if i >= p.n {
        return;
    }
    let u = a[i];
    if p.op == ADD {
        y[i] = u + b[i];
    } else {
        y[i] = silu(u) * b[i];
    }
}
