//! The outbox: device jobs gathered per worker while actions are carried out, sent in order,
//! consecutive slot writes as one batch.

use super::*;

/// Work for one device worker, collected while a batch of actions is carried out.
pub(super) enum DeviceOp {
    Create(u16, u64, u32),
    /// Writes these bytes into the slot; the buffer comes back to the manager's pool.
    Write(SlotAddr, Vec<u8>),
    /// Copies the page's home copy into the slot, on the worker: one copy, where copying it
    /// into a vector to hand over cost a second copy and a fresh allocation. In-process only:
    /// a transport to a worker elsewhere would send the bytes (`Write`) instead.
    WriteFromHome {
        at: SlotAddr,
        obj: ObjectId,
        local: u64,
        bytes: u64,
    },
    Set(GlobalPage, PageDescriptor),
    /// Copies a slot of a peer's memory into the slot on the device (`Device::copy_from_peers`);
    /// a job's consecutive peer copies go in one submission.
    PeerCopy(PeerCopy),
}

/// Where the bytes of a page copied onto a device come from.
pub(super) enum Fill {
    Home,
    Bytes(Vec<u8>),
    /// The source device's slot, copied on the device they share.
    Peer(DeviceId, SlotAddr),
}

/// One slot write of a worker's batch: bytes the manager read, or a page of home.
pub(super) enum SlotWrite {
    Bytes(SlotAddr, Vec<u8>),
    Home {
        at: SlotAddr,
        obj: ObjectId,
        local: u64,
        bytes: u64,
    },
}

/// Writes the batch collected so far as one `Device::write_slots`, home's pages read under one
/// lock, empties `writes` and moves the buffers the writes came from into `spent` (for the
/// pool). Nothing written stays in `writes`: a later batch of the same job wrote it again,
/// over a slot a peer copy in between may have filled since.
pub(super) fn write_batch(
    dev: &mut dyn Device,
    home: &SharedHome,
    writes: &mut Vec<SlotWrite>,
    spent: &mut Vec<Vec<u8>>,
) -> Result<()> {
    if writes.is_empty() {
        return Ok(());
    }
    let from_home = writes.iter().any(|w| matches!(w, SlotWrite::Home { .. }));
    let guard = if from_home {
        Some(read_home(home)?)
    } else {
        None
    };
    let mut batch = Vec::with_capacity(writes.len());
    for w in writes.iter() {
        match w {
            SlotWrite::Bytes(at, data) => batch.push((*at, data.as_slice())),
            &SlotWrite::Home {
                at,
                obj,
                local,
                bytes,
            } => {
                if let Some(h) = guard.as_ref() {
                    batch.push((at, h.page(obj, local, bytes)?));
                }
            }
        }
    }
    dev.write_slots(&batch)?;
    drop(batch);
    drop(guard);
    spent.extend(writes.drain(..).filter_map(|w| match w {
        SlotWrite::Bytes(_, data) => Some(data),
        SlotWrite::Home { .. } => None,
    }));
    Ok(())
}

/// A modified page a worker writes straight home: the page, its slot on the source, and where
/// it goes at home (object, local page, bytes).
pub(super) type HomeBound = (GlobalPage, SlotAddr, ObjectId, u64, u64);

/// Page buffers the manager keeps for reuse at most (device → device copies); a batch that
/// moves more allocates the rest.
pub(super) const POOL_BYTES: usize = 64 << 20;

/// What a worker's job gives back: the buffers it wrote from (for the pool), the nanoseconds
/// its page copies took, and its emptied op list, whose allocation the next job reuses.
pub(super) type Spent = (Vec<Vec<u8>>, u64, Vec<DeviceOp>);

/// Per-device queues of collected work and the acknowledgements still to come.
pub(super) struct Outbox {
    pub(super) ops: Vec<Vec<DeviceOp>>,
    pub(super) acks: Vec<Pending<Result<Spent>>>,
    pub(super) home: SharedHome,
    pub(super) held: Arc<HeldPages>,
    /// Some queued or sent job copies from home: the manager must let them finish before it
    /// writes home itself.
    pub(super) reads_home: bool,
    /// Buffers the workers have written from, for the pool.
    pub(super) spent: Vec<Vec<u8>>,
    /// Source slots of the peer copies queued or sent and not yet acknowledged: none may be
    /// written before `finish` (a slot freed by an invalidation and reused in the same list).
    pub(super) peer_sources: HashSet<(DeviceId, SlotAddr)>,
    /// Slots freed by this list's invalidations, which are queued or sent and not yet
    /// acknowledged: a launch may still map them.
    pub(super) freed: HashSet<(DeviceId, SlotAddr)>,
    /// Host time the acknowledged jobs spent copying pages, in nanoseconds.
    pub(super) copy_nanos: u64,
    /// Op lists the workers gave back empty: a boundary batch pushes tens of ops per device,
    /// and growing a fresh list op by op cost more of the manager's time than the ops did.
    spare: Vec<Vec<DeviceOp>>,
}

impl Outbox {
    pub(super) fn new(devices: usize, home: SharedHome, held: Arc<HeldPages>) -> Self {
        Outbox {
            ops: (0..devices).map(|_| Vec::new()).collect(),
            acks: Vec::new(),
            home,
            held,
            reads_home: false,
            spent: Vec::new(),
            peer_sources: HashSet::default(),
            freed: HashSet::default(),
            copy_nanos: 0,
            spare: Vec::new(),
        }
    }

    /// Whether nothing is collected, sent or unacknowledged: what a reused outbox must be.
    pub(super) fn is_idle(&self) -> bool {
        self.acks.is_empty() && self.spent.is_empty() && self.ops.iter().all(Vec::is_empty)
    }

    pub(super) fn push(&mut self, d: DeviceId, op: DeviceOp) {
        self.reads_home |= matches!(op, DeviceOp::WriteFromHome { .. });
        let ops = &mut self.ops[d.index()];
        if ops.capacity() == 0 {
            if let Some(v) = self.spare.pop() {
                *ops = v;
            }
        }
        ops.push(op);
    }

    /// Sends device `d`'s collected work as one job.
    pub(super) fn flush(&mut self, workers: &[WorkerHandle], d: DeviceId) {
        let mut ops = std::mem::take(&mut self.ops[d.index()]);
        if ops.is_empty() {
            if ops.capacity() > 0 {
                self.spare.push(ops);
            }
            return;
        }
        // Published as sent, before the worker applies them, under one lock: a right taken
        // away shows no later than the device's table loses it (`crate::held`).
        self.held.set_all(
            d,
            ops.iter().filter_map(|op| match *op {
                DeviceOp::Set(page, desc) => Some((page, desc)),
                _ => None,
            }),
        );
        let home = self.home.clone();
        self.acks.push(workers[d.index()].submit_here(move |dev| {
            // Consecutive slot writes go as one batch (`Device::write_slots`), consecutive peer
            // copies as another (`Device::copy_from_peers`). Each batch is sent before an op of
            // the other kind, so a slot a peer copy fills and a write then reuses (or the other
            // way round) is filled in list order. Descriptor updates go whenever they come: the
            // next launch comes after the job anyway.
            let mut peer: Vec<PeerCopy> = Vec::new();
            let mut writes: Vec<SlotWrite> = Vec::new();
            let mut spent: Vec<Vec<u8>> = Vec::new();
            let mut nanos = 0;
            // A batch is timed only when it holds something: two clock reads per op showed
            // in the manager's profile.
            let flush_writes = |nanos: &mut u64,
                                dev: &mut dyn Device,
                                w: &mut Vec<SlotWrite>,
                                spent: &mut Vec<Vec<u8>>| {
                if w.is_empty() {
                    return Ok(());
                }
                copied(nanos, || write_batch(dev, &home, w, spent))
            };
            let flush_peer = |nanos: &mut u64, dev: &mut dyn Device, p: &mut Vec<PeerCopy>| {
                if p.is_empty() {
                    return Ok(());
                }
                let res = copied(nanos, || dev.copy_from_peers(p));
                p.clear();
                res
            };
            for op in ops.drain(..) {
                match op {
                    DeviceOp::PeerCopy(c) => {
                        flush_writes(&mut nanos, dev, &mut writes, &mut spent)?;
                        peer.push(c);
                    }
                    DeviceOp::Write(at, data) => {
                        flush_peer(&mut nanos, dev, &mut peer)?;
                        writes.push(SlotWrite::Bytes(at, data));
                    }
                    DeviceOp::WriteFromHome {
                        at,
                        obj,
                        local,
                        bytes,
                    } => {
                        flush_peer(&mut nanos, dev, &mut peer)?;
                        writes.push(SlotWrite::Home {
                            at,
                            obj,
                            local,
                            bytes,
                        });
                    }
                    DeviceOp::Create(id, bytes, cap) => {
                        // The memory must exist before a batch writes into it.
                        flush_writes(&mut nanos, dev, &mut writes, &mut spent)?;
                        dev.create_memory(id, bytes, cap)?
                    }
                    DeviceOp::Set(page, desc) => dev.set_page(page, desc)?,
                }
            }
            flush_peer(&mut nanos, dev, &mut peer)?;
            flush_writes(&mut nanos, dev, &mut writes, &mut spent)?;
            Ok((spent, nanos, ops))
        }));
    }

    /// Sends everything and waits for every acknowledgement; the first error wins.
    pub(super) fn finish(&mut self, workers: &[WorkerHandle]) -> Result<()> {
        for d in 0..self.ops.len() {
            self.flush(workers, DeviceId(d as u8));
        }
        let mut res = Ok(());
        for p in self.acks.drain(..) {
            match p.wait().and_then(|r| r) {
                Ok((mut spent, nanos, ops)) => {
                    self.spent.append(&mut spent);
                    self.copy_nanos += nanos;
                    self.spare.push(ops);
                }
                Err(e) => {
                    if res.is_ok() {
                        res = Err(e);
                    }
                }
            }
        }
        self.reads_home = false;
        self.peer_sources.clear();
        self.freed.clear();
        res
    }

    pub(super) fn take_spent(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.spent)
    }
}

#[cfg(all(test, not(feature = "shuttle")))]
mod tests {
    use super::*;
    use crate::cpu::CpuDevice;
    use crate::home::HomeStore;
    use crate::sync::RwLock;

    /// A slot written by one batch and then filled otherwise (a peer copy into a reused slot)
    /// keeps the later bytes through the job's next batch.
    #[test]
    fn a_written_batch_is_not_written_again_by_the_next() {
        let pool = Arc::new(
            rayon::ThreadPoolBuilder::new()
                .num_threads(1)
                .build()
                .unwrap(),
        );
        let mut dev = CpuDevice::new(DeviceId(0), pool);
        dev.create_memory(0, 4, 2).unwrap();
        let home: SharedHome = Arc::new(RwLock::new(HomeStore::Memory(Default::default())));
        let (s0, s1) = (
            SlotAddr { memory: 0, slot: 0 },
            SlotAddr { memory: 0, slot: 1 },
        );
        let (mut writes, mut spent) = (vec![SlotWrite::Bytes(s0, vec![1; 4])], Vec::new());
        write_batch(&mut dev, &home, &mut writes, &mut spent).unwrap();
        assert!(writes.is_empty());
        assert_eq!(spent, [vec![1; 4]]);
        dev.write_slot(s0, &[7; 4]).unwrap();
        writes.push(SlotWrite::Bytes(s1, vec![2; 4]));
        write_batch(&mut dev, &home, &mut writes, &mut spent).unwrap();
        assert_eq!(dev.read_slot(s0).unwrap(), [7; 4]);
        assert_eq!(dev.read_slot(s1).unwrap(), [2; 4]);
        assert_eq!(spent.len(), 2);
    }
}
