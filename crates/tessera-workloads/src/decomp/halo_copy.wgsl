// WGSL twin of halo_copy.rs: copy the region's cells from the source side to the destination
// side. Params: source (id, is-buffer, box), destination (id, is-buffer, box), region box.

fn side_load(at: u32, g: vec3<u32>) -> u32 {
    let id = param(at);
    let l = g - box_origin(at + 2u);
    let e = box_extent(at + 2u);
    if param(at + 1u) == 1u {
        return load_u32(id, cell_word(e, l));
    }
    let t = cell_texel(e, l);
    return bitcast<u32>(load_f32(id, t.x, t.y));
}

fn side_store(at: u32, g: vec3<u32>, w: u32) {
    let id = param(at);
    let l = g - box_origin(at + 2u);
    let e = box_extent(at + 2u);
    if param(at + 1u) == 1u {
        store_u32(id, cell_word(e, l), w);
        return;
    }
    let t = cell_texel(e, l);
    store_f32(id, t.x, t.y, bitcast<f32>(w));
}

fn kernel_main(u: u32, v: u32) {
    let e = box_extent(16u);
    let g = box_origin(16u) + unlaunch(e, 0u, u, v);
    let w = side_load(0u, g);
    side_store(8u, g, w);
}
