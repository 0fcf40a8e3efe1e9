// Decoding's attention split over the cache positions, second of two dispatches (after
// attention_split.wgsl, which says why; reduce.wgsl, f16.wgsl, blocks.wgsl, copies.wgsl and
// attention_io.wgsl are prepended): for each (head, token), the chunks' partial sums in
// `scores`, (m, l, o[0..head_dim]) each, rescaled by exp(m − M) for the largest M, added,
// and divided by the rescaled total of the l; then the copies of the output the output
// projection reads. A chunk with no positions (past a token's causal end) has l = 0.

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    // Bound as for the split, which reads these (an entry point's layout holds only the
    // bindings it uses).
    _ = arrayLength(&q);
    _ = arrayLength(&k);
    _ = arrayLength(&v);
    let h = wg.x;
    let t = wg.y;
    let n = p.n_past + t + 1u;
    let used = (n + p.chunk - 1u) / p.chunk;
    let stride = p.head_dim + 2u;
    let base = (t * p.heads + h) * p.chunks * stride;
    var top = bitcast<f32>(0xff7fffffu);
    for (var c = 0u; c < used; c++) {
        top = max(top, scores[base + c * stride]);
    }
    var total = 0.0;
    for (var c = 0u; c < used; c++) {
        total += scores[base + c * stride + 1u] * exp(scores[base + c * stride] - top);
    }
    let inv = 1.0 / total;
    let qo = ((p.first_row + t) * p.heads + h) * p.head_dim;
    for (var d = lid.x; d < p.head_dim; d += WG) {
        var acc = 0.0;
        for (var c = 0u; c < used; c++) {
            acc += scores[base + c * stride + 2u + d] * exp(scores[base + c * stride] - top);
        }
        out[qo + d] = acc * inv;
    }
    head_copies(lid.x, qo);
}
