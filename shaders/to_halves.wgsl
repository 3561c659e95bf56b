// `y = x` rounded to f16, two values a word (`pack2x16float`): the input of a product on the
// matrix units made once, so each of its tiles reads x at half the bytes (linear_coop.wgsl's f16
// reader of x). One thread four values.

struct Params {
    // Vectors of 4 values.
    vectors: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<vec2<u32>>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = workgroup_index(wid, nwg) * 256u + lid;
    if i < p.vectors {
        let v = x[i];
        y[i] = vec2<u32>(pack2x16float(v.xy), pack2x16float(v.zw));
    }
}
