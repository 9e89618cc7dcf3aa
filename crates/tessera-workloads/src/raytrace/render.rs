//! The ray tracer on a tessera node: the scene's objects, one pass per frame over the image,
//! split across the devices by rows or columns.
//!
//! Objects: nodes, triangles and attributes (buffers), the atlas (RGBA8 texture), the image
//! (RGBA8 texture, the screen's size), all created once; and the ray-state buffer, created
//! zeroed for every frame (zero is the phase `START`) and freed after it. Buffer pages hold
//! as many bytes as a texture page (`page² × 4`), so a budget counts pages of one size. A
//! frame is one pass with the chosen procedure: with `relaunch`, rays that miss after making
//! progress suspend with their state saved and continue from it when relaunched.

use std::sync::Arc;

use tessera_core::{Filter, ObjectDesc, ObjectEntry, ObjectId, TexelFormat};
use tessera_runtime::{Bound, Partition, PassSpec, PassStats, Procedure, System};

use super::rays::{Objects, Rays, View, STATE_WORDS};
use super::scene::PagedScene;
use super::RaytraceError;
use crate::quake::render::level_of_page;

/// The largest image side accepted.
pub const MAX_SIDE: u32 = 4096;
/// The most AO rays per pixel accepted.
pub const MAX_AO_SAMPLES: u32 = 64;

/// How frames are rendered.
#[derive(Clone, Copy, Debug)]
pub struct RenderOptions {
    pub width: u32,
    pub height: u32,
    /// Page side of the textures; buffer pages are `page² × 4` bytes.
    pub page: u32,
    pub ao_samples: u32,
    /// AO ray length, world units.
    pub ao_radius: f32,
    pub partition: Partition,
    pub procedure: Procedure,
    /// `None`: the albedo is the nearest texel of a plain atlas. Otherwise the atlas is a
    /// mip chain (no border, so its pages stay `page² × 4` bytes like every other page) and
    /// the albedo samples it with this filter at the level of the pixel's footprint.
    pub filter: Option<Filter>,
}

/// Where one object's pages are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectResidency {
    pub name: &'static str,
    pub id: ObjectId,
    pub pages: u64,
    pub page_bytes: u64,
    /// Per device, pages it holds a copy of.
    pub per_device: Vec<u64>,
}

/// The renderer.
pub struct RayRenderer {
    pub sys: System,
    pub scene: PagedScene,
    pub view: View,
    pub opts: RenderOptions,
    objects: Vec<(&'static str, ObjectEntry)>,
    state: Option<ObjectEntry>,
}

fn words_to_bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

impl RayRenderer {
    pub fn new(
        sys: System,
        scene: PagedScene,
        view: View,
        opts: RenderOptions,
    ) -> Result<RayRenderer, RaytraceError> {
        let (w, h) = (opts.width, opts.height);
        if w == 0 || h == 0 || w > MAX_SIDE || h > MAX_SIDE {
            return Err(RaytraceError::Config(format!(
                "the image is {w}x{h}: each side must be 1 to {MAX_SIDE}"
            )));
        }
        if opts.ao_samples > MAX_AO_SAMPLES {
            return Err(RaytraceError::Config(format!(
                "{} AO samples: at most {MAX_AO_SAMPLES}",
                opts.ao_samples
            )));
        }
        if !(opts.ao_radius.is_finite() && opts.ao_radius > 0.0) {
            return Err(RaytraceError::Config(format!(
                "the AO radius must be a positive number (got {})",
                opts.ao_radius
            )));
        }
        if scene.atlas.page != opts.page {
            return Err(RaytraceError::Config(format!(
                "the scene's atlas was packed for page {}, the renderer asks for {}",
                scene.atlas.page, opts.page
            )));
        }
        let page_bytes = opts.page as u64 * opts.page as u64 * 4;
        let buffer = |words: &[u32]| -> Result<ObjectEntry, RaytraceError> {
            let desc = ObjectDesc::buffer(words.len() as u64 * 4, page_bytes)?;
            Ok(sys.create(desc, Some(words_to_bytes(words)))?)
        };
        let nodes = buffer(&scene.nodes)?;
        let tris = buffer(&scene.tris)?;
        let attrs = buffer(&scene.attrs)?;
        let atlas = match opts.filter {
            None => sys.create(
                ObjectDesc::texture(
                    scene.atlas.width,
                    scene.atlas.height,
                    TexelFormat::Rgba8Unorm,
                    opts.page,
                )?,
                Some(scene.atlas_texels.clone()),
            )?,
            Some(_) => {
                let desc = scene.atlas.mip_desc(0)?;
                let (layout, addressing) = desc
                    .mip()
                    .ok_or_else(|| RaytraceError::Config("the atlas has no mip chain".into()))?;
                let chain = scene.atlas.mip_chain(&scene.atlas_texels, &layout);
                let slots = tessera_core::mip::slots(&layout, &chain, addressing);
                sys.create(desc, Some(tessera_core::mip::words_to_bytes(&slots)))?
            }
        };
        let image = sys.create(
            ObjectDesc::texture(w, h, TexelFormat::Rgba8Unorm, opts.page)?,
            None,
        )?;
        // Checked before the first frame, so that a bad partition is a clear error.
        opts.partition.regions(w, h, sys.devices() as u32)?;
        Ok(RayRenderer {
            sys,
            scene,
            view,
            opts,
            objects: vec![
                ("nodes", nodes),
                ("triangles", tris),
                ("attributes", attrs),
                ("atlas", atlas),
                ("image", image),
            ],
            state: None,
        })
    }

    fn entry(&self, name: &str) -> &ObjectEntry {
        // The names are the constructor's own.
        &self
            .objects
            .iter()
            .find(|(n, _)| *n == name)
            .expect("an object the constructor created")
            .1
    }

    fn page_bytes(&self) -> u64 {
        self.opts.page as u64 * self.opts.page as u64 * 4
    }

    /// Renders one frame; per device, the pass's stats.
    pub fn frame(&mut self) -> Result<Vec<PassStats>, RaytraceError> {
        let (w, h) = (self.opts.width, self.opts.height);
        if let Some(s) = self.state.take() {
            self.sys.mm.free(s.id)?;
        }
        let bytes = w as u64 * h as u64 * STATE_WORDS as u64 * 4;
        let state = self
            .sys
            .create(ObjectDesc::buffer(bytes, self.page_bytes())?, None)?;
        self.state = Some(state);
        let e = |n: &str| self.entry(n).id;
        let kernel = Rays {
            obj: Objects {
                nodes: e("nodes"),
                tris: e("triangles"),
                attrs: e("attributes"),
                atlas: e("atlas"),
                state: state.id,
                image: e("image"),
            },
            width: w,
            height: h,
            node_count: self.scene.node_count,
            ao_samples: self.opts.ao_samples,
            ao_radius: self.opts.ao_radius,
            view: self.view,
            filter: self.opts.filter,
        };
        let mut bindings: Vec<Bound> = self.objects.iter().map(|(_, o)| Bound::new(o)).collect();
        bindings.push(Bound::new(&state));
        let spec = PassSpec::new(Arc::new(kernel), Arc::new(bindings), 0, 0);
        tessera_runtime::check_launch(spec.kernel.as_ref(), &spec.bindings)?;
        Ok(self
            .sys
            .run_pass(&spec, w, h, self.opts.partition, self.opts.procedure)?)
    }

    /// The last frame, RGBA8 rows from the bottom.
    pub fn image(&self) -> Result<Vec<u8>, RaytraceError> {
        Ok(self.sys.mm.read(self.entry("image").id)?)
    }

    /// Per object (the ray state last), the pages each device holds a copy of now.
    pub fn residency(&self) -> Result<Vec<ObjectResidency>, RaytraceError> {
        let (_, directory) = self.sys.mm.memory()?;
        let n = self.sys.devices();
        let mut all: Vec<(&'static str, &ObjectEntry)> =
            self.objects.iter().map(|(n, e)| (*n, e)).collect();
        if let Some(s) = &self.state {
            all.push(("ray state", s));
        }
        Ok(all
            .into_iter()
            .map(|(name, e)| {
                let mut per_device = vec![0u64; n];
                for p in e.pages() {
                    let copies = directory.get(p as usize).map_or(0, |d| d.copies.0);
                    for (d, c) in per_device.iter_mut().enumerate() {
                        *c += (copies >> d) & 1;
                    }
                }
                ObjectResidency {
                    name,
                    id: e.id,
                    pages: e.desc.page_count(),
                    page_bytes: e.desc.page_bytes(),
                    per_device,
                }
            })
            .collect())
    }

    /// Per level of the atlas's chain (one entry for a plain atlas), the atlas pages some
    /// device holds a copy of now.
    pub fn atlas_pages_by_level(&self) -> Result<Vec<u64>, RaytraceError> {
        Ok(self.atlas_levels()?.1)
    }

    /// Per level of the atlas's chain (one entry for a plain atlas): its pages, and those
    /// some device holds a copy of now.
    pub fn atlas_levels(&self) -> Result<(Vec<u64>, Vec<u64>), RaytraceError> {
        let (_, directory) = self.sys.mm.memory()?;
        let e = self.entry("atlas");
        let layout = e.desc.mip().map(|(l, _)| l);
        let levels = layout.map_or(1, |l| l.levels() as usize);
        let (mut pages, mut held) = (vec![0u64; levels], vec![0u64; levels]);
        for (local, p) in e.pages().enumerate() {
            let l = layout.map_or(0, |l| level_of_page(&l, local as u64)) as usize;
            pages[l] += 1;
            if directory.get(p as usize).is_some_and(|d| d.copies.0 != 0) {
                held[l] += 1;
            }
        }
        Ok((pages, held))
    }

    /// Bytes of every object of a frame (the scene, the image and the ray state).
    pub fn total_bytes(&self) -> u64 {
        let (w, h) = (self.opts.width as u64, self.opts.height as u64);
        let state = ObjectDesc::buffer(w * h * STATE_WORDS as u64 * 4, self.page_bytes())
            .map_or(0, |d| d.page_count() * d.page_bytes());
        self.objects
            .iter()
            .map(|(_, e)| e.desc.page_count() * e.desc.page_bytes())
            .sum::<u64>()
            + state
    }
}

/// A render that needs no node: the whole frame on one device with every page resident (a
/// budget above the scene), the reference the paged renders must equal.
pub fn resident_image(
    scene: &PagedScene,
    view: View,
    opts: RenderOptions,
) -> Result<Vec<u8>, RaytraceError> {
    let sys = System::cpu(&tessera_runtime::SystemConfig::new(1))?;
    let mut r = RayRenderer::new(
        sys,
        scene.clone(),
        view,
        RenderOptions {
            partition: Partition::Rows,
            procedure: Procedure::Relaunch,
            ..opts
        },
    )?;
    r.frame()?;
    r.image()
}
