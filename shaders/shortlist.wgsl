// The shortlist of a guided top-k draw (engine/src/pipeline/sampling.rs `shortlist` is the rule):
// one workgroup finds the k-th largest value of a logit pair by radix selection over
// order-preserving keys, then writes back the entries at or above a threshold `margin` keys below
// it, so a draw moves a few kilobytes to the host instead of the vocabulary's logits. The margin
// covers a guided value's last bit, which a driver may round once (a fused multiply-add) where the
// host rounds twice; the host applies the exact rule to what comes back.
//
// logits: [2 * pairs, width], a workgroup a pair (a batch's songs). out, a pair's after another:
// [count, index[cap], cond[cap], uncond[cap]], count -1 where the list cannot stand for the rows
// (more than cap entries, a NaN among mode 0's values, or a threshold at the values' floor).

struct Params {
    width: u32,
    // 0: the conditional value inside [lo, hi) or at `extra`; 1: the guided value.
    mode: u32,
    scale: f32,
    k: u32,
    lo: u32,
    hi: u32,
    extra: u32,
    cap: u32,
    margin: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

const THREADS: u32 = 256u;
// The key of -inf, where mode 0's masked entries rank.
const NEG_INF_KEY: u32 = 0x007fffffu;

// Where this workgroup's pair starts in `logits` and its list in `out`.
var<private> pair_start: u32;
var<private> list_start: u32;
var<workgroup> hist: array<atomic<u32>, 256>;
var<workgroup> prefix: u32;
var<workgroup> remaining: u32;
var<workgroup> count: atomic<u32>;
var<workgroup> invalid: atomic<u32>;

fn is_nan(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
}

// Larger float, larger key; -0 and +0 share one.
fn order_key(f: f32) -> u32 {
    var u = bitcast<u32>(f);
    if (u & 0x7fffffffu) == 0u {
        u = 0u;
    }
    return select(u | 0x80000000u, ~u, (u & 0x80000000u) != 0u);
}

fn ranked_key(i: u32) -> u32 {
    let c = logits[pair_start + i];
    if p.mode == 0u {
        if (i >= p.lo && i < p.hi) || i == p.extra {
            if is_nan(c) {
                atomicStore(&invalid, 1u);
            }
            return order_key(c);
        }
        return NEG_INF_KEY;
    }
    let u = logits[pair_start + p.width + i];
    let g = u + (c - u) * p.scale;
    let bits = bitcast<u32>(g);
    if is_nan(g) || bits == 0xff800000u {
        return order_key(-1e9);
    }
    if bits == 0x7f800000u {
        return order_key(1e9);
    }
    return order_key(g);
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) t: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    pair_start = wid.x * 2u * p.width;
    list_start = wid.x * (1u + 3u * p.cap);
    if t == 0u {
        prefix = 0u;
        remaining = p.k;
        atomicStore(&count, 0u);
        atomicStore(&invalid, 0u);
    }
    var mask = 0u;
    for (var shift = 24i; shift >= 0i; shift -= 8i) {
        atomicStore(&hist[t], 0u);
        workgroupBarrier();
        let want = prefix;
        for (var i = t; i < p.width; i += THREADS) {
            let key = ranked_key(i);
            if (key & mask) == want {
                atomicAdd(&hist[(key >> u32(shift)) & 255u], 1u);
            }
        }
        workgroupBarrier();
        if t == 0u {
            var before = 0u;
            for (var b = 255i; b >= 0i; b--) {
                let c = atomicLoad(&hist[b]);
                if before + c >= remaining {
                    prefix = want | (u32(b) << u32(shift));
                    remaining = remaining - before;
                    break;
                }
                before += c;
            }
        }
        mask = mask | (255u << u32(shift));
        workgroupBarrier();
    }
    let threshold = prefix;
    let low = threshold - min(threshold, p.margin);
    for (var i = t; i < p.width; i += THREADS) {
        if ranked_key(i) >= low {
            let slot = atomicAdd(&count, 1u);
            if slot < p.cap {
                out[list_start + 1u + slot] = f32(i);
                out[list_start + 1u + p.cap + slot] = logits[pair_start + i];
                out[list_start + 1u + 2u * p.cap + slot] = logits[pair_start + p.width + i];
            }
        }
    }
    workgroupBarrier();
    if t == 0u {
        var floor = threshold <= NEG_INF_KEY;
        if p.mode == 1u {
            floor = threshold <= order_key(-1e9);
        }
        let n = atomicLoad(&count);
        if atomicLoad(&invalid) != 0u || floor || n > p.cap {
            out[list_start] = -1.0;
        } else {
            out[list_start] = f32(n);
        }
    }
}
