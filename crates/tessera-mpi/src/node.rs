//! One node of the multi-node memory system: its home (protocol, directory part and home
//! copies of the pages it is home to), its worker (its devices' page copies, serving commands
//! from any node's home) and its drivers (its devices' rounds of batches).
//!
//! Everything runs in one event loop per node that never blocks on another node: a home
//! carries out one message's actions at a time, in order, and while it waits for a remote
//! worker's acknowledgement it keeps serving its own worker's commands and its drivers, so
//! the wait-for graph of docs/PROTOCOL.md ("Several nodes") holds across nodes: homes wait
//! on workers, which wait on nobody; drivers wait on homes; a deferred part waits on a release
//! by a device that holds locks only at lower homes (the parts are acquired in node order).
//!
//! A node that stops answering (no message for [`NodeConfig::lost_after`], heartbeats
//! included) or whose inbox closed is lost: the others stop with [`NodeError::Lost`] naming
//! it. Nothing is recovered: the lost node's home pages and its devices' copies are gone.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tessera_core::nodes::split_by_home;
use tessera_core::protocol::{
    Access, Action, Message, PageRequest, RequestBatch, RequestId, Source,
};
use tessera_core::{
    Coherence, DeviceId, Directory, GlobalPage, HomeMap, Protocol, ProtocolVariant,
};

use crate::litmus::{LitmusReport, ThreadRun};
use crate::transport::Transport;
use crate::wire::{decode, encode, Cmd, Wire};
use crate::workload;
use crate::NodeError;

/// The run every node of a cluster is started with (all nodes the same).
#[derive(Clone, Debug)]
pub struct NodeConfig {
    pub devices_per_node: usize,
    pub pages: u64,
    /// 32-bit words per page.
    pub words: usize,
    pub rounds: u32,
    /// Pages are dealt to homes in blocks of this many, round robin.
    pub block_pages: u64,
    /// A node silent this long is lost.
    pub lost_after: Duration,
    /// For the lost-node tests: this node stops with [`NodeError::Stopped`] right after its
    /// devices finish this round, as if killed (the MPI binary aborts the process).
    pub stop_after_round: Option<u32>,
    /// Run this litmus test instead of the rounds workload (then `pages`, `words`, `rounds`
    /// and `block_pages` are derived from it).
    pub litmus: Option<Arc<LitmusJob>>,
    /// What a read of a modified page does: owned pages (the runtime's default), or the
    /// paper's write-home rule. Either way each round ends with every copy evicted, so the
    /// last owner of each page writes it home before the field is checked.
    pub coherence: Coherence,
}

/// A litmus test and how many times to run it.
#[derive(Clone, Debug)]
pub struct LitmusJob {
    pub test: tessera_litmus::Test,
    pub runs: u32,
    /// Each memory operation waits a random 0..=`jitter_us` microseconds before its request,
    /// so the threads' operations interleave differently from run to run.
    pub jitter_us: u32,
    pub seed: u64,
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            devices_per_node: 1,
            pages: 64,
            words: 64,
            rounds: 8,
            block_pages: 4,
            lost_after: Duration::from_secs(10),
            stop_after_round: None,
            litmus: None,
            coherence: Coherence::Owned,
        }
    }
}

/// What a node saw. The totals are rank 0's, gathered from every node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeReport {
    pub nodes: usize,
    pub devices: usize,
    /// Checksum of every page at the end (rank 0; this node's home pages elsewhere).
    pub checksum: u64,
    /// The same over the sequential reference.
    pub reference_checksum: u64,
    /// Pages that differ from the reference (rank 0: all nodes').
    pub mismatches: u64,
    /// Bytes sent to other nodes, all messages (rank 0: all nodes').
    pub inter_node_bytes: u64,
    /// Of which page data (copies and write-backs that crossed nodes).
    pub inter_node_page_bytes: u64,
    /// Rank 0 of a litmus run: the outcomes and the oracle's verdict.
    pub litmus: Option<LitmusReport>,
}

#[derive(Clone, Debug, Default)]
struct Slot {
    data: Vec<u32>,
    filled: bool,
    valid: bool,
    writable: bool,
}

/// One step of a home's job: an action as the commands and sends that carry it out.
#[derive(Clone, Debug)]
enum Micro {
    /// A worker command; a `Read`'s data goes to the stash.
    Cmd(Cmd),
    FillFromHome {
        device: u16,
        page: u64,
    },
    FillFromStash {
        device: u16,
        page: u64,
    },
    StoreStashHome {
        page: u64,
    },
    Send(usize, Wire),
}

#[derive(Default)]
struct Job {
    micros: VecDeque<Micro>,
    waiting: Option<u64>,
    stash: Option<Vec<u32>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Phase {
    Idle,
    Acquiring {
        parts: Vec<(usize, Vec<(u64, bool)>)>,
        got: usize,
    },
    Releasing(usize),
    Evicting(usize),
    Done,
}

/// A litmus run's outcome while its parts come in: how many nodes sent theirs, every thread's
/// visible registers, every variable.
type Gathering = (usize, Vec<Vec<i32>>, Vec<i32>);

struct Node<'t, T: Transport> {
    t: &'t T,
    cfg: NodeConfig,
    rank: usize,
    size: usize,
    homes: HomeMap,
    proto: Protocol,
    home_data: HashMap<u64, Vec<u32>>,
    slots: HashMap<(u16, u64), Slot>,
    inbox: VecDeque<(usize, Wire)>,
    job: Option<Job>,
    seq: u64,
    phases: Vec<Phase>,
    round: u32,
    /// Per round (the eviction is round `rounds`), nodes that said `Done`.
    done: HashMap<u32, usize>,
    local: VecDeque<(usize, Wire)>,
    bytes_sent: u64,
    page_bytes_sent: u64,
    last_heard: Vec<Instant>,
    last_beat: Instant,
    bye: Vec<bool>,
    results: Vec<Option<(u64, u64, u64, u64)>>,
    /// Parts of later rounds that came before this node started them.
    future: Vec<(usize, Wire)>,
    /// Litmus: the thread each local device runs, this run.
    threads: Vec<Option<ThreadRun>>,
    /// Rank 0, litmus: per run, the parts of its outcome gathered so far.
    gathering: HashMap<u32, Gathering>,
    histogram: BTreeMap<tessera_litmus::Outcome, u64>,
    /// Litmus: requests held back by their jitter, with when to send them.
    delayed: Vec<(Instant, usize, Wire)>,
    rng: u64,
    sent_result: bool,
    reference: Vec<Vec<u32>>,
}

/// Runs one node of the cluster `t` belongs to until every node is done, or until a node is
/// lost. Every node must be started with the same `cfg`. Messages carry no run: two runs on
/// the same transport need a barrier between them (`Transport::barrier`), or a node
/// still finishing the first takes a faster node's first messages of the second as its own.
pub fn run_node<T: Transport>(t: &T, cfg: &NodeConfig) -> Result<NodeReport, NodeError> {
    let size = t.size();
    let mut cfg = cfg.clone();
    if let Some(job) = &cfg.litmus {
        let threads = job.test.threads.len();
        if threads > size * cfg.devices_per_node {
            return Err(NodeError::Config(format!(
                "{} has {threads} threads, more than the {} devices of {size} nodes",
                job.test.name,
                size * cfg.devices_per_node
            )));
        }
        if job.runs == 0 {
            return Err(NodeError::Config("at least one run".into()));
        }
        // Each variable a one-word page of its own; a run is two rounds: the threads', then
        // every device writes back and drops its copies.
        cfg.pages = job.test.vars.len() as u64;
        cfg.words = 1;
        cfg.block_pages = 1;
        cfg.rounds = 2 * job.runs;
    }
    let cfg = &cfg;
    let devices = size * cfg.devices_per_node;
    if cfg.devices_per_node == 0 || devices > tessera_core::MAX_DEVICES {
        return Err(NodeError::Config(format!(
            "{devices} devices in all; 1 to {} supported",
            tessera_core::MAX_DEVICES
        )));
    }
    if cfg.pages == 0 || cfg.words == 0 || cfg.block_pages == 0 {
        return Err(NodeError::Config(
            "pages, words and block must be > 0".into(),
        ));
    }
    if cfg.words > 1024 {
        return Err(NodeError::Config(
            "at most 1024 words per page: messages must stay small enough to send eagerly".into(),
        ));
    }
    let homes = HomeMap::Blocked {
        nodes: size as u16,
        block_pages: cfg.block_pages,
    };
    let rank = t.rank();
    let proto = Protocol::new(
        Directory::new(cfg.pages, homes),
        devices,
        ProtocolVariant::Correct,
    )
    .map_err(|e| NodeError::Config(e.to_string()))?
    .with_coherence(cfg.coherence);
    let home_data = (0..cfg.pages)
        .filter(|&p| homes.home(GlobalPage(p)).0 as usize == rank)
        .map(|p| (p, initial_page(cfg, p)))
        .collect();
    let now = Instant::now();
    let mut node = Node {
        t,
        cfg: cfg.clone(),
        rank,
        size,
        homes,
        proto,
        home_data,
        slots: HashMap::new(),
        inbox: VecDeque::new(),
        job: None,
        seq: 0,
        phases: vec![Phase::Idle; cfg.devices_per_node],
        round: 0,
        done: HashMap::new(),
        local: VecDeque::new(),
        bytes_sent: 0,
        page_bytes_sent: 0,
        last_heard: vec![now; size],
        last_beat: now,
        bye: vec![false; size],
        results: vec![None; size],
        sent_result: false,
        reference: if cfg.litmus.is_some() {
            Vec::new()
        } else {
            workload::reference(cfg.pages, cfg.words, devices, cfg.rounds)
        },
        future: Vec::new(),
        threads: vec![None; cfg.devices_per_node],
        gathering: HashMap::new(),
        histogram: BTreeMap::new(),
        delayed: Vec::new(),
        rng: cfg.litmus.as_ref().map_or(1, |j| {
            j.seed ^ (rank as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        }) | 1,
    };
    node.start_round()?;
    node.run()
}

fn initial_page(cfg: &NodeConfig, page: u64) -> Vec<u32> {
    match &cfg.litmus {
        Some(job) => vec![job.test.init[page as usize] as u32],
        None => workload::initial(page, cfg.words),
    }
}

impl<T: Transport> Node<'_, T> {
    /// The round in which every device writes back and drops its copies: after the last
    /// work round, and in a litmus run after each run's threads.
    fn evict_round(&self) -> bool {
        match self.cfg.litmus {
            Some(_) => self.round % 2 == 1,
            None => self.round == self.cfg.rounds,
        }
    }
    fn last_round(&self) -> u32 {
        match self.cfg.litmus {
            Some(_) => self.cfg.rounds - 1,
            None => self.cfg.rounds,
        }
    }

    fn devices(&self) -> usize {
        self.size * self.cfg.devices_per_node
    }
    fn node_of(&self, device: u16) -> usize {
        device as usize / self.cfg.devices_per_node
    }
    fn home_of(&self, page: u64) -> usize {
        self.homes.home(GlobalPage(page)).0 as usize
    }
    fn local_index(&self, device: u16) -> usize {
        device as usize - self.rank * self.cfg.devices_per_node
    }
    fn broken(&self, why: impl Into<String>) -> NodeError {
        NodeError::Broken {
            node: self.rank,
            why: why.into(),
        }
    }

    fn post(&mut self, to: usize, w: Wire) -> Result<(), NodeError> {
        if to == self.rank {
            self.local.push_back((to, w));
            return Ok(());
        }
        let bytes = encode(&w);
        self.bytes_sent += bytes.len() as u64;
        match &w {
            Wire::Cmd {
                cmd: Cmd::Fill { data, .. },
                ..
            }
            | Wire::Ack {
                data: Some(data), ..
            } => self.page_bytes_sent += 4 * data.len() as u64,
            _ => {}
        }
        self.t.send(to, bytes)
    }

    fn run(mut self) -> Result<NodeReport, NodeError> {
        if let Err(e) = self.run_loop() {
            let NodeError::Lost { .. } = e else {
                return Err(e);
            };
            // A send fails too when a peer already quit over the real loss: its notice, if
            // in the inbox, names the node that was lost first.
            let e = self.notice_in_inbox().unwrap_or(e);
            if let NodeError::Lost { node, .. } = e {
                for n in 0..self.size {
                    if n != self.rank && n != node {
                        // Best effort: a peer that quit cannot be told.
                        let _ = self.t.send(n, encode(&Wire::Lost { node: node as u32 }));
                    }
                }
            }
            return Err(e);
        }
        self.report()
    }

    fn notice_in_inbox(&mut self) -> Option<NodeError> {
        while let Ok(Some((from, bytes))) = self.t.recv(Duration::ZERO) {
            if let Ok(Wire::Lost { node }) = decode(&bytes) {
                return Some(NodeError::Lost {
                    node: node as usize,
                    how: format!("reported by node {from}"),
                });
            }
        }
        None
    }

    fn run_loop(&mut self) -> Result<(), NodeError> {
        loop {
            while let Some((from, w)) = self.local.pop_front() {
                self.handle(from, w)?;
            }
            if self.bye.iter().all(|&b| b) {
                break;
            }
            let now = Instant::now();
            let due: Vec<_> = self
                .delayed
                .iter()
                .filter(|d| d.0 <= now)
                .cloned()
                .collect();
            self.delayed.retain(|d| d.0 > now);
            for (_, to, w) in due {
                self.post(to, w)?;
            }
            let wait = if self.delayed.is_empty() {
                Duration::from_millis(5)
            } else {
                Duration::from_micros(20)
            };
            if let Some((from, bytes)) = self.t.recv(wait)? {
                let w = decode(&bytes).map_err(|e| NodeError::Decode {
                    from,
                    why: e.to_string(),
                })?;
                if let Some(h) = self.last_heard.get_mut(from) {
                    *h = Instant::now();
                }
                self.handle(from, w)?;
            }
            let now = Instant::now();
            if now.duration_since(self.last_beat) > self.cfg.lost_after / 10 {
                self.last_beat = now;
                for n in 0..self.size {
                    if n != self.rank && !self.bye[n] {
                        self.post(n, Wire::Heartbeat)?;
                    }
                }
            }
            for n in 0..self.size {
                let silent = now.duration_since(self.last_heard[n]);
                if n != self.rank && !self.bye[n] && silent > self.cfg.lost_after {
                    return Err(NodeError::Lost {
                        node: n,
                        how: format!("no message for {:.1} s", silent.as_secs_f64()),
                    });
                }
            }
        }
        Ok(())
    }

    fn report(&self) -> Result<NodeReport, NodeError> {
        let devices = self.devices();
        let reference_checksum = workload::checksum(
            self.reference
                .iter()
                .enumerate()
                .map(|(p, w)| (p as u64, w.as_slice())),
        );
        let (checksum, mismatches, bytes, page_bytes) = if self.rank == 0 {
            self.results.iter().flatten().fold((0u64, 0, 0, 0), |a, r| {
                (a.0.wrapping_add(r.0), a.1 + r.1, a.2 + r.2, a.3 + r.3)
            })
        } else {
            let (c, m) = self.own_result();
            (c, m, self.bytes_sent, self.page_bytes_sent)
        };
        let litmus = match (&self.cfg.litmus, self.rank) {
            (Some(job), 0) => Some(
                LitmusReport::new(&job.test, self.histogram.clone()).map_err(NodeError::Config)?,
            ),
            _ => None,
        };
        Ok(NodeReport {
            litmus,
            nodes: self.size,
            devices,
            checksum,
            reference_checksum,
            mismatches,
            inter_node_bytes: bytes,
            inter_node_page_bytes: page_bytes,
        })
    }

    fn own_result(&self) -> (u64, u64) {
        let checksum = workload::checksum(self.home_data.iter().map(|(&p, w)| (p, w.as_slice())));
        let mismatches = self
            .home_data
            .iter()
            .filter(|(&p, w)| self.reference.get(p as usize).is_some_and(|r| r != *w))
            .count() as u64;
        (checksum, mismatches)
    }

    fn handle(&mut self, from: usize, w: Wire) -> Result<(), NodeError> {
        match w {
            Wire::Part { id, .. } if id > self.round as u64 => {
                self.future.push((from, w));
                Ok(())
            }
            Wire::Part { .. } | Wire::Release { .. } | Wire::Evict { .. } => {
                self.inbox.push_back((from, w));
                self.pump()
            }
            Wire::Cmd { seq, cmd } => {
                let data = self.work(cmd)?;
                self.post(from, Wire::Ack { seq, data })
            }
            Wire::Ack { seq, data } => {
                let job = self.job.as_mut().ok_or_else(|| NodeError::Broken {
                    node: self.rank,
                    why: format!("acknowledgement {seq} for no job"),
                })?;
                if job.waiting != Some(seq) {
                    return Err(self.broken(format!("unexpected acknowledgement {seq}")));
                }
                job.waiting = None;
                if data.is_some() {
                    job.stash = data;
                }
                self.pump()
            }
            Wire::Complete { device } => self.completed(device),
            Wire::ReleaseAck { device } | Wire::EvictAck { device } => {
                let i = self.local_index(device);
                if self.phases[i] == Phase::Releasing(1) && self.threads[i].is_some() {
                    return self.litmus_step(i);
                }
                self.phases[i] = match self.phases[i] {
                    Phase::Releasing(1) | Phase::Evicting(1) => Phase::Done,
                    Phase::Releasing(n) => Phase::Releasing(n - 1),
                    Phase::Evicting(n) => Phase::Evicting(n - 1),
                    ref p => return Err(self.broken(format!("device{device} acked in {p:?}"))),
                };
                self.maybe_done()
            }
            Wire::Done { round } => {
                *self.done.entry(round).or_default() += 1;
                self.maybe_advance()
            }
            Wire::Result {
                checksum,
                mismatches,
                bytes_sent,
                page_bytes_sent,
            } => {
                self.results[from] = Some((checksum, mismatches, bytes_sent, page_bytes_sent));
                Ok(())
            }
            Wire::Heartbeat => Ok(()),
            Wire::Outcome { run, mem, regs } => self.gather(run, mem, regs),
            Wire::Lost { node } => Err(NodeError::Lost {
                node: node as usize,
                how: format!("reported by node {from}"),
            }),
            Wire::Bye => {
                self.bye[from] = true;
                Ok(())
            }
        }
    }

    /// The worker: carries out a home's command on one of this node's devices, waiting for
    /// nothing.
    fn work(&mut self, cmd: Cmd) -> Result<Option<Vec<u32>>, NodeError> {
        match cmd {
            Cmd::Read { device, page } => match self.slots.get(&(device, page)) {
                Some(s) if s.valid => Ok(Some(s.data.clone())),
                _ => Err(self.broken(format!("read of device{device}'s page{page}, not valid"))),
            },
            Cmd::Fill { device, page, data } => {
                self.slots.insert(
                    (device, page),
                    Slot {
                        data,
                        filled: true,
                        valid: false,
                        writable: false,
                    },
                );
                Ok(None)
            }
            Cmd::Install {
                device,
                page,
                writable,
            } => match self.slots.get_mut(&(device, page)) {
                Some(s) if s.filled || s.valid => {
                    s.valid = true;
                    s.writable = writable;
                    Ok(None)
                }
                _ => Err(self.broken(format!(
                    "install of device{device}'s page{page}, not filled"
                ))),
            },
            Cmd::Invalidate { device, page } => {
                self.slots.remove(&(device, page));
                Ok(None)
            }
            Cmd::SetWritable {
                device,
                page,
                writable,
            } => match self.slots.get_mut(&(device, page)) {
                Some(s) if s.valid => {
                    s.writable = writable;
                    Ok(None)
                }
                _ => Err(self.broken(format!(
                    "access change of device{device}'s page{page}, not valid"
                ))),
            },
        }
    }

    /// The home: takes protocol messages in arrival order, one at a time, and carries out each
    /// one's actions in order before the next. Returns while a remote worker owes an
    /// acknowledgement.
    fn pump(&mut self) -> Result<(), NodeError> {
        loop {
            if self.job.is_none() {
                let Some((from, w)) = self.inbox.pop_front() else {
                    return Ok(());
                };
                self.start_job(from, w)?;
            }
            let job = self.job.as_mut().expect("a job");
            if job.waiting.is_some() {
                return Ok(());
            }
            let Some(m) = job.micros.pop_front() else {
                self.job = None;
                continue;
            };
            self.micro(m)?;
        }
    }

    fn start_job(&mut self, from: usize, w: Wire) -> Result<(), NodeError> {
        let (msg, reply) = match w {
            Wire::Part { device, id, pages } => {
                for &(p, _) in &pages {
                    if self.home_of(p) != self.rank {
                        return Err(self.broken(format!(
                            "asked for page{p}, whose home is node{}",
                            self.home_of(p)
                        )));
                    }
                }
                let batch = RequestBatch {
                    id: RequestId(id),
                    device: DeviceId(device as u8),
                    pages: pages
                        .into_iter()
                        .map(|(p, write)| PageRequest {
                            page: GlobalPage(p),
                            access: if write { Access::Write } else { Access::Read },
                        })
                        .collect(),
                };
                (Message::Request(batch), None)
            }
            Wire::Release { device } => (
                Message::Release(DeviceId(device as u8)),
                Some(Wire::ReleaseAck { device }),
            ),
            Wire::Evict { device, pages } => (
                Message::Evict {
                    device: DeviceId(device as u8),
                    pages: pages.into_iter().map(GlobalPage).collect(),
                },
                Some(Wire::EvictAck { device }),
            ),
            other => return Err(self.broken(format!("{other:?} in the home's inbox"))),
        };
        let actions = self.proto.handle(msg).map_err(|e| NodeError::Protocol {
            node: self.rank,
            why: e.to_string(),
        })?;
        let mut micros = VecDeque::new();
        for a in actions {
            self.expand(a, &mut micros);
        }
        if let Some(r) = reply {
            micros.push_back(Micro::Send(from, r));
        }
        self.job = Some(Job {
            micros,
            ..Job::default()
        });
        Ok(())
    }

    fn expand(&self, a: Action, out: &mut VecDeque<Micro>) {
        let dev = |d: DeviceId| d.0 as u16;
        match a {
            Action::Copy { page, from, to } => match from {
                Source::Home => out.push_back(Micro::FillFromHome {
                    device: dev(to),
                    page: page.0,
                }),
                Source::Device(o) => {
                    out.push_back(Micro::Cmd(Cmd::Read {
                        device: dev(o),
                        page: page.0,
                    }));
                    out.push_back(Micro::FillFromStash {
                        device: dev(to),
                        page: page.0,
                    });
                }
            },
            Action::WriteBack { page, from } => {
                out.push_back(Micro::Cmd(Cmd::Read {
                    device: dev(from),
                    page: page.0,
                }));
                out.push_back(Micro::StoreStashHome { page: page.0 });
            }
            Action::Invalidate { page, device } => out.push_back(Micro::Cmd(Cmd::Invalidate {
                device: dev(device),
                page: page.0,
            })),
            Action::Install {
                page,
                device,
                writable,
            } => out.push_back(Micro::Cmd(Cmd::Install {
                device: dev(device),
                page: page.0,
                writable,
            })),
            Action::GrantWrite { page, device } => out.push_back(Micro::Cmd(Cmd::SetWritable {
                device: dev(device),
                page: page.0,
                writable: true,
            })),
            Action::Downgrade { page, device } => out.push_back(Micro::Cmd(Cmd::SetWritable {
                device: dev(device),
                page: page.0,
                writable: false,
            })),
            Action::Complete { device, .. } => out.push_back(Micro::Send(
                self.node_of(dev(device)),
                Wire::Complete {
                    device: dev(device),
                },
            )),
        }
    }

    fn micro(&mut self, m: Micro) -> Result<(), NodeError> {
        let cmd = match m {
            Micro::Cmd(c) => c,
            Micro::FillFromHome { device, page } => {
                let data = self
                    .home_data
                    .get(&page)
                    .cloned()
                    .ok_or_else(|| self.broken(format!("no home copy of page{page}")))?;
                Cmd::Fill { device, page, data }
            }
            Micro::FillFromStash { device, page } => {
                let data = self.job.as_mut().and_then(|j| j.stash.take());
                let data = data.ok_or_else(|| self.broken("a copy with nothing read"))?;
                Cmd::Fill { device, page, data }
            }
            Micro::StoreStashHome { page } => {
                let data = self.job.as_mut().and_then(|j| j.stash.take());
                let data = data.ok_or_else(|| self.broken("a write-back with nothing read"))?;
                self.home_data.insert(page, data);
                return Ok(());
            }
            Micro::Send(to, w) => return self.post(to, w),
        };
        let device = match &cmd {
            Cmd::Read { device, .. }
            | Cmd::Fill { device, .. }
            | Cmd::Install { device, .. }
            | Cmd::Invalidate { device, .. }
            | Cmd::SetWritable { device, .. } => *device,
        };
        let node = self.node_of(device);
        if node == self.rank {
            let data = self.work(cmd)?;
            if data.is_some() {
                self.job.as_mut().expect("a job").stash = data;
            }
            return Ok(());
        }
        self.seq += 1;
        let seq = self.seq;
        self.job.as_mut().expect("a job").waiting = Some(seq);
        self.post(node, Wire::Cmd { seq, cmd })
    }

    // -----------------------------------------------------------------------------------------
    // Drivers.

    fn start_round(&mut self) -> Result<(), NodeError> {
        let (k, devices, pages) = (self.cfg.devices_per_node, self.devices(), self.cfg.pages);
        for i in 0..k {
            let g = self.rank * k + i;
            if self.evict_round() {
                // Every device writes back and drops what it holds.
                let mut by_home: HashMap<usize, Vec<u64>> = HashMap::new();
                for &(d, p) in self.slots.keys() {
                    if d as usize == g {
                        by_home.entry(self.home_of(p)).or_default().push(p);
                    }
                }
                if by_home.is_empty() {
                    self.phases[i] = Phase::Done;
                    continue;
                }
                self.phases[i] = Phase::Evicting(by_home.len());
                let mut homes: Vec<_> = by_home.into_iter().collect();
                homes.sort();
                for (h, mut ps) in homes {
                    ps.sort_unstable();
                    self.post(
                        h,
                        Wire::Evict {
                            device: g as u16,
                            pages: ps,
                        },
                    )?;
                }
                continue;
            }
            if let Some(job) = &self.cfg.litmus {
                // Thread t runs on node t % nodes, device t / nodes there.
                let t = i * self.size + self.rank;
                if t < job.test.threads.len() {
                    self.threads[i] = Some(ThreadRun::new(&job.test, t));
                    self.litmus_step(i)?;
                } else {
                    self.phases[i] = Phase::Done;
                }
                continue;
            }
            let (reads, writes) = workload::batch(g, self.round, pages, devices);
            if reads.is_empty() && writes.is_empty() {
                self.phases[i] = Phase::Done;
                continue;
            }
            let batch = RequestBatch {
                id: RequestId(self.round as u64),
                device: DeviceId(g as u8),
                pages: reads
                    .iter()
                    .map(|&p| (p, Access::Read))
                    .chain(writes.iter().map(|&p| (p, Access::Write)))
                    .map(|(p, access)| PageRequest {
                        page: GlobalPage(p),
                        access,
                    })
                    .collect(),
            };
            let parts: Vec<(usize, Vec<(u64, bool)>)> = split_by_home(&batch, &self.homes)
                .into_iter()
                .map(|(n, b)| {
                    (
                        n.0 as usize,
                        b.pages
                            .iter()
                            .map(|r| (r.page.0, r.access == Access::Write))
                            .collect(),
                    )
                })
                .collect();
            self.phases[i] = Phase::Acquiring {
                parts: parts.clone(),
                got: 0,
            };
            // Parts are acquired in node order, one at a time (tessera_core::nodes).
            let (h, pages) = parts[0].clone();
            self.post(
                h,
                Wire::Part {
                    device: g as u16,
                    id: self.round as u64,
                    pages,
                },
            )?;
        }
        self.maybe_done()
    }

    fn completed(&mut self, device: u16) -> Result<(), NodeError> {
        let i = self.local_index(device);
        let Phase::Acquiring { parts, got } = self.phases[i].clone() else {
            return Err(self.broken(format!(
                "Complete for device{device}, which was not waiting"
            )));
        };
        let got = got + 1;
        if got < parts.len() {
            let (h, pages) = parts[got].clone();
            self.phases[i] = Phase::Acquiring { parts, got };
            return self.post(
                h,
                Wire::Part {
                    device,
                    id: self.round as u64,
                    pages,
                },
            );
        }
        // Every part granted: the device runs its procedure on its own copies.
        if let Some(run) = self.threads[i].as_mut() {
            let job = self.cfg.litmus.as_ref().expect("a litmus run");
            let (var, write) = run
                .next_memory(&job.test)
                .ok()
                .flatten()
                .expect("the operation it asked for");
            let slot = self
                .slots
                .get_mut(&(device, var as u64))
                .filter(|s| s.valid && (s.writable || !write));
            let Some(slot) = slot else {
                return Err(NodeError::Broken {
                    node: self.rank,
                    why: format!("device{device} granted without variable {var}"),
                });
            };
            let mut word = slot.data[0] as i32;
            run.perform(&job.test, &mut word);
            slot.data[0] = word as u32;
            self.phases[i] = Phase::Releasing(1);
            let home = self.home_of(var as u64);
            return self.post(home, Wire::Release { device });
        }
        let (reads, writes) =
            workload::batch(device as usize, self.round, self.cfg.pages, self.devices());
        let mut read_data = Vec::new();
        for &p in &reads {
            match self.slots.get(&(device, p)) {
                Some(s) if s.valid => read_data.push(s.data.clone()),
                _ => return Err(self.broken(format!("device{device} granted without page{p}"))),
            }
        }
        let refs: Vec<&[u32]> = read_data.iter().map(|v| v.as_slice()).collect();
        for &p in &writes {
            let s = match self.slots.get_mut(&(device, p)) {
                Some(s) if s.valid && s.writable => s,
                _ => {
                    return Err(NodeError::Broken {
                        node: self.rank,
                        why: format!("device{device} granted without page{p} writable"),
                    })
                }
            };
            s.data = workload::compute(device as usize, self.round, &s.data, &refs);
        }
        self.phases[i] = Phase::Releasing(parts.len());
        for (h, _) in parts {
            self.post(h, Wire::Release { device })?;
        }
        Ok(())
    }

    /// Litmus: runs local device `i`'s thread up to its next memory operation and asks that
    /// variable's home for it, or marks the device done at the end of its program.
    fn litmus_step(&mut self, i: usize) -> Result<(), NodeError> {
        let job = self.cfg.litmus.clone().expect("a litmus run");
        let run = self.threads[i].as_mut().expect("a thread on the device");
        let next = run
            .next_memory(&job.test)
            .map_err(|why| NodeError::Broken {
                node: self.rank,
                why,
            })?;
        let g = (self.rank * self.cfg.devices_per_node + i) as u16;
        match next {
            None => {
                self.phases[i] = Phase::Done;
                self.maybe_done()
            }
            Some((var, write)) => {
                let home = self.home_of(var as u64);
                let pages = vec![(var as u64, write)];
                self.phases[i] = Phase::Acquiring {
                    parts: vec![(home, pages.clone())],
                    got: 0,
                };
                let part = Wire::Part {
                    device: g,
                    id: self.round as u64,
                    pages,
                };
                // xorshift64: a different interleaving every run, from the job's seed.
                self.rng ^= self.rng << 13;
                self.rng ^= self.rng >> 7;
                self.rng ^= self.rng << 17;
                let us = self.rng % (job.jitter_us as u64 + 1);
                if us == 0 {
                    return self.post(home, part);
                }
                let at = Instant::now() + Duration::from_micros(us);
                self.delayed.push((at, home, part));
                Ok(())
            }
        }
    }

    /// Litmus, after a run's write-backs: this node's part of the outcome to rank 0 (its home
    /// variables and its threads' registers), then the variables back to their initial values.
    fn send_outcome(&mut self) -> Result<(), NodeError> {
        let job = self.cfg.litmus.clone().expect("a litmus run");
        let mem = self
            .home_data
            .iter()
            .map(|(&p, w)| (p, w[0] as i32))
            .collect();
        let regs = self
            .threads
            .iter_mut()
            .filter_map(|t| t.take())
            .map(|t| {
                let visible = job.test.threads[t.thread].visible_values(&t.regs);
                (t.thread as u32, visible)
            })
            .collect();
        let run = self.round / 2;
        self.post(0, Wire::Outcome { run, mem, regs })?;
        let pages: Vec<u64> = self.home_data.keys().copied().collect();
        for p in pages {
            let init = initial_page(&self.cfg, p);
            self.home_data.insert(p, init);
        }
        Ok(())
    }

    /// Rank 0, litmus: one node's part of a run's outcome; a run whose parts are all in is
    /// counted.
    fn gather(
        &mut self,
        run: u32,
        mem: Vec<(u64, i32)>,
        regs: Vec<(u32, Vec<i32>)>,
    ) -> Result<(), NodeError> {
        let job = self
            .cfg
            .litmus
            .clone()
            .ok_or_else(|| self.broken("an outcome outside a litmus run"))?;
        let entry = self.gathering.entry(run).or_insert_with(|| {
            (
                0,
                vec![Vec::new(); job.test.threads.len()],
                vec![0; job.test.vars.len()],
            )
        });
        entry.0 += 1;
        for (p, v) in mem {
            if let Some(m) = entry.2.get_mut(p as usize) {
                *m = v;
            }
        }
        for (t, r) in regs {
            if let Some(slot) = entry.1.get_mut(t as usize) {
                *slot = r;
            }
        }
        if entry.0 == self.size {
            let (_, regs, mem) = self.gathering.remove(&run).expect("the entry");
            *self
                .histogram
                .entry(tessera_litmus::Outcome { regs, mem })
                .or_default() += 1;
        }
        Ok(())
    }

    fn maybe_done(&mut self) -> Result<(), NodeError> {
        if self.phases.iter().all(|p| *p == Phase::Done) {
            self.phases.iter_mut().for_each(|p| *p = Phase::Idle);
            let round = self.round;
            for n in 0..self.size {
                self.post(n, Wire::Done { round })?;
            }
            if self.cfg.stop_after_round == Some(round) {
                return Err(NodeError::Stopped {
                    node: self.rank,
                    round,
                });
            }
        }
        Ok(())
    }

    fn maybe_advance(&mut self) -> Result<(), NodeError> {
        if self.done.get(&self.round).copied().unwrap_or(0) < self.size {
            return Ok(());
        }
        self.done.remove(&self.round);
        if self.cfg.litmus.is_some() && self.evict_round() {
            self.send_outcome()?;
        }
        if self.round < self.last_round() {
            self.round += 1;
            let (now, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.future)
                .into_iter()
                .partition(|(_, w)| matches!(w, Wire::Part { id, .. } if *id <= self.round as u64));
            self.future = later;
            self.inbox.extend(now);
            self.pump()?;
            return self.start_round();
        }
        if !self.sent_result {
            self.sent_result = true;
            let (checksum, mismatches) = self.own_result();
            // The result's own bytes are not counted: it is reporting, not memory traffic.
            let result = Wire::Result {
                checksum,
                mismatches,
                bytes_sent: self.bytes_sent,
                page_bytes_sent: self.page_bytes_sent,
            };
            self.post(0, result)?;
            for n in 0..self.size {
                self.post(n, Wire::Bye)?;
            }
        }
        Ok(())
    }
}
