// Scaled dot-product attention on the matrix units (tensor cores) through wgpu's cooperative
// matrices, for the DiT's shape under a fast precision policy: head dim 64, no causal mask,
// grouped KV heads, queries, keys and values rounded to f16 (the scores and the output summed in
// f32), as the CUDA backend runs the same attention in TF32 (also a 10-bit mantissa). The host
// takes it only where linear_coop.wgsl runs (16 x 16 x 16 f16 into f32, subgroups of 32).
//
// One workgroup of 4 subgroups a (batch, head, block of 64 queries), each subgroup 16 of them.
// The block's queries are staged once and kept as fragments; the keys and values go by in tiles
// of 64 through workgroup memory. For each tile a subgroup computes its 16 x 64 scores, its lanes
// (two a query, 32 keys each) keep the online softmax (running maximum and sum), write the tile's
// weights as f16 and rescale the output so far, and the subgroup adds weights x values to it.
// Each lane starts its passes over its 32 values of a row at its own place: a row's values are 32
// words apart lane to lane, all in one bank of workgroup memory, so lanes reading the same place
// would take turns 32 deep; rotated, a step's 32 reads fall in 32 banks.
// (The preamble that enables f16 and cooperative matrices is put first by the host.)

struct Params {
    tasks: u32,
    q_len: u32,
    kv_len: u32,
    kv_capacity: u32,
    heads: u32,
    kv_heads: u32,
    head_dim: u32,
    causal: u32,
    scale: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

const D: u32 = 64u;
const BQ: u32 = 64u;
const BK: u32 = 64u;
// A staged row: 64 halves and 8 of padding, as vec4s (the fragments' loads count in vec4s).
const ROW4: u32 = 18u;
// The lowest f32, where a running maximum starts.
const LOWEST: f32 = -3.4028235e38;

// The block's queries, then each tile's keys, [row][dim]; the tile's values [key][dim].
var<workgroup> qk: array<vec4<f16>, 1152>;
var<workgroup> vs: array<vec4<f16>, 1152>;
// Each subgroup's 16 x 64 f32 (1024 values): the tile's scores, then the output on its way to
// being rescaled or written.
var<workgroup> so: array<f32, 4096>;
// Each subgroup's 16 x 64 weights of a tile as f16 (16 rows of ROW4 vec4s).
var<workgroup> weights: array<vec4<f16>, 1152>;
// A value of each lane, for the two lanes of a query to combine.
var<workgroup> pair: array<f32, 128>;

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    // A folded grid's surplus workgroups redo the last task and write nothing (no early return:
    // the cooperative operations need the workgroup's control flow uniform).
    let live = workgroup_index(wid, nwg) < p.tasks;
    let task = min(workgroup_index(wid, nwg), p.tasks - 1u);
    let blocks = (p.q_len + BQ - 1u) / BQ;
    let q0 = (task % blocks) * BQ;
    let h = (task / blocks) % p.heads;
    let b = task / (blocks * p.heads);
    let kvh = h / (p.heads / p.kv_heads);
    let kv_width = p.kv_heads * D;
    let kv_base = b * p.kv_capacity * kv_width + kvh * D;
    let sg = lid / 32u;
    let lane = lid % 32u;
    // The lane's query of the subgroup's 16, and its half (32 keys of a tile, 32 dims of a row).
    let r = lane / 2u;
    let half = lane % 2u;
    let own = sg * 1024u;
    let mine = own + r * 64u + half * 32u;
    // Where the lane's passes over its 32 values start: value `(i + turn) % 32` at step `i`, or
    // in fours, group `(g + turn) % 8` at step `g` and within it value `(c + turn / 8) % 4`.
    let turn = lane;
    let shift = turn >> 3u;
    // The block's 64 queries, scaled: 1024 vec4s, eight a thread.
    for (var i = 0u; i < 8u; i++) {
        let e = lid + 128u * i;
        let row = e / 16u;
        var value = vec4<f32>();
        if q0 + row < p.q_len {
            value = q[((b * p.q_len + q0 + row) * p.heads + h) * (D / 4u) + e % 16u] * p.scale;
        }
        qk[row * ROW4 + e % 16u] = vec4<f16>(value);
    }
    workgroupBarrier();
    let stride = ROW4;
    let iq = sg * 16u * ROW4;
    let iq1 = iq + 4u;
    let iq2 = iq + 8u;
    let iq3 = iq + 12u;
    let qa0 = coopLoadT<coop_mat16x16<f16, A>>(&qk[iq], stride);
    let qa1 = coopLoadT<coop_mat16x16<f16, A>>(&qk[iq1], stride);
    let qa2 = coopLoadT<coop_mat16x16<f16, A>>(&qk[iq2], stride);
    let qa3 = coopLoadT<coop_mat16x16<f16, A>>(&qk[iq3], stride);
    var o0 = coop_mat16x16<f32, C>();
    var o1 = coop_mat16x16<f32, C>();
    var o2 = coop_mat16x16<f32, C>();
    var o3 = coop_mat16x16<f32, C>();
    var m = LOWEST;
    var l = 0.0;
    let s64 = 64u;
    let at1 = own + 16u;
    let at2 = own + 32u;
    let at3 = own + 48u;
    for (var t0 = 0u; t0 < p.kv_len; t0 += BK) {
        workgroupBarrier();
        // The tile's keys and values: 1024 vec4s each, eight a thread; zeros past the valid keys.
        for (var i = 0u; i < 8u; i++) {
            let e = lid + 128u * i;
            let j = e / 16u;
            var key = vec4<f32>();
            var value = vec4<f32>();
            if t0 + j < p.kv_len {
                let at = kv_base + (t0 + j) * kv_width + 4u * (e % 16u);
                key = k4(at);
                value = v4(at);
            }
            qk[j * ROW4 + e % 16u] = vec4<f16>(key);
            vs[j * ROW4 + e % 16u] = vec4<f16>(value);
        }
        workgroupBarrier();
        // Scores: the subgroup's 16 queries by the tile's 64 keys, four fragments of 16 keys.
        // B [dim][key] is the key's row: column-major in the staged rows.
        var s0 = coop_mat16x16<f32, C>();
        var s1 = coop_mat16x16<f32, C>();
        var s2 = coop_mat16x16<f32, C>();
        var s3 = coop_mat16x16<f32, C>();
        {
            // Dims 0..16.
            let ik0 = 0u;
            let ik1 = 16u * ROW4 + 0u;
            let ik2 = 32u * ROW4 + 0u;
            let ik3 = 48u * ROW4 + 0u;
            let k0 = coopLoad<coop_mat16x16<f16, B>>(&qk[ik0], stride);
            let k1 = coopLoad<coop_mat16x16<f16, B>>(&qk[ik1], stride);
            let k2 = coopLoad<coop_mat16x16<f16, B>>(&qk[ik2], stride);
            let k3 = coopLoad<coop_mat16x16<f16, B>>(&qk[ik3], stride);
            s0 = coopMultiplyAdd(qa0, k0, s0);
            s1 = coopMultiplyAdd(qa0, k1, s1);
            s2 = coopMultiplyAdd(qa0, k2, s2);
            s3 = coopMultiplyAdd(qa0, k3, s3);
        }
        {
            // Dims 16..32.
            let ik0 = 4u;
            let ik1 = 16u * ROW4 + 4u;
            let ik2 = 32u * ROW4 + 4u;
            let ik3 = 48u * ROW4 + 4u;
            let k0 = coopLoad<coop_mat16x16<f16, B>>(&qk[ik0], stride);
            let k1 = coopLoad<coop_mat16x16<f16, B>>(&qk[ik1], stride);
            let k2 = coopLoad<coop_mat16x16<f16, B>>(&qk[ik2], stride);
            let k3 = coopLoad<coop_mat16x16<f16, B>>(&qk[ik3], stride);
            s0 = coopMultiplyAdd(qa1, k0, s0);
            s1 = coopMultiplyAdd(qa1, k1, s1);
            s2 = coopMultiplyAdd(qa1, k2, s2);
            s3 = coopMultiplyAdd(qa1, k3, s3);
        }
        {
            // Dims 32..48.
            let ik0 = 8u;
            let ik1 = 16u * ROW4 + 8u;
            let ik2 = 32u * ROW4 + 8u;
            let ik3 = 48u * ROW4 + 8u;
            let k0 = coopLoad<coop_mat16x16<f16, B>>(&qk[ik0], stride);
            let k1 = coopLoad<coop_mat16x16<f16, B>>(&qk[ik1], stride);
            let k2 = coopLoad<coop_mat16x16<f16, B>>(&qk[ik2], stride);
            let k3 = coopLoad<coop_mat16x16<f16, B>>(&qk[ik3], stride);
            s0 = coopMultiplyAdd(qa2, k0, s0);
            s1 = coopMultiplyAdd(qa2, k1, s1);
            s2 = coopMultiplyAdd(qa2, k2, s2);
            s3 = coopMultiplyAdd(qa2, k3, s3);
        }
        {
            // Dims 48..64.
            let ik0 = 12u;
            let ik1 = 16u * ROW4 + 12u;
            let ik2 = 32u * ROW4 + 12u;
            let ik3 = 48u * ROW4 + 12u;
            let k0 = coopLoad<coop_mat16x16<f16, B>>(&qk[ik0], stride);
            let k1 = coopLoad<coop_mat16x16<f16, B>>(&qk[ik1], stride);
            let k2 = coopLoad<coop_mat16x16<f16, B>>(&qk[ik2], stride);
            let k3 = coopLoad<coop_mat16x16<f16, B>>(&qk[ik3], stride);
            s0 = coopMultiplyAdd(qa3, k0, s0);
            s1 = coopMultiplyAdd(qa3, k1, s1);
            s2 = coopMultiplyAdd(qa3, k2, s2);
            s3 = coopMultiplyAdd(qa3, k3, s3);
        }
        coopStoreT(s0, &so[own], s64);
        coopStoreT(s1, &so[at1], s64);
        coopStoreT(s2, &so[at2], s64);
        coopStoreT(s3, &so[at3], s64);
        workgroupBarrier();
        // The online softmax of the lane's query over its 32 keys, joined with the other lane's.
        let first = t0 + half * 32u;
        var tile_max = LOWEST;
        for (var i = 0u; i < 32u; i++) {
            let j = (i + turn) & 31u;
            if first + j < p.kv_len {
                tile_max = max(tile_max, so[mine + j]);
            }
        }
        pair[lid] = tile_max;
        workgroupBarrier();
        let top = max(m, max(tile_max, pair[lid ^ 1u]));
        let correction = exp(m - top);
        var sum = 0.0;
        let iw = sg * 16u * ROW4 + r * ROW4 + half * 8u;
        for (var g = 0u; g < 8u; g++) {
            let i = 4u * ((g + turn) & 7u);
            // e[c] is the weight of key i + (c + shift) % 4; w puts them in the keys' order.
            var e = vec4<f32>();
            for (var c = 0u; c < 4u; c++) {
                let cc = (c + shift) & 3u;
                if first + i + cc < p.kv_len {
                    e[c] = exp(so[mine + i + cc] - top);
                }
            }
            let w = select(select(e, e.wxyz, shift == 1u), select(e.zwxy, e.yzwx, shift == 3u),
                           shift >= 2u);
            sum += w.x + w.y + w.z + w.w;
            weights[iw + i / 4u] = vec4<f16>(w);
        }
        workgroupBarrier();
        pair[lid] = sum;
        workgroupBarrier();
        l = l * correction + sum + pair[lid ^ 1u];
        m = top;
        // The output so far, rescaled to the new maximum row by row.
        coopStoreT(o0, &so[own], s64);
        coopStoreT(o1, &so[at1], s64);
        coopStoreT(o2, &so[at2], s64);
        coopStoreT(o3, &so[at3], s64);
        workgroupBarrier();
        for (var i = 0u; i < 32u; i++) {
            let j = (i + turn) & 31u;
            so[mine + j] *= correction;
        }
        workgroupBarrier();
        o0 = coopLoadT<coop_mat16x16<f32, C>>(&so[own], s64);
        o1 = coopLoadT<coop_mat16x16<f32, C>>(&so[at1], s64);
        o2 = coopLoadT<coop_mat16x16<f32, C>>(&so[at2], s64);
        o3 = coopLoadT<coop_mat16x16<f32, C>>(&so[at3], s64);
        // Weights x values: A [query][key] the weights, B [key][dim] the values' rows.
        for (var kk = 0u; kk < 4u; kk++) {
            let ia = sg * 16u * ROW4 + 4u * kk;
            let a = coopLoadT<coop_mat16x16<f16, A>>(&weights[ia], stride);
            let iv0 = 16u * kk * ROW4;
            let iv1 = iv0 + 4u;
            let iv2 = iv0 + 8u;
            let iv3 = iv0 + 12u;
            let v0 = coopLoadT<coop_mat16x16<f16, B>>(&vs[iv0], stride);
            let v1 = coopLoadT<coop_mat16x16<f16, B>>(&vs[iv1], stride);
            let v2 = coopLoadT<coop_mat16x16<f16, B>>(&vs[iv2], stride);
            let v3 = coopLoadT<coop_mat16x16<f16, B>>(&vs[iv3], stride);
            o0 = coopMultiplyAdd(a, v0, o0);
            o1 = coopMultiplyAdd(a, v1, o1);
            o2 = coopMultiplyAdd(a, v2, o2);
            o3 = coopMultiplyAdd(a, v3, o3);
        }
    }
    workgroupBarrier();
    coopStoreT(o0, &so[own], s64);
    coopStoreT(o1, &so[at1], s64);
    coopStoreT(o2, &so[at2], s64);
    coopStoreT(o3, &so[at3], s64);
    workgroupBarrier();
    let row = q0 + sg * 16u + r;
    if live && row < p.q_len {
        let inv = 1.0 / l;
        let out = ((b * p.q_len + row) * p.heads + h) * D + half * 32u;
        for (var i = 0u; i < 32u; i++) {
            let j = (i + turn) & 31u;
            y[out + j] = so[mine + j] * inv;
        }
    }
}
