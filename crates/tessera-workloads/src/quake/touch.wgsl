// WGSL twin of `Touch` in replay.rs: reads one texel of the atlas at the invocation's own
// coordinates (the replay's domain lists one texel per page to touch). The load's request bit
// is the whole point; its value is unused.
fn kernel_main(x: u32, y: u32) {
    let c = load_rgba8(params.atlas, x, y);
}
