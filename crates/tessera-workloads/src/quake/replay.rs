//! Replaying a trace: the memory manager driven by a trace's texture blocks, without
//! rendering. Each frame, each device runs `Touch` over one texel of every atlas page its
//! recorded blocks lie in (a launch over a list of texels), so the requests are real ones,
//! through the runtime, with the same procedure, batching and residency as a rendering run.
//! At the recorded page size and device count this makes exactly the recorded run's texture
//! page requests: a block lies in one page (atlas rectangles are page-aligned and P ≥ BLOCK),
//! so the pages touched are the pages the recorded run sampled, and a page is requested by a
//! device exactly when it is touched and not resident there. The replay does what the run did
//! between frames as well: clear each frame, drop unused pages, or place the pages at random
//! first (same seed, same order, so the same placement), as the options say.
//!
//! With fewer devices than recorded, recorded device r's blocks go to device r·N/R (adjacent
//! strips merge), which is exact for the merged strips' union of blocks.

use std::sync::Arc;

use tessera_core::{DeviceId, GlobalPage, ObjectDesc, ObjectId, TexelFormat};
use tessera_runtime::{
    Bound, Domain, Fault, Invocation, Kernel, PassSpec, Procedure, System, WgslKernel,
};

use super::atlas::Atlas;
use super::trace::{Blocks, Trace, BLOCK};
use super::QuakeError;

tessera_runtime::kernel_params! {
    /// What `touch.wgsl` reads as `params`.
    pub struct TouchParams {
        pub atlas: u32,
    }
}

/// Reads the atlas texel at its own coordinates.
pub struct Touch {
    pub atlas: ObjectId,
}

impl Kernel for Touch {
    fn name(&self) -> &'static str {
        "touch"
    }
    fn wgsl(&self) -> Option<WgslKernel> {
        Some(WgslKernel::new(
            include_str!("touch.wgsl"),
            &TouchParams {
                atlas: self.atlas.0,
            },
        ))
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        inv.load_rgba8(self.atlas, x, y).map(|_| ())
    }
}

#[derive(Clone, Copy, Debug)]
pub struct ReplayOptions {
    pub page: u32,
    pub clear_each_frame: bool,
    /// After each frame, drop each device's pages it did not touch in that frame.
    pub drop_unused: bool,
    /// Place every atlas page on a random device first, from this seed (as the renderer does).
    pub random_placement: Option<u64>,
    pub procedure: Procedure,
}

/// What a replay did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replayed {
    /// Per frame, per device: texture page requests.
    pub requests: Vec<Vec<u64>>,
    /// Per device, at the end: atlas pages only it holds, and pages it shares with another.
    pub unique_pages: Vec<u64>,
    pub shared_pages: Vec<u64>,
    /// Bytes per atlas page (P² RGBA8 texels).
    pub page_bytes: u64,
}

/// Per frame, per device of `sys`, the texture page requests the replay made. `progress` is
/// called after each frame with the frames done.
pub fn replay(
    sys: &System,
    trace: &Trace,
    opts: &ReplayOptions,
    progress: impl FnMut(usize),
) -> Result<Vec<Vec<u64>>, QuakeError> {
    Ok(replay_all(sys, trace, opts, progress)?.requests)
}

/// [`replay`], with where the atlas pages are at the end.
pub fn replay_all(
    sys: &System,
    trace: &Trace,
    opts: &ReplayOptions,
    mut progress: impl FnMut(usize),
) -> Result<Replayed, QuakeError> {
    let n = sys.devices();
    if n > trace.devices as usize {
        return Err(QuakeError::Config(format!(
            "the trace was recorded on {} device(s); it replays on at most that many (got {n})",
            trace.devices
        )));
    }
    if opts.page < BLOCK {
        return Err(QuakeError::Config(format!(
            "page {}: the trace records {BLOCK}x{BLOCK} blocks, so it replays at page sizes of {BLOCK} or more",
            opts.page
        )));
    }
    let atlas = Atlas::pack(&trace.textures, opts.page)?;
    let blocks = Blocks::new(&trace.textures);
    let desc = ObjectDesc::texture(
        atlas.width,
        atlas.height,
        TexelFormat::Rgba8Unorm,
        opts.page,
    )?;
    let obj = sys.create(desc, None)?;
    let all: Vec<GlobalPage> = obj.pages().map(GlobalPage).collect();
    sys.mm.log_requests(true);
    if let Some(seed) = opts.random_placement {
        super::render::place_randomly(sys, &obj, &atlas, seed)?;
    }
    sys.mm.take_requests()?;
    let p = opts.page;
    let mut out = Vec::with_capacity(trace.frames.len());
    for (f, frame) in trace.frames.iter().enumerate() {
        if opts.clear_each_frame && f > 0 {
            for d in 0..n {
                sys.mm.evict(DeviceId::new(d)?, all.clone())?;
            }
        }
        let mut texels: Vec<Vec<(u32, u32)>> = vec![Vec::new(); n];
        for (r, rec) in frame.iter().enumerate() {
            let d = r * n / trace.devices as usize;
            for &b in &rec.blocks {
                let (t, bx, by) = blocks.locate(b);
                let rect = atlas.rects[t as usize];
                let (x, y) = (rect.x + bx * BLOCK, rect.y + by * BLOCK);
                texels[d].push((x / p * p, y / p * p));
            }
        }
        let bindings = Arc::new(vec![Bound::new(&obj)]);
        for list in &mut texels {
            list.sort_unstable();
            list.dedup();
        }
        let touched = texels.clone();
        let pending: Vec<_> = texels
            .into_iter()
            .enumerate()
            .filter(|(_, l)| !l.is_empty())
            .map(|(d, list)| {
                let spec = PassSpec {
                    kernel: Arc::new(Touch { atlas: obj.id }) as Arc<dyn Kernel>,
                    bindings: bindings.clone(),
                    domain: Domain::List(Arc::new(list)),
                    display: false,
                };
                let procedure = opts.procedure;
                sys.on_device(d, move |ctx| ctx.run_pass(&spec, procedure))
            })
            .collect::<Result<_, _>>()?;
        // Every device's pass ends before any error is reported: the barrier holds.
        let results: Vec<_> = pending.into_iter().map(|p| p.wait()).collect();
        for r in results {
            r??;
        }
        let log = sys.mm.take_requests()?;
        if opts.drop_unused {
            for (d, list) in touched.iter().enumerate() {
                let used: std::collections::HashSet<u64> = list
                    .iter()
                    .map(|&(x, y)| obj.page_offset + (y / p * atlas.pages_x() + x / p) as u64)
                    .collect();
                let unused = all
                    .iter()
                    .copied()
                    .filter(|g| !used.contains(&g.0))
                    .collect();
                sys.mm.evict(DeviceId::new(d)?, unused)?;
            }
        }
        let pages = obj.pages();
        out.push(
            (0..n)
                .map(|d| {
                    log.get(d).map_or(0, |l| {
                        l.iter().filter(|g| pages.contains(&g.0)).count() as u64
                    })
                })
                .collect(),
        );
        progress(f + 1);
    }
    let (_, directory) = sys.mm.memory()?;
    let (mut unique_pages, mut shared_pages) = (vec![0; n], vec![0; n]);
    for p in obj.pages() {
        let copies = directory.get(p as usize).map_or(0, |e| e.copies.0);
        for d in 0..n {
            if copies >> d & 1 == 1 {
                if copies.count_ones() > 1 {
                    shared_pages[d] += 1;
                } else {
                    unique_pages[d] += 1;
                }
            }
        }
    }
    Ok(Replayed {
        requests: out,
        unique_pages,
        shared_pages,
        page_bytes: p as u64 * p as u64 * 4,
    })
}
