// The f16 path's pieces for matvec.wgsl (after `enable f16;`, before a block format's
// `block_dot`): the activations are f16 in fours (activations_f16.wgsl's scaled values,
// then each 32-value block's exponent), and helpers the formats share.

alias XWord = vec4<f16>;

// The four bytes of `word`, low first, as f16 (exact: integers up to 255).
fn bytes_f16(word: u32) -> vec4<f16> {
    return vec4<f16>(vec4<u32>(word & 0xFFu, (word >> 8u) & 0xFFu, (word >> 16u) & 0xFFu, word >> 24u));
}

// Activations xo .. xo + 4 (xo a multiple of 4), scaled into (-1, 1).
fn x4_f16(xo: u32) -> vec4<f16> {
    return x[xo / 4u];
}

// What the 32-value block holding activation `xo` was scaled by, undone: 2^e. Its
// exponent is half 2·scales_at + 2·block (`p.scales_at` counts words).
fn x_scale(xo: u32) -> f32 {
    let half = 2u * p.scales_at + 2u * (xo / 32u);
    return ldexp(1.0, i32(x[half / 4u][half % 4u]));
}
