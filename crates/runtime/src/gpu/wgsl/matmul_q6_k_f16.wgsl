// Q6_K on the tiled product's f16 path (after q6_k.wgsl; matmul.wgsl): a sub-block's
// values less 32 as f16 fours per row, `w_tile[k4 · BM + r]`, and d times each half's
// scale; the dot products as matvec_q6_k_f16.wgsl's `block_dot` sums them.

// Staging row r's sub-block `block`: thread `part` (0 or 1) of the row takes 16 values.
fn stage_weights(block: u32, r: u32, part: u32) {
    let s = q6k_sub(block);
    for (var i = 0u; i < 4u; i++) {
        let q = q6k_word(s, 4u * part + i);
        w_tile[(4u * part + i) * BM + r] = bytes_f16(q) - vec4<f16>(32.0);
    }
    if (part == 0u) {
        w_meta[r] = vec2<f32>(s.d_scale0, s.d_scale1);
    }
}

fn sub_dots(ty: u32, tx: u32) -> array<f32, 16> {
    let s0 = tile_sums(0u, 4u, ty, tx);
    let s1 = tile_sums(4u, 8u, ty, tx);
    var d: array<f32, 16>;
    for (var i = 0u; i < 4u; i++) {
        let m = w_meta[ty + 16u * i];
        for (var j = 0u; j < 4u; j++) {
            d[4u * i + j] = x_scales[tx + 8u * j] * q6k_dot(m.x, m.y, s0[4u * i + j], s1[4u * i + j]);
        }
    }
    return d;
}
