// Every word of a buffer set to one bit pattern (the NaN sentinel of a fresh result buffer).

struct Params {
    n: u32,
    bits: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = workgroup_index(wid, nwg) * 256u + lid;
    if i < p.n {
        y[i] = p.bits;
    }
}
