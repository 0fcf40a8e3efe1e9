// y[t, first_row + r] = W[r] · x[t] for one part of a matrix and many tokens (a prompt),
// as a tiled matrix product: each workgroup takes BM rows × BN tokens, and for each
// 32-value sub-block along the rows stages the rows' values (decoded once, as small
// integers, with their multipliers) and the tokens' activations in workgroup memory; each
// of its 128 threads then multiplies 4 rows by 4 tokens from there, in registers. A
// block is read from memory once per BN tokens and decoded once per workgroup, where
// matvec.wgsl decodes it for every token.
//
// After product_io.wgsl, the path's piece (matmul_f32.wgsl, or matvec_f16.wgsl then
// matmul_f16.wgsl: `stage_inputs`, `x_tile`) and a format's block file and tiled piece
// (`stage_weights`, `sub_dots`: the arithmetic of its `block_dot`, on the tiles). Each
// (row, token) is summed in the order product_io.wgsl fixes, so the rows a prompt gets
// here are the rows matvec.wgsl gives its tokens one at a time. A pair of formats is
// dispatched one format at a time (kernels.rs).

const BM: u32 = 64u;
const BN: u32 = 32u;

// The staged rows' multipliers (two a sub-block; what they are is the format's). The
// values are in `w_tile`, declared by the path's piece.
var<workgroup> w_meta: array<vec2<f32>, BM>;

// Staging row `r` (0..BM) of row tile `tile`: a row of this part; with MODE_GLU, rows
// 0..BM/2 are gate rows and BM/2..BM their up rows.
fn tile_row(tile: u32, r: u32) -> u32 {
    if (p.mode == MODE_GLU) {
        return tile * (BM / 2u) + r % (BM / 2u) + (r / (BM / 2u)) * p.half;
    }
    return tile * BM + r;
}

// The output row that staging row `r` counts for (a gate row's, with MODE_GLU).
fn out_row(tile: u32, r: u32) -> u32 {
    if (p.mode == MODE_GLU) {
        return tile * (BM / 2u) + r % (BM / 2u);
    }
    return tile * BM + r;
}

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let tile = wg.x + wg.y * p.row_groups;
    let t0 = wg.z * BN;
    let lane = lid.x;
    // Thread (ty, tx) multiplies rows ty + 16i by tokens tx + 8j (i, j < 4).
    let ty = lane / 8u;
    let tx = lane % 8u;
    // Two threads stage each row.
    let r = lane / 2u;
    // A row past the part's last stages the first row again (never stored).
    let first = select(p.first_block, row_start(tile_row(tile, r)), out_row(tile, r) < p.rows);
    var acc: array<f32, 16>;
    var group: array<f32, 16>;
    for (var b = 0u; b < p.blocks; b++) {
        stage_weights(first + b, r, lane % 2u);
        stage_inputs(b, t0, lane);
        workgroupBarrier();
        let d = sub_dots(ty, tx);
        for (var i = 0u; i < 16u; i++) {
            group[i] += rounded(d[i]);
        }
        if (b % 8u == 7u || b + 1u == p.blocks) {
            for (var i = 0u; i < 16u; i++) {
                acc[i] += group[i];
                group[i] = 0.0;
            }
        }
        workgroupBarrier();
    }
    for (var j = 0u; j < 4u; j++) {
        let t = t0 + tx + 8u * j;
        if (t >= p.tokens) {
            continue;
        }
        if (p.mode == MODE_GLU) {
            // Rows ty and ty + 16 are gate rows; ty + 32 and ty + 48 their up rows.
            for (var i = 0u; i < 2u; i++) {
                let row = out_row(tile, ty + 16u * i);
                if (row < p.rows) {
                    store(t, row, acc[4u * i + j], acc[4u * (i + 2u) + j]);
                }
            }
        } else {
            for (var i = 0u; i < 4u; i++) {
                let row = out_row(tile, ty + 16u * i);
                if (row < p.rows) {
                    store(t, row, acc[4u * i + j], 0.0);
                }
            }
        }
    }
}
