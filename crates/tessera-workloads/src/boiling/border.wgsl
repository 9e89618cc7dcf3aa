// WGSL twin of border.rs: heat source along the bottom row, cold top row.
fn kernel_main(x: u32, y: u32) {
    let centre = load_f32(params.field, x, y);
    store_f32(params.border, x, y, border_value(x, y, params.height, centre));
}
