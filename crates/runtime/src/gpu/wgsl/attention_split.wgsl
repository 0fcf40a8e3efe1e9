// Decoding's attention split over the cache positions (flash-decoding), first of two
// dispatches (reduce.wgsl, f16.wgsl and attention_io.wgsl are prepended; the second is
// attention_combine.wgsl). One workgroup of 64 per (head, token, chunk of `chunk` cache
// positions), so a decode step at a depth of 512 keeps 96 workgroups busy where the
// kernel GPUs ran before kept 12 (one per head; 102 µs a layer on an H100, most of it one
// thread's chain over the positions). Prompts take it too (their rows in groups whose
// partial sums fit the scratch), so a token's result does not depend on its call's rows. Each workgroup writes, to `scores` as scratch, its
// chunk's largest score m, the sum l of exp(s − m) over the chunk, and the values weighed by
// exp(s − m), unnormalized: (m, l, o[0..head_dim]) per chunk. The combine rescales each
// chunk by exp(m − M) for the largest M and divides by the total.
//
// What differs from attention.wgsl: the probabilities are not rounded to f16 before they
// weigh the values (the CPU backend rounds them, as llama.cpp's CPU path does; its CUDA
// flash attention does not), since no chunk knows the total it would divide by. The query
// is rounded to f16 as there, and the scores and exp are the same. The check compares this
// with an exact softmax, within the same relative tolerance.

var<workgroup> weights: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    // Bound as for the combine, which writes these (an entry point's layout holds only
    // the bindings it uses).
    _ = arrayLength(&out);
    _ = arrayLength(&copy_q8);
    _ = arrayLength(&copy_f16);
    let h = wg.x;
    let t = wg.y;
    let c = wg.z;
    let kvh = h / (p.heads / p.kv_heads);
    let n = p.n_past + t + 1u;
    let qo = ((p.first_row + t) * p.heads + h) * p.head_dim;
    let pairs = p.head_dim / 2u;
    let row = p.kv_heads * pairs;
    let head = kvh * pairs;
    load_query(lid.x, qo, pairs);
    // Thread lid scores position first + lid (chunk ≤ 64, the host checks).
    let first = c * p.chunk;
    let j = first + lid.x;
    let scored = lid.x < p.chunk && j < n && j >= first_attended(n);
    var s = bitcast<f32>(0xff7fffffu); // -FLT_MAX, exactly
    if (scored) {
        var qk = 0.0;
        for (var i = 0u; i < pairs; i++) {
            let kd = unpack2x16float(k[j * row + head + i]);
            let qd = query[i];
            qk += qd.x * kd.x;
            qk += qd.y * kd.y;
        }
        s = qk * p.scale;
    }
    let m = workgroup_max(lid.x, s);
    var e = 0.0;
    if (scored) {
        e = exp(s - m);
    }
    weights[lid.x] = e;
    let l = workgroup_sum(lid.x, e);
    // The chunk's positions, weighed, for each of the head's value pairs.
    let out_at = ((t * p.heads + h) * p.chunks + c) * (p.head_dim + 2u);
    let last = min(n, first + p.chunk);
    for (var i = lid.x; i < pairs; i += WG) {
        var acc = vec2<f32>(0.0, 0.0);
        for (var jj = first; jj < last; jj++) {
            acc += weights[jj - first] * unpack2x16float(v[jj * row + head + i]);
        }
        scores[out_at + 2u + 2u * i] = acc.x;
        scores[out_at + 3u + 2u * i] = acc.y;
    }
    if (lid.x == 0u) {
        scores[out_at] = m;
        scores[out_at + 1u] = l;
    }
}
