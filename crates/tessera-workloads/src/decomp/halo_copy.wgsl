// WGSL twin of halo_copy.rs: copy the region's cells from the source side to the destination
// side; `params` is its `HaloCopyParams`. A side is an object, whether it is a buffer, and the
// box it holds (origin o, extent e).

fn side_load(id: u32, buffer: u32, o: vec3<u32>, e: vec3<u32>, g: vec3<u32>) -> u32 {
    let l = g - o;
    if buffer == 1u {
        return load_u32(id, cell_word(e, l));
    }
    let t = cell_texel(e, l);
    return bitcast<u32>(load_f32(id, t.x, t.y));
}

fn side_store(id: u32, buffer: u32, o: vec3<u32>, e: vec3<u32>, g: vec3<u32>, w: u32) {
    let l = g - o;
    if buffer == 1u {
        store_u32(id, cell_word(e, l), w);
        return;
    }
    let t = cell_texel(e, l);
    store_f32(id, t.x, t.y, bitcast<f32>(w));
}

fn kernel_main(u: u32, v: u32) {
    let e = vec3<u32>(params.ex, params.ey, params.ez);
    let g = vec3<u32>(params.ox, params.oy, params.oz) + unlaunch(e, 0u, u, v);
    let w = side_load(
        params.src,
        params.src_buffer,
        vec3<u32>(params.src_ox, params.src_oy, params.src_oz),
        vec3<u32>(params.src_ex, params.src_ey, params.src_ez),
        g,
    );
    side_store(
        params.dst,
        params.dst_buffer,
        vec3<u32>(params.dst_ox, params.dst_oy, params.dst_oz),
        vec3<u32>(params.dst_ex, params.dst_ey, params.dst_ez),
        g,
        w,
    );
}
