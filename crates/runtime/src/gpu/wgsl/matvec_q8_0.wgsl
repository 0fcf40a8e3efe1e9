// Q8_0 blocks for matvec.wgsl, re-laid at upload from 34 bytes to 36 (9 words): word 0 =
// d (f16, low half), words 1..9 = 32 signed bytes. value = d·q.

const BLOCK_VALUES: u32 = 32u;

fn block_dot(block: u32, xo: u32) -> f32 {
    let base = block * 9u;
    let d = unpack2x16float(w[base]).x;
    var s = 0.0;
    for (var i = 0u; i < 8u; i++) {
        let q = bitcast<i32>(w[base + 1u + i]);
        for (var k = 0u; k < 4u; k++) {
            s += f32(extractBits(q, 8u * k, 8u)) * x[xo + i * 4u + k];
        }
    }
    return d * s;
}
