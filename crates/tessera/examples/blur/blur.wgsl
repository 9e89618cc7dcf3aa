// WGSL twin of `Blur` in main.rs, after tessera's prelude (load_f32, store_f32, param): the
// same sums in the same order, so that both backends round alike.
fn kernel_main(x: u32, y: u32) {
    let src = param(0u);
    let dst = param(1u);
    let last = vec2<i32>(i32(param(2u)) - 1, i32(param(3u)) - 1);
    var sum = 0.0;
    for (var dy = -1; dy <= 1; dy++) {
        for (var dx = -1; dx <= 1; dx++) {
            let c = clamp(vec2<i32>(i32(x) + dx, i32(y) + dy), vec2<i32>(0), last);
            sum += load_f32(src, u32(c.x), u32(c.y));
        }
    }
    store_f32(dst, x, y, sum * (1.0 / 9.0));
}
