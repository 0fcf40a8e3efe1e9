// Workgroup reductions over WG threads (prepended to the kernels that use them, after a
// header that declares `WG` and `partial: array<f32, WG>`: 64 threads;
// registry.rs writes it). Every thread of the workgroup must call
// them, in uniform control flow.

fn workgroup_sum(lid: u32, v: f32) -> f32 {
    partial[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            partial[lid] += partial[lid + s];
        }
        workgroupBarrier();
    }
    let total = partial[0];
    workgroupBarrier();
    return total;
}

fn workgroup_max(lid: u32, v: f32) -> f32 {
    partial[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            partial[lid] = max(partial[lid], partial[lid + s]);
        }
        workgroupBarrier();
    }
    let top = partial[0];
    workgroupBarrier();
    return top;
}
