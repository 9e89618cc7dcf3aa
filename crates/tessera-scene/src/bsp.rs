//! Quake 3 BSP version 46 (`IBSP`): a checked parser and a writer.
//!
//! Layout (all little-endian): the magic `IBSP`, the version (46), then a directory of 17
//! lumps, each an `(offset, length)` pair of 32-bit integers. The parser reads the lumps a
//! scene needs: entities (text), textures (64-byte shader name, surface flags, content flags;
//! 72 bytes), vertices (position, surface and lightmap coordinates, normal, RGBA colour; 44
//! bytes), meshverts (one 32-bit vertex offset), effects (72 bytes, only counted), faces (104
//! bytes) and lightmaps (128 × 128 RGB). Every lump range is checked against the file, every
//! lump length against its record size, and every index a face holds against its table, so
//! that [`crate::Scene`] can index without checks. Allocation is bounded by the file size:
//! every table is a view of bytes that exist.

use std::fmt;

use crate::entities::{parse_entities, Entity};
use crate::{Scene, Vertex};

pub const MAGIC: [u8; 4] = *b"IBSP";
pub const VERSION: i32 = 46;
pub const LUMP_COUNT: usize = 17;
/// Magic, version and the lump directory.
pub const HEADER_LEN: usize = 8 + LUMP_COUNT * 8;
pub const TEXTURE_LEN: usize = 72;
pub const VERTEX_LEN: usize = 44;
pub const MESHVERT_LEN: usize = 4;
pub const EFFECT_LEN: usize = 72;
pub const FACE_LEN: usize = 104;
pub const LIGHTMAP_SIDE: usize = 128;
pub const LIGHTMAP_LEN: usize = LIGHTMAP_SIDE * LIGHTMAP_SIDE * 3;
/// Surface flag `SURF_NODRAW`. The loader does not act on it: q3map2 leaves no-draw brush faces
/// out of the file, and the faces that carry it in OpenArena's maps are all patches, most of
/// them with a lightmap (so meant to be seen): all 135 of `ctf_inyard`'s patches, for one.
pub const SURF_NODRAW: i32 = 0x80;

/// The 17 lumps, in directory order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lump {
    Entities,
    Textures,
    Planes,
    Nodes,
    Leafs,
    Leaffaces,
    Leafbrushes,
    Models,
    Brushes,
    Brushsides,
    Vertices,
    Meshverts,
    Effects,
    Faces,
    Lightmaps,
    Lightvols,
    Visdata,
}

impl Lump {
    pub const ALL: [Lump; LUMP_COUNT] = [
        Lump::Entities,
        Lump::Textures,
        Lump::Planes,
        Lump::Nodes,
        Lump::Leafs,
        Lump::Leaffaces,
        Lump::Leafbrushes,
        Lump::Models,
        Lump::Brushes,
        Lump::Brushsides,
        Lump::Vertices,
        Lump::Meshverts,
        Lump::Effects,
        Lump::Faces,
        Lump::Lightmaps,
        Lump::Lightvols,
        Lump::Visdata,
    ];

    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Lump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = format!("{self:?}").to_lowercase();
        write!(f, "{name} (lump {})", self.index())
    }
}

/// How far from the origin a map's positions may lie, in units: Quake III's maps stay within
/// its engine's ±131,072 (`MAX_WORLD_COORD`); eight times that keeps every sum, span and
/// centre of positions finite in `f32`.
pub const WORLD_LIMIT: f32 = 1_048_576.0;

/// Why a BSP file was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BspError {
    #[error("truncated: {len} bytes, shorter than the {HEADER_LEN}-byte header")]
    Truncated { len: usize },
    #[error("bad magic {found:?}: not an IBSP (Quake 3 BSP) file")]
    BadMagic { found: [u8; 4] },
    #[error("BSP version {found}, expected {VERSION} (Quake 3)")]
    BadVersion { found: i32 },
    #[error("{lump}: offset {offset}, length {length} lies outside the {file_len}-byte file")]
    LumpOutOfRange {
        lump: Lump,
        offset: i32,
        length: i32,
        file_len: usize,
    },
    #[error("{lump}: {length} bytes is not a multiple of its {record}-byte record")]
    BadLumpLength {
        lump: Lump,
        length: usize,
        record: usize,
    },
    #[error("face {face}: {what} {index} out of range (the table has {len})")]
    IndexOutOfRange {
        face: usize,
        what: &'static str,
        index: i64,
        len: usize,
    },
    #[error("face {face}: unknown face type {kind} (1 polygon, 2 patch, 3 mesh, 4 billboard)")]
    BadFaceType { face: usize, kind: i32 },
    #[error("face {face}: {count} meshverts is not a whole number of triangles")]
    BadMeshvertCount { face: usize, count: i32 },
    #[error(
        "face {face}: patch of {width} × {height} control points with {vertices} vertices \
         (sides must be odd, at least 3, and their product the vertex count)"
    )]
    BadPatch {
        face: usize,
        width: i32,
        height: i32,
        vertices: i32,
    },
    #[error(transparent)]
    Entities(#[from] crate::entities::EntitiesError),
    #[error("vertex {vertex} has a coordinate that is not finite")]
    NotFinite { vertex: usize },
    #[error("vertex {vertex} lies outside the world: a coordinate beyond ±{WORLD_LIMIT} units")]
    OutsideWorld { vertex: usize },
    #[error(
        "the faces expand to {vertices} vertices and {triangles} triangles, over the limit of \
         {limit} that a file of this size allows"
    )]
    TooLarge {
        vertices: u64,
        triangles: u64,
        limit: u64,
    },
}

/// A texture (shader) record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BspTexture {
    /// Shader name, up to the first NUL, lossily UTF-8.
    pub name: String,
    pub flags: i32,
    pub contents: i32,
}

/// Face types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaceKind {
    Polygon,
    Patch,
    Mesh,
    Billboard,
}

impl FaceKind {
    pub fn from_i32(kind: i32) -> Option<FaceKind> {
        match kind {
            1 => Some(FaceKind::Polygon),
            2 => Some(FaceKind::Patch),
            3 => Some(FaceKind::Mesh),
            4 => Some(FaceKind::Billboard),
            _ => None,
        }
    }

    pub fn to_i32(self) -> i32 {
        match self {
            FaceKind::Polygon => 1,
            FaceKind::Patch => 2,
            FaceKind::Mesh => 3,
            FaceKind::Billboard => 4,
        }
    }
}

/// A face record. After [`parse`], every index in it but `effect` is valid: `texture` indexes
/// [`Bsp::textures`], the vertex range lies in [`Bsp::vertices`], the meshvert range in
/// [`Bsp::meshverts`] with each offset inside the vertex range, `lightmap` is negative (none)
/// or indexes [`Bsp::lightmaps`], and a patch's `size` matches its vertex count.
#[derive(Clone, Debug, PartialEq)]
pub struct Face {
    pub texture: i32,
    pub effect: i32,
    pub kind: FaceKind,
    pub vertex: i32,
    pub n_vertices: i32,
    pub meshvert: i32,
    pub n_meshverts: i32,
    pub lightmap: i32,
    pub lm_start: [i32; 2],
    pub lm_size: [i32; 2],
    pub lm_origin: [f32; 3],
    pub lm_vecs: [[f32; 3]; 2],
    pub normal: [f32; 3],
    /// Patch control-point grid (width, height).
    pub size: [i32; 2],
}

impl Face {
    pub fn vertex_range(&self) -> std::ops::Range<usize> {
        self.vertex as usize..self.vertex as usize + self.n_vertices as usize
    }

    pub fn meshvert_range(&self) -> std::ops::Range<usize> {
        self.meshvert as usize..self.meshvert as usize + self.n_meshverts as usize
    }

    pub fn lightmap(&self) -> Option<u32> {
        u32::try_from(self.lightmap).ok()
    }
}

/// The parsed, checked lumps a scene needs.
#[derive(Clone, Debug, PartialEq)]
pub struct Bsp {
    pub entities: Vec<Entity>,
    pub textures: Vec<BspTexture>,
    pub vertices: Vec<Vertex>,
    pub meshverts: Vec<i32>,
    pub faces: Vec<Face>,
    /// 128 × 128 RGB, rows top to bottom.
    pub lightmaps: Vec<Vec<u8>>,
    /// Number of effect records (faces' `effect` should index them; not checked).
    pub effects: usize,
}

fn i32_at(b: &[u8], at: usize) -> i32 {
    i32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn f32_at(b: &[u8], at: usize) -> f32 {
    f32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The bytes of one lump, its range checked against the file and its length against the
/// record size.
fn lump(data: &[u8], which: Lump, record: usize) -> Result<&[u8], BspError> {
    let at = 8 + which.index() * 8;
    let offset = i32_at(data, at);
    let length = i32_at(data, at + 4);
    let out_of_range = BspError::LumpOutOfRange {
        lump: which,
        offset,
        length,
        file_len: data.len(),
    };
    let (Ok(start), Ok(len)) = (usize::try_from(offset), usize::try_from(length)) else {
        return Err(out_of_range);
    };
    let Some(end) = start.checked_add(len).filter(|&e| e <= data.len()) else {
        return Err(out_of_range);
    };
    if len % record != 0 {
        return Err(BspError::BadLumpLength {
            lump: which,
            length: len,
            record,
        });
    }
    Ok(&data[start..end])
}

/// Checks that `start .. start + count` lies in a table of `len` entries; `what` names the
/// start and the count in the error.
fn check_range(
    face: usize,
    what: [&'static str; 2],
    start: i32,
    count: i32,
    len: usize,
) -> Result<(), BspError> {
    if start < 0 || (start as usize) > len {
        return Err(BspError::IndexOutOfRange {
            face,
            what: what[0],
            index: start.into(),
            len,
        });
    }
    let end = i64::from(start) + i64::from(count);
    if count < 0 || end > len as i64 {
        return Err(BspError::IndexOutOfRange {
            face,
            what: what[1],
            index: end,
            len,
        });
    }
    Ok(())
}

fn parse_vertex(r: &[u8]) -> Vertex {
    let f = |i: usize| f32_at(r, i * 4);
    Vertex {
        pos: [f(0), f(1), f(2)],
        uv: [f(3), f(4)],
        lm_uv: [f(5), f(6)],
        normal: [f(7), f(8), f(9)],
        color: [r[40], r[41], r[42], r[43]],
    }
}

fn parse_face(r: &[u8], index: usize) -> Result<Face, BspError> {
    let i = |k: usize| i32_at(r, k * 4);
    let f = |k: usize| f32_at(r, k * 4);
    let kind = i(2);
    Ok(Face {
        texture: i(0),
        effect: i(1),
        kind: FaceKind::from_i32(kind).ok_or(BspError::BadFaceType { face: index, kind })?,
        vertex: i(3),
        n_vertices: i(4),
        meshvert: i(5),
        n_meshverts: i(6),
        lightmap: i(7),
        lm_start: [i(8), i(9)],
        lm_size: [i(10), i(11)],
        lm_origin: [f(12), f(13), f(14)],
        lm_vecs: [[f(15), f(16), f(17)], [f(18), f(19), f(20)]],
        normal: [f(21), f(22), f(23)],
        size: [i(24), i(25)],
    })
}

/// A 64-byte, NUL-padded name.
fn name_of(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

fn check_face(face: &Face, index: usize, bsp: &Bsp) -> Result<(), BspError> {
    let oob = |what, idx: i32, len| BspError::IndexOutOfRange {
        face: index,
        what,
        index: idx.into(),
        len,
    };
    if face.texture < 0 || face.texture as usize >= bsp.textures.len() {
        return Err(oob("texture", face.texture, bsp.textures.len()));
    }
    // `effect` (a fog volume) is not checked: nothing here uses it, and shipped maps hold
    // effect 0 with an empty effects lump (OpenArena's `aggressor`).
    if face.lightmap >= 0 && face.lightmap as usize >= bsp.lightmaps.len() {
        return Err(oob("lightmap", face.lightmap, bsp.lightmaps.len()));
    }
    check_range(
        index,
        ["first vertex", "end of vertex range"],
        face.vertex,
        face.n_vertices,
        bsp.vertices.len(),
    )?;
    match face.kind {
        FaceKind::Polygon | FaceKind::Mesh => {
            check_range(
                index,
                ["first meshvert", "end of meshvert range"],
                face.meshvert,
                face.n_meshverts,
                bsp.meshverts.len(),
            )?;
            if face.n_meshverts % 3 != 0 {
                return Err(BspError::BadMeshvertCount {
                    face: index,
                    count: face.n_meshverts,
                });
            }
            for &m in &bsp.meshverts[face.meshvert_range()] {
                if m < 0 || m >= face.n_vertices {
                    return Err(oob("meshvert offset", m, face.n_vertices as usize));
                }
            }
        }
        FaceKind::Patch => {
            let [w, h] = face.size;
            let good_side = |s: i32| s >= 3 && s % 2 == 1;
            if !good_side(w)
                || !good_side(h)
                || i64::from(w) * i64::from(h) != i64::from(face.n_vertices)
            {
                return Err(BspError::BadPatch {
                    face: index,
                    width: w,
                    height: h,
                    vertices: face.n_vertices,
                });
            }
        }
        FaceKind::Billboard => {}
    }
    Ok(())
}

/// Parses and checks a BSP file. Never panics; allocates at most a small multiple of
/// `data.len()`.
pub fn parse(data: &[u8]) -> Result<Bsp, BspError> {
    if data.len() < HEADER_LEN {
        return Err(BspError::Truncated { len: data.len() });
    }
    let magic = [data[0], data[1], data[2], data[3]];
    if magic != MAGIC {
        return Err(BspError::BadMagic { found: magic });
    }
    let version = i32_at(data, 4);
    if version != VERSION {
        return Err(BspError::BadVersion { found: version });
    }
    // Check the whole directory first, so a bad lump is reported even if unused.
    for which in Lump::ALL {
        lump(data, which, 1)?;
    }
    let entities_bytes = lump(data, Lump::Entities, 1)?;
    let end = entities_bytes
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(entities_bytes.len());
    let entities = parse_entities(&String::from_utf8_lossy(&entities_bytes[..end]))?;
    let textures = lump(data, Lump::Textures, TEXTURE_LEN)?
        .chunks_exact(TEXTURE_LEN)
        .map(|r| BspTexture {
            name: name_of(&r[..64]),
            flags: i32_at(r, 64),
            contents: i32_at(r, 68),
        })
        .collect();
    let vertices: Vec<Vertex> = lump(data, Lump::Vertices, VERTEX_LEN)?
        .chunks_exact(VERTEX_LEN)
        .map(parse_vertex)
        .collect();
    // A NaN or an infinity in a position or a texture coordinate would give every consumer its
    // own wrong answer (bounds that skip it, a renderer's division by it); none of the 50
    // OpenArena maps holds one. Lightmap coordinates are not checked: `ctf_gate1` ships one
    // that is not finite.
    if let Some(vertex) = vertices
        .iter()
        .position(|v| !v.pos.iter().chain(&v.uv).all(|c| c.is_finite()))
    {
        return Err(BspError::NotFinite { vertex });
    }
    // Finite but huge positions overflow the bounds' span and centre to infinities and NaN
    // (a camera at NaN renders nothing and says nothing).
    if let Some(vertex) = vertices
        .iter()
        .position(|v| v.pos.iter().any(|c| c.abs() > WORLD_LIMIT))
    {
        return Err(BspError::OutsideWorld { vertex });
    }
    let meshverts = lump(data, Lump::Meshverts, MESHVERT_LEN)?
        .chunks_exact(MESHVERT_LEN)
        .map(|r| i32_at(r, 0))
        .collect();
    let effects = lump(data, Lump::Effects, EFFECT_LEN)?.len() / EFFECT_LEN;
    let faces = lump(data, Lump::Faces, FACE_LEN)?
        .chunks_exact(FACE_LEN)
        .enumerate()
        .map(|(i, r)| parse_face(r, i))
        .collect::<Result<Vec<_>, _>>()?;
    let lightmaps = lump(data, Lump::Lightmaps, LIGHTMAP_LEN)?
        .chunks_exact(LIGHTMAP_LEN)
        .map(<[u8]>::to_vec)
        .collect();
    let bsp = Bsp {
        entities,
        textures,
        vertices,
        meshverts,
        faces: Vec::new(),
        lightmaps,
        effects,
    };
    for (i, face) in faces.iter().enumerate() {
        check_face(face, i, &bsp)?;
    }
    Ok(Bsp { faces, ..bsp })
}

fn put_i32(out: &mut Vec<u8>, v: i32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_f32(out: &mut Vec<u8>, v: f32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Writes a scene as a BSP file that [`parse`] and [`Scene`] read back to the same triangles.
///
/// One face per surface number `0..=max(surface)` (a number no triangle uses becomes an empty
/// face), of type mesh, with the vertex range spanning the indices its triangles use; the
/// surface's texture and lightmap are its first triangle's. Texture names longer than 63
/// bytes are cut. Lightmaps that are not 128 × 128 are written black; alpha is dropped.
/// Triangles with an out-of-range vertex are left out. BSP tree lumps are written empty, so
/// the file is for loaders, not for the game.
pub fn write(scene: &Scene) -> Vec<u8> {
    let n_surfaces = scene
        .triangles
        .iter()
        .map(|t| t.surface as usize + 1)
        .max()
        .unwrap_or(0);
    let n_vertices = scene.vertices.len();
    let mut by_surface: Vec<Vec<&crate::Triangle>> = vec![Vec::new(); n_surfaces];
    for t in &scene.triangles {
        if t.v.iter().all(|&v| (v as usize) < n_vertices) {
            by_surface[t.surface as usize].push(t);
        }
    }

    let mut vertices = Vec::new();
    let mut meshverts = Vec::new();
    let mut faces = Vec::new();
    let mut vertex_base = 0i32;
    for tris in &by_surface {
        let lo = tris.iter().flat_map(|t| t.v).min().unwrap_or(0) as usize;
        let hi = tris
            .iter()
            .flat_map(|t| t.v)
            .max()
            .map_or(0, |h| h as usize + 1);
        let first_meshvert = (meshverts.len() / 4) as i32;
        for t in tris {
            for v in t.v {
                put_i32(&mut meshverts, (v as usize - lo) as i32);
            }
        }
        for v in &scene.vertices[lo..hi.max(lo)] {
            for x in v.pos.iter().chain(&v.uv).chain(&v.lm_uv).chain(&v.normal) {
                put_f32(&mut vertices, *x);
            }
            vertices.extend_from_slice(&v.color);
        }
        let (texture, lightmap) = tris.first().map_or((0, -1), |t| {
            (t.texture as i32, t.lightmap.map_or(-1, |l| l as i32))
        });
        let count = (hi.max(lo) - lo) as i32;
        let ints = [
            texture,
            -1,
            FaceKind::Mesh.to_i32(),
            vertex_base,
            count,
            first_meshvert,
            (tris.len() * 3) as i32,
            lightmap,
            0,
            0,
            0,
            0,
        ];
        for v in ints {
            put_i32(&mut faces, v);
        }
        for _ in 0..12 {
            put_f32(&mut faces, 0.0);
        }
        put_i32(&mut faces, 0);
        put_i32(&mut faces, 0);
        vertex_base += count;
    }

    let mut textures = Vec::new();
    for t in &scene.textures {
        let mut name = [0u8; 64];
        let bytes = t.name.as_bytes();
        let n = bytes.len().min(63);
        name[..n].copy_from_slice(&bytes[..n]);
        textures.extend_from_slice(&name);
        put_i32(&mut textures, 0);
        put_i32(&mut textures, 1);
    }

    let mut lightmaps = Vec::new();
    for l in &scene.lightmaps {
        let side = LIGHTMAP_SIDE as u32;
        if l.width == side && l.height == side && l.rgba.len() == LIGHTMAP_SIDE * LIGHTMAP_SIDE * 4
        {
            for px in l.rgba.chunks_exact(4) {
                lightmaps.extend_from_slice(&px[..3]);
            }
        } else {
            lightmaps.resize(lightmaps.len() + LIGHTMAP_LEN, 0);
        }
    }

    let mut entities = String::from("{\n\"classname\" \"worldspawn\"\n}\n");
    for s in &scene.spawns {
        // `{}` prints the shortest decimal that reads back as the same f32.
        entities.push_str(&format!(
            "{{\n\"classname\" \"info_player_deathmatch\"\n\"origin\" \"{} {} {}\"\n\"angle\" \"{}\"\n}}\n",
            s.origin[0], s.origin[1], s.origin[2], s.yaw_degrees
        ));
    }
    let mut entities = entities.into_bytes();
    entities.push(0);

    let mut lumps: Vec<Vec<u8>> = vec![Vec::new(); LUMP_COUNT];
    lumps[Lump::Entities.index()] = entities;
    lumps[Lump::Textures.index()] = textures;
    lumps[Lump::Vertices.index()] = vertices;
    lumps[Lump::Meshverts.index()] = meshverts;
    lumps[Lump::Faces.index()] = faces;
    lumps[Lump::Lightmaps.index()] = lightmaps;

    let mut out = Vec::with_capacity(HEADER_LEN + lumps.iter().map(Vec::len).sum::<usize>());
    out.extend_from_slice(&MAGIC);
    put_i32(&mut out, VERSION);
    let mut offset = HEADER_LEN;
    for l in &lumps {
        put_i32(&mut out, offset as i32);
        put_i32(&mut out, l.len() as i32);
        // Keep lumps 4-byte aligned, as q3map does.
        offset += l.len().next_multiple_of(4);
    }
    for l in &lumps {
        out.extend_from_slice(l);
        out.resize(out.len().next_multiple_of(4), 0);
    }
    out
}
