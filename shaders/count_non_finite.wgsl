// How many values are NaN or infinite, counted into one atomic word.

struct Params {
    n: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> count: atomic<u32>;

var<workgroup> local_count: atomic<u32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = workgroup_index(wid, nwg) * 256u + lid;
    if i < p.n && !is_finite(x[i]) {
        atomicAdd(&local_count, 1u);
    }
    workgroupBarrier();
    if lid == 0u {
        let c = atomicLoad(&local_count);
        if c > 0u {
            atomicAdd(&count, c);
        }
    }
}
