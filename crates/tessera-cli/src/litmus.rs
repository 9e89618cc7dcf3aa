//! `tessera litmus FILE...`: runs litmus tests in the herd7 C format through the runtime and
//! checks every outcome against sequential consistency (see tessera-litmus).

use std::path::PathBuf;

use anyhow::bail;
use clap::Args;
use tessera_core::ProtocolVariant;
use tessera_litmus::run::variant_name;
use tessera_litmus::{run_files, FileOutcome, Placement, RunConfig, Schedule};

#[derive(Args, Clone)]
pub struct LitmusOpts {
    /// Litmus files in herd7's C format (as in Linux's tools/memory-model/litmus-tests), or
    /// folders: a folder runs every .litmus file below it, its subfolders included.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Runs per test.
    #[arg(long, default_value_t = 1000, value_parser = crate::parse_count)]
    runs: u64,
    /// Put all shared variables on one page (default: each on its own page).
    #[arg(long)]
    same_page: bool,
    /// Seed of the randomised schedules; thread timing still varies between runs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// How threads interleave: `random` lets them run free with random delays; `pct` lets one
    /// thread at a time take its next operation, by random priorities with random change
    /// points; `exhaustive` runs every interleaving of the operations once (stopping at
    /// `--runs`). PCT is the default: it reaches every outcome sequential consistency allows
    /// far more often than `random` (docs/LITMUS.md).
    #[arg(long, default_value = "pct", value_parser = crate::named(&[Schedule::Random, Schedule::Pct, Schedule::Exhaustive], Schedule::name))]
    schedule: Schedule,
    /// Coherence protocol. Only `correct` is tessera's: the others are broken on purpose and
    /// exist to show that the runner reports forbidden outcomes when the protocol is wrong.
    /// The `evict-*` ones differ from `correct` only where the runtime evicts, which litmus
    /// runs do not do yet.
    #[arg(long, default_value = "correct", value_parser = parse_protocol())]
    protocol: ProtocolVariant,
    /// What a read of a modified page does: owned (the owner keeps it and serves readers) or
    /// write-home (the journal paper's rule). `skip-write-back` breaks write-home only.
    #[arg(long, default_value = "owned", value_parser = crate::parse_coherence())]
    coherence: tessera_core::Coherence,
    /// Under mpirun: run each test on the multi-node memory system with K devices per MPI
    /// process, the test's threads dealt to the devices of all processes round robin (so
    /// consecutive threads sit on different nodes) and its variables homed on different nodes
    /// (`mpirun -np N tessera litmus --devices-per-node K FILE...`; a tessera built with
    /// `--features mpi`). Threads then run free with random delays of up to 300 µs before each
    /// operation; `--schedule`, `--same-page`, `--protocol`, `--coherence` and `--seed` are
    /// refused with it.
    #[arg(long, value_name = "K", value_parser = crate::parse_device_count)]
    pub devices_per_node: Option<usize>,
    /// Print JSON lines instead of litmus7's layout: one object per test as it completes
    /// (histogram, witnesses, sequential consistency's outcomes seen and not, forbidden
    /// outcomes, `passed`), `{"error": ...}` for a file that could not be run, and a last
    /// `{"summary": ...}`. The exit status is the same. Not with `--devices-per-node`.
    #[arg(long)]
    pub json: bool,
}

/// The broken protocols the command line offers beside the correct one, by the names litmus
/// reports give them.
pub fn parse_protocol() -> impl clap::builder::TypedValueParser<Value = ProtocolVariant> {
    use ProtocolVariant::*;
    const OFFERED: &[ProtocolVariant] = &[
        Correct,
        NoMemoryLock,
        SkipInvalidation,
        SkipWriteBackOnDowngrade,
        EvictWithoutWriteBack,
        EvictIgnoringLocks,
        EvictOwnerWithoutHandover,
        WriteCopiesFromHome,
    ];
    crate::named(OFFERED, variant_name)
}

/// Runs every file, printing each report as it completes; fails if any file is unreadable or
/// malformed, any outcome is forbidden by sequential consistency, or any run failed.
pub fn litmus(opts: &LitmusOpts) -> anyhow::Result<()> {
    let files = tessera_litmus::expand_folders(&opts.files);
    if let Some(k) = opts.devices_per_node {
        if opts.json {
            return Err(crate::Usage(
                "--json is not offered with --devices-per-node: the runs across processes \
                 print litmus7's layout only"
                    .into(),
            )
            .into());
        }
        // The engine across processes counts its runs in 32 bits.
        if opts.runs > u32::MAX as u64 {
            return Err(crate::Usage(format!(
                "--runs {} is too many across processes (--devices-per-node): at most {}",
                opts.runs,
                u32::MAX
            ))
            .into());
        }
        return crate::nodes::litmus(&files, opts.runs, k);
    }
    let config = RunConfig {
        runs: opts.runs,
        schedule: opts.schedule,
        placement: if opts.same_page {
            Placement::SamePage
        } else {
            Placement::OwnPage
        },
        variant: opts.protocol,
        coherence: opts.coherence,
        seed: opts.seed,
    };
    let tally = run_files(&files, &config, |outcome| match (outcome, opts.json) {
        (FileOutcome::Ran(report), false) => outln!("{}", report.render()),
        (FileOutcome::Ran(report), true) => outln!("{}", report.json()),
        (FileOutcome::Error(e), false) => eprintln!("error: {e}"),
        (FileOutcome::Error(e), true) => outln!("{}", serde_json::json!({ "error": e })),
    });
    if opts.json {
        outln!("{}", tally.json());
    } else {
        outln!("{}", tally.summary());
    }
    if let Some(problems) = tally.problems() {
        bail!("{problems}");
    }
    Ok(())
}
