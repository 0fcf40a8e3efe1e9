// The 4- and 5-bit 32-value blocks on the tiled product (after q4.wgsl or q5.wgsl,
// matmul_f32.wgsl; matmul.wgsl): a block's 32 values (q − Q_BIAS) per row and its (d, m);
// the dot products as matvec_q4_q5.wgsl's `block_dot` gives them.

const READS_Q8: bool = true;

// Staging row r's block `block`: thread `part` (0 or 1) of the row takes values
// 8·part .. 8·part + 8 and the same eight 16 on.
fn stage_weights(block: u32, r: u32, part: u32) {
    let base = block * BLOCK_WORDS;
    for (var i = 2u * part; i < 2u * part + 2u; i++) {
        for (var k = 0u; k < 4u; k++) {
            let j = 4u * i + k;
            let v = block_pair(base, i, k);
            w_tile[j * BM + r] = v.x;
            w_tile[(j + 16u) * BM + r] = v.y;
        }
    }
    if (part == 0u) {
        w_meta[r] = unpack2x16float(w[base]);
    }
}

fn sub_dots(ty: u32, tx: u32) -> array<f32, 16> {
    return q8_dots(ty, tx);
}
