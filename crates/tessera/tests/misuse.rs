//! What a library user can get wrong, each answered with a typed error that says what, and a
//! system that runs its next pass: a kernel that panics, an object id the runtime uses
//! internally, an entry of a freed object, changed by hand or of another system, data of the
//! wrong length, a buffer that is not whole words, a fault with no missed load, an empty pass,
//! no memory; and a pass shorter than the devices, which runs.

use tessera::{
    CoreError, Fault, Invocation, Kernel, ObjectDesc, ObjectEntry, ObjectId, RuntimeError, System,
    SystemConfig, TexelFormat,
};

/// A kernel from a closure, so each case says only what its invocations do.
struct K<F>(F);

impl<F> Kernel for K<F>
where
    F: Fn(&mut Invocation<'_>, u32, u32) -> Result<(), Fault> + Send + Sync + 'static,
{
    fn name(&self) -> &'static str {
        "misuse"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        (self.0)(inv, x, y)
    }
}

fn node(devices: usize) -> System {
    System::cpu(&SystemConfig::new(devices).threads(2)).unwrap()
}

/// Writes `value` at every texel of a 4 × 4 texture through `entry`.
fn fill(sys: &System, entry: &ObjectEntry, value: f32) -> Result<(), RuntimeError> {
    let id = entry.id;
    let k = K(move |inv: &mut Invocation<'_>, x, y| inv.store_f32(id, x, y, value));
    sys.run_kernel(k, &[entry], 4, 4).map(|_| ())
}

#[test]
fn a_kernel_that_panics_fails_its_pass_and_the_next_pass_runs() {
    let sys = node(2);
    let t = sys.create_f32(4, 4, 2, None).unwrap();
    let id = t.id;
    let panics = K(move |inv: &mut Invocation<'_>, x, y| {
        if (x, y) == (2, 3) {
            panic!("a bug in the user's kernel");
        }
        inv.store_f32(id, x, y, 1.0)
    });
    match sys.run_kernel(panics, &[&t], 4, 4) {
        Err(RuntimeError::KernelPanicked { kernel, message }) => {
            assert_eq!(kernel, "misuse");
            assert_eq!(message, "a bug in the user's kernel");
        }
        other => panic!("expected the kernel's panic as an error, got {other:?}"),
    }
    // Both devices' workers are still there: a correct pass runs and every texel is its.
    fill(&sys, &t, 7.0).unwrap();
    assert_eq!(sys.read_f32(&t).unwrap(), vec![7.0; 16]);
}

#[test]
fn the_largest_object_id_is_an_unbound_object_not_a_panic() {
    let sys = node(1);
    let t = sys.create_f32(4, 4, 2, None).unwrap();
    let load =
        K(|inv: &mut Invocation<'_>, _, _| inv.load_f32(ObjectId(u32::MAX), 0, 0).map(|_| ()));
    match sys.run_kernel(load, &[&t], 1, 1) {
        Err(RuntimeError::Unbound { object, .. }) => assert_eq!(object, ObjectId(u32::MAX)),
        other => panic!("expected Unbound, got {other:?}"),
    }
    let store = K(|inv: &mut Invocation<'_>, _, _| inv.store_f32(ObjectId(u32::MAX), 0, 0, 1.0));
    assert!(matches!(
        sys.run_kernel(store, &[&t], 1, 1),
        Err(RuntimeError::Unbound { .. })
    ));
    fill(&sys, &t, 1.0).unwrap();
}

#[test]
fn an_entry_of_a_freed_object_or_changed_by_hand_is_refused_not_written_through() {
    let sys = node(1);
    let a = sys.create_f32(4, 4, 2, None).unwrap();
    sys.free(&a).unwrap();
    assert!(matches!(sys.free(&a), Err(RuntimeError::NotLive { .. })));
    // Made after the free, so on a's pages.
    let b = sys.create_f32(4, 4, 2, Some(&[2.0; 16])).unwrap();
    assert_eq!(
        a.page_offset, b.page_offset,
        "the case needs b on a's pages"
    );
    assert!(matches!(
        fill(&sys, &a, 9.0),
        Err(RuntimeError::NotLive { object }) if object == a.id
    ));
    assert!(matches!(
        sys.read_f32(&a),
        Err(RuntimeError::NotLive { .. })
    ));
    assert_eq!(
        sys.read_f32(&b).unwrap(),
        vec![2.0; 16],
        "b was written through a"
    );

    // An entry whose shape was changed would address the pages after the object.
    let c = sys.create_f32(4, 4, 2, Some(&[3.0; 16])).unwrap();
    let mut wider = b;
    wider.desc = ObjectDesc::texture(8, 4, tessera::TexelFormat::R32Float, 2).unwrap();
    let err = fill(&sys, &wider, 9.0).unwrap_err();
    assert!(matches!(err, RuntimeError::NotLive { .. }), "{err}");
    assert!(err.to_string().contains("freed"), "{err}");
    assert_eq!(sys.read_f32(&c).unwrap(), vec![3.0; 16]);
    fill(&sys, &b, 4.0).unwrap();
}

#[test]
fn an_entry_of_another_system_is_refused_even_with_the_same_id_and_pages() {
    let (one, two) = (node(1), node(1));
    let mine = one.create_f32(4, 4, 2, Some(&[1.0; 16])).unwrap();
    let theirs = two.create_f32(4, 4, 2, Some(&[2.0; 16])).unwrap();
    // The same object as far as ids, pages and shape go: only the system tells them apart.
    assert_eq!(
        (mine.id, mine.page_offset, mine.desc),
        (theirs.id, theirs.page_offset, theirs.desc)
    );
    let err = fill(&one, &theirs, 9.0).unwrap_err();
    assert!(matches!(err, RuntimeError::NotLive { .. }), "{err}");
    assert!(matches!(
        one.read_f32(&theirs),
        Err(RuntimeError::NotLive { .. })
    ));
    assert_eq!(one.read_f32(&mine).unwrap(), vec![1.0; 16]);
    assert_eq!(two.read_f32(&theirs).unwrap(), vec![2.0; 16]);
}

#[test]
fn data_of_the_wrong_length_names_the_object_it_was_for() {
    let sys = node(1);
    let err = sys.create_f32(4, 4, 2, Some(&[0.0; 15])).unwrap_err();
    assert!(matches!(
        err,
        RuntimeError::DataSize {
            got: 60,
            want: 64,
            ..
        }
    ));
    let text = err.to_string();
    assert!(text.contains("4x4 R32Float texture"), "{text}");
    assert!(!text.contains(&u32::MAX.to_string()), "{text}");
}

#[test]
fn reading_floats_from_a_buffer_says_it_is_a_buffer() {
    let sys = node(1);
    let buf = sys
        .create(ObjectDesc::buffer(64, 16).unwrap(), None)
        .unwrap();
    let err = sys.read_f32(&buf).unwrap_err();
    assert!(
        matches!(
            err,
            RuntimeError::Core(CoreError::WrongKind {
                actual: "buffer",
                ..
            })
        ),
        "{err}"
    );
}

/// Words in, words out, through a kernel on two devices; and the typed reads refuse the
/// other kind of object, naming both kinds.
#[test]
fn a_buffer_of_words_goes_in_and_comes_out_as_words() {
    let sys = node(2);
    // Written by hand, not by the code under test: word i is 3i + 1.
    let words: Vec<u32> = (0..64).map(|i| 3 * i + 1).collect();
    let src = sys.create_u32(&words, 16).unwrap();
    let dst = sys.create_u32(&[0; 64], 16).unwrap();
    let (s, d) = (src.id, dst.id);
    let k = K(move |inv: &mut Invocation<'_>, x, y| {
        let i = y * 8 + x;
        let v = inv.load_u32(s, i)?;
        inv.store_u32(d, i, v * 2)
    });
    sys.run_kernel(k, &[&src, &dst], 8, 8).unwrap();
    let got = sys.read_u32(&dst).unwrap();
    assert_eq!(got.len(), 64);
    assert_eq!(got[0], 2);
    assert_eq!(got[63], 2 * (3 * 63 + 1));

    let tex = sys.create_f32(4, 4, 2, None).unwrap();
    let err = sys.read_u32(&tex).unwrap_err();
    assert!(
        err.to_string()
            .contains("is a R32Float texture, not a buffer"),
        "{err}"
    );
    assert!(matches!(
        sys.create_u32(&[1, 2, 3], 6),
        Err(RuntimeError::Core(CoreError::BadBufferPageSize(6)))
    ));
    let empty = sys.create_u32(&[], 16).err().unwrap();
    assert!(
        matches!(empty, RuntimeError::Core(CoreError::EmptyBuffer)),
        "{empty}"
    );
    assert!(empty.to_string().contains("got 0 bytes"), "{empty}");
}

/// A word past a buffer's end is named as a word of a buffer, not as a texel.
#[test]
fn a_word_past_a_buffers_end_says_so() {
    let sys = node(1);
    let buf = sys
        .create(ObjectDesc::buffer(64, 16).unwrap(), None)
        .unwrap();
    let id = buf.id;
    let k = K(move |inv: &mut Invocation<'_>, _, _| inv.store_u32(id, 16, 1));
    let err = sys.run_kernel(k, &[&buf], 1, 1).unwrap_err();
    assert!(
        err.to_string()
            .contains(&format!("word 16 is outside buffer {id} of 16 words")),
        "{err}"
    );
}

#[test]
fn a_buffer_must_be_whole_words() {
    assert!(matches!(
        ObjectDesc::buffer(6, 4),
        Err(CoreError::BufferNotWords(6))
    ));
    assert!(ObjectDesc::buffer(8, 4).is_ok());
}

#[test]
fn a_fault_with_no_missed_load_is_named_as_such() {
    let sys = node(1);
    let t = sys.create_f32(4, 4, 2, None).unwrap();
    let faults = K(|_: &mut Invocation<'_>, _, _| Err(Fault::Miss));
    match sys.run_kernel(faults, &[&t], 4, 4) {
        Err(RuntimeError::FaultWithoutMiss { kernel, left }) => {
            assert_eq!((kernel.as_str(), left), ("misuse", 16));
        }
        other => panic!("expected FaultWithoutMiss, got {other:?}"),
    }
    fill(&sys, &t, 1.0).unwrap();
}

#[test]
fn an_empty_pass_says_it_is_empty() {
    let sys = node(2);
    let t = sys.create_f32(4, 4, 2, None).unwrap();
    let id = t.id;
    let store = move |inv: &mut Invocation<'_>, x, y| inv.store_f32(id, x, y, 1.0);
    let empty = sys.run_kernel(K(store), &[&t], 4, 0).unwrap_err();
    assert!(empty.to_string().contains("empty"), "{empty}");
}

#[test]
fn a_pass_of_fewer_rows_than_devices_runs_on_as_many_devices_as_rows() {
    let sys = node(4);
    let t = sys.create_f32(4, 4, 2, None).unwrap();
    let id = t.id;
    let row =
        move |inv: &mut Invocation<'_>, x, y| inv.store_f32(id, x, y, (1 + x + 10 * y) as f32);
    let stats = sys.run_kernel(K(row), &[&t], 4, 2).unwrap();
    let launched: Vec<u64> = stats.iter().map(|s| s.launches).collect();
    assert_eq!(launched.iter().filter(|&&l| l > 0).count(), 2, "{stats:?}");
    let mut want = vec![0.0; 16];
    for y in 0..2 {
        for x in 0..4 {
            want[(y * 4 + x) as usize] = (1 + x + 10 * y) as f32;
        }
    }
    assert_eq!(sys.read_f32(&t).unwrap(), want);
    // The devices that sat it out run the next pass, which reads what the others wrote.
    let u = sys.create_f32(4, 4, 2, None).unwrap();
    let out = u.id;
    let twice = K(move |inv: &mut Invocation<'_>, x, y| {
        let v = inv.load_f32(id, x, y % 2)?;
        inv.store_f32(out, x, y, 2.0 * v)
    });
    let stats = sys.run_kernel(twice, &[&t, &u], 4, 4).unwrap();
    assert!(stats.iter().all(|s| s.launches > 0), "{stats:?}");
    let mut doubled = want.clone();
    for y in 0..4 {
        for x in 0..4 {
            doubled[(y * 4 + x) as usize] = 2.0 * want[((y % 2) * 4 + x) as usize];
        }
    }
    assert_eq!(sys.read_f32(&u).unwrap(), doubled);
}

#[test]
fn a_memory_of_no_bytes_is_refused() {
    let err = System::cpu(&SystemConfig::new(1).memory(0)).err().unwrap();
    assert!(matches!(err, RuntimeError::Config(_)), "{err}");
}

/// Refused as the node is built, as a memory of no bytes is, not at its first launch.
#[test]
fn a_budget_of_no_bytes_is_refused() {
    let err = System::cpu(&SystemConfig::new(1).budget(0)).err().unwrap();
    assert!(
        matches!(&err, RuntimeError::Config(m) if m.contains("budget of 0 bytes")),
        "{err}"
    );
}

/// Reads `src` and writes `dst` one texel further on, failing at (5, 5) when `fail`; its
/// footprint lets a node with deferred execution queue it.
struct Step {
    src: ObjectId,
    dst: ObjectId,
    fail: bool,
}

impl Kernel for Step {
    fn name(&self) -> &'static str {
        "step"
    }
    fn footprint(&self) -> Option<tessera::Footprint> {
        Some(tessera::Footprint {
            reads: vec![(self.src, 0)],
            write: self.dst,
        })
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        let v = inv.load_f32(self.src, x, y)?;
        if self.fail && (x, y) == (5, 5) {
            return Err(Fault::Error(Box::new(RuntimeError::KernelFailed(
                "bad texel".into(),
            ))));
        }
        inv.store_f32(self.dst, x, y, v + 1.0)
    }
}

/// Under deferred execution a failed pass cannot answer with its error (it is only queued):
/// the host's next read of what it left says so, not a later pass that did nothing wrong.
#[test]
fn a_deferred_pass_that_failed_says_so_at_the_next_read() {
    let sys = System::cpu(&SystemConfig::new(1).threads(1).deferred(true)).unwrap();
    let a = sys.create_f32(64, 64, 8, None).unwrap();
    let b = sys.create_f32(64, 64, 8, None).unwrap();
    let step = |fail| Step {
        src: a.id,
        dst: b.id,
        fail,
    };
    // Twice, so that the second runs deferred on pages the first brought in.
    sys.run_kernel(step(false), &[&a, &b], 64, 64).unwrap();
    sys.run_kernel(step(false), &[&a, &b], 64, 64).unwrap();
    let queued = sys.run_kernel(step(true), &[&a, &b], 64, 64);
    let read = sys.read_f32(&b);
    match (&queued, &read) {
        (Err(e), _) | (Ok(_), Err(e)) => assert!(e.to_string().contains("bad texel"), "{e}"),
        (Ok(_), Ok(_)) => panic!("the failed pass went unreported by the read after it"),
    }
    // Reported once: the pass after it, and the read after that, are fine.
    sys.run_kernel(step(false), &[&a, &b], 64, 64).unwrap();
    assert_eq!(sys.read_f32(&b).unwrap(), vec![1.0; 64 * 64]);
}

/// A pool of threads far beyond the machine's cores is refused when the system is built,
/// where it used to take seconds (minutes at thousands) to start before anything ran.
#[test]
fn too_many_cpu_threads_are_refused_up_front() {
    let max = tessera::max_cpu_threads();
    let err = System::cpu(&SystemConfig::new(1).threads(max + 1))
        .err()
        .expect("a pool over the bound was built");
    assert!(matches!(err, RuntimeError::Config(_)), "{err}");
    assert!(err.to_string().contains(&format!("at most {max}")), "{err}");
    // Objects and a buffer too large say so in bytes.
    let err = ObjectDesc::buffer(u64::MAX - 3, 4096).unwrap_err();
    assert!(matches!(err, CoreError::BufferOversized { .. }), "{err}");
    assert!(err.to_string().contains("bytes"), "{err}");
}

/// Every texel format has its typed read, and the host's writes between passes reach the next
/// pass: an Rgba32Float texture doubled by a kernel, then replaced and doubled again; bytes
/// written here by hand, not by the code under test.
#[test]
fn each_format_reads_back_typed_and_the_host_writes_between_passes() {
    let sys = node(2);
    let texels: Vec<[f32; 4]> = (0..16)
        .map(|i| [i as f32, 0.5, -1.0, 2.0 * i as f32])
        .collect();
    let bytes: Vec<u8> = texels
        .iter()
        .flatten()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let desc = ObjectDesc::texture(4, 4, TexelFormat::Rgba32Float, 2).unwrap();
    let t = sys.create(desc, Some(bytes)).unwrap();
    let id = t.id;
    let k = || {
        K(move |inv: &mut Invocation<'_>, x, y| {
            let v = inv.load_rgba32f(id, x, y)?;
            inv.store_rgba32f(id, x, y, v.map(|c| 2.0 * c))
        })
    };
    sys.run_kernel(k(), &[&t], 4, 4).unwrap();
    let got = sys.read_rgba32f(&t).unwrap();
    assert_eq!(got[5], [10.0, 1.0, -2.0, 20.0]);
    let fresh: Vec<u8> = (0..64u32).flat_map(|i| (i as f32).to_le_bytes()).collect();
    sys.write(&t, fresh).unwrap();
    sys.run_kernel(k(), &[&t], 4, 4).unwrap();
    assert_eq!(sys.read_rgba32f(&t).unwrap()[1], [8.0, 10.0, 12.0, 14.0]);

    let desc = ObjectDesc::texture(2, 2, TexelFormat::Rgba8Unorm, 2).unwrap();
    let c = sys.create(desc, Some((0u8..16).collect())).unwrap();
    assert_eq!(sys.read_rgba8(&c).unwrap()[3], [12, 13, 14, 15]);
    assert!(matches!(
        sys.read_rgba32f(&c),
        Err(RuntimeError::Core(CoreError::WrongKind { .. }))
    ));
    assert!(matches!(
        sys.read_rgba8(&t),
        Err(RuntimeError::Core(CoreError::WrongKind { .. }))
    ));
}
