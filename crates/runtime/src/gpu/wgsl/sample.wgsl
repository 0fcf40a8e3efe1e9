// Drawing the next token on the GPU (temperature, top-k, top-p), so that 4 bytes come back
// per token instead of a vocabulary of logits. One workgroup over one row of logits; the
// random number `u` in [0, 1) is drawn by the CPU's seeded generator and passed in, so the
// same seed gives the same text on either backend's logits.
//
// What it computes is the CPU sampler's (lm/sampler.rs) on the same logits: non-finite
// logits are never candidates; top-k keeps the k largest (ties to the lower index);
// weights are exp((l - max) / temperature); top-p keeps the shortest most-likely-first
// run whose share reaches top_p; then u times the kept weight is walked down that run.
// Three ways, by settings:
//   - a head (top-k of at most HEAD, or top-p): the HEAD (or k) most likely tokens are
//     found by a radix select on the logits' order-preserving bit keys (four passes of
//     8 bits), gathered, sorted (bitonic, in workgroup memory) and walked as the CPU walks
//     them, so for one u both pick the same token (up to f32 against f64 rounding at an
//     interval's edge);
//   - neither top-k nor top-p: u times the total weight is walked in index order, as the
//     CPU walks it then (no sort of the vocabulary on either);
//   - what needs more than a head (top-k above HEAD, or a nucleus the HEAD most likely
//     tokens do not fill): FALLBACK is written and the caller reads the logits back and
//     draws on the CPU with the same u.
// Why one workgroup: a step's sampling is a few passes over 50k–150k logits, small
// beside the matrix products; one workgroup needs no second dispatch to combine results.

struct Params {
    width: u32,
    top_k: u32,        // 0: all
    _pad0: u32,
    _pad1: u32,
    temperature: f32,  // > 0
    top_p: f32,        // 1: all
    u: f32,            // in [0, 1)
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

const WG: u32 = 256u;
const HEAD: u32 = 256u;
const NONE: u32 = 0xffffffffu;
const FALLBACK: u32 = 0xfffffffeu;

var<workgroup> red_f: array<f32, WG>;
var<workgroup> red_a: array<u32, WG>;
var<workgroup> red_b: array<u32, WG>;
var<workgroup> hist: array<atomic<u32>, 256>;
var<workgroup> cand_key: array<u32, HEAD>;
var<workgroup> cand_idx: array<u32, HEAD>;
var<workgroup> bcast_a: u32;
var<workgroup> bcast_b: u32;
var<workgroup> bcast_f: f32;

fn finite(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7f800000u) != 0x7f800000u;
}

// An order-preserving key: a < b as floats (total order, -0 before +0) iff key(a) < key(b).
fn key_of(v: f32) -> u32 {
    let b = bitcast<u32>(v);
    return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

fn value_of(k: u32) -> f32 {
    return bitcast<f32>(select(~k, k & 0x7fffffffu, (k & 0x80000000u) != 0u));
}

// Whether candidate (ka, ia) comes before (kb, ib): larger, or equal and lower index.
fn before(ka: u32, ia: u32, kb: u32, ib: u32) -> bool {
    return ka > kb || (ka == kb && ia < ib);
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid3: vec3<u32>) {
    let lid = lid3.x;
    let chunk = (p.width + WG - 1u) / WG;
    let lo = min(lid * chunk, p.width);
    let hi = min(lo + chunk, p.width);

    // The largest finite logit and how many are finite.
    var m = bitcast<f32>(0xff7fffffu); // -FLT_MAX (some compilers refuse the literal)
    var count = 0u;
    for (var i = lo; i < hi; i++) {
        let v = x[i];
        if (finite(v)) {
            m = max(m, v);
            count += 1u;
        }
    }
    red_f[lid] = m;
    red_a[lid] = count;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            red_f[lid] = max(red_f[lid], red_f[lid + s]);
            red_a[lid] += red_a[lid + s];
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        bcast_f = red_f[0];
        bcast_a = red_a[0];
    }
    let finite_n = workgroupUniformLoad(&bcast_a);
    let mx = workgroupUniformLoad(&bcast_f);
    let k = select(min(p.top_k, finite_n), finite_n, p.top_k == 0u);
    let whole = k == finite_n;
    if (finite_n == 0u || (!whole && k > HEAD)) {
        if (lid == 0u) {
            out[0] = FALLBACK;
        }
        return;
    }

    // The weight of every finite logit, summed (needed unless top-k keeps a head).
    var total = 0.0;
    if (whole) {
        var part = 0.0;
        for (var i = lo; i < hi; i++) {
            let v = x[i];
            if (finite(v)) {
                part += exp((v - mx) / p.temperature);
            }
        }
        red_f[lid] = part;
        workgroupBarrier();
        if (lid == 0u) {
            // In thread order, so thread j's range starts at the sum before it.
            var acc = 0.0;
            for (var t = 0u; t < WG; t++) {
                let w = red_f[t];
                red_f[t] = acc;
                acc += w;
            }
            bcast_f = acc;
        }
        total = workgroupUniformLoad(&bcast_f);

        if (p.top_p >= 1.0) {
            // Neither top-k nor top-p: walk u · total in index order. Thread 0 finds the
            // range it falls in; that range's thread walks it.
            if (lid == 0u) {
                let r = p.u * total;
                var owner = NONE;
                var last = NONE;
                for (var t = 0u; t < WG; t++) {
                    var next = total;
                    if (t + 1u < WG) {
                        next = red_f[t + 1u];
                    }
                    if (next > red_f[t]) {
                        last = t;
                        if (owner == NONE && r <= next) {
                            owner = t;
                        }
                    }
                }
                if (owner == NONE) {
                    owner = last;
                }
                bcast_a = owner;
            }
            let owner = workgroupUniformLoad(&bcast_a);
            if (lid == owner) {
                var r = p.u * total - red_f[lid];
                var pick = NONE;
                for (var i = lo; i < hi; i++) {
                    let v = x[i];
                    if (finite(v)) {
                        pick = i;
                        r -= exp((v - mx) / p.temperature);
                        if (r <= 0.0) {
                            break;
                        }
                    }
                }
                out[0] = pick;
            }
            return;
        }
    }

    // A head of h candidates: the key of the h-th largest (radix select, 8 bits a pass),
    // how many ties of it to take, then the head gathered in index order.
    let h = min(k, HEAD);
    var prefix = 0u;
    var mask = 0u;
    var need = h;
    for (var digit = 0u; digit < 4u; digit++) {
        let shift = 24u - 8u * digit;
        atomicStore(&hist[lid], 0u);
        workgroupBarrier();
        for (var i = lo; i < hi; i++) {
            let v = x[i];
            let key = key_of(v);
            if (finite(v) && (key & mask) == prefix) {
                atomicAdd(&hist[(key >> shift) & 255u], 1u);
            }
        }
        workgroupBarrier();
        if (lid == 0u) {
            var cum = 0u;
            var b = 255u;
            loop {
                let c = atomicLoad(&hist[b]);
                if (cum + c >= need || b == 0u) {
                    bcast_a = b;
                    bcast_b = need - cum;
                    break;
                }
                cum += c;
                b -= 1u;
            }
        }
        let bin = workgroupUniformLoad(&bcast_a);
        need = workgroupUniformLoad(&bcast_b);
        prefix |= bin << shift;
        mask |= 255u << shift;
    }
    let pivot = prefix;
    let above = h - need;

    // Gather: keys above the pivot, then the first `need` keys equal to it (index order).
    var n_above = 0u;
    var n_equal = 0u;
    for (var i = lo; i < hi; i++) {
        let v = x[i];
        if (finite(v)) {
            let key = key_of(v);
            n_above += select(0u, 1u, key > pivot);
            n_equal += select(0u, 1u, key == pivot);
        }
    }
    red_a[lid] = n_above;
    red_b[lid] = n_equal;
    cand_key[lid] = 0u;
    cand_idx[lid] = NONE;
    workgroupBarrier();
    if (lid == 0u) {
        var sa = 0u;
        var sb = 0u;
        for (var t = 0u; t < WG; t++) {
            let a = red_a[t];
            let b = red_b[t];
            red_a[t] = sa;
            red_b[t] = sb;
            sa += a;
            sb += b;
        }
    }
    workgroupBarrier();
    var at_above = red_a[lid];
    var at_equal = red_b[lid];
    for (var i = lo; i < hi; i++) {
        let v = x[i];
        if (finite(v)) {
            let key = key_of(v);
            if (key > pivot) {
                cand_key[at_above] = key;
                cand_idx[at_above] = i;
                at_above += 1u;
            } else if (key == pivot) {
                if (at_equal < need) {
                    cand_key[above + at_equal] = key;
                    cand_idx[above + at_equal] = i;
                }
                at_equal += 1u;
            }
        }
    }
    workgroupBarrier();

    // Bitonic sort, most likely first (the empty slots, key 0, last).
    for (var size = 2u; size <= HEAD; size <<= 1u) {
        for (var j = size >> 1u; j > 0u; j >>= 1u) {
            let other = lid ^ j;
            if (other > lid) {
                let ka = cand_key[lid];
                let ia = cand_idx[lid];
                let kb = cand_key[other];
                let ib = cand_idx[other];
                let forward = (lid & size) == 0u;
                if (forward == before(kb, ib, ka, ia)) {
                    cand_key[lid] = kb;
                    cand_idx[lid] = ib;
                    cand_key[other] = ka;
                    cand_idx[other] = ia;
                }
            }
            workgroupBarrier();
        }
    }

    // The CPU's walk: shares of the total (of all, or of the top-k head), the nucleus cut
    // where they reach top_p, then u times the kept share.
    if (lid == 0u) {
        var sum = total;
        if (!whole) {
            sum = 0.0;
            for (var i = 0u; i < h; i++) {
                sum += exp((value_of(cand_key[i]) - mx) / p.temperature);
            }
        }
        var kept = 0u;
        var acc = 0.0;
        for (var i = 0u; i < h; i++) {
            acc += exp((value_of(cand_key[i]) - mx) / p.temperature) / sum;
            kept = i + 1u;
            if (p.top_p < 1.0 && acc >= p.top_p) {
                break;
            }
        }
        if (p.top_p < 1.0 && acc < p.top_p && whole && h < finite_n) {
            // The head does not fill the nucleus: the CPU draws from the whole row.
            out[0] = FALLBACK;
            return;
        }
        var r = p.u * acc;
        var pick = cand_idx[kept - 1u];
        for (var i = 0u; i < kept; i++) {
            r -= exp((value_of(cand_key[i]) - mx) / p.temperature) / sum;
            if (r <= 0.0) {
                pick = cand_idx[i];
                break;
            }
        }
        out[0] = pick;
    }
}
