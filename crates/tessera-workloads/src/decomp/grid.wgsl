// Shared by the halo workloads' WGSL twins (decomp/mod.rs): boxes of cells on a tall texture.
// A box is an origin and an extent, each three parameter fields (`ox, oy, oz`, `ex, ey, ez`).

// The box-local cell of invocation (u, v): order 0 is v = z * ny + y, 1 is v = y * nz + z.
fn unlaunch(e: vec3<u32>, order: u32, u: u32, v: u32) -> vec3<u32> {
    if order == 1u {
        return vec3<u32>(u, v / e.z, v % e.z);
    }
    return vec3<u32>(u, v % e.y, v / e.y);
}

// Texel of box-local cell l.
fn cell_texel(e: vec3<u32>, l: vec3<u32>) -> vec2<u32> {
    return vec2<u32>(l.x, l.z * e.y + l.y);
}

// Word of box-local cell l in a dense buffer of the box's cells.
fn cell_word(e: vec3<u32>, l: vec3<u32>) -> u32 {
    return (l.z * e.y + l.y) * e.x + l.x;
}
