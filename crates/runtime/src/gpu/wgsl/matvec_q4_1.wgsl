// Q4_1 blocks for matvec.wgsl. A block (20 bytes, 5 words) holds 32 values: word 0 = d
// (f16, low half) and m (f16, high half); words 1..5 = 16 bytes whose low nibbles are
// values 0..16 and high nibbles values 16..32. value = d·q + m, so a block's dot product
// is d·Σq·x + m·Σx.

const BLOCK_VALUES: u32 = 32u;

fn block_dot(block: u32, xo: u32) -> f32 {
    let base = block * 5u;
    let dm = unpack2x16float(w[base]);
    var sqx = 0.0;
    var sx = 0.0;
    for (var i = 0u; i < 4u; i++) {
        let q = w[base + 1u + i];
        for (var k = 0u; k < 4u; k++) {
            let j = i * 4u + k;
            let byte = (q >> (8u * k)) & 0xFFu;
            let x0 = x[xo + j];
            let x1 = x[xo + j + 16u];
            sqx += f32(byte & 0xFu) * x0 + f32(byte >> 4u) * x1;
            sx += x0 + x1;
        }
    }
    return dm.x * sqx + dm.y * sx;
}
