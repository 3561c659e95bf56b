// What the GEMMs (linear.wgsl, linear_wide.wgsl, linear_coop.wgsl) share: their parameters and
// output. `n` weight rows (a piece of a weight kept in pieces, whose columns of `y` start at
// `y_offset` in rows `y_stride` wide).

struct Params {
    m: u32,
    n: u32,
    k: u32,
    has_bias: u32,
    y_stride: u32,
    y_offset: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
