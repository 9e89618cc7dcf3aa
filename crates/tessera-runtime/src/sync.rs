//! The thread and channel primitives the runtime's threads use, in one place.
//!
//! Normally these are std's threads and crossbeam's channels. With the `shuttle` feature they
//! are shuttle's, so a test can run the real memory manager, workers and drivers under
//! shuttle's controlled scheduler (random or PCT): every send, receive, spawn and join is then
//! a point where shuttle may switch threads, and a schedule that fails can be replayed. What
//! the memory manager, workers and drivers share goes through here (the home store's lock,
//! which the memory manager shares with the device workers, and the locks behind which a
//! caller runs the manager's or a worker's queued work itself). Some shared state stays std
//! and is not scheduled by shuttle: the CPU backend's per-device memory words, the deferred
//! launches' skip gate in `driver.rs`, `RemoteRegistry`, `cluster`'s threads and locks, and
//! counters (see docs/PROTOCOL.md, "Under shuttle").

#[cfg(not(feature = "shuttle"))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicUsize};
#[cfg(not(feature = "shuttle"))]
pub(crate) use std::sync::Mutex;
#[cfg(not(feature = "shuttle"))]
pub(crate) use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
#[cfg(not(feature = "shuttle"))]
pub(crate) use std::thread::{Builder, JoinHandle};

#[cfg(feature = "shuttle")]
pub(crate) use shuttle::sync::atomic::{AtomicBool, AtomicUsize};
#[cfg(feature = "shuttle")]
pub(crate) use shuttle::sync::Mutex;
#[cfg(feature = "shuttle")]
pub(crate) use shuttle::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
#[cfg(feature = "shuttle")]
pub(crate) use shuttle::thread::{Builder, JoinHandle};

#[cfg(not(feature = "shuttle"))]
pub(crate) mod channel {
    pub(crate) use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
}

#[cfg(feature = "shuttle")]
pub(crate) mod channel {
    pub(crate) use shuttle::sync::mpsc::{Receiver, Sender};

    pub(crate) fn unbounded<T>() -> (Sender<T>, Receiver<T>) {
        shuttle::sync::mpsc::channel()
    }

    /// Every bounded channel in the runtime is a reply channel that carries exactly one
    /// message, so its capacity never makes a sender wait; an unbounded channel behaves the
    /// same and keeps one `Sender` type (shuttle's `sync_channel` has its own).
    pub(crate) fn bounded<T>(_capacity: usize) -> (Sender<T>, Receiver<T>) {
        shuttle::sync::mpsc::channel()
    }
}
