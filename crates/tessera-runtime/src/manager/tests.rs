use std::sync::Arc;

use tessera_core::{
    Access, Coherence, CoreError, DeviceId, GlobalPage, ObjectDesc, ObjectEntry, ObjectId,
    PageRequest, ProtocolVariant, TexelFormat,
};

use crate::{
    Bound, Fault, Invocation, Kernel, Partition, PassSpec, Procedure, RuntimeError, System,
    SystemConfig, PAGE_LIMIT,
};

struct Fill {
    to: ObjectId,
    value: f32,
}

impl Kernel for Fill {
    fn name(&self) -> &'static str {
        "fill"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        inv.store_f32(self.to, x, y, self.value)
    }
}

struct CopyTexels {
    from: ObjectId,
    to: ObjectId,
}

impl Kernel for CopyTexels {
    fn name(&self) -> &'static str {
        "copy"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        let v = inv.load_f32(self.from, x, y)?;
        inv.store_f32(self.to, x, y, v)
    }
}

/// One 8×8 page of 32-bit floats.
fn one_page() -> ObjectDesc {
    ObjectDesc::texture(8, 8, TexelFormat::R32Float, 8).unwrap()
}

fn texels(v: f32) -> Vec<u8> {
    (0..64).flat_map(|_| v.to_le_bytes()).collect()
}

fn system(variant: ProtocolVariant) -> System {
    System::cpu(&SystemConfig::new(1).variant(variant).threads(1)).unwrap()
}

fn pass(sys: &System, kernel: impl Kernel + 'static, objects: &[&ObjectEntry]) {
    let spec = PassSpec::new(
        Arc::new(kernel),
        Arc::new(objects.iter().map(|e| Bound::new(e)).collect()),
        8,
        8,
    );
    sys.run_pass(&spec, 8, 8, Partition::Rows, Procedure::Relaunch)
        .unwrap();
}

/// Device 0 writes an object, which is freed; the next object reuses its page, and device
/// 0 copies it: what it copies is what it saw of the new object.
fn copy_of_a_reused_page(variant: ProtocolVariant) -> Vec<u8> {
    let sys = system(variant);
    let old = sys.create(one_page(), None).unwrap();
    // Keeps the old page a hole inside the space, so page tables are not shortened past it
    // (which would hide a stale mapping).
    let _keep = sys.create(one_page(), None).unwrap();
    pass(
        &sys,
        Fill {
            to: old.id,
            value: 1.0,
        },
        &[&old],
    );
    sys.mm.free(old.id).unwrap();
    let new = sys.create(one_page(), Some(texels(2.0))).unwrap();
    assert_eq!(new.page_offset, old.page_offset, "the page is reused");
    let out = sys.create(one_page(), None).unwrap();
    pass(
        &sys,
        CopyTexels {
            from: new.id,
            to: out.id,
        },
        &[&new, &out],
    );
    sys.mm.read(out.id).unwrap()
}

#[test]
fn a_reused_page_is_not_mapped_to_the_freed_objects_data() {
    assert_eq!(copy_of_a_reused_page(ProtocolVariant::Correct), texels(2.0));
    // Without the invalidations the device keeps its mapping of the old object's slot and
    // reads it without asking.
    assert_eq!(
        copy_of_a_reused_page(ProtocolVariant::FreeWithoutInvalidation),
        texels(1.0)
    );
}

/// Reads the texel mirrored left to right: on two column devices each reads the page the
/// other wrote.
struct Mirror {
    from: ObjectId,
    to: ObjectId,
}

impl Kernel for Mirror {
    fn name(&self) -> &'static str {
        "mirror"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        let v = inv.load_f32(self.from, 15 - x, y)?;
        inv.store_f32(self.to, x, y, v)
    }
}

/// Each device writes its page, then reads the other's: the reader's copy comes from the
/// owner under both rules; under `coherence` it also goes home (write-home) or not (owned).
fn read_of_a_modified_page(coherence: Coherence) {
    let sys = System::cpu(&SystemConfig::new(2).threads(1).coherence(coherence)).unwrap();
    let home_too = coherence == Coherence::WriteHome;
    // Two 8×8 pages side by side; with columns, device d writes and owns page d of `a`.
    let two_pages = ObjectDesc::texture(16, 8, TexelFormat::R32Float, 8).unwrap();
    let a = sys.create(two_pages, None).unwrap();
    let b = sys.create(two_pages, None).unwrap();
    let run = |kernel: Arc<dyn Kernel>, objects: &[&ObjectEntry]| {
        let spec = PassSpec::new(
            kernel,
            Arc::new(objects.iter().map(|e| Bound::new(e)).collect()),
            16,
            8,
        );
        sys.run_pass(&spec, 16, 8, Partition::Cols, Procedure::Relaunch)
            .unwrap();
    };
    run(
        Arc::new(Fill {
            to: a.id,
            value: 5.0,
        }),
        &[&a],
    );
    let before = sys.mm.traffic().unwrap();
    run(
        Arc::new(Mirror {
            from: a.id,
            to: b.id,
        }),
        &[&a, &b],
    );
    let after = sys.mm.traffic().unwrap();
    const PAGE: u64 = 8 * 8 * 4;
    for (d, other) in [(0, 1), (1, 0)] {
        let (t0, t1) = (&before[d], &after[d]);
        // Only its page of `b` comes from home; the other's page of `a` comes from the
        // other device (owner → home → reader before reads came from the owner: two pages from home).
        assert_eq!(
            t1.host_to_device.bytes - t0.host_to_device.bytes,
            PAGE,
            "{d}"
        );
        assert_eq!(t1.device_to_device.bytes, PAGE, "{d}");
        let from = |s: usize| t1.device_to_device_from.get(s).map_or(0, |c| c.bytes);
        assert_eq!((from(other), from(d)), (PAGE, 0), "{d}");
        // Under write-home the other wrote that page home for the same grant: a topology
        // with no link between the two takes it from home, not over the other's host link
        // a second time.
        let homed = t1
            .device_to_device_homed_from
            .get(other)
            .map_or(0, |c| c.bytes);
        assert_eq!(homed, if home_too { PAGE } else { 0 }, "{d}");
        // Its own page of `a` was written home for the other's read, under write-home only.
        assert_eq!(
            t1.device_to_host.bytes - t0.device_to_host.bytes,
            if home_too { PAGE } else { 0 },
            "{d}"
        );
        assert_eq!(
            t1.coherence_write_backs - t0.coherence_write_backs,
            home_too as u64,
            "{d}"
        );
    }
    assert_eq!(
        sys.mm.read(b.id).unwrap(),
        [texels(5.0), texels(5.0)].concat()
    );
    let (_, directory) = sys.mm.memory().unwrap();
    let pages = a.page_offset as usize..a.page_offset as usize + 2;
    for (d, e) in directory[pages].iter().enumerate() {
        assert_eq!(e.copies.len(), 2);
        if home_too {
            // Home is current with both copies clean: no owner.
            assert_eq!((e.owner, e.writable), (None, false));
        } else {
            // The writer still owns its page, read-only, and home is stale: the host's
            // read below must come from the owner.
            assert_eq!((e.owner, e.writable), (Some(DeviceId(d as u8)), false));
        }
    }
    assert_eq!(
        sys.mm.read(a.id).unwrap(),
        [texels(5.0), texels(5.0)].concat()
    );
}

#[test]
fn a_read_of_a_modified_page_comes_from_its_owner_and_goes_home_under_write_home() {
    read_of_a_modified_page(Coherence::WriteHome);
}

#[test]
fn a_read_of_a_modified_page_comes_from_its_owner_which_keeps_it_under_owned_pages() {
    read_of_a_modified_page(Coherence::Owned);
}

#[test]
fn freeing_a_page_held_under_the_memory_lock_is_refused_until_release() {
    let sys = system(ProtocolVariant::Correct);
    let e = sys.create(one_page(), Some(texels(3.0))).unwrap();
    let page = GlobalPage(e.page_offset);
    let write = vec![PageRequest {
        page,
        access: Access::Write,
    }];
    sys.mm
        .request(DeviceId(0), write.clone())
        .wait()
        .unwrap()
        .unwrap();
    assert_eq!(
        sys.mm.free(e.id),
        Err(RuntimeError::Core(CoreError::FreeWhileLocked {
            page,
            device: DeviceId(0)
        }))
    );
    // Refused means untouched: the object is still there, with its data.
    assert_eq!(sys.mm.read(e.id).unwrap(), texels(3.0));
    sys.mm.release(DeviceId(0));
    sys.mm.free(e.id).unwrap();
    assert_eq!(
        sys.mm.read(e.id),
        Err(RuntimeError::Core(CoreError::UnknownObject(e.id)))
    );
    assert_eq!(
        sys.mm.request(DeviceId(0), write).wait().unwrap(),
        Err(RuntimeError::Core(CoreError::UnknownPage(page)))
    );
    let (_, directory) = sys.mm.memory().unwrap();
    assert!(directory.is_empty(), "the space shrank to nothing");
}

#[test]
fn the_request_log_lists_exactly_the_pages_missed_while_on() {
    let sys = system(ProtocolVariant::Correct);
    let a = sys.create(one_page(), Some(texels(1.0))).unwrap();
    let b = sys.create(one_page(), Some(texels(2.0))).unwrap();
    let ask = |e: &ObjectEntry| {
        let req = vec![PageRequest {
            page: GlobalPage(e.page_offset),
            access: Access::Read,
        }];
        sys.mm.request(DeviceId(0), req).wait().unwrap().unwrap();
        sys.mm.release(DeviceId(0));
    };
    ask(&a);
    sys.mm.log_requests(true);
    ask(&b);
    // Asked again while the device holds it: counted in the totals, not a miss to log.
    ask(&a);
    assert_eq!(
        sys.mm.take_requests().unwrap(),
        vec![vec![GlobalPage(b.page_offset)]]
    );
    assert_eq!(
        sys.mm.take_requests().unwrap(),
        vec![Vec::<GlobalPage>::new()]
    );
    sys.mm.log_requests(false);
    ask(&b);
    assert_eq!(
        sys.mm.take_requests().unwrap(),
        vec![Vec::<GlobalPage>::new()]
    );
    // The totals count the same requests, logged or not.
    assert_eq!(sys.mm.traffic().unwrap()[0].page_requests, 4);
    // Evicting drops the device's copy (and leaves pages it does not hold alone).
    let holds = |e: &ObjectEntry| {
        sys.mm
            .holds(DeviceId(0), vec![GlobalPage(e.page_offset)])
            .unwrap()
    };
    assert!(holds(&a) && holds(&b));
    sys.mm
        .evict(DeviceId(0), vec![GlobalPage(a.page_offset)])
        .unwrap();
    sys.mm
        .evict(DeviceId(0), vec![GlobalPage(a.page_offset)])
        .unwrap();
    assert!(!holds(&a) && holds(&b));
    assert_eq!(sys.mm.traffic().unwrap()[0].evictions, 1);
    // Evicted, the page is a miss again.
    sys.mm.log_requests(true);
    ask(&a);
    assert_eq!(
        sys.mm.take_requests().unwrap(),
        vec![vec![GlobalPage(a.page_offset)]]
    );
    sys.mm.log_requests(false);
    assert!(sys.mm.evict(DeviceId(5), vec![]).is_err());
    assert_eq!(sys.mm.read(a.id).unwrap(), texels(1.0));
}

/// An object past the page limit is refused when it is created, before a home copy or any
/// per-page bookkeeping is made for it: a 4096² field of one-texel pages had aborted the
/// process out of memory in the middle of its first pass.
#[test]
fn an_object_past_the_page_limit_is_refused_when_created() {
    let sys = system(ProtocolVariant::Correct);
    let side = 1u32 << 12;
    let rows = (PAGE_LIMIT / side as u64) as u32 + 1;
    let big = ObjectDesc::texture(side, rows, TexelFormat::R32Float, 1).unwrap();
    let e = sys.create(big, None).unwrap_err();
    let want = PAGE_LIMIT + side as u64;
    assert!(
        matches!(
            e,
            RuntimeError::Core(CoreError::PageLimit { requested, in_use: 0, limit })
                if requested == want && limit == PAGE_LIMIT
        ),
        "{e}"
    );
    sys.create(one_page(), Some(texels(1.0))).unwrap();
}
