// Writing the copies a fused kernel makes beside its f32 output (after f16.wgsl and
// blocks.wgsl, in a kernel that declares `copy_q8: array<f32>` and `copy_f16: array<u32>`,
// read_write). The layouts are quantize_q8.wgsl's and activations_f16.wgsl's: for an
// operand of n values, the 8-bit copy holds the q values at [0, n) and block b's (d, s) at
// n + 2b; the f16 copy holds the scaled values' f16 pairs at words [0, n / 2) and block b's
// exponent at word n / 2 + b.

const COPY_Q8: u32 = 1u;
const COPY_F16: u32 = 2u;

// Block b of an operand of n values (its values `vals`) into the copies `forms` names.
fn write_copies(forms: u32, n: u32, b: u32, vals: array<f32, 32>) {
    if ((forms & COPY_Q8) != 0u) {
        let q8 = q8_block(vals);
        for (var j = 0u; j < 32u; j++) {
            copy_q8[32u * b + j] = q8.q[j];
        }
        copy_q8[n + 2u * b] = q8.d;
        copy_q8[n + 2u * b + 1u] = q8.s;
    }
    if ((forms & COPY_F16) != 0u) {
        let h16 = f16_block(vals);
        for (var j = 0u; j < 16u; j++) {
            copy_f16[16u * b + j] = h16.words[j];
        }
        copy_f16[n / 2u + b] = h16.exponent;
    }
}
