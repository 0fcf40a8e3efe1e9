// What the two attention kernels (attention.wgsl for software adapters, attention_wide.wgsl
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
}

@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> k: array<u32>;
@group(0) @binding(2) var<storage, read> v: array<u32>;
@group(0) @binding(3) var<storage, read_write> scores: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;
