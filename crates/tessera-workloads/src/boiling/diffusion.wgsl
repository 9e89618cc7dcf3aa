// WGSL twin of diffusion.rs: centre and 4 neighbours of the border output.
fn kernel_main(x: u32, y: u32) {
    let c = five_point(params.border, x, y);
    store_f32(params.diffusion, x, y, diffusion_value(c[0], c[1], c[2], c[3], c[4]));
}
