// WGSL twin of diffusion.rs: centre and 4 neighbours of the border output.
fn kernel_main(x: u32, y: u32) {
    let i = params.border;
    let centre = at(i, x, y, 0, 0);
    let n = at(i, x, y, 0, 1);
    let s = at(i, x, y, 0, -1);
    let e = at(i, x, y, 1, 0);
    let w = at(i, x, y, -1, 0);
    store_f32(params.diffusion, x, y, diffusion_value(centre, n, s, e, w));
}
