// Rows of a table picked by id (an embedding lookup); `table(i)` reads the table's format. For a
// table kept in pieces, each piece runs with the ids of the rows it holds and 0xffffffff for the
// rest, which it leaves to the others.

struct Params {
    rows: u32,
    dim: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> ids: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = workgroup_index(wid, nwg) * 256u + lid;
    if i >= p.rows * p.dim {
        return;
    }
    let id = ids[i / p.dim];
    if id == 0xffffffffu {
        return;
    }
    y[i] = table(id * p.dim + i % p.dim);
}
