// Snake: `x + sin(alpha * x)^2 / (alpha + 1e-9)` with one alpha per channel of `x [c, t]`. The
// angle is reduced to [-pi, pi] first in two steps (Cody and Waite), since a GPU's sin is accurate
// only there and a vocoder's angles reach far beyond.

struct Params {
    n: u32,
    t: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

const TWO_PI_HI: f32 = 6.28125;
const TWO_PI_LO: f32 = 0.0019353071795864769;
const INV_TWO_PI: f32 = 0.15915494309189535;

fn reduced_sin(a: f32) -> f32 {
    let turns = round(a * INV_TWO_PI);
    return sin((a - turns * TWO_PI_HI) - turns * TWO_PI_LO);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = workgroup_index(wid, nwg) * 256u + lid;
    if i >= p.n {
        return;
    }
    let a = alpha(i / p.t);
    let v = x[i];
    let s = reduced_sin(a * v);
    y[i] = v + 1.0 / (a + 1e-9) * (s * s);
}
