// WGSL twin of latent_heat.rs: the 3×3 of the border output and the 5-point stencil of the
// buoyancy output; writes the next frame's input.
fn kernel_main(x: u32, y: u32) {
    var input: array<f32, 9>;
    for (var i = 0u; i < 9u; i++) {
        input[i] = at(params.border, x, y, i32(i % 3u) - 1, i32(i / 3u) - 1);
    }
    let b = five_point(params.buoyancy, x, y);
    store_f32(params.field, x, y, latent_heat_value(input, b[0], b[1], b[2], b[3], b[4]));
}
