// WGSL twin of stencil.rs; `params` is its `StencilParams`.

fn st_origin() -> vec3<u32> {
    return vec3<u32>(params.ox, params.oy, params.oz);
}

fn st_extent() -> vec3<u32> {
    return vec3<u32>(params.ex, params.ey, params.ez);
}

fn st_at(g: vec3<i32>) -> f32 {
    let dims = vec3<i32>(i32(params.nx), i32(params.ny), i32(params.nz));
    if any(g < vec3<i32>(0)) || any(g >= dims) {
        return 0.0;
    }
    let l = vec3<u32>(g) - st_origin();
    let t = cell_texel(st_extent(), l);
    return load_f32(params.input, t.x, t.y);
}

fn kernel_main(u: u32, v: u32) {
    let e = st_extent();
    let l = unlaunch(e, params.order, u, v);
    let g = vec3<i32>(st_origin() + l);
    let w0 = params.w0;
    let wx = params.wx;
    let wy = params.wy;
    let wz = params.wz;
    var c = w0 * st_at(g);
    let r = i32(params.radius);
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
    store_f32(params.output, t.x, t.y, c);
}
