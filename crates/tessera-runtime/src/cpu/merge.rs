//! The merge (paper 3.5, third pass): the CPU twin of `shader/merge.wgsl` in tessera-wgpu.
//! Writes a pass's temporary through the page table; a store whose page is not held writable
//! is kept for the next merge and its page reported, so the driver can request it.

use std::sync::atomic::Ordering;

use rayon::prelude::*;
use tessera_core::PageTable;

use crate::backend::MergeOutcome;
use crate::contract::TempStore;

/// Stores per rayon task.
const CHUNK: usize = 4096;

/// Merges `temp` on the current rayon pool; returns what was written and the stores kept.
pub(super) fn merge(
    table: &PageTable,
    memories: &[std::sync::Arc<super::Memory>],
    temp: &[TempStore],
) -> (MergeOutcome, Vec<TempStore>) {
    let parts: Vec<(u64, Vec<TempStore>)> = temp
        .par_chunks(CHUNK)
        .map(|chunk| {
            let (mut written, mut kept) = (0, Vec::new());
            for s in chunk {
                let d = table.get(s.page).unwrap_or_default();
                match d.slot_addr() {
                    Some(at) if d.is_writable() => {
                        let memory = &memories[at.memory as usize];
                        let base = at.slot as usize * memory.slot_words();
                        memory[base + s.word as usize].store(s.value, Ordering::Relaxed);
                        written += 1;
                    }
                    _ => kept.push(*s),
                }
            }
            (written, kept)
        })
        .collect();
    let mut out = MergeOutcome::default();
    let mut all_kept = Vec::new();
    for (w, kept) in parts {
        out.written += w;
        out.missing.extend(kept.iter().map(|s| s.page));
        all_kept.extend(kept);
    }
    out.missing.sort_unstable();
    out.missing.dedup();
    (out, all_kept)
}
