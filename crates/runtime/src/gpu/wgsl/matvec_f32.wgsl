// f32 "blocks" of one value for matvec.wgsl (the words are the floats' bits).

const BLOCK_VALUES: u32 = 1u;

fn block_dot(block: u32, xo: u32) -> f32 {
    return bitcast<f32>(w[block]) * x[xo];
}
