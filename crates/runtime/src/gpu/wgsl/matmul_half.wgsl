// 16-bit float weights (f16 or bf16) on the tiled product (after the format's
// `weight_pair`, matmul_f32.wgsl; matmul.wgsl): a sub-block's 32 values per row as f32;
// the dot products as matvec_half.wgsl's `block_dot` sums them. No multipliers.

const READS_Q8: bool = false;

// Staging row r's sub-block `block`: thread `part` (0 or 1) of the row takes 16 values.
fn stage_weights(block: u32, r: u32, part: u32) {
    for (var k = 0u; k < 8u; k++) {
        let v = weight_pair(w[16u * block + 8u * part + k]);
        let j = 16u * part + 2u * k;
        w_tile[j * BM + r] = v.x;
        w_tile[(j + 1u) * BM + r] = v.y;
    }
}

fn sub_dots(ty: u32, tx: u32) -> array<f32, 16> {
    return tile_sums(0u, 32u, ty, tx);
}
