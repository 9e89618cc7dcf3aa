//! Runtime errors: what can go wrong once threads, backends and kernels are involved.

use std::path::PathBuf;
use std::sync::Arc;

use tessera_core::{CoreError, DeviceId, GlobalPage, ObjectId};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Core(#[from] CoreError),
    #[error("kernel {kernel} touched object {object}, which is not bound to its launch")]
    Unbound { kernel: String, object: ObjectId },
    #[error("kernel {kernel}: {source}")]
    Kernel { kernel: String, source: CoreError },
    /// The user's kernel code panicked on the CPU backend; the pass stopped there, and the
    /// system runs the next pass.
    #[error("kernel {kernel} panicked: {message}")]
    KernelPanicked { kernel: String, message: String },
    /// A binding or read named an object this system does not hold as described.
    #[error("object {object} is not a live object of this system as its entry describes it: it was freed, it belongs to another system, or its entry was changed")]
    NotLive { object: ObjectId },
    #[error("kernel {kernel} is launched with {bindings} objects bound; at most {max} can be")]
    TooManyBindings {
        kernel: String,
        bindings: usize,
        max: usize,
    },
    #[error("kernel {kernel} has {words} parameter words; at most {max} fit a launch")]
    TooManyParams {
        kernel: String,
        words: usize,
        max: usize,
    },
    #[error("an invocation of kernel {kernel} made more than {max} stores")]
    TooManyStores { kernel: String, max: usize },
    #[error("{device} was told to write {page} without holding it writable: its grant was broken (memory lock disabled?)")]
    GrantViolated { device: DeviceId, page: GlobalPage },
    #[error("{0} stopped unexpectedly")]
    ThreadGone(&'static str),
    /// The runtime found its own records disagreeing with a device (a bug, not an input).
    #[error("backend error on {device}: {message}")]
    Backend { device: DeviceId, message: String },
    /// A backend's own error, kept typed: [`BackendError::downcast_ref`] gives it back (a
    /// `tessera_wgpu::WgpuError` on wgpu). Its message is part of this one's, so it is not
    /// also this error's `source`: a chain printed whole (`{:#}`) would say it twice.
    #[error("{device}: {error}")]
    Device {
        device: DeviceId,
        error: BackendError,
    },
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("device count must be between 1 and {max} (got {got})")]
    DeviceCount { got: usize, max: usize },
    #[error("devices per node must be at least 1")]
    NoDevicesPerNode,
    #[error("{nodes} nodes × {per_node} devices is {total} devices; at most {max} fit one address space")]
    ClusterTooLarge {
        nodes: usize,
        per_node: usize,
        total: usize,
        max: usize,
    },
    #[error("node {rank} was given {got} devices for {per_node} devices per node")]
    NodeDevices {
        rank: usize,
        got: usize,
        per_node: usize,
    },
    #[error("{}", split_too_fine(*len, what, *parts))]
    SplitTooFine {
        len: u32,
        what: &'static str,
        parts: usize,
    },
    #[error("cannot open the nodes' transport: {0}")]
    Transport(String),
    #[error("cannot start {what}: {message}")]
    Spawn { what: &'static str, message: String },
    #[error("object {object} is {mode}, not remote: only a remote object's pages are placed")]
    NotRemote {
        object: ObjectId,
        mode: tessera_core::AccessMode,
    },
    #[error("object {object} has {pages} pages; {given} locations given")]
    Locations {
        object: ObjectId,
        pages: u64,
        given: usize,
    },
    #[error("object {object} is remote: its pages are not kept as pages")]
    RemotePagesNotKept { object: ObjectId },
    #[error("{backend} copies no pages between peers")]
    NoPeerCopies { backend: String },
    #[error("{backend}: a device has at most {max} memories and each of the {nodes} nodes' homes needs one of its own; run at most {max} nodes")]
    TooManyHomes {
        backend: String,
        max: u16,
        nodes: usize,
    },
    #[error("a home copy of {bytes} bytes does not fit memory: a home holds whole pages, so a texture takes its pages' bytes, many times its texels' where a side is much shorter than a page (smaller pages, or a home file, `SystemConfig::home_file`)")]
    HomeTooLarge { bytes: u64 },
    #[error("remote objects are not built across nodes: their pages live on one device")]
    RemoteAcrossNodes,
    /// A kernel's own failure, in its words: what a kernel (code outside the runtime) found
    /// wrong with its inputs, or why it gave up.
    #[error("the kernel failed: {0}")]
    KernelFailed(String),
    /// The runtime's own records disagree (a bug, not an input): what was found.
    #[error("internal inconsistency: {0}")]
    Internal(String),
    /// The object does not exist yet: it is named by its shape.
    #[error("the initial data has {got} bytes; {object} holds {want}")]
    DataSize {
        object: String,
        got: usize,
        want: usize,
    },
    #[error(
        "pass did not converge: {left} invocations (or pages to merge) still missing pages after {rounds} rounds"
    )]
    NoProgress { left: usize, rounds: usize },
    /// Invocations returned [`crate::Fault::Miss`] (or suspended) though none of their loads
    /// missed: the runtime has no page to fetch, and running them again gives the same.
    #[error("kernel {kernel}: {left} invocation(s) returned a fault though no load missed, so there is no page to fetch; return Fault::Miss only as a missed load gives it")]
    FaultWithoutMiss { kernel: String, left: usize },
    /// A batch (with the pages its wave keeps) needs more slots than the device's budget
    /// holds even after evicting everything else. The drivers answer it by splitting the wave;
    /// it reaches the caller only through a direct request.
    #[error("{device} cannot hold a batch of {} of {page_bytes} bytes at once: it holds {capacity} such pages besides the ones it may not evict, within its budget of {budget_bytes} bytes and what the device's memories can be (on wgpu, the adapter's largest binding and buffer)", count(*pages, "page"))]
    OverBudget {
        device: DeviceId,
        pages: u64,
        capacity: u64,
        page_bytes: u64,
        budget_bytes: u64,
    },
    /// Not even one invocation's pages fit: nothing can run.
    #[error("{device}'s budget of {budget_bytes} bytes is too small: one invocation of kernel {kernel} needs at least {} of {page_bytes} bytes ({min_bytes} bytes) resident at once{}{}", count(*pages, "page"), advice(*min_bytes, *budget_bytes), enough_note(*min_bytes, *enough_bytes))]
    BudgetTooSmall {
        device: DeviceId,
        kernel: String,
        /// The pages the invocation had asked for when the budget ran out: a lower bound,
        /// since an invocation reveals its pages one miss at a time.
        pages: u64,
        page_bytes: u64,
        /// Those pages' bytes.
        min_bytes: u64,
        budget_bytes: u64,
        /// Where the kernel bounds its pages (a footprint, or `Kernel::pages_per_invocation`):
        /// the bytes of the most pages one invocation can need, which are enough for any
        /// invocation of this kernel (other kernels of the run may need more).
        enough_bytes: Option<u64>,
    },
    /// The home file could not be created, grown, shrunk or mapped. `io::Error` is neither
    /// `Clone` nor `PartialEq`, which this enum must be (a broken manager repeats its error to
    /// every later caller), so its kind and text are kept instead.
    #[error("home file {}: cannot {action}: {message}", path.display())]
    HomeFile {
        path: PathBuf,
        action: &'static str,
        kind: std::io::ErrorKind,
        message: String,
    },
    #[error("object {object} is replicate-read: {device} may not write it ({page})")]
    ReadOnlyObject {
        object: ObjectId,
        device: DeviceId,
        page: GlobalPage,
    },
    #[error("{device} requested {page} of remote object {object}: a remote page is never copied")]
    RemoteRequested {
        object: ObjectId,
        device: DeviceId,
        page: GlobalPage,
    },
    #[error("remote mode is not built on the {backend} backend (object {object} is remote)")]
    RemoteNotBuilt { backend: String, object: ObjectId },
    #[error(
        "home file {} already exists; tessera creates its home file fresh and never overwrites one: remove it or choose another path",
        path.display()
    )]
    HomeFileExists { path: PathBuf },
    #[error("node {node} was lost ({how}); with homes split and no replication its pages are gone, and the run cannot finish")]
    NodeLost { node: usize, how: String },
    #[error("node {node}: {message}")]
    OnNode { node: usize, message: String },
}

/// A backend's error behind the runtime's boundary, which knows no backend's types. Shared,
/// so that [`RuntimeError`] stays `Clone` (a broken memory manager repeats its error to every
/// later caller); two are equal when they say the same.
#[derive(Clone, Debug)]
pub struct BackendError(Arc<dyn std::error::Error + Send + Sync>);

impl BackendError {
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        BackendError(Arc::new(error))
    }
    /// The backend's error, when it is an `E`.
    pub fn downcast_ref<E: std::error::Error + 'static>(&self) -> Option<&E> {
        self.0.downcast_ref()
    }
}

impl std::fmt::Display for BackendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for BackendError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl PartialEq for BackendError {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.to_string() == other.0.to_string()
    }
}

pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;

/// `n` and `noun`, in the plural unless `n` is 1: "1 page", "2 pages".
pub fn count(n: u64, noun: &str) -> String {
    match n {
        1 => format!("1 {noun}"),
        _ => format!("{n} {noun}s"),
    }
}

/// What `BudgetTooSmall` tells the user to give. Where the pages asked for fit the budget by
/// their bytes, the room went to pages the device could not evict or to pages of other sizes
/// sharing the budget, and how much more is needed is not known here: saying "at least" the
/// budget it already had would be no advice.
fn advice(min_bytes: u64, budget_bytes: u64) -> String {
    if min_bytes > budget_bytes {
        format!(
            "; give it at least {}",
            advised(min_bytes).trim_end_matches(',')
        )
    } else {
        format!(
            ", which this budget could not hold beside the pages the device could not evict \
             and those of other sizes; give it more than {budget_bytes} bytes"
        )
    }
}

/// The end of `BudgetTooSmall`'s message: the kernel's bound (its footprint's, or
/// `Kernel::pages_per_invocation`) where it says more than the pages asked for, and without
/// one, that those pages are a lower bound. A stencil given the bytes its message asked for
/// failed again asking for more, three times over, and nothing had said it might.
fn enough_note(min_bytes: u64, enough_bytes: Option<u64>) -> String {
    match enough_bytes {
        Some(b) if b > min_bytes => format!(
            " ({} are enough for any one invocation of it; the run's other kernels may need \
             more)",
            advised(b)
        ),
        Some(_) => " (the run's other kernels may need more)".to_string(),
        None => " (a lower bound: an invocation shows its pages one miss at a time, and \
                 another may need more; a kernel whose `Kernel::pages_per_invocation` or \
                 footprint bounds its pages is told what is enough)"
            .to_string(),
    }
}

/// Bytes the user is told to give, also in MiB: the command line takes budgets in MiB
/// (`--budget-mib`), and 576 bytes converted by hand go wrong. A byte count over 2^20 is a
/// dyadic fraction, which `f64`'s shortest form prints exactly, ready to paste.
fn advised(bytes: u64) -> String {
    format!("{bytes} bytes, {} MiB,", bytes as f64 / (1u64 << 20) as f64)
}

fn split_too_fine(len: u32, what: &str, parts: usize) -> String {
    match len {
        0 => format!("the pass's domain is empty: it has 0 {what}"),
        _ => format!(
            "cannot split {} between {parts} devices: more devices than {what} (each \
             device's band is at least one)",
            count(len as u64, what.trim_end_matches('s'))
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_too_small_never_advises_the_budget_it_had() {
        let e = |pages: u64, budget_bytes: u64| {
            RuntimeError::BudgetTooSmall {
                device: DeviceId(0),
                kernel: "k".into(),
                pages,
                page_bytes: 64,
                min_bytes: pages * 64,
                budget_bytes,
                enough_bytes: None,
            }
            .to_string()
        };
        let over = e(10, 320);
        assert!(
            over.contains("; give it at least 640 bytes, 0.0006103515625 MiB (a lower bound"),
            "{over}"
        );
        let within = e(3, 320);
        assert!(
            within.contains("3 pages of 64 bytes (192 bytes) resident at once, which this budget"),
            "{within}"
        );
        assert!(within.contains("give it more than 320 bytes"), "{within}");
        // With a footprint the note says what is enough, and nothing where the footprint
        // names no more than the pages already asked for.
        let bounded = |enough: u64| {
            RuntimeError::BudgetTooSmall {
                device: DeviceId(0),
                kernel: "k".into(),
                pages: 10,
                page_bytes: 64,
                min_bytes: 640,
                budget_bytes: 320,
                enough_bytes: Some(enough),
            }
            .to_string()
        };
        let more = bounded(1024);
        assert!(
            more.ends_with(
                "give it at least 640 bytes, 0.0006103515625 MiB (1024 bytes, 0.0009765625 MiB, \
                 are enough for any one invocation of it; the run's other kernels may need more)"
            ),
            "{more}"
        );
        let same = bounded(640);
        assert!(
            same.ends_with(
                "; give it at least 640 bytes, 0.0006103515625 MiB (the run's other kernels may \
                 need more)"
            ),
            "{same}"
        );
        // One page is one page: boiling under a budget of a few bytes said "1 pages".
        let one = e(1, 16);
        assert!(one.contains("needs at least 1 page of 64 bytes"), "{one}");
    }

    /// The whole chain, as `anyhow`'s `{:#}` and the CLI print it.
    fn chain(e: &dyn std::error::Error) -> String {
        let mut s = e.to_string();
        let mut next = e.source();
        while let Some(c) = next {
            s += &format!(": {c}");
            next = c.source();
        }
        s
    }

    #[derive(Debug, thiserror::Error)]
    #[error("out of GPU memory: a temporary of 256 MiB")]
    struct Oom;

    #[test]
    fn a_backends_error_is_said_once_in_the_chain() {
        let e = RuntimeError::Device {
            device: DeviceId(0),
            error: BackendError::new(Oom),
        };
        let said = chain(&e);
        assert_eq!(said.matches("out of GPU memory").count(), 1, "{said}");
        assert!(said.starts_with("device0: "), "{said}");
        let RuntimeError::Device { error, .. } = &e else {
            unreachable!()
        };
        assert!(error.downcast_ref::<Oom>().is_some());
    }
}
