//! The trace file: per frame and device, the texture blocks the device sampled (what
//! GLIntercept gave the paper), at a granularity independent of the page size, so that one
//! trace replays at any page size of at least `BLOCK`.
//!
//! A block is a `BLOCK`×`BLOCK` square of one texture's texels, counted from the texture's
//! origin; blocks are numbered texture after texture (in the header's order), row-major inside
//! each texture: block (bx, by) of texture t is `base(t) + by·⌈w/BLOCK⌉ + bx`, where `base(t)`
//! is the number of blocks of the textures before t. Atlas rectangles are aligned to the page
//! size, so at any page size P ≥ BLOCK a block lies inside one page.
//!
//! Format, version 2, all integers little-endian:
//!
//! | bytes | field |
//! | --- | --- |
//! | 8 | magic `TSSRTRC\0` |
//! | 4 | version (2) |
//! | 4 | BLOCK (texels per block side) |
//! | 4 | devices N |
//! | 4 | frames F |
//! | 4, 4 | screen width, height |
//! | 4 | split: 0 left-right, 1 top-bottom |
//! | 4 | page size P of the recording run |
//! | 4 | flags: bit 0, the recording run cleared the devices' texture memory each frame; bit 1, it dropped each device's unused pages after each frame; bit 2, it placed the atlas pages at random first |
//! | 8 | the seed of that random placement (0 without one) |
//! | 4 | textures T |
//! | T × (4, 4) | each texture's width and height |
//! | F × N records | frame after frame, device after device: |
//! | — 8 | the recording run's texture page requests for this frame and device |
//! | — 4 | blocks n |
//! | — varint × n | the block numbers, ascending, each as its difference from the previous (the first from 0), LEB128 |
//! | 4 | CRC-32 (IEEE) of every byte before it |
//!
//! Nothing may follow the checksum. Version 1 is the same without the checksum, and is still
//! read. The checksum is there because a corrupt trace can be a valid one: a flipped bit in a
//! block number may name another block of the same page, and the replay then "matches" the
//! recording it no longer is (407 of 13,000 single-byte corruptions of a recorded version 1
//! trace replayed as a match). Reading checks every field and returns a typed [`TraceError`];
//! it never panics on any input.

use super::Split;

pub const MAGIC: [u8; 8] = *b"TSSRTRC\0";
pub const VERSION: u32 = 2;
/// The checksum's bytes at the end of a version 2 trace.
const CHECKSUM_BYTES: usize = 4;
/// Texels per block side: the smallest page size a trace replays at.
pub const BLOCK: u32 = 4;

/// What can be wrong with a trace file.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TraceError {
    #[error("not a tessera trace (bad magic bytes)")]
    BadMagic,
    #[error(
        "trace version {found} is not supported (this tessera reads versions 1 to {supported})"
    )]
    Version { found: u32, supported: u32 },
    #[error(
        "the trace is corrupt: its checksum is {stored:#010x}, its bytes give {computed:#010x}"
    )]
    Checksum { stored: u32, computed: u32 },
    #[error("the trace is truncated, or a count before byte {offset} is corrupt: it ends inside {what} at byte {offset}")]
    Truncated { what: &'static str, offset: usize },
    #[error("invalid trace: {0}")]
    Invalid(String),
}

/// One device's part of one frame.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceFrame {
    /// Texture page requests the recording run made (at its page size).
    pub requests: u64,
    /// Blocks sampled, ascending and unique.
    pub blocks: Vec<u32>,
}

/// A whole trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    pub block: u32,
    pub devices: u32,
    pub width: u32,
    pub height: u32,
    pub split: Split,
    pub page: u32,
    pub clear_each_frame: bool,
    pub drop_unused: bool,
    /// The seed of the recording run's random initial placement, if it had one.
    pub random_placement: Option<u64>,
    /// Each texture's (width, height).
    pub textures: Vec<(u32, u32)>,
    /// Per frame, per device.
    pub frames: Vec<Vec<DeviceFrame>>,
}

/// Block numbering over a list of texture sizes.
#[derive(Clone, Debug)]
pub struct Blocks {
    /// Per texture, its first block number; one more entry, the total.
    base: Vec<u64>,
    /// Per texture, blocks per row.
    per_row: Vec<u32>,
}

impl Blocks {
    pub fn new(textures: &[(u32, u32)]) -> Blocks {
        let mut base = vec![0u64];
        let mut per_row = Vec::new();
        for &(w, h) in textures {
            let (bw, bh) = (w.div_ceil(BLOCK), h.div_ceil(BLOCK));
            per_row.push(bw);
            base.push(base.last().copied().unwrap_or(0) + bw as u64 * bh as u64);
        }
        Blocks { base, per_row }
    }
    pub fn total(&self) -> u64 {
        self.base.last().copied().unwrap_or(0)
    }
    /// The block of texel (x, y) of texture t (inside it).
    pub fn of(&self, t: u32, x: u32, y: u32) -> u32 {
        let t = t as usize;
        (self.base[t] + (y / BLOCK) as u64 * self.per_row[t] as u64 + (x / BLOCK) as u64) as u32
    }
    /// Texture and block (bx, by) inside it of block number b (< total).
    pub fn locate(&self, b: u32) -> (u32, u32, u32) {
        let b = b as u64;
        let t = self.base.partition_point(|&s| s <= b) - 1;
        let local = b - self.base[t];
        let bw = self.per_row[t] as u64;
        (t as u32, (local % bw) as u32, (local / bw) as u32)
    }
}

fn put(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

impl Trace {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&MAGIC);
        for v in [
            VERSION,
            self.block,
            self.devices,
            self.frames.len() as u32,
            self.width,
            self.height,
            match self.split {
                Split::LeftRight => 0,
                Split::TopBottom => 1,
            },
            self.page,
            self.clear_each_frame as u32
                | (self.drop_unused as u32) << 1
                | (self.random_placement.is_some() as u32) << 2,
        ] {
            put(&mut out, v);
        }
        out.extend_from_slice(&self.random_placement.unwrap_or(0).to_le_bytes());
        put(&mut out, self.textures.len() as u32);
        for &(w, h) in &self.textures {
            put(&mut out, w);
            put(&mut out, h);
        }
        for f in &self.frames {
            for d in f {
                out.extend_from_slice(&d.requests.to_le_bytes());
                put(&mut out, d.blocks.len() as u32);
                let mut prev = 0u32;
                for &b in &d.blocks {
                    let mut v = b - prev;
                    prev = b;
                    loop {
                        let byte = (v & 0x7f) as u8;
                        v >>= 7;
                        if v == 0 {
                            out.push(byte);
                            break;
                        }
                        out.push(byte | 0x80);
                    }
                }
            }
        }
        let sum = crc32fast::hash(&out);
        out.extend_from_slice(&sum.to_le_bytes());
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Trace, TraceError> {
        let mut r = Reader { bytes, at: 0 };
        if bytes.len() < MAGIC.len() {
            return if MAGIC.starts_with(bytes) {
                Err(TraceError::Truncated {
                    what: "the magic bytes",
                    offset: bytes.len(),
                })
            } else {
                Err(TraceError::BadMagic)
            };
        }
        if bytes[..8] != MAGIC {
            return Err(TraceError::BadMagic);
        }
        r.at = 8;
        let version = r.u32("the version")?;
        if !(1..=VERSION).contains(&version) {
            return Err(TraceError::Version {
                found: version,
                supported: VERSION,
            });
        }
        // Version 2 ends in its checksum, checked once the fields before it read: a field
        // that does not says more about a cut or corrupt file than a checksum that differs.
        let stored = match version {
            1 => None,
            _ => {
                let body = bytes.len().saturating_sub(CHECKSUM_BYTES).max(r.at);
                r.bytes = &bytes[..body];
                bytes[body..].try_into().ok().map(u32::from_le_bytes)
            }
        };
        let trace = Self::fields(&mut r)?;
        if version > 1 {
            let Some(stored) = stored else {
                return Err(TraceError::Truncated {
                    what: "the checksum",
                    offset: bytes.len(),
                });
            };
            let computed = crc32fast::hash(r.bytes);
            if stored != computed {
                return Err(TraceError::Checksum { stored, computed });
            }
        }
        Ok(trace)
    }

    /// The fields after the version, to the end of `r`.
    fn fields(r: &mut Reader<'_>) -> Result<Trace, TraceError> {
        let bytes = r.bytes;
        let block = r.u32("the header")?;
        if block != BLOCK {
            return Err(TraceError::Invalid(format!(
                "block side {block}; traces of every version use {BLOCK}"
            )));
        }
        let devices = r.u32("the header")?;
        let frames = r.u32("the header")?;
        let width = r.u32("the header")?;
        let height = r.u32("the header")?;
        let split = match r.u32("the header")? {
            0 => Split::LeftRight,
            1 => Split::TopBottom,
            s => return Err(TraceError::Invalid(format!("split {s} (expected 0 or 1)"))),
        };
        let page = r.u32("the header")?;
        let flags = r.u32("the header")?;
        if flags > 7 {
            return Err(TraceError::Invalid(format!(
                "flags {flags:#x} (only bits 0 to 2 are defined)"
            )));
        }
        let (clear, drop_unused) = (flags & 1 == 1, flags & 2 == 2);
        let seed = r.u64("the header")?;
        if flags & 4 == 0 && seed != 0 {
            return Err(TraceError::Invalid(format!(
                "placement seed {seed} without a random placement"
            )));
        }
        let random_placement = (flags & 4 == 4).then_some(seed);
        let n_textures = r.u32("the header")?;
        if devices == 0 || devices as usize > tessera_core::MAX_DEVICES {
            return Err(TraceError::Invalid(format!(
                "{devices} devices (expected 1 to {})",
                tessera_core::MAX_DEVICES
            )));
        }
        let side = 1..=super::MAX_SCREEN_SIDE;
        if !side.contains(&width) || !side.contains(&height) {
            return Err(TraceError::Invalid(format!(
                "screen {width}x{height} (each side 1 to {})",
                super::MAX_SCREEN_SIDE
            )));
        }
        // A recording run refuses more devices than its split has columns or rows.
        let (along, what) = match split {
            Split::LeftRight => (width, "columns"),
            Split::TopBottom => (height, "rows"),
        };
        if devices > along {
            return Err(TraceError::Invalid(format!(
                "{devices} devices split a screen of {along} {what}"
            )));
        }
        if tessera_core::PageSize::new(page).is_err() || page < BLOCK {
            return Err(TraceError::Invalid(format!(
                "recorded page size {page} (expected a power of two from {BLOCK} to 512)"
            )));
        }
        if n_textures == 0 {
            return Err(TraceError::Invalid("no textures".into()));
        }
        // No run records zero frames (`--frames 0` is refused), and a replay of none would
        // say it matched a run it never compared.
        if frames == 0 {
            return Err(TraceError::Invalid("no frames".into()));
        }
        // Each texture takes 8 bytes: a count the file cannot hold is truncation, found
        // before anything is allocated for it.
        if (n_textures as u64) * 8 > r.left() as u64 {
            return Err(TraceError::Truncated {
                what: "the texture table",
                offset: bytes.len(),
            });
        }
        let mut textures = Vec::with_capacity(n_textures as usize);
        for _ in 0..n_textures {
            let w = r.u32("the texture table")?;
            let h = r.u32("the texture table")?;
            if w == 0 || h == 0 || w > super::MAX_TEXTURE_SIDE || h > super::MAX_TEXTURE_SIDE {
                return Err(TraceError::Invalid(format!("texture size {w}x{h}")));
            }
            textures.push((w, h));
        }
        let total = Blocks::new(&textures).total();
        // Each record takes at least 12 bytes.
        if frames as u64 * devices as u64 * 12 > r.left() as u64 {
            return Err(TraceError::Truncated {
                what: "the frame records",
                offset: bytes.len(),
            });
        }
        let mut out_frames = Vec::with_capacity(frames as usize);
        for _ in 0..frames {
            let mut f = Vec::with_capacity(devices as usize);
            for _ in 0..devices {
                let requests = r.u64("a frame record")?;
                let n = r.u32("a frame record")?;
                if n as u64 > r.left() as u64 || n as u64 > total {
                    return Err(if n as u64 > r.left() as u64 {
                        TraceError::Truncated {
                            what: "a block list",
                            offset: bytes.len(),
                        }
                    } else {
                        TraceError::Invalid(format!(
                            "{n} blocks in one record; the textures have {total}"
                        ))
                    });
                }
                let mut blocks = Vec::with_capacity(n as usize);
                let mut prev: u64 = 0;
                for i in 0..n {
                    let d = r.varint()?;
                    if i > 0 && d == 0 {
                        return Err(TraceError::Invalid("a block listed twice".into()));
                    }
                    let b = prev + d as u64;
                    if b >= total {
                        return Err(TraceError::Invalid(format!(
                            "block {b}; the textures have {total}"
                        )));
                    }
                    blocks.push(b as u32);
                    prev = b;
                }
                f.push(DeviceFrame { requests, blocks });
            }
            out_frames.push(f);
        }
        if r.left() != 0 {
            return Err(TraceError::Invalid(format!(
                "{} bytes after the last record",
                r.left()
            )));
        }
        Ok(Trace {
            block,
            devices,
            width,
            height,
            split,
            page,
            clear_each_frame: clear,
            drop_unused,
            random_placement,
            textures,
            frames: out_frames,
        })
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn left(&self) -> usize {
        self.bytes.len() - self.at
    }
    fn take<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], TraceError> {
        let s = self
            .bytes
            .get(self.at..self.at + N)
            .ok_or(TraceError::Truncated {
                what,
                offset: self.bytes.len(),
            })?;
        self.at += N;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    fn u32(&mut self, what: &'static str) -> Result<u32, TraceError> {
        Ok(u32::from_le_bytes(self.take(what)?))
    }
    fn u64(&mut self, what: &'static str) -> Result<u64, TraceError> {
        Ok(u64::from_le_bytes(self.take(what)?))
    }
    fn varint(&mut self) -> Result<u32, TraceError> {
        let mut v: u64 = 0;
        for shift in (0..35).step_by(7) {
            let [b] = self.take::<1>("a block list")?;
            if b == 0 && shift > 0 {
                // Each number has one encoding, so a trace reads back to the same bytes.
                return Err(TraceError::Invalid("an overlong varint".into()));
            }
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return u32::try_from(v)
                    .map_err(|_| TraceError::Invalid("a block number over 32 bits".into()));
            }
        }
        Err(TraceError::Invalid("a varint longer than 5 bytes".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Trace {
        Trace {
            block: BLOCK,
            devices: 2,
            width: 64,
            height: 48,
            split: Split::LeftRight,
            page: 8,
            clear_each_frame: false,
            drop_unused: true,
            random_placement: Some(77),
            textures: vec![(8, 8), (512, 256)],
            frames: vec![
                vec![
                    DeviceFrame {
                        requests: 3,
                        blocks: vec![0, 1, 200, 8195],
                    },
                    DeviceFrame::default(),
                ],
                vec![
                    DeviceFrame {
                        requests: 0,
                        blocks: vec![5],
                    },
                    DeviceFrame {
                        requests: 7,
                        blocks: vec![4, 5, 6],
                    },
                ],
            ],
        }
    }

    #[test]
    fn round_trip_and_block_numbers() {
        let t = sample();
        let bytes = t.encode();
        assert_eq!(&bytes[..8], b"TSSRTRC\0");
        assert_eq!(Trace::decode(&bytes).unwrap(), t);
        // Hand-computed: texture 0 has 2x2 blocks; texture 1 128 per row.
        let b = Blocks::new(&t.textures);
        assert_eq!(b.total(), 4 + 128 * 64);
        assert_eq!(b.of(0, 7, 5), 3);
        assert_eq!(b.of(1, 9, 4), 4 + 128 + 2);
        assert_eq!(b.locate(4 + 128 + 2), (1, 2, 1));
        assert_eq!(b.locate(3), (0, 1, 1));
    }

    #[test]
    fn bad_input_is_a_typed_error() {
        let bytes = sample().encode();
        for cut in [0, 3, 8, 11, 20, 55, 60, bytes.len() - 1] {
            let e = Trace::decode(&bytes[..cut]).unwrap_err();
            assert!(matches!(e, TraceError::Truncated { .. }), "cut {cut}: {e}");
        }
        let mut other = bytes.clone();
        other[8] = 3;
        assert_eq!(
            Trace::decode(&other).unwrap_err(),
            TraceError::Version {
                found: 3,
                supported: 2
            }
        );
        let mut magic = bytes.clone();
        magic[0] = b'X';
        assert_eq!(Trace::decode(&magic).unwrap_err(), TraceError::BadMagic);
        assert_eq!(Trace::decode(b"PNG").unwrap_err(), TraceError::BadMagic);
        let mut extra = bytes.clone();
        extra.push(0);
        assert!(matches!(Trace::decode(&extra), Err(TraceError::Invalid(_))));
        // A screen no run could record: a side of 0 or over the raster's largest, or more
        // devices than its split has columns or rows.
        for (width, height, split) in [
            (0, 48, Split::LeftRight),
            (64, 0, Split::LeftRight),
            (u32::MAX, 48, Split::LeftRight),
            (64, super::super::MAX_SCREEN_SIDE + 1, Split::TopBottom),
            (1, 48, Split::LeftRight),
            (64, 1, Split::TopBottom),
        ] {
            let bad = Trace {
                width,
                height,
                split,
                ..sample()
            };
            let e = Trace::decode(&bad.encode()).unwrap_err();
            assert!(matches!(e, TraceError::Invalid(_)), "{width}x{height}: {e}");
        }
        let narrow = Trace {
            width: 2,
            height: 1,
            ..sample()
        };
        assert_eq!(Trace::decode(&narrow.encode()).unwrap(), narrow);
        // No frames: no run records that, and a replay would compare nothing.
        let empty = Trace {
            frames: Vec::new(),
            ..sample()
        };
        assert_eq!(
            Trace::decode(&empty.encode()).unwrap_err(),
            TraceError::Invalid("no frames".into())
        );
        // An overlong varint (0 written as 0x80 0x00) is refused: one encoding per trace.
        let mut long = Trace {
            frames: vec![vec![
                DeviceFrame {
                    requests: 0,
                    blocks: vec![0],
                },
                DeviceFrame::default(),
            ]],
            ..sample()
        }
        .encode();
        // Before the checksum, the last record (8 + 4 bytes, no blocks), then the varint.
        let at = long.len() - 4 - 12 - 1;
        assert_eq!(long[at], 0);
        long[at] = 0x80;
        long.insert(at + 1, 0);
        assert!(matches!(Trace::decode(&long), Err(TraceError::Invalid(_))));
        // Every single-byte corruption is an error, never a panic, and never a trace. Without
        // the checksum (version 1) some are valid traces that are not the one written: a
        // request count, a block of the same page.
        let v1 = as_version_1(&bytes);
        let mut valid_in_v1 = 0;
        for i in 0..bytes.len() {
            for v in [0u8, 1, 0x7f, 0x80, 0xff] {
                let mut c = bytes.clone();
                if c[i] == v {
                    continue;
                }
                c[i] = v;
                assert!(Trace::decode(&c).is_err(), "byte {i} = {v}");
                if i < v1.len() && i != 8 {
                    let mut c1 = v1.clone();
                    c1[i] = v;
                    if Trace::decode(&c1).is_ok_and(|t| t != sample()) {
                        valid_in_v1 += 1;
                        let e = Trace::decode(&c).unwrap_err();
                        assert!(matches!(e, TraceError::Checksum { .. }), "byte {i}: {e}");
                    }
                }
            }
        }
        assert!(valid_in_v1 > 0);
    }

    /// A version 2 trace's bytes as version 1 wrote them: version 1, no checksum.
    fn as_version_1(v2: &[u8]) -> Vec<u8> {
        let mut v1 = v2[..v2.len() - CHECKSUM_BYTES].to_vec();
        v1[8..12].copy_from_slice(&1u32.to_le_bytes());
        v1
    }

    /// Traces written before the checksum still replay.
    #[test]
    fn version_1_traces_are_still_read() {
        let v1 = as_version_1(&sample().encode());
        assert_eq!(Trace::decode(&v1).unwrap(), sample());
    }
}
