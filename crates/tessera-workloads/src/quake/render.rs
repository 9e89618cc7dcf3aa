//! The paged renderer: the game trace's frames on a tessera node, the screen split across its
//! devices.
//!
//! Objects: the texture atlas (RGBA8, page P, created once, read only), the framebuffer and
//! the access map (RGBA8, the screen's size, page P), and per frame two buffers of triangle
//! setup (`setup`), created fresh each frame and freed the next. A frame:
//! 1. sets up and bins the triangles on the host and creates the two buffers;
//! 2. with `clear_each_frame`, empties every device of texture pages (evicts its copies of
//!    every atlas page; nothing else on the devices changes);
//! 3. gives every device a read copy of the two buffers (uploading the frame's geometry to
//!    each GPU), so that a two-pass request pass sees real triangles and records exactly the
//!    texture pages the compute pass will sample;
//! 4. runs the kernel over the screen, split by `Split`, with the chosen procedure;
//! 5. with `drop_unused`, evicts from each device the atlas pages it did not sample.
//!
//! Texture page requests are counted from the memory manager's request log, keeping the
//! pages of the atlas: the per-device totals cannot tell them from the buffers' and the
//! framebuffer's.

use std::sync::Arc;

use tessera_core::{
    Access, AccessMode, DeviceId, Filter, GlobalPage, MipLayout, ObjectDesc, ObjectEntry,
    PageRequest, TexelFormat,
};
use tessera_runtime::{Bound, Domain, PassSpec, PassStats, Procedure, System};

use super::atlas::{Atlas, Packing};
use super::raster::{Objects, Raster, NO_ACCESS};
use super::reference::check_screen;
use super::setup::{setup, BUFFER_PAGE_BYTES};
use super::trace::Blocks;
use super::{Mesh, QuakeError, Split, ViewProj};

/// How frames are rendered.
#[derive(Clone, Copy, Debug)]
pub struct RenderOptions {
    pub width: u32,
    pub height: u32,
    /// Page side of the atlas, the framebuffer and the access map.
    pub page: u32,
    pub split: Split,
    pub procedure: Procedure,
    pub clear_each_frame: bool,
    /// After each frame, drop every device's texture pages it did not sample in that frame
    /// (the paper's Fig 13: a page stays on a device only while the device keeps using it).
    pub drop_unused: bool,
}

/// A filtered renderer's atlas: a mip chain sampled by `filter`, its pages bordered by
/// `border` texels (a bordered atlas is read-only, replicated to its readers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Filtering {
    pub filter: Filter,
    pub border: u32,
    pub miss: Miss,
}

/// How a frame meets an atlas page its device does not hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Miss {
    /// The pixel faults and runs again once the page is there: every frame is exact.
    Relaunch,
    /// The sample is served from the finest resident coarser level, the page is requested and
    /// brought after the pass, for a later frame; no pixel runs twice for a texture page. The
    /// levels whose sides are both at most `tail` texels are replicated on every device before
    /// the first frame, so that a fallback always finds one.
    Degrade { tail: u32 },
}

/// The default [`Miss::Degrade`] tail: levels of at most 64 × 64 texels.
pub const DEFAULT_TAIL: u32 = 64;

/// What degrading did in one frame (`Miss::Degrade`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DegradeFrame {
    /// Pixels that sampled the atlas.
    pub samples: u64,
    /// Of those, pixels served at a coarser level than wanted.
    pub coarse_samples: u64,
    /// Invocations of the frame's passes that ran again after a fault (all devices).
    pub relaunched: u64,
    /// Pages asked for by pixels that completed without them (all devices).
    pub late_requests: u64,
    /// Atlas pages that arrived on the device that asked for them by the end of this frame,
    /// by frames taken (index k: requested k frames before the first frame that finds it;
    /// 1: brought right after the frame that asked).
    pub arrived_after: Vec<u64>,
}

impl DegradeFrame {
    /// `coarse_samples / samples` (0 with no sample).
    pub fn coarse_fraction(&self) -> f64 {
        if self.samples == 0 {
            0.0
        } else {
            self.coarse_samples as f64 / self.samples as f64
        }
    }
}

/// What one frame did.
#[derive(Clone, Debug, Default)]
pub struct FrameStats {
    /// Per device, texture (atlas) page requests.
    pub requests: Vec<u64>,
    /// Per device, requests for other pages (the frame's buffers, the framebuffer and the
    /// access map).
    pub other_requests: Vec<u64>,
    /// Per texture (the mesh's order), texture page requests of all devices: pages mapped
    /// back to the texture whose rectangle holds them (level 0's pages only, where the atlas
    /// has levels).
    pub by_texture: Vec<u64>,
    /// Per mip level of the atlas, texture page requests of all devices (one level, level 0,
    /// for the unfiltered renderer).
    pub by_level: Vec<u64>,
    /// Triangles set up (after clipping and fanning).
    pub triangles: u32,
    /// Per device, the pass's stats.
    pub passes: Vec<PassStats>,
    /// With `Miss::Degrade`.
    pub degrade: Option<DegradeFrame>,
}

pub struct Renderer {
    pub sys: System,
    mesh: Mesh,
    pub atlas: Atlas,
    /// The atlas object's host data (for a mipmapped atlas, its slots).
    texels: Vec<u8>,
    atlas_obj: ObjectEntry,
    atlas_mode: AccessMode,
    filtering: Option<Filtering>,
    frame_obj: ObjectEntry,
    access_obj: ObjectEntry,
    buffers: Option<(ObjectEntry, ObjectEntry)>,
    pub opts: RenderOptions,
    blocks: Blocks,
    regions: Vec<Domain>,
    frames: u64,
    /// With `Miss::Degrade`: the map of levels coarser than wanted, per pixel.
    coarse_obj: Option<ObjectEntry>,
    /// The atlas's replicated tail, as local pages (empty without `Miss::Degrade`).
    tail: std::ops::Range<u64>,
    /// Atlas pages asked for and not yet on the device that asked: (device, local page) to
    /// the frame (1-based) that first asked.
    waiting: std::collections::BTreeMap<(usize, u64), u64>,
}

fn read_words(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn buffer(sys: &System, words: &[u32]) -> Result<ObjectEntry, QuakeError> {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let desc = ObjectDesc::buffer(bytes.len() as u64, BUFFER_PAGE_BYTES)?;
    Ok(sys.create(desc, Some(bytes))?)
}

/// Requests `pages` for reading on every device (each device's own batch, all at once) and
/// waits for every grant.
fn read_everywhere(sys: &System, pages: &[GlobalPage]) -> Result<(), QuakeError> {
    let req: Vec<PageRequest> = pages
        .iter()
        .map(|&page| PageRequest {
            page,
            access: Access::Read,
        })
        .collect();
    acquire_on_each(sys, vec![req; sys.devices()])
}

/// Acquires (and releases) `per[d]` on device `d`, every device's batch at once, and waits
/// for every grant.
fn acquire_on_each(sys: &System, per: Vec<Vec<PageRequest>>) -> Result<(), QuakeError> {
    let pending: Vec<_> = per
        .into_iter()
        .enumerate()
        .map(|(d, req)| {
            sys.on_device(d, move |ctx| {
                if req.is_empty() {
                    return Ok(());
                }
                let r = ctx.acquire(req);
                ctx.release();
                r
            })
        })
        .collect::<Result<_, _>>()?;
    for p in pending {
        p.wait()??;
    }
    Ok(())
}

impl Renderer {
    pub fn new(sys: System, mesh: Mesh, opts: RenderOptions) -> Result<Renderer, QuakeError> {
        Self::new_with(sys, mesh, opts, None)
    }

    /// A renderer sampling a mipmapped atlas as `filtering` says (`None`: as [`Renderer::new`]).
    pub fn new_with(
        sys: System,
        mesh: Mesh,
        opts: RenderOptions,
        filtering: Option<Filtering>,
    ) -> Result<Renderer, QuakeError> {
        mesh.validate()?;
        check_screen(opts.width, opts.height)?;
        let packing = match filtering {
            None => Packing::Pages,
            Some(_) => Packing::Levels,
        };
        let (atlas, mut texels) = Atlas::of(&mesh.textures, opts.page, packing)?;
        let (desc, atlas_mode) = match filtering {
            None => (atlas.desc()?, AccessMode::Migrate),
            Some(f) => {
                let desc = atlas.mip_desc(f.border)?;
                if let Some((layout, addressing)) = desc.mip() {
                    let chain = atlas.mip_chain(&texels, &layout);
                    texels = tessera_core::mip::words_to_bytes(&tessera_core::mip::slots(
                        &layout, &chain, addressing,
                    ));
                }
                let mode = if f.border > 0 {
                    AccessMode::ReplicateRead
                } else {
                    AccessMode::Migrate
                };
                (desc, mode)
            }
        };
        let atlas_obj = sys.create_with(desc, Some(texels.clone()), atlas_mode)?;
        let screen =
            ObjectDesc::texture(opts.width, opts.height, TexelFormat::Rgba8Unorm, opts.page)?;
        let frame_obj = sys.create(screen, None)?;
        let access_obj = sys.create(screen, None)?;
        sys.mm.log_requests(true);
        let layout = atlas_obj.desc.mip().map(|(m, _)| m);
        let (coarse_obj, tail) = match (filtering.map(|f| f.miss), layout) {
            (Some(Miss::Degrade { tail }), Some(m)) => {
                let first = (0..m.levels()).find(|&l| {
                    m.extent(l)
                        .is_ok_and(|(w, h)| w <= tail as u64 && h <= tail as u64)
                });
                let start = first.map_or(Ok(m.page_count()), |l| m.level_offset(l))?;
                (Some(sys.create(screen, None)?), start..m.page_count())
            }
            _ => (None, 0..0),
        };
        // The textures every frame's pass binds (the others are its buffers), so the split
        // is the one `run_pass` makes.
        let textures: Vec<Bound> = [&atlas_obj, &frame_obj, &access_obj]
            .into_iter()
            .chain(coarse_obj.as_ref())
            .map(Bound::new)
            .collect();
        let regions = sys.regions(&textures, opts.width, opts.height, opts.split.partition())?;
        let r = Renderer {
            sys,
            blocks: Blocks::new(&mesh.texture_sizes()),
            mesh,
            atlas,
            texels,
            atlas_obj,
            atlas_mode,
            filtering,
            frame_obj,
            access_obj,
            buffers: None,
            opts,
            regions,
            frames: 0,
            coarse_obj,
            tail,
            waiting: Default::default(),
        };
        r.replicate_tail()?;
        Ok(r)
    }

    /// Atlas pages asked for (`Miss::Degrade`) and not yet on the device that asked.
    pub fn waiting_pages(&self) -> u64 {
        self.waiting.len() as u64
    }

    /// The atlas's replicated tail (`Miss::Degrade`), as local pages.
    pub fn tail_pages(&self) -> std::ops::Range<u64> {
        self.tail.clone()
    }

    /// Reads the tail onto every device; its requests are counted in no frame.
    fn replicate_tail(&self) -> Result<(), QuakeError> {
        if self.tail.is_empty() {
            return Ok(());
        }
        let base = self.atlas_obj.page_offset;
        let pages: Vec<GlobalPage> = self.tail.clone().map(|p| GlobalPage(base + p)).collect();
        read_everywhere(&self.sys, &pages)?;
        self.sys.mm.take_requests()?;
        Ok(())
    }

    /// Gives each device its region's pages of the objects a frame writes, writable, so
    /// that a degrading frame faults on none of them.
    fn writable_regions(&self) -> Result<(), QuakeError> {
        let targets: Vec<&ObjectEntry> = [&self.frame_obj, &self.access_obj]
            .into_iter()
            .chain(self.coarse_obj.as_ref())
            .collect();
        let p = self.opts.page;
        let per = self
            .regions
            .iter()
            .map(|r| {
                let mut req = Vec::new();
                if let Domain::Rect { x0, y0, x1, y1 } = *r {
                    for e in &targets {
                        let (px, _) = e.desc.pages_xy();
                        for py in y0 / p..y1.div_ceil(p) {
                            for qx in x0 / p..x1.div_ceil(p) {
                                req.push(PageRequest {
                                    page: GlobalPage(e.page_offset + qx as u64 + py as u64 * px),
                                    access: Access::Write,
                                });
                            }
                        }
                    }
                }
                req
            })
            .collect();
        acquire_on_each(&self.sys, per)?;
        Ok(())
    }

    /// The last frame's map of levels coarser than wanted per pixel (`Miss::Degrade`).
    pub fn coarse_map(&self) -> Result<Option<Vec<u32>>, QuakeError> {
        self.coarse_obj
            .as_ref()
            .map(|e| Ok(read_words(&self.sys.mm.read(e.id)?)))
            .transpose()
    }

    /// The mipmapped atlas's layout; `None` for the unfiltered renderer.
    pub fn mip_layout(&self) -> Option<MipLayout> {
        self.atlas_obj.desc.mip().map(|(m, _)| m)
    }

    pub fn filtering(&self) -> Option<Filtering> {
        self.filtering
    }

    pub fn mesh(&self) -> &Mesh {
        &self.mesh
    }

    /// The atlas object (its global pages, for residency pictures).
    pub fn atlas_entry(&self) -> &ObjectEntry {
        &self.atlas_obj
    }

    /// Each device's rectangle of the screen.
    pub fn regions(&self) -> &[Domain] {
        &self.regions
    }

    /// Renders one frame seen through `vp`.
    pub fn frame(&mut self, vp: &ViewProj) -> Result<FrameStats, QuakeError> {
        let (w, h) = (self.opts.width, self.opts.height);
        let s = setup(&self.mesh, &self.atlas, vp, w, h);
        if let Some((t, b)) = self.buffers.take() {
            self.sys.mm.free(t.id)?;
            self.sys.mm.free(b.id)?;
        }
        let tris = buffer(&self.sys, &s.tris)?;
        let bins = buffer(&self.sys, &s.bins)?;
        self.buffers = Some((tris, bins));
        if self.opts.clear_each_frame && self.frames > 0 {
            self.sys.mm.free(self.atlas_obj.id)?;
            self.atlas_obj = self.sys.create_with(
                self.atlas_obj.desc,
                Some(self.texels.clone()),
                self.atlas_mode,
            )?;
            self.waiting.clear();
            self.replicate_tail()?;
        }
        self.frames += 1;
        let pages: Vec<GlobalPage> = tris.pages().chain(bins.pages()).map(GlobalPage).collect();
        read_everywhere(&self.sys, &pages)?;
        if self.coarse_obj.is_some() {
            self.writable_regions()?;
        }
        let before = self.sys.mm.take_requests()?;
        let kernel = Raster {
            obj: Objects {
                atlas: self.atlas_obj.id,
                tris: tris.id,
                bins: bins.id,
                frame: self.frame_obj.id,
                access: self.access_obj.id,
            },
            width: w,
            height: h,
            tiles_x: s.tiles_x,
            filter: self.filtering.map(|f| f.filter),
            degrade: self.coarse_obj.as_ref().map(|e| e.id),
        };
        let objects: Vec<&ObjectEntry> = [
            &self.atlas_obj,
            &tris,
            &bins,
            &self.frame_obj,
            &self.access_obj,
        ]
        .into_iter()
        .chain(self.coarse_obj.as_ref())
        .collect();
        let spec = PassSpec::new(
            Arc::new(kernel),
            Arc::new(objects.iter().map(|e| Bound::new(e)).collect()),
            0,
            0,
        );
        tessera_runtime::check_launch(spec.kernel.as_ref(), &spec.bindings)?;
        let passes = self.sys.run_pass(
            &spec,
            w,
            h,
            self.opts.split.partition(),
            self.opts.procedure,
        )?;
        let log = self.sys.mm.take_requests()?;
        if self.opts.drop_unused {
            // The access map names level-0 texels, so only level 0's pages are judged: a
            // mipmapped atlas keeps its coarser levels.
            let level0 = self.atlas.page_count();
            let used = self.used_pages()?;
            for (d, used) in used.iter().enumerate() {
                let unused: Vec<GlobalPage> = self
                    .atlas_obj
                    .pages()
                    .filter(|p| {
                        let local = p - self.atlas_obj.page_offset;
                        local < level0
                            && !self.tail.contains(&local)
                            && used.binary_search(&local).is_err()
                    })
                    .map(GlobalPage)
                    .collect();
                self.sys.mm.evict(DeviceId::new(d)?, unused)?;
            }
        }
        let atlas = self.atlas_obj.pages();
        let n = self.sys.devices();
        let mut requests = vec![0; n];
        let mut by_texture = vec![0; self.mesh.textures.len()];
        let layout = self.mip_layout();
        let mut by_level = vec![0; layout.map_or(1, |m| m.levels() as usize)];
        let mut other: Vec<u64> = before.iter().map(|l| l.len() as u64).collect();
        other.resize(n, 0);
        for (d, l) in log.iter().enumerate().take(n) {
            for p in l {
                if atlas.contains(&p.0) {
                    requests[d] += 1;
                    let local = p.0 - atlas.start;
                    by_level[layout.map_or(0, |m| level_of_page(&m, local) as usize)] += 1;
                    if let Some(t) = self.atlas.texture_of_page(p.0 - atlas.start) {
                        by_texture[t as usize] += 1;
                    }
                } else {
                    other[d] += 1;
                }
            }
        }
        let degrade = match self.coarse_obj {
            Some(_) => Some(self.degrade_figures(&log, &passes)?),
            None => None,
        };
        Ok(FrameStats {
            requests,
            other_requests: other,
            by_texture,
            by_level,
            triangles: s.triangles,
            passes,
            degrade,
        })
    }

    /// What degrading did in the frame just rendered, whose atlas requests (per device) were
    /// `log`: the coarse samples from the maps, and which of the pages asked for so far are
    /// on their devices now.
    fn degrade_figures(
        &mut self,
        log: &[Vec<GlobalPage>],
        passes: &[PassStats],
    ) -> Result<DegradeFrame, QuakeError> {
        let coarse = self.coarse_map()?.unwrap_or_default();
        let access = self.access_map()?;
        let mut out = DegradeFrame {
            relaunched: passes.iter().map(|p| p.relaunched).sum(),
            late_requests: passes.iter().map(|p| p.late_requests).sum(),
            ..Default::default()
        };
        for (&c, &a) in coarse.iter().zip(&access) {
            if a != NO_ACCESS {
                out.samples += 1;
                out.coarse_samples += (c != 0) as u64;
            }
        }
        let atlas = self.atlas_obj.pages();
        for (d, l) in log.iter().enumerate() {
            for p in l.iter().filter(|p| atlas.contains(&p.0)) {
                self.waiting
                    .entry((d, p.0 - atlas.start))
                    .or_insert(self.frames);
            }
        }
        let (_, directory) = self.sys.mm.memory()?;
        let now = self.frames;
        self.waiting.retain(|&(d, local), &mut asked| {
            let held = directory
                .get((atlas.start + local) as usize)
                .is_some_and(|e| e.copies.0 >> d & 1 == 1);
            if held {
                let k = (now + 1 - asked) as usize;
                if out.arrived_after.len() <= k {
                    out.arrived_after.resize(k + 1, 0);
                }
                out.arrived_after[k] += 1;
            }
            !held
        });
        Ok(out)
    }

    /// The last frame, RGBA8 rows from the lower left.
    pub fn framebuffer(&self) -> Result<Vec<u8>, QuakeError> {
        Ok(self.sys.mm.read(self.frame_obj.id)?)
    }

    /// The last frame's access map: per pixel the atlas texel sampled (x | y << 16) or
    /// `NO_ACCESS`.
    pub fn access_map(&self) -> Result<Vec<u32>, QuakeError> {
        Ok(read_words(&self.sys.mm.read(self.access_obj.id)?))
    }

    /// Per device, the atlas pages (local numbers, ascending) its pixels sampled in the last
    /// frame.
    pub fn used_pages(&self) -> Result<Vec<Vec<u64>>, QuakeError> {
        let map = self.access_map()?;
        let w = self.opts.width as usize;
        let (p, px) = (self.atlas.page, self.atlas.pages_x() as u64);
        Ok(self
            .regions
            .iter()
            .map(|r| {
                let mut pages = Vec::new();
                if let Domain::Rect { x0, y0, x1, y1 } = *r {
                    for y in y0..y1 {
                        let row = &map[y as usize * w + x0 as usize..y as usize * w + x1 as usize];
                        for &a in row.iter().filter(|&&a| a != NO_ACCESS) {
                            let (ax, ay) = (a & 0xffff, a >> 16);
                            pages.push((ay / p) as u64 * px + (ax / p) as u64);
                        }
                    }
                }
                pages.sort_unstable();
                pages.dedup();
                pages
            })
            .collect())
    }

    /// Per device, the texture blocks (`trace`'s numbering) its pixels sampled in the last
    /// frame, ascending.
    pub fn accessed_blocks(&self) -> Result<Vec<Vec<u32>>, QuakeError> {
        let map = self.access_map()?;
        let w = self.opts.width as usize;
        let mut out = Vec::with_capacity(self.regions.len());
        for r in &self.regions {
            let mut blocks = Vec::new();
            if let Domain::Rect { x0, y0, x1, y1 } = *r {
                for y in y0..y1 {
                    for &a in &map[y as usize * w + x0 as usize..y as usize * w + x1 as usize] {
                        if a == NO_ACCESS {
                            continue;
                        }
                        let (ax, ay) = (a & 0xffff, a >> 16);
                        let t = self.atlas.texture_at(ax, ay).ok_or_else(|| {
                            QuakeError::Config(format!(
                                "the access map names atlas texel ({ax}, {ay}), outside every texture"
                            ))
                        })?;
                        let rect = self.atlas.rects[t as usize];
                        blocks.push(self.blocks.of(t, ax - rect.x, ay - rect.y));
                    }
                }
            }
            blocks.sort_unstable();
            blocks.dedup();
            out.push(blocks);
        }
        Ok(out)
    }

    /// Gives every page of a texture to one device chosen at random (seeded), as read copies,
    /// before the first frame (the start of the paper's Fig 13). The requests this makes are
    /// not counted in any frame.
    pub fn place_randomly(&mut self, seed: u64) -> Result<(), QuakeError> {
        place_randomly(&self.sys, &self.atlas_obj, &self.atlas, seed)
    }

    /// Per atlas page (local, row-major from the lower left), the devices holding a copy as a
    /// bit set (bit d: device d).
    /// Per level of the mipmapped atlas (one entry for a plain atlas), the pages some device
    /// holds a copy of now: the chain's memory on the devices, level by level.
    pub fn held_pages_by_level(&self) -> Result<Vec<u64>, QuakeError> {
        let held = self.atlas_residency()?;
        let layout = self.mip_layout();
        let mut out = vec![0u64; layout.map_or(1, |m| m.levels() as usize)];
        for (local, copies) in held.iter().enumerate() {
            if *copies != 0 {
                out[layout.map_or(0, |m| level_of_page(&m, local as u64)) as usize] += 1;
            }
        }
        Ok(out)
    }

    pub fn atlas_residency(&self) -> Result<Vec<u64>, QuakeError> {
        let (_, directory) = self.sys.mm.memory()?;
        Ok(self
            .atlas_obj
            .pages()
            .map(|p| directory.get(p as usize).map_or(0, |e| e.copies.0))
            .collect())
    }
}

/// Gives every page of `obj` that holds texels of a texture of `atlas` (every page of a
/// coarser level) to one device of `sys` chosen by a SplitMix64 stream from `seed` (pages in
/// order), as read copies; the requests this makes are taken off the request log. Padding
/// pages, which no texture owns and no sample reads, stay home: placed, they were counted in
/// a device's footprint though no picture or texture had them. Each page still draws its
/// number from the stream, so a texture page goes where it always went. The renderer and the
/// trace replay place alike, so a replay reproduces a randomly placed run.
pub fn place_randomly(
    sys: &System,
    obj: &ObjectEntry,
    atlas: &Atlas,
    seed: u64,
) -> Result<(), QuakeError> {
    let n = sys.devices();
    let mut per: Vec<Vec<PageRequest>> = vec![Vec::new(); n];
    let mut state = seed;
    for (local, p) in obj.pages().enumerate() {
        let d = (splitmix64(&mut state) % n as u64) as usize;
        let local = local as u64;
        if local < atlas.page_count() && atlas.texture_of_page(local).is_none() {
            continue;
        }
        per[d].push(PageRequest {
            page: GlobalPage(p),
            access: Access::Read,
        });
    }
    acquire_on_each(sys, per)?;
    sys.mm.take_requests()?;
    Ok(())
}

/// The level whose pages hold local page `page` of a chain.
pub fn level_of_page(m: &MipLayout, page: u64) -> u32 {
    (1..m.levels())
        .take_while(|&l| m.level_offset(l).is_ok_and(|o| o <= page))
        .last()
        .unwrap_or(0)
}

/// A small seeded generator (SplitMix64), so random placements repeat.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
