// Causal grouped-query attention of `tokens` new query rows over a layer's cache (reduce.wgsl,
// f16.wgsl and attention_io.wgsl are prepended), for software adapters (llvmpipe,
// SwiftShader), where it runs tens of times faster than attention_split.wgsl, the one GPUs
// run (which says why). Token t (at position n_past + t) of head h attends to positions
// 0..=n_past + t of kv head h / (heads / kv_heads): one workgroup of 64 per (head, token).
// The scores go to a scratch buffer (contexts are longer than workgroup memory), then
// softmax, then each thread sums the weighted values of its dimensions. The query, and each
// normalised probability, are rounded to f16 precision, as the CPU backend rounds them for
// llama.cpp's f16 cache (whose products take f16 operands). The cache holds f16 pairs packed
// in u32 words (kv_store.wgsl); every row and head starts at an even value.

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let h = wg.x;
    let t = wg.y;
    let kvh = h / (p.heads / p.kv_heads);
    let n = p.n_past + t + 1u;
    let qo = ((p.first_row + t) * p.heads + h) * p.head_dim;
    let so = (t * p.heads + h) * p.ctx;
    let kv_stride = p.kv_heads * p.head_dim;
    let lo = first_attended(n);
    var m = bitcast<f32>(0xff7fffffu); // -FLT_MAX, exactly (Tint refuses the decimal literal rounded past it)
    for (var j = lo + lid.x; j < n; j += WG) {
        let ko = j * kv_stride + kvh * p.head_dim;
        var s = 0.0;
        for (var d = 0u; d < p.head_dim; d += 2u) {
            let kd = unpack2x16float(k[(ko + d) / 2u]);
            s += f16_round(q[qo + d]) * kd.x;
            s += f16_round(q[qo + d + 1u]) * kd.y;
        }
        s *= p.scale;
        scores[so + j] = s;
        m = max(m, s);
    }
    let top = workgroup_max(lid.x, m);
    var sum = 0.0;
    for (var j = lo + lid.x; j < n; j += WG) {
        let e = exp(scores[so + j] - top);
        scores[so + j] = e;
        sum += e;
    }
    let inv = 1.0 / workgroup_sum(lid.x, sum);
    storageBarrier();
    for (var d = lid.x; d < p.head_dim; d += WG) {
        var acc = 0.0;
        for (var j = lo; j < n; j++) {
            let vd = unpack2x16float(v[(j * kv_stride + kvh * p.head_dim + d) / 2u]);
            acc += f16_round(scores[so + j] * inv) * select(vd.x, vd.y, (d & 1u) == 1u);
        }
        out[qo + d] = acc;
    }
    head_copies(lid.x, qo);
}
