// Q4_K and Q5_K on the tiled product's f32 path (after q4_k.wgsl; matmul.wgsl): a sub-block's
// 4- or 5-bit values as f32 per row, `w_tile[k · BM + r]`, and (d·scale, dmin·min); the dot
// products as matvec_q4_k.wgsl's `block_dot` sums them (Σq·x and Σx in order, q4k_dot).

const READS_Q8: bool = false;

// Staging row r's sub-block `block`: thread `part` (0 or 1) of the row takes 16 values.
fn stage_weights(block: u32, r: u32, part: u32) {
    let s = q4k_sub(block);
    for (var i = 0u; i < 4u; i++) {
        let q = q4k_word(s, 4u * part + i);
        for (var k = 0u; k < 4u; k++) {
            w_tile[(16u * part + 4u * i + k) * BM + r] = f32((q >> (8u * k)) & 0xFFu);
        }
    }
    if (part == 0u) {
        w_meta[r] = vec2<f32>(s.d_scale, s.dmin_min);
    }
}

fn sub_dots(ty: u32, tx: u32) -> array<f32, 16> {
    let sqx = tile_sums(0u, 32u, ty, tx);
    let sx = tile_input_sums(tx);
    var d: array<f32, 16>;
    for (var i = 0u; i < 4u; i++) {
        let m = w_meta[ty + 16u * i];
        for (var j = 0u; j < 4u; j++) {
            d[4u * i + j] = q4k_dot(m.x, m.y, sqx[4u * i + j], sx[j]);
        }
    }
    return d;
}
