// WGSL twin of convolution.rs. Params: 0 input, 1 output, 2 filter buffer, 3..4 image size,
// 5..10 the objects' box, 11 launch order, 12 filter side F.

fn kernel_main(u: u32, v: u32) {
    let e = box_extent(5u);
    let o = box_origin(5u);
    let l = unlaunch(e, param(11u), u, v);
    let gx = i32(o.x + l.x);
    let gy = i32(o.y + l.y);
    let f = param(12u);
    let r = i32(f / 2u);
    let nx = i32(param(3u));
    let ny = i32(param(4u));
    var sum = 0.0;
    for (var j = 0u; j < f; j++) {
        let y = u32(clamp(gy + i32(j) - r, 0, ny - 1)) - o.y;
        for (var i = 0u; i < f; i++) {
            let x = u32(clamp(gx + i32(i) - r, 0, nx - 1)) - o.x;
            let w = bitcast<f32>(load_u32(param(2u), j * f + i));
            let t = cell_texel(e, vec3<u32>(x, y, 0u));
            sum = sum + w * load_f32(param(0u), t.x, t.y);
        }
    }
    let t = cell_texel(e, l);
    store_f32(param(1u), t.x, t.y, sum);
}
