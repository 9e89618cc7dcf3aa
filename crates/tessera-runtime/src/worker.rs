//! Device workers: one thread per device that owns the backend device.
//!
//! A worker runs jobs from its command queue one at a time, to completion, and never waits on
//! another thread: the paper's OpenGL thread (3.7), whose commands "never cause [it] to block".
//! Each job answers on its own reply channel, so replies never queue behind commands. Because
//! a device runs one job at a time, a launch is atomic with respect to the memory manager's
//! page moves on that device.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tessera_core::DeviceId;

use crate::backend::Device;
use crate::error::{Result, RuntimeError};
use crate::sync::channel::{bounded, unbounded, Receiver, Sender};
use crate::sync::{Builder, JoinHandle};

type Job = Box<dyn FnOnce(&mut dyn Device) + Send>;

/// A reply that will arrive on its own channel.
pub struct Pending<R>(Receiver<R>, &'static str, Option<Arc<AtomicU64>>);

impl<R> Pending<R> {
    /// Blocks until the reply comes; a reply from a device worker counts as one of the
    /// device's blocking waits ([`crate::stats::HostCounters`]).
    pub fn wait(self) -> Result<R> {
        if let Some(c) = &self.2 {
            c.fetch_add(1, Ordering::Relaxed);
        }
        self.0.recv().map_err(|_| RuntimeError::ThreadGone(self.1))
    }
    /// The reply if it has arrived already.
    pub fn try_take(&self) -> Option<R> {
        self.0.try_recv().ok()
    }
    pub(crate) fn new(rx: Receiver<R>, who: &'static str) -> Self {
        Pending(rx, who, None)
    }
}

/// What the host asked of one device worker: jobs queued, and waits for their replies.
#[derive(Debug, Default)]
struct SeamCounters {
    jobs: AtomicU64,
    /// Shared with every reply the worker hands out.
    waits: Arc<AtomicU64>,
}

/// The command side of a device worker; cheap to clone.
#[derive(Clone)]
pub struct WorkerHandle {
    pub device: DeviceId,
    tx: Sender<Job>,
    seam: Arc<SeamCounters>,
    backend: Option<Arc<crate::stats::BackendCounters>>,
    /// The device leaves queued launches on itself (`Device::queues_launches`).
    queues_launches: bool,
}

impl WorkerHandle {
    /// Queues a job on the device; its result comes back on a fresh reply channel.
    pub fn submit<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut dyn Device) -> R + Send + 'static,
    ) -> Pending<R> {
        let (tx, rx) = bounded(1);
        self.seam.jobs.fetch_add(1, Ordering::Relaxed);
        // A send fails only when the worker is gone; the Pending then reports ThreadGone.
        let _ = self.tx.send(Box::new(move |d: &mut dyn Device| {
            let r = f(d);
            // Before the reply: whoever the reply wakes may act on the job's effects.
            d.end_of_job();
            let _ = tx.send(r);
        }));
        Pending(rx, "device worker", Some(self.seam.waits.clone()))
    }

    /// The host's work for this device so far, but for the memory manager's messages (the
    /// manager's handle counts those).
    pub fn counters(&self) -> crate::stats::HostCounters {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut h = crate::stats::HostCounters {
            submissions: load(&self.seam.jobs),
            blocking_waits: load(&self.seam.waits),
            ..Default::default()
        };
        if let Some(b) = &self.backend {
            h.submissions = load(&b.submissions);
            h.device_waits = load(&b.device_waits);
            h.bytes_read_back = load(&b.bytes_read_back);
        }
        h
    }

    /// Whether the device leaves launches queued with `Device::queue_launch` on itself, to be
    /// settled with `Device::settle_queued`.
    pub fn queues_launches(&self) -> bool {
        self.queues_launches
    }

    /// Queues a job and waits for it.
    pub fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut dyn Device) -> Result<R> + Send + 'static,
    ) -> Result<R> {
        self.submit(f).wait()?
    }
}

/// Starts a worker thread owning `device`.
pub fn spawn(id: DeviceId, mut device: Box<dyn Device>) -> Result<(WorkerHandle, JoinHandle<()>)> {
    let (tx, rx) = unbounded::<Job>();
    let backend = device.counters();
    let queues_launches = device.queues_launches();
    let join = Builder::new()
        .name(format!("tessera-worker-{}", id.0))
        .spawn(move || {
            while let Ok(job) = rx.recv() {
                job(&mut *device);
            }
        })
        .map_err(|e| RuntimeError::Spawn {
            what: "a thread",
            message: e.to_string(),
        })?;
    Ok((
        WorkerHandle {
            device: id,
            tx,
            seam: Arc::new(SeamCounters::default()),
            backend,
            queues_launches,
        },
        join,
    ))
}
