// f32 weights on the tiled product (after matmul_f32.wgsl; matmul.wgsl): a sub-block's 32
// values per row; the dot products as matvec_f32.wgsl's `block_dot` sums them (in order,
// as `fma`). No multipliers.

const READS_Q8: bool = false;

// Staging row r's sub-block `block`: thread `part` (0 or 1) of the row takes 16 values.
fn stage_weights(block: u32, r: u32, part: u32) {
    for (var k = 16u * part; k < 16u * part + 16u; k++) {
        w_tile[k * BM + r] = bitcast<f32>(w[32u * block + k]);
    }
}

fn sub_dots(ty: u32, tx: u32) -> array<f32, 16> {
    return tile_sums(0u, 32u, ty, tx);
}
