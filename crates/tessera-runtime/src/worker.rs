//! Device workers: one thread per device that owns the backend device.
//!
//! A worker runs jobs from its command queue one at a time, to completion, and never waits on
//! another thread: the paper's OpenGL thread (3.7), whose commands "never cause \[it\] to block".
//! Each job answers on its own reply channel, so replies never queue behind commands. Because
//! a device runs one job at a time, a launch is atomic with respect to the memory manager's
//! page moves on that device.
//!
//! The memory manager's short jobs (descriptor updates, revocations, page copies between
//! devices) may run on the manager's own thread instead, when the worker has nothing queued
//! or running ([`WorkerHandle::submit_here`]): a hand-off to the worker and back costs two
//! thread wake-ups, tens of microseconds each, several times a batch, where the jobs
//! themselves take a few. The device is then held by one thread at a time through a lock, so
//! a job still runs alone on its device, in the order it was submitted.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tessera_core::DeviceId;

use crate::backend::Device;
use crate::error::{Result, RuntimeError};
use crate::sync::channel::{bounded, unbounded, Receiver, Sender};
use crate::sync::{AtomicUsize, Builder, JoinHandle, Mutex};

/// A queued job: it runs on the device and gives back what sends its reply, which the worker
/// calls once it has let go of the device, so whoever the reply wakes finds the worker idle.
type Job = Box<dyn FnOnce(&mut dyn Device) -> Reply + Send>;
type Reply = Box<dyn FnOnce() + Send>;

/// The device, and how many jobs are queued for it or running on its worker.
struct Owned {
    device: Mutex<Box<dyn Device>>,
    queued: AtomicUsize,
}

/// A reply that will arrive on its own channel, or one that is there already.
pub struct Pending<R>(Answer<R>, &'static str, Option<Arc<AtomicU64>>);

/// Where a [`Pending`] reply is: a job run on the caller's thread answers at once, with no
/// channel to make (a boundary batch runs dozens of such jobs).
enum Answer<R> {
    Channel(Receiver<R>),
    Ready(std::cell::Cell<Option<R>>),
}

impl<R> Pending<R> {
    /// Blocks until the reply comes; a reply from a device worker counts as one of the
    /// device's blocking waits ([`crate::stats::HostCounters`]).
    pub fn wait(self) -> Result<R> {
        match self.0 {
            Answer::Channel(rx) => {
                if let Some(c) = &self.2 {
                    c.fetch_add(1, Ordering::Relaxed);
                }
                rx.recv().map_err(|_| RuntimeError::ThreadGone(self.1))
            }
            Answer::Ready(r) => r.into_inner().ok_or(RuntimeError::ThreadGone(self.1)),
        }
    }
    /// The reply if it has arrived already.
    pub fn try_take(&self) -> Option<R> {
        match &self.0 {
            Answer::Channel(rx) => rx.try_recv().ok(),
            Answer::Ready(r) => r.take(),
        }
    }
    pub(crate) fn new(rx: Receiver<R>, who: &'static str) -> Self {
        Pending(Answer::Channel(rx), who, None)
    }
    /// A reply there already: waiting for it blocks nothing, so it is not counted.
    pub(crate) fn ready(r: R, who: &'static str) -> Self {
        Pending(Answer::Ready(std::cell::Cell::new(Some(r))), who, None)
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
    owned: Arc<Owned>,
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
        self.owned.queued.fetch_add(1, Ordering::SeqCst);
        // A send fails only when the worker is gone; the Pending then reports ThreadGone.
        let _ = self.tx.send(Box::new(move |d: &mut dyn Device| {
            let r = f(d);
            // Before the reply: whoever the reply wakes may act on the job's effects.
            d.end_of_job();
            Box::new(move || {
                let _ = tx.send(r);
            }) as Reply
        }));
        Pending(
            Answer::Channel(rx),
            "device worker",
            Some(self.seam.waits.clone()),
        )
    }

    /// [`WorkerHandle::submit`], but run at once on this thread when the worker has no job
    /// queued or running: the same order (nothing is ahead of it) without the hand-off. Only
    /// for short jobs of a thread that would wait for them anyway (the memory manager's): a
    /// launch queued this way would hold up its caller.
    pub fn submit_here<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut dyn Device) -> R + Send + 'static,
    ) -> Pending<R> {
        if self.owned.queued.load(Ordering::SeqCst) == 0 {
            if let Ok(mut dev) = self.owned.device.try_lock() {
                // Checked again under the lock: a job queued since would run after this one
                // although it was submitted first.
                if self.owned.queued.load(Ordering::SeqCst) == 0 {
                    self.seam.jobs.fetch_add(1, Ordering::Relaxed);
                    let r = f(&mut **dev);
                    dev.end_of_job();
                    drop(dev);
                    return Pending::ready(r, "device worker");
                }
            }
        }
        self.submit(f)
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

    /// [`WorkerHandle::call`] through [`WorkerHandle::submit_here`].
    pub fn call_here<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut dyn Device) -> Result<R> + Send + 'static,
    ) -> Result<R> {
        self.submit_here(f).wait()?
    }
}

/// Starts a worker thread owning `device`.
pub fn spawn(id: DeviceId, device: Box<dyn Device>) -> Result<(WorkerHandle, JoinHandle<()>)> {
    let (tx, rx) = unbounded::<Job>();
    let backend = device.counters();
    let queues_launches = device.queues_launches();
    let owned = Arc::new(Owned {
        device: Mutex::new(device),
        queued: AtomicUsize::new(0),
    });
    let mine = owned.clone();
    let join = Builder::new()
        .name(format!("tessera-worker-{}", id.0))
        .spawn(move || {
            while let Ok(job) = rx.recv() {
                let reply = {
                    // A job that panicked while holding the device poisoned the lock; the
                    // device is left as that job left it, as it was before there was a lock.
                    let mut dev = mine.device.lock().unwrap_or_else(|p| p.into_inner());
                    job(&mut **dev)
                };
                mine.queued.fetch_sub(1, Ordering::SeqCst);
                reply();
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
            owned,
            backend,
            queues_launches,
        },
        join,
    ))
}
