//! The stereo renderer: the quake raster kernel drawing a scheme's pieces of work on the GPMs
//! of a tessera node, and the modeled frame latency (docs/EVALUATION.md, "OO-VR").
//!
//! Objects: the texture atlas (created once, read only), per GPM one eye-sized framebuffer and
//! access map, and per pass two setup buffers. A frame:
//! 1. empties every GPM of texture pages: a GPM keeps no copy from one frame to the next, so
//!    every page it samples in a frame is fetched in that frame (the NUMA remote accesses of
//!    OO-VR's first-touch baseline, §3; within a frame a fetched page stays, as the remote
//!    cache and the pre-allocated copies keep it);
//! 2. per eye, sets up every triangle on the host and resolves visibility over the records
//!    with the kernel's own depth test (`Raster::nearest` over plain arrays): which object
//!    shows at each pixel, which objects are visible at all, and Eq. 3's features;
//! 3. lets the scheme render its pieces: per piece and eye, the piece's triangles are set up,
//!    and the kernel runs on the piece's GPM alone over the part of its region the triangles'
//!    tiles touch; its device seconds are the pass's stage times less the memory manager's
//!    waits (`bench scaling`'s isolated-device work), and its texture page requests are
//!    charged to links by first touch;
//! 4. composes: a pixel takes its colour from the piece that holds the object in front there.
//!    The kernel keeps depth inside the invocation and writes no depth buffer, so the host's
//!    visibility from step 2 stands in for the depth comparison of the composition hardware;
//!    the fragments, colour and depth, that a GPM would send are counted from its access map,
//!    once per pixel it drew in the frame (its pieces meet in its one framebuffer, behind its
//!    own depth test, before it composes).
use std::sync::Arc;

use serde::Serialize;
use tessera_core::{
    Access, DeviceId, GlobalPage, ObjectDesc, ObjectEntry, PageRequest, TexelFormat,
};
use tessera_runtime::{Bound, Domain, Fault, Kernel, PassSpec, Procedure, System};
use tessera_scene::Scene;

use super::objects::{objects_of, DrawObject};
use super::predict::BatchFeatures;
use super::scheme::{Composition, FrameInput, Piece, Scheme};
use super::VrError;
use crate::quake::atlas::{Atlas, Packing};
use crate::quake::raster::{Objects, Raster, BACKGROUND, NO_ACCESS};
use crate::quake::reference::{check_screen, PlainRaster, PLAIN};
use crate::quake::setup::{setup, FrameSetup, BUFFER_PAGE_BYTES, TILE};
use crate::quake::{Camera, Mesh, ViewProj};

/// The interpupillary distance in world units. Quake's unit is about an inch (a player is 56
/// units tall), so 2.5 units is about 64 mm, an adult's typical IPD.
pub const IPD: f32 = 2.5;

/// Bytes a GPM sends per fragment to compose elsewhere: RGBA8 colour and a 32-bit depth.
pub const FRAGMENT_BYTES: u64 = 8;

/// The left and right eye of `cam`: moved by ∓IPD/2 along the camera's right vector, looking
/// the same way (parallel stereo axes).
pub fn eyes(cam: &Camera) -> [Camera; 2] {
    let (sy, cy) = cam.yaw.sin_cos();
    let right = [sy, -cy];
    let at = |s: f32| Camera {
        eye: [
            cam.eye[0] + s * IPD / 2.0 * right[0],
            cam.eye[1] + s * IPD / 2.0 * right[1],
            cam.eye[2],
        ],
        ..*cam
    };
    [at(-1.0), at(1.0)]
}

/// Two eyes' `width × height` images as one, left beside right, as
/// [`StereoRenderer::stereo_image`] lays them out.
fn side_by_side(eyes: &[Vec<u8>; 2], width: u32, height: u32) -> Vec<u8> {
    let row = width as usize * 4;
    let mut out = Vec::with_capacity(row * 2 * height as usize);
    for y in 0..height as usize {
        for eye in eyes {
            out.extend_from_slice(&eye[y * row..(y + 1) * row]);
        }
    }
    out
}

/// The stereo frame through `cam` drawn by the unpaged rasterizer
/// ([`crate::quake::reference::render`]) for each eye, laid out as
/// [`StereoRenderer::stereo_image`]: what every scheme on any number of GPMs must compose.
pub fn reference_stereo(
    scene: &Scene,
    cam: &Camera,
    opts: &StereoOptions,
) -> Result<Vec<u8>, VrError> {
    let mesh = Mesh::from(scene);
    let sizes: Vec<(u32, u32)> = mesh.textures.iter().map(|t| (t.width, t.height)).collect();
    let atlas = Atlas::pack(&sizes, opts.page)?;
    let aspect = opts.width as f64 / opts.height as f64;
    let [l, r] = eyes(cam);
    let draw = |c: &Camera| {
        crate::quake::reference::render(
            &mesh,
            &atlas,
            &c.view_proj(aspect),
            opts.width,
            opts.height,
        )
        .map(|(frame, _)| frame)
    };
    Ok(side_by_side(
        &[draw(&l)?, draw(&r)?],
        opts.width,
        opts.height,
    ))
}

/// How frames are drawn.
#[derive(Clone, Copy, Debug)]
pub struct StereoOptions {
    /// One eye's screen.
    pub width: u32,
    pub height: u32,
    /// Page side of the atlas and the framebuffers.
    pub page: u32,
    pub procedure: Procedure,
}

/// The links and ROPs that the modeled latency charges.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct LinkModel {
    /// Bytes per second of one direction of the link between two GPMs.
    #[serde(rename = "bandwidth_bytes_per_second")]
    pub bandwidth: f64,
    /// Seconds per page move (and per composition transfer between two GPMs).
    #[serde(rename = "latency_seconds")]
    pub latency: f64,
    /// Pixels per second one GPM's ROPs compose.
    pub rop_pixels_per_second: f64,
}

/// What one frame measured: device seconds and counts, no model yet.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FrameMeasure {
    /// The run's scheme, which the report gives once (`split`).
    #[serde(skip)]
    pub scheme: String,
    /// Per GPM, when its work finished (measured device seconds; waits a dispatcher imposed
    /// included).
    #[serde(rename = "finish_seconds")]
    pub finish: Vec<f64>,
    /// Per GPM, measured device seconds of its passes.
    #[serde(rename = "busy_seconds")]
    pub busy: Vec<f64>,
    /// Device time of the frame's kernels from timestamp queries, all GPMs (on one GPU, the
    /// time it was busy with them); absent where the backend has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_seconds: Option<f64>,
    /// `[from][to]`: texture pages fetched by GPM `to` whose first-touch home is GPM `from`.
    #[serde(rename = "texture_pages_from_to")]
    pub texture_pages: Vec<Vec<u64>>,
    /// Per GPM, texture pages it fetched from its own memory.
    pub local_pages: Vec<u64>,
    pub page_bytes: u64,
    /// `[from][to]`: fragment bytes sent to compose (the modeled frame's `composition_bytes`
    /// is their sum).
    #[serde(rename = "composition_bytes_from_to")]
    pub composition_bytes: Vec<Vec<u64>>,
    /// Per GPM, fragments its ROPs compose (root or distributed composition).
    pub composed_fragments: Vec<u64>,
    pub preallocated: bool,
    pub prediction_errors: Vec<f64>,
    pub batches: usize,
    pub passes: u64,
    pub tail_split: bool,
    pub visible_objects: usize,
    /// Pixels with an object in front that no piece composed, and pixels composed twice:
    /// both 0 when the scheme covered the frame.
    pub uncomposed: u64,
    pub overdrawn: u64,
}

/// A frame's modeled figures.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FrameReport {
    /// Modeled frame latency, seconds: the slowest GPM (its work, plus or overlapped with its
    /// texture link time) plus composition.
    #[serde(rename = "latency_seconds")]
    pub latency: f64,
    /// Per GPM, texture link seconds: its busiest incoming link.
    #[serde(rename = "texture_link_seconds")]
    pub texture_link: Vec<f64>,
    /// Composition seconds: the slowest GPM's incoming fragments plus its ROP time.
    #[serde(rename = "composition_seconds")]
    pub composition: f64,
    pub texture_bytes: u64,
    pub composition_bytes: u64,
    /// Mean GPM work over the busiest GPM's (1: perfectly balanced).
    pub load_balance: f64,
}

impl FrameMeasure {
    /// The modeled figures under `link`.
    pub fn cost(&self, link: &LinkModel) -> FrameReport {
        let g = self.finish.len();
        let over = |pages: u64, bytes: u64| -> f64 {
            if bytes == 0 {
                0.0
            } else {
                pages as f64 * link.latency + bytes as f64 / link.bandwidth
            }
        };
        let texture_link: Vec<f64> = (0..g)
            .map(|to| {
                (0..g)
                    .map(|from| {
                        let p = self.texture_pages[from][to];
                        over(p, p * self.page_bytes)
                    })
                    .fold(0.0, f64::max)
            })
            .collect();
        let slowest = (0..g)
            .map(|k| {
                if self.preallocated {
                    self.finish[k].max(texture_link[k])
                } else {
                    self.finish[k] + texture_link[k]
                }
            })
            .fold(0.0, f64::max);
        let composition = (0..g)
            .map(|to| {
                let incoming = (0..g)
                    .map(|from| over(1, self.composition_bytes[from][to]))
                    .fold(0.0, f64::max);
                incoming + self.composed_fragments[to] as f64 / link.rop_pixels_per_second
            })
            .fold(0.0, f64::max);
        let total: f64 = self.busy.iter().sum();
        let max = self.busy.iter().copied().fold(0.0, f64::max);
        FrameReport {
            latency: slowest + composition,
            texture_link,
            composition,
            texture_bytes: self.texture_pages.iter().flatten().sum::<u64>() * self.page_bytes,
            composition_bytes: self.composition_bytes.iter().flatten().sum(),
            load_balance: if max > 0.0 {
                total / g as f64 / max
            } else {
                1.0
            },
        }
    }
}

/// No object at a pixel.
const NONE: u32 = u32::MAX;
/// No first-touch home yet.
const NO_HOME: u8 = u8::MAX;

pub struct StereoRenderer {
    pub sys: System,
    /// The scene's vertices and texture sizes (texels left out); `triangles` is set per pass.
    geom: Mesh,
    all: Vec<tessera_scene::Triangle>,
    atlas: Atlas,
    atlas_obj: ObjectEntry,
    /// Per GPM, its framebuffer and access map.
    targets: Vec<(ObjectEntry, ObjectEntry)>,
    objects: Vec<DrawObject>,
    /// Per triangle, its object.
    object_of: Vec<u32>,
    home: Vec<u8>,
    opts: StereoOptions,
    frames: u64,
    /// The last frame's composed eyes, RGBA8 rows from the lower left.
    composed: [Vec<u8>; 2],
}

/// One frame's state while the scheme runs.
struct Acc {
    vps: [ViewProj; 2],
    full: [FrameSetup; 2],
    /// Per eye and pixel, the global object in front.
    owner: [Vec<u32>; 2],
    visible: Vec<usize>,
    composition: Composition,
    replicated: bool,
    gpms: usize,
    m: FrameMeasure,
    filled: [Vec<u8>; 2],
    /// Per GPM and eye, the pixels any of its pieces drew this frame: a GPM depth-tests its
    /// pieces into its one framebuffer and sends each pixel to composition once, however
    /// many of its pieces drew there.
    drawn: Vec<[Vec<bool>; 2]>,
}

fn buffer(sys: &System, words: &[u32]) -> Result<ObjectEntry, VrError> {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let desc = ObjectDesc::buffer(bytes.len() as u64, BUFFER_PAGE_BYTES)?;
    Ok(sys.create(desc, Some(bytes))?)
}

fn words(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// The pixel rectangle of the tiles with any triangle, within the screen.
fn tile_bounds(s: &FrameSetup, w: u32, h: u32) -> Option<(u32, u32, u32, u32)> {
    let mut b: Option<(u32, u32, u32, u32)> = None;
    for ty in 0..s.tiles_y {
        for tx in 0..s.tiles_x {
            let t = (ty * s.tiles_x + tx) as usize;
            if s.bins[2 * t + 1] == 0 {
                continue;
            }
            let r = (
                tx * TILE,
                ty * TILE,
                ((tx + 1) * TILE).min(w),
                ((ty + 1) * TILE).min(h),
            );
            b = Some(match b {
                None => r,
                Some(o) => (o.0.min(r.0), o.1.min(r.1), o.2.max(r.2), o.3.max(r.3)),
            });
        }
    }
    b
}

impl StereoRenderer {
    /// A renderer of `scene` on the devices of `sys`, one per GPM.
    pub fn new(sys: System, scene: &Scene, opts: StereoOptions) -> Result<Self, VrError> {
        let objects = objects_of(scene)?;
        let mesh = Mesh::from(scene);
        mesh.validate()?;
        check_screen(opts.width, opts.height)?;
        if sys.devices() > NO_HOME as usize {
            return Err(VrError::Config(format!(
                "at most {} GPMs (got {})",
                NO_HOME,
                sys.devices()
            )));
        }
        let (atlas, texels) = Atlas::of(&mesh.textures, opts.page, Packing::Pages)?;
        let atlas_obj = sys.create(atlas.desc()?, Some(texels))?;
        let screen =
            ObjectDesc::texture(opts.width, opts.height, TexelFormat::Rgba8Unorm, opts.page)?;
        let targets = (0..sys.devices())
            .map(|_| Ok((sys.create(screen, None)?, sys.create(screen, None)?)))
            .collect::<Result<Vec<_>, VrError>>()?;
        let mut object_of = vec![NONE; mesh.triangles.len()];
        for (k, o) in objects.iter().enumerate() {
            for &t in &o.triangles {
                object_of[t as usize] = k as u32;
            }
        }
        sys.mm.log_requests(true);
        let geom = Mesh {
            vertices: mesh.vertices,
            triangles: Vec::new(),
            textures: mesh
                .textures
                .iter()
                .map(|t| tessera_scene::TextureImage {
                    name: String::new(),
                    width: t.width,
                    height: t.height,
                    rgba: Vec::new(),
                })
                .collect(),
        };
        let pixels = (opts.width * opts.height * 4) as usize;
        Ok(StereoRenderer {
            home: vec![NO_HOME; atlas.page_count() as usize],
            sys,
            geom,
            all: mesh.triangles,
            atlas,
            atlas_obj,
            targets,
            objects,
            object_of,
            opts,
            frames: 0,
            composed: [vec![0; pixels], vec![0; pixels]],
        })
    }

    /// The scene's draw objects (before visibility).
    pub fn objects(&self) -> &[DrawObject] {
        &self.objects
    }

    pub fn atlas(&self) -> &Atlas {
        &self.atlas
    }

    /// The last frame's eyes, each RGBA8 rows from the lower left.
    pub fn eye_images(&self) -> &[Vec<u8>; 2] {
        &self.composed
    }

    /// The last frame as one image, left eye beside right: `2W × H` RGBA8 rows from the lower
    /// left.
    pub fn stereo_image(&self) -> Vec<u8> {
        side_by_side(&self.composed, self.opts.width, self.opts.height)
    }

    /// Renders one stereo frame through `cam` with `scheme`.
    pub fn frame(
        &mut self,
        cam: &Camera,
        scheme: &mut dyn Scheme,
    ) -> Result<FrameMeasure, VrError> {
        let gpms = self.sys.devices();
        if self.frames > 0 {
            let pages: Vec<GlobalPage> = self.atlas_obj.pages().map(GlobalPage).collect();
            for d in 0..gpms {
                self.sys.mm.evict(DeviceId::new(d)?, pages.clone())?;
            }
        }
        self.sys.mm.take_requests()?;
        let (w, h) = (self.opts.width, self.opts.height);
        let aspect = w as f64 / h as f64;
        let [l, r] = eyes(cam);
        let vps = [l.view_proj(aspect), r.view_proj(aspect)];
        self.geom.triangles = std::mem::take(&mut self.all);
        let full = [
            setup(&self.geom, &self.atlas, &vps[0], w, h),
            setup(&self.geom, &self.atlas, &vps[1], w, h),
        ];
        self.all = std::mem::take(&mut self.geom.triangles);
        let n = self.objects.len();
        let mut records = vec![0u64; n];
        let mut pixels = vec![0u64; n];
        let mut owner = [vec![NONE; (w * h) as usize], vec![NONE; (w * h) as usize]];
        for e in 0..2 {
            let s = &full[e];
            for &t in &s.source[1..] {
                records[self.object_of[t as usize] as usize] += 1;
            }
            let k = Raster {
                obj: PLAIN,
                width: w,
                height: h,
                tiles_x: s.tiles_x,
                filter: None,
                degrade: None,
            };
            let mut plain = PlainRaster {
                atlas: &[],
                atlas_width: 0,
                tris: &s.tris,
                bins: &s.bins,
                width: w,
                frame: Vec::new(),
                access: Vec::new(),
                chain: None,
            };
            for y in 0..h {
                for x in 0..w {
                    let (_, rec) = match k.nearest(&mut plain, x, y) {
                        Ok(v) => v,
                        Err(Fault::Error(e)) => return Err(VrError::Runtime(*e)),
                        Err(Fault::Miss | Fault::Suspend) => {
                            return Err(VrError::Config("plain arrays missed".into()))
                        }
                    };
                    if rec != 0 {
                        let o = self.object_of[s.source[rec as usize] as usize];
                        owner[e][(y * w + x) as usize] = o;
                        pixels[o as usize] += 1;
                    }
                }
            }
        }
        let visible: Vec<usize> = (0..n).filter(|&k| records[k] > 0).collect();
        let vis_objects: Vec<DrawObject> =
            visible.iter().map(|&k| self.objects[k].clone()).collect();
        let features: Vec<BatchFeatures> = visible
            .iter()
            .map(|&k| {
                BatchFeatures::new(
                    2.0 * self.objects[k].triangle_count() as f64,
                    3.0 * records[k] as f64,
                    pixels[k] as f64,
                )
            })
            .collect();
        let mut acc = Acc {
            vps,
            full,
            owner,
            visible,
            composition: scheme.composition(),
            replicated: scheme.replicated(),
            gpms,
            m: FrameMeasure {
                scheme: scheme.name().to_string(),
                texture_pages: vec![vec![0; gpms]; gpms],
                local_pages: vec![0; gpms],
                page_bytes: self.opts.page as u64 * self.opts.page as u64 * 4,
                composition_bytes: vec![vec![0; gpms]; gpms],
                composed_fragments: vec![0; gpms],
                preallocated: scheme.preallocates(),
                ..FrameMeasure::default()
            },
            filled: [vec![0; (w * h) as usize], vec![0; (w * h) as usize]],
            drawn: vec![[vec![false; (w * h) as usize], vec![false; (w * h) as usize]]; gpms],
        };
        for eye in &mut self.composed {
            for px in eye.chunks_exact_mut(4) {
                px.copy_from_slice(&BACKGROUND);
            }
        }
        let input = FrameInput {
            index: self.frames,
            objects: &vis_objects,
            features: &features,
            gpms,
            width: w,
            height: h,
        };
        let timing = scheme.frame(&input, &mut |p: &Piece| self.piece(p, &mut acc))?;
        if timing.finish.len() != gpms || timing.busy.len() != gpms {
            return Err(VrError::Config(format!(
                "scheme {} timed {} GPMs of {gpms}",
                scheme.name(),
                timing.finish.len()
            )));
        }
        let mut m = acc.m;
        for e in 0..2 {
            for (o, f) in acc.owner[e].iter().zip(&acc.filled[e]) {
                if *o != NONE && *f == 0 {
                    m.uncomposed += 1;
                }
                if *f > 1 {
                    m.overdrawn += 1;
                }
            }
        }
        m.finish = timing.finish;
        m.busy = timing.busy;
        m.prediction_errors = timing.prediction_errors;
        m.batches = timing.batches;
        m.tail_split = timing.tail_split;
        m.visible_objects = vis_objects.len();
        self.frames += 1;
        Ok(m)
    }

    /// Draws one piece (both eyes where its region covers them) on its GPM alone.
    fn piece(&mut self, p: &Piece, acc: &mut Acc) -> Result<f64, VrError> {
        if p.gpm >= acc.gpms {
            return Err(VrError::Config(format!(
                "a piece names GPM {} of {}",
                p.gpm, acc.gpms
            )));
        }
        let (w, h) = (self.opts.width, self.opts.height);
        let mut member: Option<Vec<bool>> = None;
        if let Some(objs) = &p.objects {
            let mut m = vec![false; self.objects.len()];
            let mut tris = Vec::new();
            for &k in objs {
                let g = *acc.visible.get(k).ok_or_else(|| {
                    VrError::Config(format!("a piece names object {k} of {}", acc.visible.len()))
                })?;
                m[g] = true;
                tris.extend_from_slice(&self.objects[g].triangles);
            }
            tris.sort_unstable();
            self.geom.triangles = tris.iter().map(|&t| self.all[t as usize]).collect();
            member = Some(m);
        }
        let mut seconds = 0.0;
        for e in 0..2u32 {
            let x0 = p.region.x0.max(e * w) - e * w;
            let x1 = p.region.x1.min((e + 1) * w).saturating_sub(e * w);
            let (y0, y1) = (p.region.y0, p.region.y1.min(h));
            if x0 >= x1 || y0 >= y1 || p.region.x0 >= (e + 1) * w {
                continue;
            }
            let own;
            let s = if member.is_some() {
                own = setup(&self.geom, &self.atlas, &acc.vps[e as usize], w, h);
                &own
            } else {
                &acc.full[e as usize]
            };
            let Some(b) = tile_bounds(s, w, h) else {
                continue;
            };
            let (dx0, dy0, dx1, dy1) = (x0.max(b.0), y0.max(b.1), x1.min(b.2), y1.min(b.3));
            if dx0 >= dx1 || dy0 >= dy1 {
                continue;
            }
            seconds += self.pass(p.gpm, s, (dx0, dy0, dx1, dy1), &mut acc.m, acc.replicated)?;
            let (frame, access) = &self.targets[p.gpm];
            // Both in one read: one wait for the GPU per owner, not one per object.
            let mut both = self.sys.mm.read_many(&[frame.id, access.id])?.into_iter();
            let (colour, access) = (
                both.next().unwrap_or_default(),
                words(&both.next().unwrap_or_default()),
            );
            let g = acc.gpms as u32;
            for y in dy0..dy1 {
                for x in dx0..dx1 {
                    let i = (y * w + x) as usize;
                    if access[i] == NO_ACCESS {
                        continue;
                    }
                    let sx = e * w + x;
                    let home = match acc.composition {
                        Composition::InPlace => None,
                        Composition::Root => Some(0),
                        Composition::Distributed => {
                            Some((sx as u64 * g as u64 / (2 * w) as u64) as usize)
                        }
                    };
                    let first = !std::mem::replace(&mut acc.drawn[p.gpm][e as usize][i], true);
                    if let Some(home) = home.filter(|_| first) {
                        acc.m.composed_fragments[home] += 1;
                        if home != p.gpm {
                            acc.m.composition_bytes[p.gpm][home] += FRAGMENT_BYTES;
                        }
                    }
                    let o = acc.owner[e as usize][i];
                    if o != NONE && member.as_ref().is_none_or(|m| m[o as usize]) {
                        self.composed[e as usize][4 * i..4 * i + 4]
                            .copy_from_slice(&colour[4 * i..4 * i + 4]);
                        acc.filled[e as usize][i] = acc.filled[e as usize][i].saturating_add(1);
                    }
                }
            }
        }
        Ok(seconds)
    }

    /// One pass of the kernel on `gpm` alone over `rect`; its device seconds.
    fn pass(
        &mut self,
        gpm: usize,
        s: &FrameSetup,
        rect: (u32, u32, u32, u32),
        m: &mut FrameMeasure,
        replicated: bool,
    ) -> Result<f64, VrError> {
        let tris = buffer(&self.sys, &s.tris)?;
        let bins = buffer(&self.sys, &s.bins)?;
        let req: Vec<PageRequest> = tris
            .pages()
            .chain(bins.pages())
            .map(|p| PageRequest {
                page: GlobalPage(p),
                access: Access::Read,
            })
            .collect();
        self.sys
            .on_device(gpm, move |ctx| {
                let r = ctx.acquire(req);
                ctx.release();
                r
            })?
            .wait()??;
        self.sys.mm.take_requests()?;
        let (frame, access) = &self.targets[gpm];
        let kernel = Raster {
            obj: Objects {
                atlas: self.atlas_obj.id,
                tris: tris.id,
                bins: bins.id,
                frame: frame.id,
                access: access.id,
            },
            width: self.opts.width,
            height: self.opts.height,
            tiles_x: s.tiles_x,
            filter: None,
            degrade: None,
        };
        let bound = [&self.atlas_obj, &tris, &bins, frame, access];
        let spec = PassSpec {
            kernel: Arc::new(kernel) as Arc<dyn Kernel>,
            bindings: Arc::new(bound.iter().map(|e| Bound::new(e)).collect()),
            domain: Domain::Rect {
                x0: rect.0,
                y0: rect.1,
                x1: rect.2,
                y1: rect.3,
            },
            display: false,
        };
        tessera_runtime::check_launch(spec.kernel.as_ref(), &spec.bindings)?;
        let procedure = self.opts.procedure;
        let stats = self
            .sys
            .on_device(gpm, move |ctx| ctx.run_pass(&spec, procedure))?
            .wait()??;
        let st = &stats.stages;
        let seconds = st.request_pass + st.uniquify + st.compute + st.page_writes + st.display;
        if let Some(g) = &stats.gpu_stages {
            *m.gpu_seconds.get_or_insert(0.0) += g.total();
        }
        let log = self.sys.mm.take_requests()?;
        let atlas = self.atlas_obj.pages();
        for (d, pages) in log.iter().enumerate() {
            for p in pages.iter().filter(|p| atlas.contains(&p.0)) {
                let local = (p.0 - atlas.start) as usize;
                if replicated {
                    m.local_pages[d] += 1;
                    continue;
                }
                if self.home[local] == NO_HOME {
                    self.home[local] = d as u8;
                }
                let home = self.home[local] as usize;
                if home == d {
                    m.local_pages[d] += 1;
                } else {
                    m.texture_pages[home][d] += 1;
                }
            }
        }
        self.sys.mm.free(tris.id)?;
        self.sys.mm.free(bins.id)?;
        m.passes += 1;
        Ok(seconds)
    }
}
