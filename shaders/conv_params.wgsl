// What both convolution programs (conv.wgsl, conv_tiled.wgsl) take: `x [c_in, t]` into
// `y [c_out, t_out]`, forward (`op` 0) or transposed (`op` 1).

struct Params {
    op: u32,
    c_in: u32,
    t: u32,
    c_out: u32,
    k: u32,
    t_out: u32,
    padding: u32,
    // forward: the dilation; transposed: the stride.
    step: u32,
    has_bias: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
