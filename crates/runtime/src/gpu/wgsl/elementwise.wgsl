// Element-wise kernels over two vectors: `a[i] = op(a[i], b[i % b_len])` for i < n (b
// repeats: a bias added to every token's row), 64 elements a workgroup, workgroups past
// 65535 continuing along y. The operation's file, prepended, defines `op`.

struct Params {
    n: u32,
    b_len: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read_write> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * 65535u * 64u;
    if (i >= p.n) {
        return;
    }
    a[i] = op(a[i], b[i % p.b_len]);
}
