// Q4_0 and Q4_1 on the tiled product (after the format's `Q_BIAS`, matmul_f32.wgsl;
// matmul.wgsl): a block's 32 values (q − Q_BIAS) per row and its (d, m); the dot products
// as matvec_q4.wgsl's `block_dot` gives them (d·dx·Σq·qx + m·s).

const READS_Q8: bool = true;

// Staging row r's block `block`: thread `part` (0 or 1) of the row takes bytes
// 8·part .. 8·part + 8, each a value j (low nibble) and j + 16 (high).
fn stage_weights(block: u32, r: u32, part: u32) {
    let base = block * 5u;
    for (var i = 0u; i < 2u; i++) {
        let q = w[base + 1u + 2u * part + i];
        for (var k = 0u; k < 4u; k++) {
            let j = 8u * part + 4u * i + k;
            let byte = (q >> (8u * k)) & 0xFFu;
            w_tile[j * BM + r] = f32(i32(byte & 0xFu) - Q_BIAS);
            w_tile[(j + 16u) * BM + r] = f32(i32(byte >> 4u) - Q_BIAS);
        }
    }
    if (part == 0u) {
        w_meta[r] = unpack2x16float(w[base]);
    }
}

fn sub_dots(ty: u32, tx: u32) -> array<f32, 16> {
    return q8_dots(ty, tx);
}
