// Causal grouped-query attention of `tokens` new query rows over a layer's cache (reduce.wgsl
// at 256 threads, f16.wgsl and attention_io.wgsl are prepended). Token t (at position n_past + t) of head h attends to positions
// 0..=n_past + t of kv head h / (heads / kv_heads): one workgroup of 256 threads per (head,
// token). The scores go to a scratch buffer (contexts are longer than workgroup memory):
// each thread scores every 256th position, then softmax over the workgroup; then the
// weighted sum of values is split by position too: the head's f16 pairs (head_dim / 2 of
// them) take one thread each, and the workgroup's 256 / (head_dim / 2) groups of such
// threads each sum every group-th position, their partial sums added in group order at the
// end. (A thread per dimension, looping over every position, left decoding waiting on one
// long chain of loads: on an H100 it took 64% of a 1.5B model's decode step. That kernel,
// attention.wgsl, stays for software adapters: on llvmpipe this one is some forty times
// slower, which would make the tests that run on it crawl.) The query,
// and each normalised probability, are rounded to f16 precision, as the CPU backend rounds
// them for llama.cpp's f16 cache (whose products take f16 operands). The cache holds f16
// pairs packed in u32 words (kv_store.wgsl); every row and head starts at an even value.
// head_dim is even and at most 512 (the host checks).

var<workgroup> sums: array<vec2<f32>, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let h = wg.x;
    let t = wg.y;
    let kvh = h / (p.heads / p.kv_heads);
    let n = p.n_past + t + 1u;
    let qo = ((p.first_row + t) * p.heads + h) * p.head_dim;
    let so = (t * p.heads + h) * p.ctx;
    let pairs = p.head_dim / 2u;
    // Rows of the cache in u32 words: kv heads × head_dim halves.
    let row = p.kv_heads * pairs;
    let head = kvh * pairs;
    load_query(lid.x, qo, pairs);
    var m = bitcast<f32>(0xff7fffffu); // -FLT_MAX, exactly (Tint refuses the decimal literal rounded past it)
    for (var j = lid.x; j < n; j += WG) {
        let ko = j * row + head;
        var s = 0.0;
        for (var i = 0u; i < pairs; i++) {
            let kd = unpack2x16float(k[ko + i]);
            let qd = query[i];
            s += qd.x * kd.x;
            s += qd.y * kd.y;
        }
        s *= p.scale;
        scores[so + j] = s;
        m = max(m, s);
    }
    let top = workgroup_max(lid.x, m);
    var sum = 0.0;
    for (var j = lid.x; j < n; j += WG) {
        let e = exp(scores[so + j] - top);
        scores[so + j] = e;
        sum += e;
    }
    let inv = 1.0 / workgroup_sum(lid.x, sum);
    storageBarrier();
    // Values: thread (g, i) sums pair i over positions g, g + groups, …
    let groups = WG / pairs;
    let g = lid.x / pairs;
    let i = lid.x % pairs;
    var acc = vec2<f32>(0.0, 0.0);
    if (g < groups) {
        for (var j = g; j < n; j += groups) {
            let w = f16_round(scores[so + j] * inv);
            acc += w * unpack2x16float(v[j * row + head + i]);
        }
    }
    sums[lid.x] = acc;
    workgroupBarrier();
    if (g == 0u) {
        var total = sums[i];
        for (var o = 1u; o < groups; o++) {
            total += sums[o * pairs + i];
        }
        out[qo + 2u * i] = total.x;
        out[qo + 2u * i + 1u] = total.y;
    }
    head_copies(lid.x, qo);
}
