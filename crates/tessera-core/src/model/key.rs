//! The compact key: the visited set holds only these, never whole states.

use super::*;

// Two reductions make the key smaller than the state it names, and both are sound only because
// of checks made elsewhere:
//
// - Symmetry. Devices are interchangeable, and so are pages: the protocol uses their numbers
//   only as names (sets, arrival order, the order of actions inside one atomic step, which touch
//   disjoint data per page), so renaming maps reachable states to reachable states and keeps
//   every property. The key renames pages, then devices, in the order of a label-free summary of
//   each; ties keep their numbers, which may leave some symmetric states apart. That costs
//   states, never soundness: two states share a key only if one is a renaming of the other.
// - Dead values. The value left in a dropped slot matters only to a device that still trusts a
//   grant for that page (it may read or write it). Elsewhere it is dead, and the key writes it as
//   0. The protocol itself could still read it if it copied from a dropped copy, installed a
//   slot it never filled or wrote a dropped copy back; `carry_out` reports each of those as a
//   violation, so no run the key merges can tell the merged states apart unnoticed.

/// Most words a key may take.
pub(super) const KEY_WORDS: usize = 4;
pub(super) const KEY_BITS: u32 = 64 * KEY_WORDS as u32;

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct Key<const W: usize>([u64; W]);

impl<const W: usize> Hash for Key<W> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        for w in self.0 {
            h.write_u64(w);
        }
    }
}

/// Field widths of the encoding, fixed per world.
pub(super) struct Layout {
    pub(super) devices: u32,
    pub(super) pages: u32,
    pub(super) value_bits: u32,
    pub(super) device_bits: u32,
    pub(super) owner_bits: u32,
    pub(super) index_bits: u32,
    pub(super) issued_bits: u32,
    pub(super) evicted_bits: u32,
    pub(super) freed_bits: u32,
    pub(super) len_bits: u32,
    pub(super) remote_pages: u32,
    pub(super) remote_ops_bits: u32,
    pub(super) held_ops_bits: u32,
}

/// Bits to hold every number in `0..=max`.
pub(super) fn bits_for(max: u32) -> u32 {
    32 - max.leading_zeros()
}

impl Layout {
    pub(super) fn new(cfg: &ModelConfig) -> Layout {
        let devices = cfg.devices as u32;
        Layout {
            devices,
            pages: cfg.pages as u32,
            value_bits: bits_for(cfg.values.saturating_sub(1) as u32),
            device_bits: bits_for(devices.saturating_sub(1)),
            owner_bits: bits_for(devices),
            index_bits: bits_for(cfg.requests_per_device.saturating_sub(1) as u32),
            issued_bits: bits_for(cfg.requests_per_device as u32),
            evicted_bits: bits_for(cfg.evictions_per_device as u32),
            freed_bits: bits_for(cfg.frees as u32),
            len_bits: bits_for(cfg.pages as u32 + cfg.remote_pages as u32),
            remote_pages: cfg.remote_pages as u32,
            remote_ops_bits: bits_for(cfg.remote_ops_per_device as u32),
            held_ops_bits: bits_for(cfg.held_ops_per_device as u32),
        }
    }

    /// Bits of one device's own part (see `own_part`).
    pub(super) fn device_bits_total(&self) -> u32 {
        2 + 3 * self.pages
            + self.issued_bits
            + self.evicted_bits
            + self.pages * (self.value_bits + 2)
            + self.remote_ops_bits
            + self.remote_pages * (self.value_bits + 1)
            + self.held_ops_bits
    }

    pub(super) fn max_bits(&self) -> u32 {
        let per_page = 2 + 2 * self.value_bits + self.devices + self.owner_bits;
        // At most one outstanding request per device, so at most `devices` deferred.
        let deferred = self.devices * (1 + self.device_bits + self.index_bits + 2 * self.pages) + 1;
        self.pages * per_page
            + self.devices
            + self.freed_bits
            + self.len_bits
            + deferred
            + self.devices * self.device_bits_total()
            + self.remote_pages * 2 * self.value_bits
    }
}

/// Appends fixed-width fields to a little-endian bit string of `N` words.
pub(super) struct Bits<const N: usize> {
    pub(super) words: [u64; N],
    pub(super) pos: u32,
}

impl<const N: usize> Bits<N> {
    pub(super) fn new() -> Self {
        Bits {
            words: [0; N],
            pos: 0,
        }
    }

    #[inline]
    pub(super) fn push(&mut self, value: u64, bits: u32) {
        if bits == 0 {
            return;
        }
        debug_assert!(
            bits == 64 || value < 1 << bits,
            "{value} does not fit {bits} bits"
        );
        let (w, off) = ((self.pos / 64) as usize, self.pos % 64);
        self.words[w] |= value << off;
        if off + bits > 64 {
            self.words[w + 1] |= value >> (64 - off);
        }
        self.pos += bits;
    }

    pub(super) fn push_batch(&mut self, b: Batch, pages: u32) {
        self.push(b.read as u64, pages);
        self.push(b.write as u64, pages);
    }
}

/// A renaming of devices and pages: `x_from[new] = old`, `x_to[old] = new`.
pub(super) struct Renaming {
    pub(super) dev_to: [u8; MAX_MODEL_DEVICES],
    pub(super) page_to: [u8; MAX_MODEL_PAGES],
    pub(super) page_from: [u8; MAX_MODEL_PAGES],
}

impl Renaming {
    pub(super) fn devices(&self, set: DeviceSet) -> u64 {
        set.iter()
            .fold(0, |acc, d| acc | 1 << self.dev_to[d.index()])
    }
    pub(super) fn pages(&self, mask: u8) -> u8 {
        let mut out = 0;
        let mut m = mask;
        while m != 0 {
            let p = m.trailing_zeros() as usize;
            out |= 1 << self.page_to[p];
            m &= m - 1;
        }
        out
    }
    pub(super) fn batch(&self, b: Batch) -> Batch {
        Batch {
            read: self.pages(b.read),
            write: self.pages(b.write),
        }
    }
}

/// Pages the device may still read or write under its grant: only there does a dropped slot's
/// value stay live.
pub(super) fn live_pages(dev: &Dev) -> u8 {
    match dev.phase {
        Phase::Granted { batch, done } => batch.pages() & !done,
        _ => 0,
    }
}

pub(super) fn slot_bits(dev: &Dev, p: usize, value_bits: u32) -> u64 {
    let s = dev.slots[p];
    let dead = !s.valid() && live_pages(dev) & (1 << p) == 0;
    let value = if dead { 0 } else { s.value() as u64 };
    value | (s.valid() as u64) << value_bits | (s.writable() as u64) << (value_bits + 1)
}

/// Mixes one feature into a label-free (order-independent) sum.
pub(super) fn mix(x: u64) -> u64 {
    let mut h = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

impl State {
    /// A device's own part of the key, pages renamed: everything that names no other device.
    pub(super) fn own_part(&self, l: &Layout, r: &Renaming, dev: &Dev) -> Bits<2> {
        let mut w = Bits::<2>::new();
        match dev.phase {
            Phase::Idle => w.push(0, 2),
            Phase::Requested(b) => {
                w.push(1, 2);
                w.push_batch(r.batch(b), l.pages);
            }
            Phase::Waiting(b) => {
                w.push(2, 2);
                w.push_batch(r.batch(b), l.pages);
            }
            Phase::Granted { batch, done } => {
                w.push(3, 2);
                w.push_batch(r.batch(batch), l.pages);
                w.push(r.pages(done) as u64, l.pages);
            }
        }
        w.push(dev.issued as u64, l.issued_bits);
        w.push(dev.evicted as u64, l.evicted_bits);
        for &old in &r.page_from[..l.pages as usize] {
            w.push(slot_bits(dev, old as usize, l.value_bits), l.value_bits + 2);
        }
        // Remote pages are not renamed (the renaming covers migrate pages only).
        w.push(dev.remote_ops as u64, l.remote_ops_bits);
        for c in &dev.cache[..l.remote_pages as usize] {
            w.push(c.map_or(0, |v| v as u64 + 1), l.value_bits + 1);
        }
        w.push(dev.held_ops as u64, l.held_ops_bits);
        w
    }

    /// The key of one renaming of the state (see the section comment).
    pub(super) fn key<const W: usize>(&self, l: &Layout) -> Key<W> {
        let (nd, np) = (l.devices as usize, l.pages as usize);
        let devs = &self.devs[..nd];
        let directory = self.proto.directory();
        // A freed page's entry is unknown to the directory and home-only by construction.
        let entry = |p: usize| {
            directory
                .entry(GlobalPage(p as u64))
                .copied()
                .unwrap_or_default()
        };

        let mut pages = [(0u64, 0u8); MAX_MODEL_PAGES];
        for (p, sig) in pages[..np].iter_mut().enumerate() {
            let e = entry(p);
            let mut h = mix(self.home[p] as u64
                | (self.latest[p] as u64) << 8
                | (e.owner.is_some() as u64) << 16
                | (e.copies.len() as u64) << 17
                | ((self.live >> p) as u64 & 1) << 25
                | (e.writable as u64) << 26);
            for (d, dev) in devs.iter().enumerate() {
                let id = DeviceId(d as u8);
                let (tag, access, done) = match dev.phase {
                    Phase::Idle => (0, None, false),
                    Phase::Requested(b) => (1, b.access(p), false),
                    Phase::Waiting(b) => (2, b.access(p), false),
                    Phase::Granted { batch, done } => (3, batch.access(p), done & (1 << p) != 0),
                };
                let access = match access {
                    None => 0,
                    Some(Access::Read) => 1,
                    Some(Access::Write) => 2,
                };
                h = h.wrapping_add(mix(slot_bits(dev, p, l.value_bits)
                    | tag << 8
                    | access << 10
                    | (done as u64) << 12
                    | (e.copies.contains(id) as u64) << 13
                    | ((e.owner == Some(id)) as u64) << 14
                    | (self.proto.locked().contains(id) as u64) << 15));
            }
            *sig = (h, p as u8);
        }
        pages[..np].sort_unstable();
        let mut r = Renaming {
            dev_to: [0; MAX_MODEL_DEVICES],
            page_to: [0; MAX_MODEL_PAGES],
            page_from: [0; MAX_MODEL_PAGES],
        };
        for (new, &(_, old)) in pages[..np].iter().enumerate() {
            r.page_to[old as usize] = new as u8;
            r.page_from[new] = old;
        }

        let mut own = [([0u64; 2], 0u8); MAX_MODEL_DEVICES];
        for (d, dev) in devs.iter().enumerate() {
            // Most significant word first, so the sort compares whole bit strings.
            let w = self.own_part(l, &r, dev).words;
            own[d] = ([w[1], w[0]], d as u8);
        }
        own[..nd].sort_unstable();
        for (new, &(_, old)) in own[..nd].iter().enumerate() {
            r.dev_to[old as usize] = new as u8;
        }

        let mut w = Bits::<W>::new();
        for &old in &r.page_from[..np] {
            let e = entry(old as usize);
            w.push((self.live >> old) as u64 & 1, 1);
            w.push(self.home[old as usize] as u64, l.value_bits);
            w.push(self.latest[old as usize] as u64, l.value_bits);
            w.push(r.devices(e.copies), l.devices);
            let owner = e.owner.map_or(0, |o| r.dev_to[o.index()] as u64 + 1);
            w.push(owner, l.owner_bits);
            w.push(e.writable as u64, 1);
        }
        w.push(r.devices(self.proto.locked()), l.devices);
        w.push(self.freed as u64, l.freed_bits);
        // Not renamed: which page ends the space decides whether a free shrinks the directory
        // and a create grows it. The protocol behaves alike either way, so leaving it out would
        // be sound too, but would explore growth only when a free of the last page happened to
        // be reached first.
        w.push(directory.len(), l.len_bits);
        for b in self.proto.deferred() {
            w.push(1, 1);
            w.push(r.dev_to[b.device.index()] as u64, l.device_bits);
            w.push(b.id.0 & 0xff, l.index_bits);
            w.push_batch(r.batch(Batch::from_requests(&b.pages)), l.pages);
        }
        w.push(0, 1);
        for r in 0..l.remote_pages as usize {
            w.push(self.remote[r] as u64, l.value_bits);
            w.push(self.remote_latest[r] as u64, l.value_bits);
        }
        let bits = l.device_bits_total();
        for &([hi, lo], _) in &own[..nd] {
            w.push(lo, bits.min(64));
            w.push(hi, bits.saturating_sub(64));
        }
        Key(w.words)
    }
}

/// FxHash-style word hasher with a final mix: the keys are already dense bit fields, so SipHash's
/// DoS resistance buys nothing here and costs a large share of the run time.
#[derive(Default)]
pub(super) struct WordHasher(u64);

impl Hasher for WordHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^ (h >> 33)
    }
}
