//! Typed errors of the core. Every bad input a user can give ends here, never in a panic.

use crate::{DeviceId, GlobalPage, ObjectId};

/// Everything the pure memory model can refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoreError {
    #[error("object size must be non-zero (got {width}x{height})")]
    ZeroSized { width: u64, height: u64 },
    #[error("a buffer must hold at least one 32-bit word (got 0 bytes)")]
    EmptyBuffer,
    #[error("object of {texels} texels is larger than the limit of {limit} texels")]
    Oversized { texels: u64, limit: u64 },
    #[error("a buffer of {bytes} bytes is larger than the limit of {limit} bytes")]
    BufferOversized { bytes: u64, limit: u64 },
    #[error("page size {0} {why}", why = page_size_problem(*.0))]
    BadPageSize(u32),
    #[error("buffer page size {0} bytes is not a power of two between 4 and 1048576")]
    BadBufferPageSize(u64),
    #[error(
        "a buffer of {0} bytes is not a whole number of 4-byte words, which kernels address it by"
    )]
    BufferNotWords(u64),
    #[error("mip level {level} does not exist: the chain has {levels} levels (0 to {})", levels.saturating_sub(1))]
    LevelOutOfRange { level: u32, levels: u32 },
    #[error(
        "a chain of {asked} mip levels was asked for: a {width}x{height} texture has 1 to {full}"
    )]
    LevelCount {
        asked: u32,
        width: u32,
        height: u32,
        full: u32,
    },
    #[error("a border of {border} texels is too wide for pages of {page}: at most a quarter of the page side ({})", page / 4)]
    BorderTooWide { border: u32, page: u32 },
    #[error("texel ({s}, {t}) is outside mip level {level} of {width}x{height}")]
    TexelOutOfLevel {
        level: u32,
        s: u64,
        t: u64,
        width: u64,
        height: u64,
    },
    #[error("a buffer object has no mip chain: only textures have levels and bordered pages")]
    MipsOnBuffer,
    #[error("a mipmapped texture holds Rgba8Unorm texels (the box filter and the samplers are integer RGBA8 arithmetic), not {format}")]
    MipFormat { format: &'static str },
    #[error("a mipmapped texture of {width}x{height} is too wide: the samplers' fixed point allows at most {limit} texels a side")]
    MipTooWide { width: u32, height: u32, limit: u32 },
    #[error("a bordered texture must be read-only (access mode replicate-read), not {mode}: a store would have to reach every copy of its texel in the neighbours' borders")]
    BorderOnWritable { mode: &'static str },
    #[error("{}", out_of_range(*object, *x, *y, *width, *height, *buffer))]
    OutOfRange {
        object: ObjectId,
        x: u64,
        y: u64,
        width: u64,
        height: u64,
        /// A buffer's: `x` is a word of its `width`, `y` is 0, `height` is 1.
        buffer: bool,
    },
    #[error("unknown object id {0}")]
    UnknownObject(ObjectId),
    #[error("object {0} was already freed")]
    DoubleFree(ObjectId),
    #[error("object {object} is a {actual}, not a {expected}")]
    WrongKind {
        object: ObjectId,
        expected: &'static str,
        actual: &'static str,
    },
    #[error("{0} devices requested; at most 64 are supported")]
    TooManyDevices(usize),
    #[error("{0} does not exist")]
    UnknownDevice(DeviceId),
    #[error("{0} is not a page of a live object")]
    UnknownPage(GlobalPage),
    #[error("page range {start}..{end} is empty")]
    EmptyPageRange { start: u64, end: u64 },
    #[error("{0} cannot be given to a new object: it belongs to a live one")]
    PageInUse(GlobalPage),
    #[error("{page} cannot be freed yet: {device} holds it under the memory lock")]
    FreeWhileLocked { page: GlobalPage, device: DeviceId },
    #[error("{page} cannot be freed yet: a deferred request of {device} names it")]
    FreeWhileDeferred { page: GlobalPage, device: DeviceId },
    #[error("the global address space is exhausted ({requested} more pages requested)")]
    AddressSpaceExhausted { requested: u64 },
    #[error("the address space has handed out all 2^32 object ids (ids are never reused)")]
    ObjectIdsExhausted,
    #[error("the address space holds at most {limit} pages: {in_use} are in use, and an object of {requested} more does not fit (larger pages make fewer)")]
    PageLimit {
        requested: u64,
        in_use: u64,
        limit: u64,
    },
    #[error("{device} is out of its memory budget: {needed} more bytes needed, {budget} bytes budgeted, {used} in use")]
    OutOfBudget {
        device: DeviceId,
        needed: u64,
        used: u64,
        budget: u64,
    },
    #[error("{device}'s {memories} physical memories ({bytes} bytes) are full and its backend binds no more: one launch needs more pages than they hold")]
    MemoriesFull {
        device: DeviceId,
        memories: usize,
        bytes: u64,
    },
    #[error("physical memory {memory} slot {slot} is not allocated")]
    BadSlot { memory: u16, slot: u32 },
    #[error("page descriptor field out of range: {0}")]
    DescriptorField(&'static str),
    #[error("{0} sent a request while it still holds the memory lock")]
    RequestWhileLocked(DeviceId),
    #[error("{0} asked to evict pages while it holds the memory lock")]
    EvictWhileLocked(DeviceId),
    #[error("{0} released a memory lock it does not hold")]
    NotLocked(DeviceId),
    #[error("request batch from {0} is empty")]
    EmptyRequest(DeviceId),
    #[error("{0} staged pages without holding the memory lock (stage from inside a procedure; otherwise request)")]
    StageWhileUnlocked(DeviceId),
    #[error("{0} cannot stage now: the batch needs a locked device or one an older deferred request waits for, and a staged batch never waits")]
    StageWouldWait(DeviceId),
    #[error("{device} staged {page}, which its running procedure holds")]
    StageHeld { device: DeviceId, page: GlobalPage },
    #[error("{device} cannot evict {page}: its running procedure holds it")]
    EvictHeld { device: DeviceId, page: GlobalPage },
    #[error("staging is not enabled in this protocol (Protocol::with_staging)")]
    StagingOff,
}

pub type Result<T, E = CoreError> = std::result::Result<T, E>;

/// What is wrong with a page side that `PageSize::new` refuses.
fn page_size_problem(p: u32) -> &'static str {
    if p > crate::PageSize::MAX {
        "is larger than 512, the largest page side"
    } else {
        "is not a power of two from 1 to 512 (1, 2, 4, … 512)"
    }
}

/// [`CoreError::OutOfRange`]'s message: a texel of a texture, a word of a buffer.
fn out_of_range(object: ObjectId, x: u64, y: u64, width: u64, height: u64, buffer: bool) -> String {
    if buffer && y != 0 {
        format!(
            "({x}, {y}) is outside buffer {object} of {width} words: a buffer's words are at y = 0"
        )
    } else if buffer {
        format!("word {x} is outside buffer {object} of {width} words")
    } else {
        format!("texel ({x}, {y}) is outside object {object} of {width}x{height}")
    }
}
