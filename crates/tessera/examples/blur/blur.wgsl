// WGSL twin of `Blur` in main.rs, after tessera's prelude (load_f32, store_f32, and `params`,
// the `Blur` struct itself): the same sums in the same order, so that both backends round
// alike.
fn kernel_main(x: u32, y: u32) {
    let last = vec2<i32>(i32(params.width) - 1, i32(params.height) - 1);
    var sum = 0.0;
    for (var dy = -1; dy <= 1; dy++) {
        for (var dx = -1; dx <= 1; dx++) {
            let c = clamp(vec2<i32>(i32(x) + dx, i32(y) + dy), vec2<i32>(0), last);
            sum += load_f32(params.src, u32(c.x), u32(c.y));
        }
    }
    store_f32(params.dst, x, y, sum * (1.0 / 9.0));
}
