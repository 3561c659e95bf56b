// Data movement that is not a plain copy: a transpose, a column range, and nearest-neighbour
// resampling along time.

struct Params {
    op: u32,
    rows: u32,
    cols: u32,
    // columns: the first column.
    first: u32,
    out_cols: u32,
    // resample: the source step `t / out_len` in f32, as torch computes it (mode 0), or an exact
    // integer rule (1: the same length, 2: twice as long).
    scale: f32,
    mode: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

const TRANSPOSE: u32 = 0u;
const COLUMNS: u32 = 1u;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = workgroup_index(wid, nwg) * 256u + lid;
    if i >= p.rows * p.out_cols {
        return;
    }
    let r = i / p.out_cols;
    let c = i % p.out_cols;
    switch p.op {
        case TRANSPOSE: {
            // Output [cols, rows]: out_cols is the input's rows.
            y[i] = x[c * p.cols + r];
        }
        case COLUMNS: {
            y[i] = x[r * p.cols + p.first + c];
        }
        default: {
            var source = c;
            if p.mode == 2u {
                source = c >> 1u;
            } else if p.mode == 0u {
                source = min(u32(floor(f32(c) * p.scale)), p.cols - 1u);
            }
            y[i] = x[r * p.cols + source];
        }
    }
}
