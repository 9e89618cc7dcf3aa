//! Per-object access modes (GPU-SM, GPGPU-8 2015, §2 and §5): how the devices reach an
//! object's pages. The rules are in docs/PROTOCOL.md ("Access modes").
//!
//! - [`AccessMode::Migrate`]: today's demand paging; read copies and exclusive write copies
//!   kept coherent by the directory.
//! - [`AccessMode::ReplicateRead`]: a read-only object; pages are copied to every device that
//!   reads them and never written, so no copy is ever invalidated. A store is refused.
//! - [`AccessMode::Remote`]: each page has one [`Location`] and is never copied; every
//!   device's loads and stores go to it in place, and each access that leaves its device is
//!   charged to the link it crosses ([`RemoteLink`]), counted as batch or spread
//!   ([`classify_runs`]).

use std::fmt;
use std::str::FromStr;

use crate::DeviceId;

/// How the devices reach one object's pages.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum AccessMode {
    /// Pages move to the device that uses them (directory-kept copies): the default.
    #[default]
    Migrate,
    /// A read-only object, copied on first touch to each reader; a store is an error.
    ReplicateRead,
    /// One location per page, accessed in place by every device, never copied.
    Remote,
}

impl AccessMode {
    pub const ALL: [AccessMode; 3] = [
        AccessMode::Migrate,
        AccessMode::ReplicateRead,
        AccessMode::Remote,
    ];

    pub fn name(self) -> &'static str {
        match self {
            AccessMode::Migrate => "migrate",
            AccessMode::ReplicateRead => "replicate-read",
            AccessMode::Remote => "remote",
        }
    }
}

impl fmt::Display for AccessMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An access mode name that is none of the three.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown access mode {0:?} (expected migrate, replicate-read or remote)")]
pub struct UnknownAccessMode(pub String);

impl FromStr for AccessMode {
    type Err = UnknownAccessMode;
    fn from_str(s: &str) -> Result<Self, UnknownAccessMode> {
        AccessMode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| UnknownAccessMode(s.to_string()))
    }
}

/// Where a remote page lives: host memory (the home), or one device's memory.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Location {
    #[default]
    Host,
    Device(u8),
}

impl Location {
    pub fn device(d: DeviceId) -> Self {
        Location::Device(d.0)
    }

    /// Whether an access by `accessor` leaves the accessor (crosses a link).
    pub fn is_remote_to(self, accessor: DeviceId) -> bool {
        self != Location::Device(accessor.0)
    }

    /// A compact code for an atomic cell: 0 is the host, `d + 1` device `d`.
    pub fn code(self) -> u16 {
        match self {
            Location::Host => 0,
            Location::Device(d) => d as u16 + 1,
        }
    }

    pub fn from_code(c: u16) -> Self {
        match c {
            0 => Location::Host,
            d => Location::Device((d - 1) as u8),
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Host => f.write_str("host"),
            Location::Device(d) => write!(f, "device{d}"),
        }
    }
}

/// A run of at least this many distinct consecutive words of one page, touched by one tile of
/// invocations in one direction, is a *batch* (GPU-SM §3.2 and Fig. 5–7: remote accesses
/// concentrated in thread blocks that run together); accesses to words in shorter runs are
/// *spread*. 32 words are 128 bytes, one GPU cache line and a full PCIe 3 read completion,
/// the unit a batch moves in at full link speed (GPU-SM §4 Fig. 4, the "batch" rows reach it).
pub const BATCH_RUN_WORDS: u64 = 32;

/// Remote traffic between one accessor and one location.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RemoteLink {
    /// Loads, 4 bytes per word loaded (every access, repeated ones included).
    pub read_bytes: u64,
    /// Stores that were committed (a faulting invocation's stores never leave it).
    pub write_bytes: u64,
    /// Of `read_bytes + write_bytes`, the bytes of accesses that belong to a batch run.
    pub batch_bytes: u64,
    /// Of `read_bytes + write_bytes`, the rest.
    pub spread_bytes: u64,
    /// Batch runs counted.
    pub batches: u64,
}

impl RemoteLink {
    pub fn add(&mut self, o: &RemoteLink) {
        self.read_bytes += o.read_bytes;
        self.write_bytes += o.write_bytes;
        self.batch_bytes += o.batch_bytes;
        self.spread_bytes += o.spread_bytes;
        self.batches += o.batches;
    }

    pub fn since(&self, before: &RemoteLink) -> RemoteLink {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        RemoteLink {
            read_bytes: d(self.read_bytes, before.read_bytes),
            write_bytes: d(self.write_bytes, before.write_bytes),
            batch_bytes: d(self.batch_bytes, before.batch_bytes),
            spread_bytes: d(self.spread_bytes, before.spread_bytes),
            batches: d(self.batches, before.batches),
        }
    }

    pub fn bytes(&self) -> u64 {
        self.read_bytes + self.write_bytes
    }

    pub fn is_empty(&self) -> bool {
        self.bytes() == 0
    }
}

/// One remote access of a tile, as the counting rule sees it: the global page, the word in
/// the page, and whether it was a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RemoteAccess {
    pub write: bool,
    pub page: u64,
    pub word: u32,
}

impl RemoteAccess {
    /// The access as one sortable word: page (below 2^31), then direction, then word. What
    /// the CPU backend logs: each tile sorts its log, and 8-byte words sort faster than these
    /// 24-byte structs.
    #[inline]
    pub fn key(self) -> u64 {
        debug_assert!(self.page < 1 << 31);
        (self.page << 33) | ((self.write as u64) << 32) | self.word as u64
    }

    #[inline]
    fn of_key(k: u64) -> Self {
        RemoteAccess {
            write: (k >> 32) & 1 == 1,
            page: k >> 33,
            word: k as u32,
        }
    }
}

/// Classifies one tile's remote accesses (in any order) into batch and spread bytes, calling
/// `charge(page, link)` once per page and direction with that page's share. The rule: the
/// distinct words a tile touched in one page and one direction form runs of consecutive
/// words; a run of at least [`BATCH_RUN_WORDS`] is one batch, and every access (repeats
/// included) to a word of it is batch; all other accesses are spread. Sorts `accesses`.
pub fn classify_runs(accesses: &mut [RemoteAccess], charge: impl FnMut(u64, RemoteLink)) {
    let mut keys: Vec<u64> = accesses.iter().map(|a| a.key()).collect();
    classify_keys(&mut keys, charge);
    accesses.sort_unstable();
}

/// [`classify_runs`] over accesses given as [`RemoteAccess::key`]s. Sorts `keys`.
pub fn classify_keys(keys: &mut [u64], mut charge: impl FnMut(u64, RemoteLink)) {
    keys.sort_unstable();
    let group = |k: u64| k >> 32;
    let mut i = 0;
    while i < keys.len() {
        // One page and direction.
        let g = group(keys[i]);
        let RemoteAccess { write, page, .. } = RemoteAccess::of_key(keys[i]);
        let mut link = RemoteLink::default();
        let mut j = i;
        while j < keys.len() && group(keys[j]) == g {
            // One run of consecutive distinct words: [j, k) accesses, `distinct` words.
            let mut k = j + 1;
            let mut distinct = 1;
            while k < keys.len() && group(keys[k]) == g && keys[k] <= keys[k - 1] + 1 {
                if keys[k] != keys[k - 1] {
                    distinct += 1;
                }
                k += 1;
            }
            let bytes = 4 * (k - j) as u64;
            if distinct >= BATCH_RUN_WORDS {
                link.batch_bytes += bytes;
                link.batches += 1;
            } else {
                link.spread_bytes += bytes;
            }
            if write {
                link.write_bytes += bytes;
            } else {
                link.read_bytes += bytes;
            }
            j = k;
        }
        charge(page, link);
        i = j;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_unknown_names_are_errors_naming_the_choices() {
        for m in AccessMode::ALL {
            assert_eq!(m.name().parse::<AccessMode>(), Ok(m));
        }
        let e = "copy".parse::<AccessMode>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown access mode \"copy\" (expected migrate, replicate-read or remote)"
        );
        assert_eq!(AccessMode::default(), AccessMode::Migrate);
    }

    #[test]
    fn runs_of_32_distinct_words_are_batches_shorter_ones_spread() {
        let mut acc = Vec::new();
        // Page 5: words 0..40 loaded, words 3 and 4 twice: one run of 40 ≥ 32, 42 accesses.
        for w in 0..40 {
            acc.push(RemoteAccess {
                write: false,
                page: 5,
                word: w,
            });
        }
        for w in [3, 4] {
            acc.push(RemoteAccess {
                write: false,
                page: 5,
                word: w,
            });
        }
        // Page 5: words 100..104 loaded: a run of 4, spread. Stores to page 5 words 0..31
        // (31 words): spread too.
        for w in 100..104 {
            acc.push(RemoteAccess {
                write: false,
                page: 5,
                word: w,
            });
        }
        for w in 0..31 {
            acc.push(RemoteAccess {
                write: true,
                page: 5,
                word: w,
            });
        }
        let mut got = Vec::new();
        classify_runs(&mut acc, |p, l| got.push((p, l)));
        assert_eq!(
            got,
            vec![
                (
                    5,
                    RemoteLink {
                        read_bytes: 4 * 46,
                        write_bytes: 0,
                        batch_bytes: 4 * 42,
                        spread_bytes: 4 * 4,
                        batches: 1,
                    }
                ),
                (
                    5,
                    RemoteLink {
                        read_bytes: 0,
                        write_bytes: 4 * 31,
                        batch_bytes: 0,
                        spread_bytes: 4 * 31,
                        batches: 0,
                    }
                ),
            ]
        );
    }
}
