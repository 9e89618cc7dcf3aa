//! Per-device page tables: one flat 64-bit descriptor per global page (the patent's flat page
//! table), and beside it one access time stamp per page for LRU eviction.
//!
//! Descriptor encoding (bit 0 is the least significant):
//!
//! | bits   | field                                   |
//! |--------|-----------------------------------------|
//! | 0      | resident: the page has a valid copy here |
//! | 1      | writable: this device holds it exclusively |
//! | 2–15   | reserved, zero                           |
//! | 16–31  | physical memory id (16 bits)             |
//! | 32–63  | slot within that physical memory (32 bits) |
//!
//! A non-resident page is the all-zero descriptor, so a fresh table is `vec![0; pages]` and the
//! GPU twin can test residency with one `& 1`. The paper (3.2.2) used a negative memory id for
//! "not resident"; a flag bit does the same without a signed field.

use crate::error::{CoreError, Result};
use crate::physical::SlotAddr;
use crate::GlobalPage;

/// One page table entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PageDescriptor(pub u64);

impl PageDescriptor {
    pub const RESIDENT: u64 = 1;
    pub const WRITABLE: u64 = 1 << 1;
    pub const MEMORY_SHIFT: u32 = 16;
    pub const SLOT_SHIFT: u32 = 32;
    pub const NOT_RESIDENT: PageDescriptor = PageDescriptor(0);

    /// A resident page at `at`; writable only for a device holding it exclusively.
    pub fn resident(at: SlotAddr, writable: bool) -> Self {
        PageDescriptor(
            Self::RESIDENT
                | if writable { Self::WRITABLE } else { 0 }
                | (at.memory as u64) << Self::MEMORY_SHIFT
                | (at.slot as u64) << Self::SLOT_SHIFT,
        )
    }

    /// Decodes from raw bits, refusing reserved bits and a writable-but-absent page.
    pub fn from_bits(bits: u64) -> Result<Self> {
        if bits & 0xfffc != 0 {
            return Err(CoreError::DescriptorField("reserved bits 2-15 set"));
        }
        if bits & Self::RESIDENT == 0 && bits != 0 {
            return Err(CoreError::DescriptorField(
                "non-resident descriptor with fields set",
            ));
        }
        Ok(PageDescriptor(bits))
    }

    #[inline]
    pub fn is_resident(self) -> bool {
        self.0 & Self::RESIDENT != 0
    }
    #[inline]
    pub fn is_writable(self) -> bool {
        self.0 & Self::WRITABLE != 0
    }
    #[inline]
    pub fn slot_addr(self) -> Option<SlotAddr> {
        self.is_resident().then_some(SlotAddr {
            memory: (self.0 >> Self::MEMORY_SHIFT) as u16,
            slot: (self.0 >> Self::SLOT_SHIFT) as u32,
        })
    }
}

/// A device's page table and time stamps, both indexed by global page.
#[derive(Clone, Debug, Default)]
pub struct PageTable {
    descriptors: Vec<PageDescriptor>,
    stamps: Vec<u64>,
}

impl PageTable {
    pub fn new(pages: u64) -> Self {
        let mut t = PageTable::default();
        t.resize(pages);
        t
    }

    /// Follows the address space as it grows and shrinks; new pages are not resident.
    pub fn resize(&mut self, pages: u64) {
        self.descriptors
            .resize(pages as usize, PageDescriptor::NOT_RESIDENT);
        self.stamps.resize(pages as usize, 0);
    }

    pub fn len(&self) -> u64 {
        self.descriptors.len() as u64
    }
    pub fn is_empty(&self) -> bool {
        self.descriptors.is_empty()
    }

    #[inline]
    pub fn get(&self, page: GlobalPage) -> Result<PageDescriptor> {
        self.descriptors
            .get(page.index())
            .copied()
            .ok_or(CoreError::UnknownPage(page))
    }

    pub fn set(&mut self, page: GlobalPage, d: PageDescriptor) -> Result<()> {
        *self
            .descriptors
            .get_mut(page.index())
            .ok_or(CoreError::UnknownPage(page))? = d;
        Ok(())
    }

    /// Records an access at `time` (a launch counter in the runtime) for LRU eviction.
    pub fn touch(&mut self, page: GlobalPage, time: u64) -> Result<()> {
        *self
            .stamps
            .get_mut(page.index())
            .ok_or(CoreError::UnknownPage(page))? = time;
        Ok(())
    }

    pub fn stamp(&self, page: GlobalPage) -> Result<u64> {
        self.stamps
            .get(page.index())
            .copied()
            .ok_or(CoreError::UnknownPage(page))
    }

    /// The raw descriptors, as a backend uploads them.
    pub fn raw(&self) -> &[PageDescriptor] {
        &self.descriptors
    }

    /// Pages resident here, in global order.
    pub fn resident_pages(&self) -> impl Iterator<Item = (GlobalPage, PageDescriptor)> + '_ {
        self.descriptors
            .iter()
            .enumerate()
            .filter(|(_, d)| d.is_resident())
            .map(|(i, d)| (GlobalPage(i as u64), *d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn descriptor_round_trips(memory: u16, slot: u32, writable: bool) {
            let d = PageDescriptor::resident(SlotAddr { memory, slot }, writable);
            prop_assert!(d.is_resident());
            prop_assert_eq!(d.is_writable(), writable);
            prop_assert_eq!(d.slot_addr(), Some(SlotAddr { memory, slot }));
            prop_assert_eq!(PageDescriptor::from_bits(d.0), Ok(d));
        }
    }

    #[test]
    fn not_resident_is_zero_and_bad_bits_are_refused() {
        assert_eq!(PageDescriptor::NOT_RESIDENT.0, 0);
        assert_eq!(PageDescriptor::NOT_RESIDENT.slot_addr(), None);
        assert!(PageDescriptor::from_bits(0b100).is_err());
        assert!(PageDescriptor::from_bits(1 << 40).is_err());
        let mut t = PageTable::new(4);
        assert_eq!(
            t.get(GlobalPage(4)),
            Err(CoreError::UnknownPage(GlobalPage(4)))
        );
        t.touch(GlobalPage(2), 7).unwrap();
        assert_eq!(t.stamp(GlobalPage(2)), Ok(7));
        t.resize(2);
        assert!(t.touch(GlobalPage(2), 8).is_err());
    }
}
