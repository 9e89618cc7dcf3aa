// WGSL twin of convolution.rs; `params` is its `ConvolutionParams`.

fn kernel_main(u: u32, v: u32) {
    let e = vec3<u32>(params.ex, params.ey, params.ez);
    let o = vec3<u32>(params.ox, params.oy, params.oz);
    let l = unlaunch(e, params.order, u, v);
    let gx = i32(o.x + l.x);
    let gy = i32(o.y + l.y);
    let f = params.size;
    let r = i32(f / 2u);
    let nx = i32(params.nx);
    let ny = i32(params.ny);
    var sum = 0.0;
    for (var j = 0u; j < f; j++) {
        let y = u32(clamp(gy + i32(j) - r, 0, ny - 1)) - o.y;
        for (var i = 0u; i < f; i++) {
            let x = u32(clamp(gx + i32(i) - r, 0, nx - 1)) - o.x;
            let w = bitcast<f32>(load_u32(params.weights, j * f + i));
            let t = cell_texel(e, vec3<u32>(x, y, 0u));
            sum = sum + w * load_f32(params.input, t.x, t.y);
        }
    }
    let t = cell_texel(e, l);
    store_f32(params.output, t.x, t.y, sum);
}
