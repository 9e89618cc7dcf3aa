// WGSL twin of stencil.rs. Params: 0 input, 1 output, 2..4 grid size, 5..10 the objects' box,
// 11 launch order, 12 radius, 13..16 weights (centre, x, y, z) as f32 bits.

fn st_at(g: vec3<i32>) -> f32 {
    let dims = vec3<i32>(i32(param(2u)), i32(param(3u)), i32(param(4u)));
    if any(g < vec3<i32>(0)) || any(g >= dims) {
        return 0.0;
    }
    let l = vec3<u32>(g) - box_origin(5u);
    let t = cell_texel(box_extent(5u), l);
    return load_f32(param(0u), t.x, t.y);
}

fn kernel_main(u: u32, v: u32) {
    let e = box_extent(5u);
    let l = unlaunch(e, param(11u), u, v);
    let g = vec3<i32>(box_origin(5u) + l);
    let w0 = bitcast<f32>(param(13u));
    let wx = bitcast<f32>(param(14u));
    let wy = bitcast<f32>(param(15u));
    let wz = bitcast<f32>(param(16u));
    var c = w0 * st_at(g);
    let r = i32(param(12u));
    for (var s = 1; s <= r; s++) {
        let xl = st_at(g - vec3<i32>(s, 0, 0));
        let xr = st_at(g + vec3<i32>(s, 0, 0));
        let yl = st_at(g - vec3<i32>(0, s, 0));
        let yr = st_at(g + vec3<i32>(0, s, 0));
        let zl = st_at(g - vec3<i32>(0, 0, s));
        let zr = st_at(g + vec3<i32>(0, 0, s));
        c = c + ((wx * (xl + xr) + wy * (yl + yr)) + wz * (zl + zr));
    }
    let t = cell_texel(e, l);
    store_f32(param(1u), t.x, t.y, c);
}
