// Activation rows rounded as the integer decode products see them: per group of 32, the codes
// round(x * 127 / max|x|) times the scale max|x| / 127 (NaN for a group holding a non-finite
// value), and what the rounding took from the group's sum. One thread a group.

struct Params {
    groups: u32,
    // A NaN from the host (WGSL refuses one as a constant).
    nan: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> rounded: array<f32>;
@group(0) @binding(3) var<storage, read_write> lost: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let g = workgroup_index(wid, nwg) * 256u + lid;
    if g >= p.groups {
        return;
    }
    let base = g * 32u;
    var finite = true;
    var amax = 0.0;
    var sum = 0.0;
    for (var j = 0u; j < 32u; j++) {
        let v = x[base + j];
        finite = finite && is_finite(v);
        amax = max(amax, abs(v));
        sum += v;
    }
    var to_code = 0.0;
    if finite && amax > 0.0 {
        to_code = 127.0 / amax;
    }
    var scale = amax / 127.0;
    if !finite {
        scale = p.nan;
    }
    var codes = 0.0;
    for (var j = 0u; j < 32u; j++) {
        var code = 0.0;
        if finite {
            code = round(x[base + j] * to_code);
        }
        codes += code;
        rounded[base + j] = code * scale;
    }
    lost[g] = sum - scale * codes;
}
