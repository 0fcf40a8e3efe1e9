// What the attention kernels (attention.wgsl for software adapters, attention_split.wgsl
// for GPUs) take: the same parameters and buffers, so either runs behind one call.

struct Params {
    head_dim: u32,
    heads: u32,
    kv_heads: u32,
    tokens: u32,
    n_past: u32,
    ctx: u32,       // scratch row length (at least n_past + tokens)
    scale: f32,
    first_row: u32, // the batch row of token 0 (queries and output)
    forms: u32,     // COPY_Q8 | COPY_F16 (copies.wgsl), or 0
    n_total: u32,   // values in the whole output (the copies' layout)
    chunk: u32,     // split attention: positions a workgroup takes
    chunks: u32,    // split attention: workgroups a (head, token) takes
    window: u32,    // positions a token sees, its own included (sliding window), or 0: all
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

// The first cache position a token that sees `n` positions attends to: 0, or the start of
// its sliding window (earlier positions weigh nothing, as llama.cpp's mask makes them).
fn first_attended(n: u32) -> u32 {
    if (p.window > 0u && n > p.window) {
        return n - p.window;
    }
    return 0u;
}

@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> k: array<u32>;
@group(0) @binding(2) var<storage, read> v: array<u32>;
@group(0) @binding(3) var<storage, read_write> scores: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<storage, read_write> copy_q8: array<f32>;
@group(0) @binding(6) var<storage, read_write> copy_f16: array<u32>;
@group(0) @binding(7) var<uniform> p: Params;

// The copies of the head output at `qo` (written by this workgroup) that `forms` asks for:
// thread b takes block b of the head (head_dim a multiple of 32 when forms ≠ 0; the host
// checks). Every thread calls it (a barrier is inside).
fn head_copies(lid: u32, qo: u32) {
    if (p.forms == 0u) {
        return;
    }
    storageBarrier();
    for (var b = lid; b < p.head_dim / 32u; b += WG) {
        var vals: array<f32, 32>;
        for (var j = 0u; j < 32u; j++) {
            vals[j] = out[qo + 32u * b + j];
        }
        write_copies(p.forms, p.n_total, qo / 32u + b, vals);
    }
}

// The query of the head whose first value is q[qo], rounded to f16 as the CPU backend
// rounds it for the f16 cache's products, into workgroup memory (attention_split.wgsl);
// every thread calls it (a barrier is inside).
var<workgroup> query: array<vec2<f32>, 256>;

fn load_query(lid: u32, qo: u32, pairs: u32) {
    for (var i = lid; i < pairs; i += WG) {
        query[i] = vec2<f32>(f16_round(q[qo + 2u * i]), f16_round(q[qo + 2u * i + 1u]));
    }
    workgroupBarrier();
}
