// The two copies of activations that matrix kernels read instead of f32, one block of 32
// values at a time (after f16.wgsl): 8-bit (`q8_block`, what the Q4_0 to Q8_0 kernels
// read, as the CPU backend and llama.cpp quantize them) and scaled f16 (`f16_block`, what
// the K-quants' kernels read on the f16 path). One function each, so the kernels that make
// copies (quantize_q8.wgsl, activations_f16.wgsl, and the fused ones that write a copy
// beside their own output: rms_norm.wgsl, the attention kernels) make the same bits.

// A block quantized to 8 bits: d = amax / 127, q = round-half-even(x · 127 / amax), d at
// f16 precision, and s = d · Σq (Q4_1's minimum term) likewise.
struct Q8Block {
    q: array<f32, 32>,
    d: f32,
    s: f32,
}

fn q8_block(values: array<f32, 32>) -> Q8Block {
    var vals = values;
    var amax = 0.0;
    for (var j = 0u; j < 32u; j++) {
        amax = max(amax, abs(vals[j]));
    }
    let d = amax / 127.0;
    var id = 0.0;
    if (amax != 0.0) {
        id = 127.0 / amax;
    }
    var block: Q8Block;
    var sum = 0.0;
    for (var j = 0u; j < 32u; j++) {
        let r = round(vals[j] * id);
        block.q[j] = r;
        sum += r;
    }
    block.d = f16_round(d);
    block.s = f16_round(d * sum);
    return block;
}

// A block scaled by 2^-e, 2^e just above its largest magnitude (so every value lies in
// (-1, 1) and no product with a K-quant's small integers overflows f16), as f16 pairs, and
// its exponent e as an f16 (the high half zero). ldexp per value, not a factor 2^-e (which
// overflows for a block of subnormals); e = 0 for a block of zeros.
struct F16Block {
    words: array<u32, 16>,
    exponent: u32,
}

fn f16_block(values: array<f32, 32>) -> F16Block {
    var vals = values;
    var amax = 0.0;
    for (var j = 0u; j < 32u; j++) {
        amax = max(amax, abs(vals[j]));
    }
    let e = frexp(amax).exp;
    var block: F16Block;
    for (var j = 0u; j < 16u; j++) {
        block.words[j] = pack_f16(ldexp(vals[2u * j], -e), ldexp(vals[2u * j + 1u], -e));
    }
    block.exponent = pack_f16(f32(e), 0.0);
    return block;
}
