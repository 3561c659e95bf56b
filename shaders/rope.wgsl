// The rotary embedding, rotate-half convention, on the leading `rotary_dim` dims of each head; the
// rest of each head is copied. The cosines and sines come from a table the host computes in f32
// as the reference does (`angles[position][i]` = cos, sin), since a GPU's sin and cos lose
// accuracy for the large angles of late positions.

struct Params {
    rows: u32,
    width: u32,
    head_dim: u32,
    half: u32,
    seq_len: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read> angles: array<vec2<f32>>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let e = workgroup_index(wid, nwg) * 256u + lid;
    if e >= p.rows * p.width {
        return;
    }
    let row = e / p.width;
    let d = e % p.head_dim;
    let head = e - d;
    if d >= 2u * p.half {
        y[e] = x[e];
        return;
    }
    let i = d % p.half;
    let cs = angles[(row % p.seq_len) * p.half + i];
    let a = x[head + i];
    let b = x[head + i + p.half];
    if d < p.half {
        y[e] = a * cs.x - b * cs.y;
    } else {
        y[e] = b * cs.x + a * cs.y;
    }
}
