//! `tessera bench page-moves`: how fast the runtime moves pages, against a plain memcpy of the
//! same bytes measured in the same run.
//!
//! Every move goes through the memory manager as a real request batch, so the time includes
//! the protocol, the directory, the slot allocation, the workers' slot writes and reads, and
//! the descriptor updates, everything a kernel's miss pays. Per page size, one object of
//! `--mib` MiB is created on a two-device node and, per round:
//!
//! - home → device: device 0 asks to read every page (one batch; each page is copied from its
//!   home copy into a slot);
//! - device → device: device 0 takes every page exclusively (no copy: it holds them), then
//!   device 1 asks to write every page: each is copied from device 0's slot into one of
//!   device 1's (and device 0's copy is invalidated) as a peer copy (docs/PROTOCOL.md,
//!   "Peer copies"): on the CPU backend one copy between the two devices' memories, made by
//!   device 1's worker; where both devices share one wgpu device (`--backend wgpu`) one
//!   `copy_buffer_to_buffer` on the device per page, the batch in one submission, timed up to
//!   the device having run it (`Device::wait_queued`). With
//!   `TESSERA_PEER_COPY=off` each page goes through the host instead (read from device 0's
//!   slot into a buffer, then written into device 1's: two copies);
//! - device → home, written back: device 0 asks to read every page again. Device 1 owns them,
//!   so each is written back home and then copied to device 0 from home (also where the two
//!   share a wgpu device: a page read back home anyway is not copied on the device as well,
//!   docs/PROTOCOL.md, "Peer copies"). The line prints the whole (two copies a page,
//!   against two memcpys) and, derived by subtracting the home → device round, the write-back
//!   alone.
//!
//! memcpy copies the same bytes page by page between two buffers that were touched before, in
//! the same round. Beside them, where the time goes: the CPU backend's slot writes and reads of
//! the same pages on their own (no manager, no channel), and each page copied into a fresh
//! vector (what the manager did per page before a worker copied from home itself). Rounds alternate the two so that machine noise hits both; medians are
//! compared. A warm-up round (which also creates the devices' physical memories) is not
//! counted.

use anyhow::{bail, Result};
use clap::Args;
use tessera_wgpu::PlainCopies;
use tessera_workloads::page_moves::{measure, peer_summary};

use crate::{BackendKind, NodeOpts};

/// The largest page a buffer may have (`ObjectDesc::buffer`).
const MAX_PAGE_KIB: u32 = 1024;

#[derive(Args, Clone)]
pub struct PageMovesOpts {
    /// Page sizes in KiB, powers of two from 1 to 1024 (the runtime's largest page is 1 MiB):
    /// a list such as 4,64,1024, where `...` keeps doubling (4,8,...,1024).
    #[arg(long, default_value = "4,16,64,256,1024", value_parser = parse_page_kib)]
    pages_kib: crate::lists::List,
    /// MiB moved per page size and direction in each round.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=1024))]
    mib: u32,
    /// Rounds; the median is reported.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    rounds: u32,
    // On wgpu the runtime's moves are compared with a host memcpy and with plain wgpu moves
    // of the same pages on a device of their own (`queue.write_buffer`,
    // `copy_buffer_to_buffer`).
    #[command(flatten)]
    node: NodeOpts,
}

pub fn parse_page_kib(s: &str) -> Result<crate::lists::List, String> {
    crate::lists::parse_list_of(s, "page size (KiB)", |k| {
        if !k.is_power_of_two() {
            Err(format!(
                "page size {k} KiB is not a power of two (1, 2, 4, ..., {MAX_PAGE_KIB} KiB)"
            ))
        } else if k > MAX_PAGE_KIB {
            Err(format!(
                "page size {k} KiB is larger than the runtime's largest page, {MAX_PAGE_KIB} KiB"
            ))
        } else {
            Ok(())
        }
    })
}

pub fn page_moves(o: &PageMovesOpts) -> Result<()> {
    // The third round times a write-back: under owned pages a read of a page another device
    // modified is served from the owner with nothing written home, so it runs under the
    // paper's rule, which writes the page home. The other two rounds move the same pages
    // under either rule.
    let cfg = o
        .node
        .config(2)
        .coherence(tessera_core::Coherence::WriteHome);
    let (backend_name, adapter) = {
        let (sys, adapter) = o.node.system(&cfg)?;
        (sys.backend().to_string(), adapter)
    };
    let total = o.mib as u64 * (1 << 20);
    let src: Vec<u8> = (0..total)
        .map(|i| ((i * 2_654_435_761) >> 13) as u8)
        .collect();
    let mut dst = vec![1u8; total as usize];
    outln!(
        "page moves through the runtime, 2 devices [{}{}], {} MiB per page size and move, median of {} rounds (measured)",
        backend_name,
        adapter.map(|a| format!(": {a}")).unwrap_or_default(),
        o.mib,
        o.rounds
    );
    outln!(
        "GB/s = 10^9 bytes per second; ratio = the move's throughput / memcpy's of the same bytes"
    );
    let (c1, c2, c3) = match o.node.backend {
        BackendKind::Cpu => {
            outln!("where the time goes: slot write / slot read are the CPU backend's own slot copies alone (no manager); to new Vec is each page copied into a fresh vector, as the manager once handed a page to a worker (a worker now copies from home itself)");
            ("slot write", "slot read", "to new Vec")
        }
        BackendKind::Wgpu => {
            outln!("plain wgpu on a device of its own, same adapter, same pages: write_buffer = queue.write_buffer per page, queued only (as the runtime's slot write: the upload runs at the next submission); +wait = then submitted and waited for; copy b2b = copy_buffer_to_buffer per page inside one device, submitted and waited for");
            ("write_buffer", "write_buffer+wait", "copy b2b")
        }
    };
    outln!(
        "{:>8} {:>9} {:>16} {:>18} {:>22} {:>20} {:>17} {:>17} {:>16}",
        "page KiB",
        "memcpy",
        "home→device",
        "device→device",
        "write-back+read",
        "write-back (derived)",
        c1,
        c2,
        c3
    );
    let plain = match o.node.backend {
        BackendKind::Cpu => None,
        BackendKind::Wgpu => Some(PlainCopies::new(
            &tessera_wgpu::AdapterChoice::from_env(),
            total,
        )?),
    };
    let mut plain = plain.as_ref().map(|p| {
        move |src: &[u8], page_bytes: u64| -> Result<[f64; 3]> {
            let t = p.round(src, page_bytes)?;
            Ok([t.write_queued, t.write_done, t.copy_done])
        }
    });
    let mut summary = Vec::new();
    let mut on_gpu = Vec::new();
    for &kib in &o.pages_kib.0 {
        if total < kib as u64 * 1024 {
            bail!("--mib {} is smaller than one {kib} KiB page", o.mib);
        }
        // A node of its own per page size: a memory holds one slot size and is never given
        // back, and a wgpu device binds at most four, so one node stopped at the fifth size.
        let (sys, _) = o.node.system(&cfg)?;
        let row = measure(&sys, kib, o.rounds, (&src, &mut dst), plain.as_mut())?;
        outln!("{}", row.line);
        summary.push(row.summary);
        on_gpu.push((kib, row.on_gpu, row.moved));
    }
    for s in summary {
        outln!("{s}");
    }
    outln!("{}", peer_summary(&on_gpu));
    Ok(())
}
