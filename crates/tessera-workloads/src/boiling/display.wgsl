// WGSL twin of display.rs: the field through the colour map into an RGBA8 image.
fn kernel_main(x: u32, y: u32) {
    let t = load_f32(params.field, x, y);
    store_rgba8(params.display, x, y, display_value(t));
}
