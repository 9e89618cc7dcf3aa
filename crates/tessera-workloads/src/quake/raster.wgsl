// WGSL twin of `Raster` in raster.rs, after tessera's prelude (load_u32, load_rgba8,
// store_rgba8; `params` is its `RasterParams`): the same walk over the tile's triangles, the
// same integer coverage test and fill rule, the same f32 planes in the same order, the same
// wrap and the same stores. Record layout and constants: setup.rs.
const TILE: u32 = 16u;
const SUB_BITS: u32 = 3u;
const HALF_SUB: i32 = 4;
const RECORD_WORDS: u32 = 32u;
const W_RECT: u32 = 0u;
const W_SIZE: u32 = 1u;
const W_VERTS: u32 = 2u;
const W_OWNS: u32 = 8u;
const W_ORIGIN: u32 = 9u;
const W_INV_W: u32 = 11u;
const W_U: u32 = 14u;
const W_V: u32 = 17u;
const BACKGROUND: u32 = 0xff000000u;
const NO_ACCESS: u32 = 0xffffffffu;
const COORD_LIMIT: f32 = 16777216.0;

// The words of one triangle record a pixel read, by word index (setup.rs). Every record word
// goes through this array from one `load_u32` call site per loop: a shader compiler inlines
// each call of the prelude's translation, and with the loads written out one by one a cold
// 64×48 `run quake --backend wgpu` took 55–58 s on lavapipe, compile included (6–7 s after;
// docs/WGPU.md). The loads keep raster.rs's order, so they fault at the same page.
var<private> g_tri: array<u32, 20>;

fn raster_plane(at: u32, dx: f32, dy: f32) -> f32 {
    let f0 = bitcast<f32>(g_tri[at]);
    let fx = bitcast<f32>(g_tri[at + 1u]);
    let fy = bitcast<f32>(g_tri[at + 2u]);
    return f0 + fx * dx + fy * dy;
}

// Whether the record in `g_tri` (vertices and owned edges read) covers the sample point
// (sx, sy): the integer edge functions with the fill rule (setup.rs).
fn raster_covers(sx: i32, sy: i32) -> bool {
    let owns = g_tri[W_OWNS];
    for (var e = 0u; e < 3u; e++) {
        let ax = bitcast<i32>(g_tri[W_VERTS + 2u * e]);
        let ay = bitcast<i32>(g_tri[W_VERTS + 2u * e + 1u]);
        let n = (e + 1u) % 3u;
        let bx = bitcast<i32>(g_tri[W_VERTS + 2u * n]);
        let by = bitcast<i32>(g_tri[W_VERTS + 2u * n + 1u]);
        let f = (bx - ax) * (sy - ay) - (by - ay) * (sx - ax);
        if !(f > 0 || (f == 0 && ((owns >> e) & 1u) == 1u)) {
            return false;
        }
    }
    return true;
}

fn raster_wrap(t: f32, size: u32) -> u32 {
    let i = i32(clamp(floor(t), -COORD_LIMIT, COORD_LIMIT));
    let n = i32(max(size, 1u));
    return u32(((i % n) + n) % n);
}

// Levels coarser than wanted the pixel's degrading sample was served (raster.rs,
// `Raster::degrade`).
var<private> g_coarser: u32;

// The filtered sample (raster.rs, `Raster::filter`): `params.filter_code` is the filter code + 1,
// `params.degrade` the degrade map's id + 1 (0: a miss faults).
fn raster_filtered(atlas: u32, best: f32, dx: f32, dy: f32, uw: f32, vw: f32, rect: u32, size: u32) -> u32 {
    let u0 = uw / best;
    let v0 = vw / best;
    let iwx = raster_plane(W_INV_W, dx + 1.0, dy);
    let ux = raster_plane(W_U, dx + 1.0, dy) / iwx;
    let vx = raster_plane(W_V, dx + 1.0, dy) / iwx;
    let iwy = raster_plane(W_INV_W, dx, dy + 1.0);
    let uy = raster_plane(W_U, dx, dy + 1.0) / iwy;
    let vy = raster_plane(W_V, dx, dy + 1.0) / iwy;
    let ax = ux - u0;
    let ay = vx - v0;
    let bx = uy - u0;
    let by = vy - v0;
    let rho2 = max(ax * ax + ay * ay, bx * bx + by * by);
    let lod_raw = f32((bitcast<i32>(rho2) - 0x3f800000) >> 16u) / 256.0;
    let cap = countTrailingZeros((rect & 0xffffu) | (rect >> 16u) | (size & 0xffffu) | (size >> 16u));
    let lod = min(lod_raw, f32(cap));
    let w = size & 0xffffu;
    let h = size >> 16u;
    let win = vec4<u32>(rect & 0xffffu, rect >> 16u, w, h);
    if params.degrade != 0u {
        let cs = sample_rgba8_window_degraded(atlas, params.filter_code - 1u, 0u, win, u0 / f32(w), v0 / f32(h), lod);
        g_coarser = cs.y;
        return cs.x;
    }
    return sample_rgba8_window(atlas, params.filter_code - 1u, 0u, win, u0 / f32(w), v0 / f32(h), lod);
}

fn kernel_main(x: u32, y: u32) {
    let atlas = params.atlas;
    let tris = params.tris;
    let bins = params.bins;
    let tiles_x = params.tiles_x;
    let tile = (y / TILE) * tiles_x + x / TILE;
    let first = load_u32(bins, 2u * tile);
    let count = load_u32(bins, 2u * tile + 1u);
    let sx = (i32(x) << SUB_BITS) + HALF_SUB;
    let sy = (i32(y) << SUB_BITS) + HALF_SUB;
    let cx = f32(x) + 0.5;
    let cy = f32(y) + 0.5;
    var best = 0.0;
    var winner = 0u;
    for (var i = 0u; i < count; i++) {
        let t = load_u32(bins, first + i);
        let base = t * RECORD_WORDS;
        // Size, vertices and owned edges, then origin and 1/w once the pixel is inside.
        var covered = true;
        for (var k = W_SIZE; k < W_INV_W + 3u; k++) {
            g_tri[k] = load_u32(tris, base + k);
            if k == W_SIZE && g_tri[k] == 0u {
                covered = false;
                break;
            }
            if k == W_OWNS && !raster_covers(sx, sy) {
                covered = false;
                break;
            }
        }
        if !covered {
            continue;
        }
        let ox = bitcast<f32>(g_tri[W_ORIGIN]);
        let oy = bitcast<f32>(g_tri[W_ORIGIN + 1u]);
        let iw = raster_plane(W_INV_W, cx - ox, cy - oy);
        if iw > best {
            best = iw;
            winner = t;
        }
    }
    var c = BACKGROUND;
    var sampled = NO_ACCESS;
    g_coarser = 0u;
    if winner != 0u {
        // Rectangle and size, origin, 1/w (filtered only: the derivatives' planes), u and v.
        let base = winner * RECORD_WORDS;
        for (var k = W_RECT; k < W_V + 3u; k++) {
            let unread = (k >= W_VERTS && k < W_ORIGIN) || (k >= W_INV_W && k < W_U && params.filter_code == 0u);
            if !unread {
                g_tri[k] = load_u32(tris, base + k);
            }
        }
        let rect = g_tri[W_RECT];
        let size = g_tri[W_SIZE];
        let dx = cx - bitcast<f32>(g_tri[W_ORIGIN]);
        let dy = cy - bitcast<f32>(g_tri[W_ORIGIN + 1u]);
        let uw = raster_plane(W_U, dx, dy);
        let vw = raster_plane(W_V, dx, dy);
        let tx = (rect & 0xffffu) + raster_wrap(uw / best, size & 0xffffu);
        let ty = (rect >> 16u) + raster_wrap(vw / best, size >> 16u);
        if params.filter_code == 0u {
            c = load_rgba8(atlas, tx, ty);
        } else {
            c = raster_filtered(atlas, best, dx, dy, uw, vw, rect, size);
        }
        sampled = tx | (ty << 16u);
    }
    store_rgba8(params.frame, x, y, c);
    store_rgba8(params.access, x, y, sampled);
    if params.filter_code != 0u && params.degrade != 0u {
        store_rgba8(params.degrade - 1u, x, y, g_coarser);
    }
}
