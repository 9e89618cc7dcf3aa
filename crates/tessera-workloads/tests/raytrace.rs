//! The out-of-core ray tracer on the CPU backend: every configuration renders the
//! resident image bit for bit, rays resume from saved state, and the BVH walk finds the
//! triangle a brute-force search over all triangles finds.

#[path = "shared/raytrace.rs"]
mod shared;

use shared::{evictions, setup_paged};
use tessera_runtime::{Partition, Policy, Procedure, System, SystemConfig};
use tessera_workloads::raytrace::rays::View;
use tessera_workloads::raytrace::render::{resident_image, RayRenderer, RenderOptions};
use tessera_workloads::raytrace::scene::PagedScene;
use tessera_workloads::raytrace::{check_budget, RaytraceError, SceneSpec, MIN_BUDGET_PAGES};

const PAGE: u32 = 16;

fn setup(n: u32, instances: u32, w: u32, h: u32) -> (PagedScene, View, RenderOptions) {
    setup_paged(n, instances, w, h, PAGE)
}

fn render(
    scene: &PagedScene,
    view: View,
    opts: RenderOptions,
    devices: usize,
    budget_bytes: u64,
    policy: Policy,
) -> (Vec<u8>, u64, u64) {
    let sys = System::cpu(
        &SystemConfig::new(devices)
            .budget(budget_bytes)
            .memory(budget_bytes)
            .policy(policy)
            .threads(2),
    )
    .unwrap();
    let mut r = RayRenderer::new(sys, scene.clone(), view, opts).unwrap();
    let stats = r.frame().unwrap();
    let evictions = evictions(&r.sys);
    let suspended = stats.iter().map(|s| s.suspended).sum();
    (r.image().unwrap(), evictions, suspended)
}

#[test]
fn the_image_is_not_trivial() {
    let (scene, view, opts) = setup(3, 1, 48, 36);
    let img = resident_image(&scene, view, opts).unwrap();
    let mut distinct: Vec<[u8; 4]> = img
        .chunks_exact(4)
        .map(|c| [c[0], c[1], c[2], c[3]])
        .collect();
    distinct.sort_unstable();
    distinct.dedup();
    assert!(distinct.len() > 20, "only {} colours", distinct.len());
}

/// At the minimum budget a ray's step fits under every policy. At pages of 4 texels (64
/// bytes) a leaf's triangles span more pages than the 8 of the minimum, and the ray tracer
/// made each leaf one step: under random eviction a ray resumed before a leaf and asked for
/// 9 pages at once. A leaf's triangles are steps of their own now.
#[test]
fn the_minimum_budget_renders_under_every_policy_at_small_pages() {
    let page = 4;
    let (scene, view, opts) = setup_paged(3, 1, 17, 13, page);
    let want = resident_image(&scene, view, opts).unwrap();
    let budget = MIN_BUDGET_PAGES * (page * page * 4) as u64;
    check_budget(budget, page).unwrap();
    for policy in Policy::ALL {
        let (img, evictions, suspended) = render(&scene, view, opts, 1, budget, policy);
        assert!(evictions > 0 && suspended > 0, "{policy:?}");
        assert!(img == want, "{policy:?}");
    }
}

/// Pages each object of a resident one-device render touched, summed.
fn touched_pages(scene: &PagedScene, view: View, opts: RenderOptions) -> u64 {
    let sys = System::cpu(&SystemConfig::new(1).threads(2)).unwrap();
    let mut r = RayRenderer::new(sys, scene.clone(), view, opts).unwrap();
    r.frame().unwrap();
    r.residency().unwrap().iter().map(|o| o.per_device[0]).sum()
}

const PAGE_BYTES: u64 = (PAGE * PAGE * 4) as u64;

/// Only rays that suspended read the state buffer. With a budget that holds the scene and the
/// image but not the state, a frame after the first suspends no ray and leaves none of the
/// state's pages on a device, in a few launches and the resident image; had every ray read
/// its state, each frame's new state buffer would fault at every pixel and fill the budget.
#[test]
fn rays_that_never_suspended_read_no_saved_state() {
    let (scene, view, opts) = setup(3, 1, 48, 36);
    let want = resident_image(&scene, view, opts).unwrap();
    let fits = |r: &RayRenderer, name: &str| {
        r.residency()
            .unwrap()
            .into_iter()
            .find(|o| o.name == name)
            .unwrap()
    };
    // Sized from a resident render: every page but the state's, with room to spare.
    let sys = System::cpu(&SystemConfig::new(1).threads(2)).unwrap();
    let mut r = RayRenderer::new(sys, scene.clone(), view, opts).unwrap();
    r.frame().unwrap();
    let all = r.residency().unwrap();
    let state = fits(&r, "ray state");
    let others: u64 = all
        .iter()
        .filter(|o| o.name != "ray state")
        .map(|o| o.pages)
        .sum();
    assert!(state.pages > 4, "the state buffer is {} pages", state.pages);
    let budget = (others + 4) * PAGE_BYTES;
    assert!(budget < (others + state.pages) * PAGE_BYTES);
    for devices in [1, 2] {
        let sys = System::cpu(
            &SystemConfig::new(devices)
                .budget(budget)
                .memory(budget)
                .threads(2),
        )
        .unwrap();
        let mut r = RayRenderer::new(sys, scene.clone(), view, opts).unwrap();
        for frame in 0..3 {
            let stats = r.frame().unwrap();
            assert_eq!(
                r.image().unwrap(),
                want,
                "{devices} device(s), frame {frame}"
            );
            if frame == 0 {
                continue;
            }
            let suspended: u64 = stats.iter().map(|s| s.suspended).sum();
            let launches: u64 = stats.iter().map(|s| s.launches).sum();
            assert_eq!(suspended, 0, "{devices} device(s), frame {frame}");
            assert!(
                launches <= 3 * devices as u64,
                "{devices} device(s), frame {frame}: {launches} launches"
            );
            assert_eq!(fits(&r, "ray state").per_device, vec![0; devices]);
        }
    }
}

/// Two devices split 36 rows of 16-row pages at 16, not 18, so no page of the image is
/// written by both: once the scene is resident each device launches once a frame and nothing
/// is relaunched (with the even cut the image's second page row went from one device to the
/// other every frame, and its rays ran again).
#[test]
fn two_devices_share_no_image_page_and_relaunch_nothing_once_resident() {
    let (scene, view, opts) = setup(3, 1, 48, 36);
    let want = resident_image(&scene, view, opts).unwrap();
    let sys = System::cpu(&SystemConfig::new(2).threads(2)).unwrap();
    let mut r = RayRenderer::new(sys, scene, view, opts).unwrap();
    for frame in 0..4 {
        let stats = r.frame().unwrap();
        assert_eq!(r.image().unwrap(), want, "frame {frame}");
        if frame < 2 {
            continue;
        }
        for (d, s) in stats.iter().enumerate() {
            assert_eq!(
                (s.launches, s.relaunched),
                (1, 0),
                "frame {frame}, device {d}"
            );
        }
    }
}

/// The "done when": fully resident, 2× and 8× oversubscription, 1–4 devices, every
/// policy and both procedures render the same image bit for bit; the oversubscribed runs do
/// evict, and their rays do suspend and resume.
#[test]
fn every_configuration_renders_the_resident_image() {
    let (scene, view, opts) = setup(3, 2, 40, 30);
    let want = resident_image(&scene, view, opts).unwrap();
    let touched = touched_pages(&scene, view, opts);
    let cases: &[(usize, f64, Policy, Procedure)] = &[
        (1, 1.0, Policy::Lru, Procedure::Relaunch),
        (1, 2.0, Policy::Lru, Procedure::Relaunch),
        (1, 8.0, Policy::Lru, Procedure::Relaunch),
        (2, 2.0, Policy::Clock, Procedure::Relaunch),
        (3, 8.0, Policy::Fifo, Procedure::Relaunch),
        (4, 2.0, Policy::Random, Procedure::Relaunch),
        (4, 8.0, Policy::Lru, Procedure::Relaunch),
        (2, 2.0, Policy::Lru, Procedure::TwoPass),
    ];
    for &(devices, ratio, policy, procedure) in cases {
        let budget = (touched as f64 / devices as f64 / ratio) as u64 * PAGE_BYTES;
        let budget = budget.max(tessera_workloads::raytrace::MIN_BUDGET_PAGES * PAGE_BYTES);
        let o = RenderOptions {
            procedure,
            partition: if devices == 3 {
                Partition::Cols
            } else {
                Partition::Rows
            },
            ..opts
        };
        let (got, evictions, suspended) = render(&scene, view, o, devices, budget, policy);
        let what = format!("{devices} devices, {ratio}x, {policy:?}, {procedure:?}");
        assert!(
            got == want,
            "{what}: the image differs from the resident one"
        );
        if ratio > 1.0 {
            assert!(evictions > 0, "{what}: nothing was evicted");
        }
        if procedure == Procedure::Relaunch {
            assert!(suspended > 0, "{what}: no ray saved its state");
        }
    }
}

/// 4× oversubscription with a budget of a few pages: rays suspend and resume many times, and
/// the image is still the resident one.
#[test]
fn a_budget_of_a_few_pages_renders_the_resident_image() {
    let page = 32;
    let page_bytes = (page * page * 4) as u64;
    let (scene, view, opts) = setup_paged(1, 1, 16, 12, page);
    let want = resident_image(&scene, view, opts).unwrap();
    let touched = touched_pages(&scene, view, opts);
    let pages = (touched / 4).max(tessera_workloads::raytrace::MIN_BUDGET_PAGES);
    assert!(
        pages <= 16,
        "{pages} pages is not a few (touched {touched})"
    );
    let (got, evictions, suspended) =
        render(&scene, view, opts, 1, pages * page_bytes, Policy::Lru);
    assert!(
        got == want,
        "{pages} pages: the image differs from the resident one"
    );
    assert!(evictions > 0 && suspended > 0);
}

#[test]
fn a_budget_below_the_minimum_is_a_typed_error() {
    let min = tessera_workloads::raytrace::MIN_BUDGET_PAGES * PAGE_BYTES;
    assert!(check_budget(min, PAGE).is_ok());
    assert!(matches!(
        check_budget(min - 1, PAGE),
        Err(RaytraceError::BudgetTooSmall { min_bytes, .. }) if min_bytes == min
    ));
}

#[test]
fn scene_specs_parse_or_say_why_not() {
    assert_eq!("generated".parse(), Ok(SceneSpec::Generated(3)));
    assert_eq!("generated:5".parse(), Ok(SceneSpec::Generated(5)));
    assert_eq!(
        "openarena:oa_dm1".parse(),
        Ok(SceneSpec::OpenArena("oa_dm1".into()))
    );
    for bad in [
        "",
        "openarena:",
        "generated:x",
        "generated:100000",
        "quake:dm1",
    ] {
        assert!(bad.parse::<SceneSpec>().is_err(), "{bad:?} parsed");
    }
    // A missing pak directory or map is a typed error, before anything is rendered.
    let missing = SceneSpec::OpenArena("no_such_map".into())
        .load(std::path::Path::new("/nonexistent/pak/dir"));
    assert!(matches!(missing, Err(RaytraceError::Load(_))));
}

mod plain {
    //! The kernel body over plain arrays, with loads refused on purpose.
    use tessera_core::ObjectId;
    use tessera_runtime::Fault;
    use tessera_workloads::access::BufferAccess;
    use tessera_workloads::raytrace::rays::{Objects, RayAccess};

    pub struct Plain<'a> {
        pub obj: Objects,
        pub nodes: &'a [u32],
        pub tris: &'a [u32],
        pub attrs: &'a [u32],
        pub atlas: &'a [u8],
        pub atlas_width: u32,
        pub state: Vec<u32>,
        pub image: Vec<u8>,
        pub width: u32,
        /// Loads left before every load misses (scene loads only; the state is always there).
        pub loads_left: u64,
        /// Refuse every atlas load.
        pub no_atlas: bool,
        pub loads: u64,
        pub stores: Vec<(u32, u32)>,
        /// The pixel saved its state at an earlier attempt (the runtime's `RESUMED_BIT`).
        pub resumed: bool,
    }

    impl RayAccess for Plain<'_> {
        fn store_u32(&mut self, id: ObjectId, i: u32, v: u32) -> Result<(), Fault> {
            assert_eq!(id, self.obj.state);
            self.stores.push((i, v));
            Ok(())
        }
        fn resumed(&self) -> bool {
            self.resumed
        }
    }

    impl BufferAccess for Plain<'_> {
        fn load_u32(&mut self, id: ObjectId, i: u32) -> Result<u32, Fault> {
            if id == self.obj.state {
                return Ok(self.state[i as usize]);
            }
            if self.loads_left == 0 {
                return Err(Fault::Miss);
            }
            self.loads_left -= 1;
            self.loads += 1;
            let b = if id == self.obj.nodes {
                self.nodes
            } else if id == self.obj.tris {
                self.tris
            } else {
                self.attrs
            };
            Ok(b[i as usize])
        }
        fn load_rgba8(&mut self, _: ObjectId, x: u32, y: u32) -> Result<[u8; 4], Fault> {
            if self.no_atlas || self.loads_left == 0 {
                return Err(Fault::Miss);
            }
            self.loads_left -= 1;
            self.loads += 1;
            let at = ((y * self.atlas_width + x) * 4) as usize;
            Ok([
                self.atlas[at],
                self.atlas[at + 1],
                self.atlas[at + 2],
                self.atlas[at + 3],
            ])
        }
        fn store_rgba8(&mut self, _: ObjectId, x: u32, y: u32, v: [u8; 4]) -> Result<(), Fault> {
            let at = ((y * self.width + x) * 4) as usize;
            self.image[at..at + 4].copy_from_slice(&v);
            Ok(())
        }
        fn sample_window(
            &mut self,
            _: ObjectId,
            _: tessera_core::Sampler,
            _: tessera_core::Window,
            _: (f32, f32, f32),
        ) -> Result<[u8; 4], Fault> {
            unreachable!("the plain arrays hold no mip chain: these kernels do not filter")
        }
    }
}

fn kernel(
    scene: &PagedScene,
    view: View,
    opts: RenderOptions,
) -> tessera_workloads::raytrace::rays::Rays {
    use tessera_core::ObjectId;
    use tessera_workloads::raytrace::rays::{Objects, Rays};
    Rays {
        obj: Objects {
            nodes: ObjectId(1),
            tris: ObjectId(2),
            attrs: ObjectId(3),
            atlas: ObjectId(4),
            state: ObjectId(5),
            image: ObjectId(6),
        },
        width: opts.width,
        height: opts.height,
        node_count: scene.node_count,
        ao_samples: opts.ao_samples,
        ao_radius: opts.ao_radius,
        view,
        filter: None,
    }
}

fn plain<'a>(
    scene: &'a PagedScene,
    k: &tessera_workloads::raytrace::rays::Rays,
) -> plain::Plain<'a> {
    plain::Plain {
        obj: k.obj,
        nodes: &scene.nodes,
        tris: &scene.tris,
        attrs: &scene.attrs,
        atlas: &scene.atlas_texels,
        atlas_width: scene.atlas.width,
        state: vec![0; (k.width * k.height * 8) as usize],
        image: vec![0; (k.width * k.height * 4) as usize],
        width: k.width,
        loads_left: u64::MAX,
        no_atlas: false,
        loads: 0,
        stores: Vec::new(),
        resumed: false,
    }
}

/// Möller–Trumbore written again from the triangle words, over every triangle (no BVH).
fn brute_force_nearest(scene: &PagedScene, o: [f32; 3], d: [f32; 3]) -> Option<f32> {
    let f = |w: u32| f32::from_bits(w);
    let mut best: Option<f32> = None;
    for t in scene.tris.chunks_exact(9) {
        let v0 = [f(t[0]), f(t[1]), f(t[2])];
        let e1 = [f(t[3]), f(t[4]), f(t[5])];
        let e2 = [f(t[6]), f(t[7]), f(t[8])];
        let cr = |a: [f32; 3], b: [f32; 3]| {
            [
                a[1] * b[2] - a[2] * b[1],
                a[2] * b[0] - a[0] * b[2],
                a[0] * b[1] - a[1] * b[0],
            ]
        };
        let dt = |a: [f32; 3], b: [f32; 3]| a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
        let p = cr(d, e2);
        let det = dt(e1, p);
        if det == 0.0 {
            continue;
        }
        let inv = 1.0 / det;
        let s = [o[0] - v0[0], o[1] - v0[1], o[2] - v0[2]];
        let u = dt(s, p) * inv;
        if !(0.0..=1.0).contains(&u) {
            continue;
        }
        let q = cr(s, e1);
        let v = dt(d, q) * inv;
        if v < 0.0 || u + v > 1.0 {
            continue;
        }
        let tt = dt(e2, q) * inv;
        if tt > 0.0 && best.is_none_or(|b| tt < b) {
            best = Some(tt);
        }
    }
    best
}

/// The BVH walk finds the nearest hit a search over every triangle finds: each pixel runs
/// with the atlas refused, so it suspends at the albedo and stores its primary hit.
#[test]
fn the_bvh_walk_finds_the_brute_force_nearest_hit() {
    let (scene, view, opts) = setup(3, 2, 32, 24);
    let k = kernel(&scene, view, opts);
    let mut p = plain(&scene, &k);
    p.no_atlas = true;
    let mut hits = 0;
    for y in 0..opts.height {
        for x in 0..opts.width {
            p.stores.clear();
            let r = k.pixel(&mut p, x, y);
            let sx = (x as f32 + 0.5) * (2.0 / opts.width as f32) - 1.0;
            let sy = (y as f32 + 0.5) * (2.0 / opts.height as f32) - 1.0;
            let d = [0, 1, 2].map(|c| view.forward[c] + view.right[c] * sx + view.up[c] * sy);
            match brute_force_nearest(&scene, view.eye, d) {
                None => assert!(r.is_ok(), "({x}, {y}): a sky pixel did not complete"),
                Some(t) => {
                    assert!(matches!(r, Err(tessera_runtime::Fault::Suspend)));
                    let base = (y * opts.width + x) * 8;
                    let saved_t = p
                        .stores
                        .iter()
                        .find(|(i, _)| *i == base + 2)
                        .map(|&(_, v)| f32::from_bits(v));
                    assert_eq!(saved_t, Some(t), "({x}, {y})");
                    hits += 1;
                }
            }
        }
    }
    assert!(hits > (opts.width * opts.height / 2) as usize);
}

/// A ray that has made progress never starts again from the camera: with every attempt cut
/// off after a fixed number of loads (enough for one triangle, fewer than one leaf's and far
/// fewer than a ray needs), each
/// pixel still completes, by resuming from the state it stored, with the resident image's
/// colour; a ray restarted from the camera would never get past the first loads. An attempt
/// that stops before any progress (inside a leaf) stores nothing and is simply retried, as
/// the runtime relaunches a plain miss.
#[test]
fn rays_resume_from_their_saved_state() {
    let (scene, view, opts) = setup(3, 1, 16, 12);
    let want = resident_image(&scene, view, opts).unwrap();
    let k = kernel(&scene, view, opts);
    let mut whole = plain(&scene, &k);
    let mut cut = plain(&scene, &k);
    // The ray's state (7 loads), an AO ray's normal (6), a node's words (8) and one triangle
    // (9), with room; a leaf's 8 triangles alone are 72 loads.
    const PER_ATTEMPT: u64 = 40;
    let mut most_attempts = 0;
    for y in 0..opts.height {
        for x in 0..opts.width {
            let before = whole.loads;
            k.pixel(&mut whole, x, y).unwrap();
            let needed = whole.loads - before;
            let mut attempts = 0u64;
            cut.resumed = false;
            loop {
                attempts += 1;
                assert!(attempts <= needed, "({x}, {y}): no progress");
                cut.loads_left = PER_ATTEMPT;
                cut.stores.clear();
                match k.pixel(&mut cut, x, y) {
                    Ok(()) => break,
                    Err(tessera_runtime::Fault::Suspend) => {
                        for &(i, v) in &cut.stores {
                            cut.state[i as usize] = v;
                        }
                        cut.resumed = true;
                    }
                    Err(tessera_runtime::Fault::Miss) => assert!(cut.stores.is_empty()),
                    Err(e) => panic!("({x}, {y}): {e:?}"),
                }
            }
            if needed > 3 * PER_ATTEMPT {
                most_attempts = most_attempts.max(attempts);
            }
        }
    }
    assert!(most_attempts > 3, "no pixel needed many attempts");
    assert!(cut.image == whole.image && whole.image == want);
}

/// A filtered albedo (a mip-chained atlas sampled at the level of the pixel's footprint) is
/// as exact under paging as the nearest texel: oversubscribed, on several devices and with
/// both procedures the image is the resident one. Distant surfaces do reach coarser levels.
#[test]
fn filtered_renders_equal_the_resident_render_and_use_coarse_levels() {
    use tessera_core::Filter;
    let (scene, view, plain) = setup(3, 2, 40, 30);
    let opts = RenderOptions {
        filter: Some(Filter::Trilinear),
        ..plain
    };
    let want = resident_image(&scene, view, opts).unwrap();
    assert!(want != resident_image(&scene, view, plain).unwrap());
    let sys = System::cpu(&SystemConfig {
        devices: 1,
        cpu_threads: 2,
        ..Default::default()
    })
    .unwrap();
    let mut r = RayRenderer::new(sys, scene.clone(), view, opts).unwrap();
    r.frame().unwrap();
    let by_level = r.atlas_pages_by_level().unwrap();
    assert!(by_level.len() > 1, "{by_level:?}");
    assert!(by_level[1..].iter().sum::<u64>() > 0, "{by_level:?}");
    let touched = touched_pages(&scene, view, opts);
    for (devices, ratio, procedure) in [(2, 4.0, Procedure::Relaunch), (3, 2.0, Procedure::TwoPass)]
    {
        // A trilinear tap set may straddle four pages on each of two levels: room for them
        // beside the ray's other pages.
        let budget = (touched as f64 / devices as f64 / ratio) as u64 * PAGE_BYTES;
        let budget = budget.max(16 * PAGE_BYTES);
        let o = RenderOptions { procedure, ..opts };
        let (got, evictions, _) = render(&scene, view, o, devices, budget, Policy::Lru);
        assert!(got == want, "{devices} devices, {ratio}x, {procedure:?}");
        assert!(
            evictions > 0,
            "{devices} devices, {ratio}x: nothing evicted"
        );
    }
}
