// Q8_0 on the tiled product (after matmul_f32.wgsl; matmul.wgsl): a block's 32 signed
// values per row and its d (and a minimum of 0, for `q8_dots`); the dot products as
// matvec_q8_0.wgsl's `block_dot` gives them (d·dx·Σq·qx).

const READS_Q8: bool = true;

// Staging row r's block `block`: thread `part` (0 or 1) of the row takes 16 values.
fn stage_weights(block: u32, r: u32, part: u32) {
    let base = block * 9u;
    for (var i = 0u; i < 4u; i++) {
        let q = bitcast<i32>(w[base + 1u + 4u * part + i]);
        for (var k = 0u; k < 4u; k++) {
            w_tile[(16u * part + 4u * i + k) * BM + r] = f32(extractBits(q, 8u * k, 8u));
        }
    }
    if (part == 0u) {
        w_meta[r] = vec2<f32>(unpack2x16float(w[base]).x, 0.0);
    }
}

fn sub_dots(ty: u32, tx: u32) -> array<f32, 16> {
    return q8_dots(ty, tx);
}
