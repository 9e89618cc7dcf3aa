// WGSL twin of latent_heat.rs: the 3×3 of the border output and the 5-point stencil of the
// buoyancy output; writes the next frame's input.
fn kernel_main(x: u32, y: u32) {
    var input: array<f32, 9>;
    for (var i = 0u; i < 9u; i++) {
        input[i] = at(params.border, x, y, i32(i % 3u) - 1, i32(i / 3u) - 1);
    }
    let b = params.buoyancy;
    let b_c = at(b, x, y, 0, 0);
    let b_n = at(b, x, y, 0, 1);
    let b_s = at(b, x, y, 0, -1);
    let b_e = at(b, x, y, 1, 0);
    let b_w = at(b, x, y, -1, 0);
    store_f32(params.field, x, y, latent_heat_value(input, b_c, b_n, b_s, b_e, b_w));
}
