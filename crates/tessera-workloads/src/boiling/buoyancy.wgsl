// WGSL twin of buoyancy.rs: centre, above and below of the diffusion output.
fn kernel_main(x: u32, y: u32) {
    let i = params.diffusion;
    let centre = at(i, x, y, 0, 0);
    let above = at(i, x, y, 0, 1);
    let below = at(i, x, y, 0, -1);
    store_f32(params.buoyancy, x, y, buoyancy_value(centre, above, below));
}
