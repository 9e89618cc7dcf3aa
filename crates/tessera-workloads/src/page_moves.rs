//! Page moves through the runtime as real request batches (home to device, device to device,
//! write-back and read), each timed, beside a plain memcpy of the same bytes and the CPU
//! backend's own slot copies: one round of `tessera bench page-moves` for one page size.

use std::sync::Arc;
use std::time::Instant;

use tessera_core::{Access, CoreError, DeviceId, GlobalPage, ObjectDesc, PageRequest, SlotAddr};
use tessera_runtime::cpu::CpuDevice;
use tessera_runtime::{Device, RuntimeError, System};

/// What can stop a round.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PageMovesError {
    #[error("page moves run between two devices; the node has {0}")]
    Devices(usize),
    #[error("cannot start a thread: {0}")]
    Thread(String),
    #[error("the object read back differs from what was written ({page_bytes}-byte pages)")]
    Corrupted { page_bytes: u64 },
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Core(#[from] CoreError),
}

/// Seconds of one round per move, for one page size.
#[derive(Default, Clone, Copy)]
pub struct Round {
    pub memcpy: f64,
    pub to_device: f64,
    pub device_to_device: f64,
    pub write_back_and_read: f64,
    /// The CPU backend's slot writes and reads of the same pages alone, on this thread, with
    /// no manager, channel or protocol: where a move's time goes.
    pub slot_write: f64,
    pub slot_read: f64,
    /// Each page copied into a vector of its own, as the manager once handed a page to a worker.
    pub to_new_vec: f64,
    /// Pages of the device → device round moved as peer copies, and all it moved.
    pub on_gpu: u64,
    pub moved: u64,
}

fn requests(first: u64, pages: u64, access: Access) -> Vec<PageRequest> {
    (first..first + pages)
        .map(|p| PageRequest {
            page: GlobalPage(p),
            access,
        })
        .collect()
}

/// One batch from `device`, timed from sending it to its reply (every page copied and every
/// acknowledgement in), then the lock released.
fn timed_batch(sys: &System, device: u8, batch: Vec<PageRequest>) -> Result<f64, RuntimeError> {
    let d = DeviceId(device);
    let t = Instant::now();
    sys.mm.request(d, batch).wait()??;
    let secs = t.elapsed().as_secs_f64();
    sys.mm.release(d);
    Ok(secs)
}

/// A CPU device of its own on one thread, with one memory of `total / page_bytes` slots, for
/// the slot-copy breakdown.
pub fn slot_device(page_bytes: u64, total: u64) -> Result<CpuDevice, PageMovesError> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .map_err(|e| PageMovesError::Thread(e.to_string()))?;
    let mut d = CpuDevice::new(DeviceId(0), Arc::new(pool));
    d.create_memory(0, page_bytes, (total / page_bytes) as u32)?;
    Ok(d)
}

/// Times `dev`'s slot writes and reads of `src`, page by page, into memory 0.
fn slot_copies(
    dev: &mut CpuDevice,
    page_bytes: u64,
    src: &[u8],
    r: &mut Round,
) -> Result<(), RuntimeError> {
    let pb = page_bytes as usize;
    let t = Instant::now();
    for (i, s) in src.chunks_exact(pb).enumerate() {
        dev.write_slot(
            SlotAddr {
                memory: 0,
                slot: i as u32,
            },
            s,
        )?;
    }
    r.slot_write = t.elapsed().as_secs_f64();
    let t = Instant::now();
    for i in 0..src.len() / pb {
        std::hint::black_box(dev.read_slot(SlotAddr {
            memory: 0,
            slot: i as u32,
        })?);
    }
    r.slot_read = t.elapsed().as_secs_f64();
    Ok(())
}

/// One round on `sys` (two devices) of `total` bytes in pages of `page_bytes`: `src` is the
/// object's data, `dst` memcpy's target, `slots` the device of [`slot_device`] (CPU only).
pub fn round(
    sys: &System,
    page_bytes: u64,
    total: u64,
    src: &[u8],
    dst: &mut [u8],
    slots: Option<&mut CpuDevice>,
) -> Result<Round, PageMovesError> {
    if sys.devices() < 2 {
        return Err(PageMovesError::Devices(sys.devices()));
    }
    let mut r = Round::default();
    let t = Instant::now();
    for s in src.chunks_exact(page_bytes as usize) {
        std::hint::black_box(s.to_vec());
    }
    r.to_new_vec = t.elapsed().as_secs_f64();
    if let Some(dev) = slots {
        slot_copies(dev, page_bytes, src, &mut r)?;
    }
    let pb = page_bytes as usize;
    let t = Instant::now();
    for (d, s) in dst.chunks_exact_mut(pb).zip(src.chunks_exact(pb)) {
        d.copy_from_slice(s);
    }
    std::hint::black_box(&mut *dst);
    r.memcpy = t.elapsed().as_secs_f64();

    let obj = sys.create(ObjectDesc::buffer(total, page_bytes)?, Some(src.to_vec()))?;
    let (first, pages) = (obj.page_offset, obj.desc.page_count());
    r.to_device = timed_batch(sys, 0, requests(first, pages, Access::Read))?;
    // Timed as queued, like the plain write_buffer it is compared with; the uploads then run
    // before the next move's clock starts, which would otherwise pay for them.
    sys.on_device(0, |ctx| ctx.worker.call(|d| d.wait_queued()))?
        .wait()??;
    // Device 0 already holds every page: this grants write access without moving bytes.
    timed_batch(sys, 0, requests(first, pages, Access::Write))?;
    let before = sys.mm.traffic()?;
    let t = Instant::now();
    sys.mm
        .request(DeviceId(1), requests(first, pages, Access::Write))
        .wait()??;
    // Peer copies on a GPU return once queued: the move is done when the copies are, as the
    // plain copy_buffer_to_buffer beside it is timed up to its wait.
    sys.on_device(1, |ctx| ctx.worker.call(|d| d.wait_queued()))?
        .wait()??;
    r.device_to_device = t.elapsed().as_secs_f64();
    sys.mm.release(DeviceId(1));
    let moved = sys.mm.traffic()?[1].since(&before[1]);
    (r.on_gpu, r.moved) = (
        moved.device_to_device_peer.pages,
        moved.device_to_device.pages,
    );
    r.write_back_and_read = timed_batch(sys, 0, requests(first, pages, Access::Read))?;
    // The moves must have kept the bytes: a wrong copy would make the figures meaningless.
    if sys.mm.read(obj.id)? != src {
        return Err(PageMovesError::Corrupted { page_bytes });
    }
    sys.mm.free(obj.id)?;
    Ok(r)
}

/// The row of pages of `kib` KiB ([`row`]) moved between `src` and `dst` (memcpy's target):
/// a warm-up round, which also creates the devices' physical memories, then `rounds`
/// counted ones. On wgpu `plain` times plain moves of the same pages before each of the
/// runtime's rounds (given the data and the page size); without it, the CPU backend's slot
/// copies are timed on a [`slot_device`] of their own.
pub fn measure<E: From<PageMovesError>>(
    sys: &System,
    kib: u32,
    rounds: u32,
    (src, dst): (&[u8], &mut [u8]),
    mut plain: Option<impl FnMut(&[u8], u64) -> Result<[f64; 3], E>>,
) -> Result<Row, E> {
    let (page_bytes, total) = (kib as u64 * 1024, src.len() as u64);
    let mut slots = match plain {
        Some(_) => None,
        None => Some(slot_device(page_bytes, total)?),
    };
    let (mut counted, mut beside) = (Vec::new(), Vec::new());
    for i in 0..=rounds {
        let p = match plain.as_mut() {
            Some(f) => Some(f(src, page_bytes)?),
            None => None,
        };
        let r = round(sys, page_bytes, total, src, dst, slots.as_mut())?;
        if i > 0 {
            beside.push(p.unwrap_or([r.slot_write, r.slot_read, r.to_new_vec]));
            counted.push(r);
        }
    }
    Ok(row(kib, total, &counted, &beside, plain.is_some()))
}

/// One page size's line of the table and its summary line, from its rounds.
pub struct Row {
    pub line: String,
    pub summary: String,
    /// The fewest pages any round moved as peer copies, and the most any round moved.
    pub on_gpu: u64,
    pub moved: u64,
}

/// The row for pages of `kib` KiB, `total` bytes moved a round: each round's moves beside its
/// memcpy, and `beside`, three more timings a round shown after them (the CPU backend's slot
/// copies, or plain wgpu's moves of the same pages where `plain`, which the summary then
/// compares the runtime's with).
pub fn row(kib: u32, total: u64, rounds: &[Round], beside: &[[f64; 3]], plain: bool) -> Row {
    let median = crate::oversub::median;
    let m = |f: fn(&Round) -> f64| median(rounds.iter().map(f).collect());
    let b = |i: usize| median(beside.iter().map(|t| t[i]).collect());
    let memcpy = m(|r| r.memcpy);
    let gbs = |secs: f64, bytes: u64| bytes as f64 / secs / 1e9;
    let cell = |secs: f64, copies: u64| {
        format!(
            "{:>6.2} ({:>5.1}%)",
            gbs(secs, copies * total),
            100.0 * memcpy * copies as f64 / secs
        )
    };
    let (h2d, d2d, wb) = (
        m(|r| r.to_device),
        m(|r| r.device_to_device),
        m(|r| r.write_back_and_read),
    );
    // The write-back alone: the composite round less a round of the copy that follows the
    // write-back (home → device). Two medians' difference, so noisier than the other columns.
    let wb_alone = m(|r| r.write_back_and_read - r.to_device);
    let derived = if wb_alone > 0.0 {
        cell(wb_alone, 1)
    } else {
        "n/a".to_string()
    };
    let line = format!(
        "{kib:>8} {:>9.2} {:>16} {:>18} {:>22} {:>20} {:>17} {:>17} {:>16}",
        gbs(memcpy, total),
        cell(h2d, 1),
        cell(d2d, 1),
        cell(wb, 2),
        derived,
        cell(b(0), 1),
        cell(b(1), 1),
        cell(b(2), 1)
    );
    let mut summary = format!(
        "page_kib={kib} h2d_ratio={:.3} d2d_ratio={:.3} writeback_read_ratio={:.3}",
        memcpy / h2d,
        memcpy / d2d,
        2.0 * memcpy / wb
    );
    if plain {
        // The runtime's moves against plain wgpu's of the same pages: throughput ratios.
        summary += &format!(
            " h2d_vs_write_buffer={:.3} h2d_vs_write_buffer_wait={:.3} d2d_vs_copy_b2b={:.3}",
            b(0) / h2d,
            b(1) / h2d,
            b(2) / d2d
        );
    }
    Row {
        line,
        summary,
        on_gpu: rounds.iter().map(|r| r.on_gpu).min().unwrap_or(0),
        moved: rounds.iter().map(|r| r.moved).max().unwrap_or(0),
    }
}

/// Which path the device → device moves took, per page size (KiB, peer copies, pages moved):
/// peer copies (one copy between the memories; on wgpu on the device, one submission per
/// batch) or through the host.
pub fn peer_summary(on_gpu: &[(u32, u64, u64)]) -> String {
    if on_gpu.iter().all(|&(_, g, n)| g == n && n > 0) {
        return "device→device: every page a peer copy, straight from the owner's memory (the write-back round's copies come from home)".into();
    }
    if on_gpu.iter().all(|&(_, g, _)| g == 0) {
        return "device→device: every page through the host (read back from the owner, written to the reader)".into();
    }
    on_gpu
        .iter()
        .map(|(kib, g, n)| format!("device→device at {kib} KiB: {g} of {n} pages peer copies"))
        .collect::<Vec<_>>()
        .join("\n")
}
