//! A physical memory of the CPU backend, reachable from other threads.
//!
//! Kernels reach a memory's words atomically (relaxed), from the device's own launches. Two
//! kinds of access come from other threads: another CPU device reading a slot for a peer copy
//! (one copy from device to device instead of two through a host buffer, `tessera bench
//! page-moves`), and the memory manager writing a staged page into a free slot while the
//! device computes ([`SlotSink`], docs/PROTOCOL.md "Asynchronous staging"). Those go word
//! by word through the atomics, so they can never race with a kernel in the sense of undefined
//! behaviour, whatever the memory manager does.
//!
//! The owning device's own slot copies (a page in from home, a page out to home) are bulk
//! copies of plain words, which ran at about twice the speed of an atomic access per word. They
//! are sound because of two exclusions, both held here rather than assumed of callers:
//!
//! - they run only inside the owning `CpuDevice`'s `&mut self` methods, and a launch holds
//!   `&mut self` (through the worker) for all of its kernels, so no kernel of the device runs;
//! - every copy of a slot, bulk or word by word, from any thread, holds the slot's lease: many
//!   readers or one writer. A copy that finds the slot leased otherwise fails with an error
//!   (the memory manager's order never lets that happen), instead of racing.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use crate::peer::{PeerMemory, SlotSink};

/// A lease word's value while a writer holds it; below it, the number of readers.
const WRITER: u32 = u32::MAX;

/// Pages are little-endian words (`u32::from_le_bytes` wherever they are read), and the bulk
/// copies move bytes as they are: the CPU backend builds only where the two agree.
const _: () = assert!(
    cfg!(target_endian = "little"),
    "the CPU backend's bulk slot copies assume little-endian words"
);

pub struct Memory {
    words: Box<[AtomicU32]>,
    slot_words: usize,
    leases: Box<[AtomicU32]>,
}

/// A held lease on one slot; dropping it gives the slot back.
struct Lease<'a> {
    word: &'a AtomicU32,
    writer: bool,
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        // Release: the copy made under the lease is seen by whoever leases the slot next.
        if self.writer {
            self.word.store(0, Ordering::Release);
        } else {
            self.word.fetch_sub(1, Ordering::Release);
        }
    }
}

/// Why a slot copy was refused; the device turns it into its own error.
#[derive(Debug)]
pub enum SlotError {
    OutOfRange { slot: u32, capacity: u32 },
    Length { bytes: usize, slot_bytes: usize },
    Busy { slot: u32, writing: bool },
}

impl std::fmt::Display for SlotError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SlotError::OutOfRange { slot, capacity } => {
                write!(f, "slot {slot} outside a memory of {capacity} slots")
            }
            SlotError::Length { bytes, slot_bytes } => {
                write!(f, "{bytes} bytes copied for a {slot_bytes}-byte slot")
            }
            SlotError::Busy { slot, writing } => write!(
                f,
                "slot {slot} is being {} by another thread at the same time",
                if *writing { "written" } else { "read" }
            ),
        }
    }
}

impl Memory {
    /// A memory of `capacity` zeroed slots; `None` when the allocator cannot give it.
    pub fn new(slot_words: usize, capacity: u32) -> Option<Self> {
        // Zeroed by the allocator, not word by word: a device's first memory takes its whole
        // budget (64 MiB by default) and fills a few pages of it, and a large zeroed
        // allocation is the operating system's fresh pages, backed only where touched. Writing
        // every zero made an 8-device `run boiling` at 1024² hold 1.08 GB, not 0.10 GB.
        let words = slot_words.checked_mul(capacity as usize)?;
        Some(Memory {
            words: bytemuck::allocation::try_zeroed_slice_box(words).ok()?,
            slot_words,
            leases: bytemuck::allocation::try_zeroed_slice_box(capacity as usize).ok()?,
        })
    }

    pub fn capacity(&self) -> u32 {
        self.leases.len() as u32
    }

    pub fn slot_words(&self) -> usize {
        self.slot_words
    }

    pub fn slot_bytes(&self) -> usize {
        self.slot_words * 4
    }

    fn range(&self, slot: u32, bytes: usize) -> Result<std::ops::Range<usize>, SlotError> {
        if slot >= self.capacity() {
            return Err(SlotError::OutOfRange {
                slot,
                capacity: self.capacity(),
            });
        }
        if bytes != self.slot_bytes() {
            return Err(SlotError::Length {
                bytes,
                slot_bytes: self.slot_bytes(),
            });
        }
        let start = slot as usize * self.slot_words;
        Ok(start..start + self.slot_words)
    }

    fn lease(&self, slot: u32, writer: bool) -> Result<Lease<'_>, SlotError> {
        let word = &self.leases[slot as usize];
        let busy = |held: u32| SlotError::Busy {
            slot,
            writing: held == WRITER,
        };
        if writer {
            word.compare_exchange(0, WRITER, Ordering::Acquire, Ordering::Relaxed)
                .map_err(busy)?;
        } else {
            let mut held = word.load(Ordering::Relaxed);
            loop {
                if held >= WRITER - 1 {
                    return Err(busy(held));
                }
                match word.compare_exchange_weak(
                    held,
                    held + 1,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => break,
                    Err(now) => held = now,
                }
            }
        }
        Ok(Lease { word, writer })
    }

    /// The owning device's bulk write of a slot. Callable only from the owner's `&mut self`
    /// methods (module doc): no kernel of the device runs.
    pub(super) fn owner_write(&self, slot: u32, data: &[u8]) -> Result<(), SlotError> {
        let r = self.range(slot, data.len())?;
        let _lease = self.lease(slot, true)?;
        // SAFETY: the words are in bounds (`range`). No other thread touches them during the
        // copy: every cross-thread access of a slot holds its lease, which we hold as its only
        // writer, and the device's own kernels do not run while its `&mut self` method does
        // (module doc). `AtomicU32` has the layout of `u32`, so the words may be written as
        // bytes (little-endian words: the assertion at the top of this file).
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                self.words[r.start].as_ptr().cast::<u8>(),
                data.len(),
            );
        }
        Ok(())
    }

    /// The owning device's bulk read of a slot into `out`; as [`Memory::owner_write`].
    pub(super) fn owner_read(&self, slot: u32, out: &mut [u8]) -> Result<(), SlotError> {
        let r = self.range(slot, out.len())?;
        let _lease = self.lease(slot, false)?;
        // SAFETY: as in `owner_write`, with a reader's lease: other holders can only read.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.words[r.start].as_ptr().cast::<u8>().cast_const(),
                out.as_mut_ptr(),
                out.len(),
            );
        }
        Ok(())
    }

    /// The owning device copies slot `from_slot` of `from` (another device's memory, whose
    /// launches may be running) into its own slot `slot`: one copy, word by word through the
    /// source's atomics.
    pub(super) fn owner_copy_from(
        &self,
        slot: u32,
        from: &Memory,
        from_slot: u32,
    ) -> Result<(), SlotError> {
        let r = self.range(slot, from.slot_bytes())?;
        let s = from.range(from_slot, self.slot_bytes())?;
        let _mine = self.lease(slot, true)?;
        let _theirs = from.lease(from_slot, false)?;
        let src = &from.words[s];
        // SAFETY: our words as in `owner_write` (our writer's lease, no kernel of ours runs);
        // the source's words are only loaded atomically, so its own kernels may run.
        unsafe {
            let dst = self.words[r.start].as_ptr();
            for (i, w) in src.iter().enumerate() {
                dst.add(i).write(w.load(Ordering::Relaxed));
            }
        }
        Ok(())
    }

    /// A copy of a slot, word by word through the atomics, from any thread.
    #[cfg(test)]
    fn read_atomic(&self, slot: u32, out: &mut [u8]) -> Result<(), SlotError> {
        let r = self.range(slot, out.len())?;
        let _lease = self.lease(slot, false)?;
        for (o, w) in out.chunks_exact_mut(4).zip(&self.words[r]) {
            o.copy_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
        }
        Ok(())
    }

    /// Writes a slot word by word through the atomics, from any thread.
    fn write_atomic(&self, slot: u32, data: &[u8]) -> Result<(), SlotError> {
        let r = self.range(slot, data.len())?;
        let _lease = self.lease(slot, true)?;
        for (w, b) in self.words[r].iter().zip(data.chunks_exact(4)) {
            w.store(
                u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
                Ordering::Relaxed,
            );
        }
        Ok(())
    }
}

impl std::ops::Deref for Memory {
    type Target = [AtomicU32];
    fn deref(&self) -> &[AtomicU32] {
        &self.words
    }
}

/// A CPU memory handed to a peer ([`crate::Device::peer_memory`]) or to the memory manager
/// for staging ([`crate::Device::slot_sink`]).
pub struct SharedMemory(pub(super) Arc<Memory>);

impl SharedMemory {
    pub(super) fn peer(memory: &Arc<Memory>) -> PeerMemory {
        Arc::new(SharedMemory(memory.clone()))
    }
}

impl SlotSink for SharedMemory {
    fn write_slot(&self, slot: u32, data: &[u8]) -> std::result::Result<(), String> {
        self.0.write_atomic(slot, data).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_memory_reads_zero_and_one_too_big_is_refused() {
        let m = Memory::new(3, 5).unwrap();
        assert_eq!(m.capacity(), 5);
        let mut out = vec![0xffu8; 12];
        for slot in 0..5 {
            m.owner_read(slot, &mut out).unwrap();
            assert_eq!(out, [0; 12]);
        }
        // Words that overflow the address space, and 4 EiB no allocator gives.
        assert!(Memory::new(usize::MAX, 2).is_none());
        assert!(Memory::new(1 << 40, 1 << 20).is_none());
    }

    #[test]
    fn owner_copy_is_little_endian() {
        let m = Memory::new(2, 2).unwrap();
        m.owner_write(1, &[1, 0, 0, 0, 0, 0, 0, 0x80]).unwrap();
        assert_eq!(m[2].load(Ordering::Relaxed), 1);
        assert_eq!(m[3].load(Ordering::Relaxed), 0x8000_0000);
        let mut out = [0u8; 8];
        m.owner_read(1, &mut out).unwrap();
        assert_eq!(out, [1, 0, 0, 0, 0, 0, 0, 0x80]);
    }

    #[test]
    fn a_leased_slot_refuses_a_writer_and_takes_readers() {
        let m = Memory::new(1, 2).unwrap();
        let r = m.lease(0, false).unwrap();
        assert!(matches!(
            m.owner_write(0, &[0; 4]),
            Err(SlotError::Busy { slot: 0, .. })
        ));
        let mut out = [0u8; 4];
        m.read_atomic(0, &mut out).unwrap();
        m.owner_write(1, &[7, 0, 0, 0]).unwrap();
        drop(r);
        m.owner_write(0, &[9, 0, 0, 0]).unwrap();
        let w = m.lease(1, true).unwrap();
        assert!(matches!(
            m.read_atomic(1, &mut out),
            Err(SlotError::Busy { writing: true, .. })
        ));
        drop(w);
        m.read_atomic(1, &mut out).unwrap();
        assert_eq!(out, [7, 0, 0, 0]);
    }

    #[test]
    fn copies_check_bounds_and_lengths() {
        let m = Memory::new(2, 1).unwrap();
        assert!(matches!(
            m.owner_write(1, &[0; 8]),
            Err(SlotError::OutOfRange { .. })
        ));
        assert!(matches!(
            m.owner_write(0, &[0; 4]),
            Err(SlotError::Length { .. })
        ));
        let other = Memory::new(1, 1).unwrap();
        assert!(matches!(
            m.owner_copy_from(0, &other, 0),
            Err(SlotError::Length { .. })
        ));
    }

    #[test]
    fn a_peer_copy_is_one_copy_of_the_words() {
        let src = Memory::new(3, 2).unwrap();
        src.owner_write(1, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])
            .unwrap();
        let dst = Memory::new(3, 1).unwrap();
        dst.owner_copy_from(0, &src, 1).unwrap();
        let mut out = [0u8; 12];
        dst.read_atomic(0, &mut out).unwrap();
        assert_eq!(out, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    }
}
