//! Physical memories: fixed-capacity pools of page slots on one device (paper 3.2.2).
//!
//! A GPU allocation is not resizable, so when every memory with the right slot size is full the
//! device creates another one, as the paper did when a 4096² physical texture filled up. The
//! device's byte budget counts whole memories, because that is what the GPU allocates.

use crate::error::{CoreError, Result};
use crate::DeviceId;

/// Where a page lives on one device: a physical memory and a slot in it (the paper's
/// "physical page address").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SlotAddr {
    pub memory: u16,
    pub slot: u32,
}

/// One fixed-capacity pool of equally sized slots.
#[derive(Clone, Debug)]
pub struct PhysicalMemory {
    pub id: u16,
    pub slot_bytes: u64,
    pub capacity: u32,
    free: Vec<u32>,
    /// Slots never handed out yet sit above this mark, so creation costs O(1), not O(capacity).
    fresh: u32,
    allocated: Vec<u64>,
    /// Whether the backend has been handed this memory: one reserved ahead
    /// ([`DeviceMemory::reserve`]) is handed over with its first slot.
    announced: bool,
}

impl PhysicalMemory {
    fn new(id: u16, slot_bytes: u64, capacity: u32) -> Self {
        PhysicalMemory {
            id,
            slot_bytes,
            capacity,
            free: Vec::new(),
            fresh: 0,
            allocated: vec![0; (capacity as usize).div_ceil(64)],
            announced: false,
        }
    }

    /// Whether the backend has this memory yet.
    pub fn announced(&self) -> bool {
        self.announced
    }

    pub fn used(&self) -> u32 {
        self.fresh - self.free.len() as u32
    }

    fn alloc(&mut self) -> Option<u32> {
        let slot = self.free.pop().or_else(|| {
            (self.fresh < self.capacity).then(|| {
                self.fresh += 1;
                self.fresh - 1
            })
        })?;
        self.allocated[slot as usize / 64] |= 1 << (slot % 64);
        Some(slot)
    }

    fn is_allocated(&self, slot: u32) -> bool {
        slot < self.capacity && self.allocated[slot as usize / 64] & (1 << (slot % 64)) != 0
    }
}

/// `m`, once: the first slot handed out of a memory hands the memory to the backend.
fn announce(m: &mut PhysicalMemory) -> Option<PhysicalMemory> {
    if m.announced {
        return None;
    }
    m.announced = true;
    Some(m.clone())
}

/// What a backend can bind of physical memories: the wgpu backend binds at most four per
/// kernel, each one storage buffer no larger than the adapter's binding limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryLimits {
    /// The most memories one device may have; `None`: no limit (the CPU backend).
    pub max_memories: Option<u16>,
    /// The most bytes one memory may have.
    pub max_memory_bytes: u64,
}

impl Default for MemoryLimits {
    fn default() -> Self {
        MemoryLimits {
            max_memories: None,
            max_memory_bytes: u64::MAX,
        }
    }
}

/// Where the memory count is limited, each new memory of a slot size is this many times the
/// last one of that size (up to the byte limit): four memories then reach 85 times
/// `memory_bytes` (64 MiB grows to 5.3 GiB), so a large field fits on a GPU while a small run
/// still allocates one small memory.
const GROWTH_WHERE_LIMITED: u64 = 4;

/// All physical memories of one device, under its byte budget.
#[derive(Clone, Debug)]
pub struct DeviceMemory {
    pub device: DeviceId,
    pub budget_bytes: u64,
    /// Bytes of each newly created memory (less when the budget has less room left), like
    /// the paper's fixed 4096² physical textures: small pages get many slots per memory.
    pub memory_bytes: u64,
    pub limits: MemoryLimits,
    memories: Vec<PhysicalMemory>,
    /// The memory that last had a free slot: allocation starts there instead of scanning
    /// every memory, which matters with millions of tiny pages.
    hint: usize,
    /// Per slot size, the bytes of the live objects' pages of that size
    /// ([`DeviceMemory::set_demand`]).
    demand: Vec<(u64, u64)>,
}

impl DeviceMemory {
    pub fn new(device: DeviceId, budget_bytes: u64, memory_bytes: u64) -> Self {
        DeviceMemory {
            device,
            budget_bytes,
            memory_bytes: memory_bytes.max(1),
            limits: MemoryLimits::default(),
            memories: Vec::new(),
            hint: 0,
            demand: Vec::new(),
        }
    }

    /// Records, per slot size, the bytes of the live objects' pages of that size (sizes with
    /// none left out), so that a memory made for another size leaves them room
    /// (`DeviceMemory::held_back`). Replaces what was recorded before.
    pub fn set_demand(&mut self, demand: impl IntoIterator<Item = (u64, u64)>) {
        self.demand = demand.into_iter().filter(|&(_, bytes)| bytes > 0).collect();
        self.demand.sort_unstable();
    }

    /// Budget bytes a new memory of `slot_bytes` leaves unreserved for the page sizes that have
    /// no memory yet: for each, its objects' bytes, at most an even share of the budget among
    /// the sizes. No eviction gives a memory back, so without this the first memory made under a
    /// small budget took all of it, and a page of another size (a convolution's filter beside
    /// its field, with a budget no larger than one memory) could never be given a slot.
    fn held_back(&self, slot_bytes: u64) -> u64 {
        let share = self.budget_bytes / (self.demand.len().max(1) as u64);
        self.demand
            .iter()
            .filter(|&&(size, _)| size != slot_bytes && self.of_size(size).next().is_none())
            .map(|&(_, bytes)| bytes.min(share))
            .sum()
    }

    /// Budget bytes new memories of `slot_bytes` may still reserve.
    fn unreserved_bytes(&self, slot_bytes: u64) -> u64 {
        self.budget_bytes
            .saturating_sub(self.reserved_bytes())
            .saturating_sub(self.held_back(slot_bytes))
    }

    /// The same, on a backend with `limits`.
    pub fn with_limits(
        device: DeviceId,
        budget_bytes: u64,
        memory_bytes: u64,
        limits: MemoryLimits,
    ) -> Self {
        DeviceMemory {
            limits,
            ..Self::new(device, budget_bytes, memory_bytes)
        }
    }

    /// Slots of `slot_bytes` in the `j`-th memory of that size still to be created (before the
    /// budget): `memory_bytes`, growing where the memory count is limited, within the byte limit.
    fn new_memory_slots(&self, slot_bytes: u64, j: usize) -> u64 {
        let slot = slot_bytes.max(1);
        let index = self.of_size(slot_bytes).count() + j;
        let bytes = match self.limits.max_memories {
            Some(_) => (0..index).fold(self.memory_bytes, |b, _| {
                b.saturating_mul(GROWTH_WHERE_LIMITED)
            }),
            None => self.memory_bytes,
        }
        .min(self.limits.max_memory_bytes);
        (bytes / slot).clamp(1, u32::MAX as u64)
    }

    /// Memories the device may still create.
    fn memories_left(&self) -> usize {
        let max = self
            .limits
            .max_memories
            .map_or(u16::MAX as usize + 1, |m| m as usize);
        max.saturating_sub(self.memories.len())
    }

    /// Bytes reserved by all memories: what counts against the budget.
    pub fn reserved_bytes(&self) -> u64 {
        self.memories
            .iter()
            .map(|m| m.capacity as u64 * m.slot_bytes)
            .sum()
    }

    /// Bytes of slots holding a page.
    pub fn used_bytes(&self) -> u64 {
        self.memories
            .iter()
            .map(|m| m.used() as u64 * m.slot_bytes)
            .sum()
    }

    pub fn memories(&self) -> &[PhysicalMemory] {
        &self.memories
    }

    /// Slots of `slot_bytes` the budget could still hand out without freeing any: free slots in
    /// memories of that size plus what new memories in the unreserved budget would hold.
    pub fn room(&self, slot_bytes: u64) -> u64 {
        self.free_slots(slot_bytes) + self.unreserved_slots(slot_bytes)
    }

    /// Slots of `slot_bytes` the device can hold at once if every page of that size were
    /// evicted. Memories of other sizes keep their share of the budget: eviction frees slots,
    /// not memories.
    pub fn capacity(&self, slot_bytes: u64) -> u64 {
        self.of_size(slot_bytes)
            .map(|m| m.capacity as u64)
            .sum::<u64>()
            + self.unreserved_slots(slot_bytes)
    }

    fn of_size(&self, slot_bytes: u64) -> impl Iterator<Item = &PhysicalMemory> {
        self.memories
            .iter()
            .filter(move |m| m.slot_bytes == slot_bytes)
    }

    fn unreserved_slots(&self, slot_bytes: u64) -> u64 {
        let budget = self.unreserved_bytes(slot_bytes) / slot_bytes.max(1);
        if self.limits.max_memories.is_none() {
            return if self.memories_left() == 0 { 0 } else { budget };
        }
        // With few memories allowed, what they can still hold bounds it too.
        let mut slots = 0u64;
        for j in 0..self.memories_left() {
            slots = slots.saturating_add(self.new_memory_slots(slot_bytes, j));
            if slots >= budget {
                return budget;
            }
        }
        slots
    }

    /// Allocates a slot of `slot_bytes`. Returns the slot and, when the slot is the first of a
    /// physical memory the backend has not been handed yet (created now, or reserved ahead),
    /// that memory (the backend must allocate it before writing).
    pub fn alloc(&mut self, slot_bytes: u64) -> Result<(SlotAddr, Option<PhysicalMemory>)> {
        let n = self.memories.len();
        for i in (0..n).map(|k| (self.hint + k) % n) {
            let m = &mut self.memories[i];
            if m.slot_bytes != slot_bytes {
                continue;
            }
            if let Some(slot) = m.alloc() {
                self.hint = i;
                return Ok((SlotAddr { memory: m.id, slot }, announce(m)));
            }
        }
        let i = self.create(slot_bytes)?;
        let m = &mut self.memories[i];
        let slot = m.alloc().expect("a new memory has a free slot");
        self.hint = i;
        Ok((SlotAddr { memory: m.id, slot }, announce(m)))
    }

    /// Creates memories of `slot_bytes`, handing out no slot, until `slots` more slots of that
    /// size are free or the budget (or the memory count) allows no more memory; returns the
    /// free slots of that size gained. A request with pages of two sizes reserves one size's
    /// memories before it counts the other's room, so that two sizes never both count the
    /// same unreserved budget bytes, which [`DeviceMemory::room`] taken size by size does.
    pub fn reserve(&mut self, slot_bytes: u64, slots: u64) -> u64 {
        let mut got = 0u64;
        while got < slots {
            let Ok(i) = self.create(slot_bytes) else {
                break;
            };
            got += self.memories[i].capacity as u64;
        }
        got
    }

    /// Memories so far, to be given back by [`DeviceMemory::unreserve_to`].
    pub fn mark(&self) -> usize {
        self.memories.len()
    }

    /// Gives back the memories reserved since `mark` that are still unannounced and empty: a
    /// request that reserved them and then failed leaves the budget as it found it.
    pub fn unreserve_to(&mut self, mark: usize) {
        while self.memories.len() > mark {
            match self.memories.last() {
                Some(m) if !m.announced && m.used() == 0 => {
                    self.memories.pop();
                }
                _ => break,
            }
        }
        if self.hint >= self.memories.len() {
            self.hint = 0;
        }
    }

    /// Free slots of `slot_bytes` in the memories there are, reserved ones included.
    pub fn free_slots(&self, slot_bytes: u64) -> u64 {
        self.of_size(slot_bytes)
            .map(|m| (m.capacity - m.used()) as u64)
            .sum()
    }

    /// Adds an empty memory of `slot_bytes` as large as the budget and limits allow; returns
    /// its index.
    fn create(&mut self, slot_bytes: u64) -> Result<usize> {
        let left = self.unreserved_bytes(slot_bytes);
        let per_memory = self.new_memory_slots(slot_bytes, 0);
        let capacity = (left / slot_bytes.max(1)).min(per_memory) as u32;
        if self.memories_left() == 0 {
            return Err(CoreError::MemoriesFull {
                device: self.device,
                memories: self.memories.len(),
                bytes: self.reserved_bytes(),
            });
        }
        if capacity == 0 {
            return Err(CoreError::OutOfBudget {
                device: self.device,
                needed: slot_bytes,
                used: self.reserved_bytes(),
                budget: self.budget_bytes,
            });
        }
        self.memories.push(PhysicalMemory::new(
            self.memories.len() as u16,
            slot_bytes,
            capacity,
        ));
        Ok(self.memories.len() - 1)
    }

    pub fn free(&mut self, at: SlotAddr) -> Result<()> {
        let m = self
            .memories
            .get_mut(at.memory as usize)
            .filter(|m| m.is_allocated(at.slot))
            .ok_or(CoreError::BadSlot {
                memory: at.memory,
                slot: at.slot,
            })?;
        m.allocated[at.slot as usize / 64] &= !(1 << (at.slot % 64));
        m.free.push(at.slot);
        self.hint = at.memory as usize;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_memory_when_full_and_budget_is_typed() {
        let mut d = DeviceMemory::new(DeviceId(0), 5 * 64, 2 * 64);
        let (a, m) = d.alloc(64).unwrap();
        assert_eq!(
            (a, m.map(|m| m.capacity)),
            (SlotAddr { memory: 0, slot: 0 }, Some(2))
        );
        let (b, m) = d.alloc(64).unwrap();
        assert_eq!((b.memory, m.is_none()), (0, true));
        let (c, m) = d.alloc(64).unwrap();
        assert_eq!((c.memory, m.map(|m| m.capacity)), (1, Some(2)));
        d.alloc(64).unwrap();
        let (e, m) = d.alloc(64).unwrap();
        assert_eq!(
            (e.memory, m.map(|m| m.capacity)),
            (2, Some(1)),
            "last memory fits the budget"
        );
        assert!(matches!(d.alloc(64), Err(CoreError::OutOfBudget { .. })));
        d.free(b).unwrap();
        assert_eq!(d.free(b), Err(CoreError::BadSlot { memory: 0, slot: 1 }));
        assert_eq!(d.alloc(64).unwrap().0, b, "freed slots are reused");
        assert_eq!(d.used_bytes(), 5 * 64);
        assert!(d.free(SlotAddr { memory: 9, slot: 0 }).is_err());
    }

    #[test]
    fn limited_memories_grow_and_bound_room() {
        // Two memories at most, the second four times the first, none over 1000 bytes.
        let limits = MemoryLimits {
            max_memories: Some(2),
            max_memory_bytes: 1000,
        };
        let mut d = DeviceMemory::with_limits(DeviceId(0), u64::MAX, 4 * 64, limits);
        // 4 slots, then min(16, 1000 / 64 = 15): 19 in all, not the unlimited budget.
        assert_eq!((d.room(64), d.capacity(64)), (19, 19));
        let (_, m) = d.alloc(64).unwrap();
        assert_eq!(m.map(|m| m.capacity), Some(4));
        for _ in 0..3 {
            assert!(d.alloc(64).unwrap().1.is_none());
        }
        let (_, m) = d.alloc(64).unwrap();
        assert_eq!(m.map(|m| m.capacity), Some(15));
        for _ in 0..14 {
            d.alloc(64).unwrap();
        }
        assert_eq!((d.room(64), d.capacity(64)), (0, 19));
        assert!(matches!(
            d.alloc(64),
            Err(CoreError::MemoriesFull { memories: 2, .. })
        ));
        // Without a count limit memories stay the same size.
        let mut d = DeviceMemory::new(DeviceId(0), u64::MAX, 4 * 64);
        for _ in 0..5 {
            d.alloc(64).unwrap();
        }
        assert_eq!(d.memories()[1].capacity, 4);
    }

    #[test]
    fn room_and_capacity_count_slots_the_budget_allows() {
        // 10 slots of 64 fit the budget; memories hold 4 each.
        let mut d = DeviceMemory::new(DeviceId(0), 640, 4 * 64);
        assert_eq!((d.room(64), d.capacity(64)), (10, 10));
        let a: Vec<_> = (0..5).map(|_| d.alloc(64).unwrap().0).collect();
        assert_eq!((d.room(64), d.capacity(64)), (5, 10));
        // A memory of 128-byte slots takes budget from the 64-byte ones for good.
        d.alloc(128).unwrap();
        assert_eq!((d.room(64), d.capacity(64)), (3, 8));
        assert_eq!((d.room(128), d.capacity(128)), (0, 1));
        d.free(a[0]).unwrap();
        assert_eq!((d.room(64), d.capacity(64)), (4, 8));
        for _ in 0..4 {
            d.alloc(64).unwrap();
        }
        assert_eq!(d.room(64), 0);
        assert!(matches!(d.alloc(64), Err(CoreError::OutOfBudget { .. })));
    }

    #[test]
    fn a_memory_leaves_room_for_the_page_sizes_with_none_yet() {
        // A budget of one memory: 16 slots of 64 bytes. Without demands the first memory takes
        // it all and a 32-byte page has nowhere to go.
        let mut d = DeviceMemory::new(DeviceId(0), 1024, 1024);
        d.alloc(64).unwrap();
        assert!(matches!(d.alloc(32), Err(CoreError::OutOfBudget { .. })));
        // Objects of 32-byte pages, 96 bytes of them: the 64-byte memory leaves those 96
        // bytes, so it gets 14 slots (896 bytes), and 32-byte pages the 128 bytes left.
        let mut d = DeviceMemory::new(DeviceId(0), 1024, 1024);
        d.set_demand([(64, 4096), (32, 96)]);
        assert_eq!(d.capacity(64), 14);
        let (_, m) = d.alloc(64).unwrap();
        assert_eq!(m.map(|m| m.capacity), Some(14));
        assert_eq!(d.capacity(32), 4, "what the 64-byte memory left: 128 bytes");
        for _ in 0..4 {
            d.alloc(32).unwrap();
        }
        assert!(matches!(d.alloc(32), Err(CoreError::OutOfBudget { .. })));
        // Each size's room is at most an even share of the budget: two sizes with more than
        // the budget each split it.
        let mut d = DeviceMemory::new(DeviceId(0), 1024, 1024);
        d.set_demand([(64, 1 << 20), (32, 1 << 20)]);
        assert_eq!(d.capacity(64), 8);
        // A size whose objects are gone holds nothing back.
        d.set_demand([(64, 1 << 20)]);
        assert_eq!(d.capacity(64), 16);
    }

    #[test]
    fn reserving_ahead_counts_the_budget_once_for_two_sizes() {
        // 24 KiB of budget in memories of 1 KiB: taken size by size, each size's room counts
        // every unreserved byte, so two sizes together were promised more than the budget.
        let mut d = DeviceMemory::new(DeviceId(0), 3 * 1024, 1024);
        assert_eq!((d.room(1024), d.room(64)), (3, 48));
        let mark = d.mark();
        assert_eq!(d.reserve(1024, 2), 2);
        assert_eq!(d.room(64), 16, "what the two 1 KiB memories left");
        assert_eq!(d.free_slots(1024), 2);
        // A reserved memory is handed to the backend with its first slot, once.
        let (_, m) = d.alloc(1024).unwrap();
        assert_eq!(m.map(|m| (m.id, m.capacity)), Some((0, 1)));
        // Given back: only what is still empty and unannounced.
        d.unreserve_to(mark);
        assert_eq!(d.memories().len(), 1);
        assert!(d.memories()[0].announced());
        assert_eq!(d.room(64), 32);
        // More than the budget holds: as much as it does.
        assert_eq!(d.reserve(64, 1000), 32);
        assert_eq!(d.reserve(64, 1), 0);
        assert!(matches!(d.alloc(1024), Err(CoreError::OutOfBudget { .. })));
    }
}
