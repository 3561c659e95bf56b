// 1-D convolutions of `x [c_in, t]`, one thread an output element: forward (`op` 0, stride 1,
// `w [c_out, c_in, k]`) and transposed (`op` 1, `w [c_in, c_out, k]`, as torch lays them out).
// `w(i)` and `bias(i)` read the parameters' format; the parameters are conv_params.wgsl's.

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let e = workgroup_index(wid, nwg) * 256u + lid;
    if e >= p.c_out * p.t_out {
        return;
    }
    let co = e / p.t_out;
    let to = e % p.t_out;
    var acc = 0.0;
    if p.op == 0u {
        for (var ci = 0u; ci < p.c_in; ci++) {
            for (var j = 0u; j < p.k; j++) {
                let src = i32(to + j * p.step) - i32(p.padding);
                if src >= 0 && u32(src) < p.t {
                    acc = fma(w((co * p.c_in + ci) * p.k + j), x[ci * p.t + u32(src)], acc);
                }
            }
        }
    } else {
        let pos = to + p.padding;
        for (var j = 0u; j < p.k; j++) {
            if j <= pos && (pos - j) % p.step == 0u {
                let ti = (pos - j) / p.step;
                if ti < p.t {
                    for (var ci = 0u; ci < p.c_in; ci++) {
                        acc = fma(w((ci * p.c_out + co) * p.k + j), x[ci * p.t + ti], acc);
                    }
                }
            }
        }
    }
    if p.has_bias != 0u {
        acc += bias(co);
    }
    y[e] = acc;
}
