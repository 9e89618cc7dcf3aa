// WGSL twin of display.rs: the field through the colour map into an RGBA8 image.
fn kernel_main(x: u32, y: u32) {
    let t = load_f32(p_field(), x, y);
    store_rgba8(p_display(), x, y, display_value(t));
}
