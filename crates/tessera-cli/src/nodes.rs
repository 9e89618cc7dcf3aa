//! `mpirun -np N tessera run boiling --devices-per-node K`: one simulation over the CPU devices
//! of N processes, each a node home to a share of the pages (tessera_runtime::cluster;
//! docs/MPI.md).
//!
//! Every rank runs the same frames; rank 0 prints the summary and writes report.json and
//! frame.png. The report is measured only: the topology model of a single node's run charges
//! links between devices of one machine, and the traffic between nodes is counted instead
//! (bytes every node sent to the others, gathered by rank 0).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};
use tessera_model::Network;
use tessera_runtime::cluster::{ClusterConfig, Link};
use tessera_runtime::{RuntimeError, System};
use tessera_workloads::boiling::cluster::{self, Settings};
use tessera_workloads::boiling::sim::PagedBoiling;

pub use tessera_workloads::boiling::cluster::NodesReport;

use crate::output::{shown, write_json, write_png};
use crate::{BackendKind, RunOpts};

/// Runs `o` as rank `link.rank()` of the cluster behind `link`; every rank returns the same
/// report (rank 0's clock).
pub fn run_on(link: Arc<Link>, o: &RunOpts) -> Result<(NodesReport, PagedBoiling)> {
    let k = link.devices_per_node();
    let network = network(o)?;
    // Every rank would create the same home file, and the runtime never stages or defers
    // across nodes; main refuses those options when given.
    let cfg = o
        .node
        .config(k)
        .home_file(None)
        .staging(false)
        .deferred(false);
    let sys = match o.node.base.backend {
        BackendKind::Cpu => System::cpu_on_cluster(&cfg, link.clone())?,
        BackendKind::Wgpu => tessera_wgpu::system_on_cluster(
            &cfg,
            &tessera_wgpu::AdapterChoice::from_env(),
            link.clone(),
        )?,
    };
    let bar =
        (link.rank() == 0).then(|| crate::run::progress((o.warmup + o.frames) as u64, "boiling"));
    let settings = Settings {
        backend: o.node.base.backend.name(),
        size: o.size,
        page: o.page.get(),
        partition: o.partition,
        procedure: o.procedure,
        warmup: o.warmup,
        frames: o.frames,
        home_block_pages: o.cluster.home_block_pages,
    };
    let rank = link.rank();
    let out = cluster::run_node(sys, &link, &settings, &network, |n, warmup| -> Result<()> {
        if !warmup && o.cluster.abort_rank == Some(rank) && n == o.cluster.abort_after_frames {
            let line = format!("rank {rank} aborts after frame {n}, as asked\n");
            let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
            std::process::abort();
        }
        if let Some(b) = &bar {
            b.inc(1);
        }
        Ok(())
    })?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    Ok(out)
}

/// Before anything runs: every rank must have been given the same run (mpirun's `:` can give
/// each its own options, and ranks that disagree on where the pages live computed a wrong
/// field without a word), and rank 0 must be able to write `--out` (found only after the run
/// before). Every rank stops with the same error otherwise. Rank 0 gets its output folder.
fn agree(
    link: &Arc<Link>,
    o: &RunOpts,
    k: usize,
    force: bool,
) -> Result<Option<crate::output::Staged>> {
    let run = format!(
        "{:?}",
        (
            o.size,
            o.page.get(),
            o.frames,
            o.warmup,
            o.procedure,
            o.partition,
            o.cluster.home_block_pages,
            k,
            o.node.base.backend.name(),
            o.node.config(k).home_file(None),
        )
    );
    let staged = (link.rank() == 0).then(|| crate::output::Staged::begin(&o.out, force));
    let out_error = match &staged {
        Some(Err(e)) => format!("{e:#}"),
        _ => String::new(),
    };
    let all = link.all_gather(format!("{run}\n{out_error}").into_bytes())?;
    let lines: Vec<(String, String)> = all
        .iter()
        .map(|b| {
            let text = String::from_utf8_lossy(b);
            let (run, err) = text.split_once('\n').unwrap_or((&text, ""));
            (run.to_string(), err.to_string())
        })
        .collect();
    if let Some(r) = lines.iter().position(|(other, _)| *other != lines[0].0) {
        return Err(crate::usage(format!(
            "rank {r} was given another run than rank 0: every rank must run the same options"
        )));
    }
    if let Some((_, err)) = lines.first().filter(|(_, e)| !e.is_empty()) {
        bail!("rank 0 cannot write --out: {err}");
    }
    staged.transpose()
}

/// Rank 0's report.json and frame.png, in `staged`'s `--out` once both are written.
fn write(
    staged: crate::output::Staged,
    report: &NodesReport,
    sim: &PagedBoiling,
    o: &RunOpts,
) -> Result<()> {
    let json = staged.path().join("report.json");
    write_json(&json, report)?;
    let png = staged.path().join("frame.png");
    write_png(&png, o.size, o.size, &sim.display_rgba()?)?;
    let (json, png) = (shown(&json), shown(&png));
    staged.commit()?;
    wrote!("wrote {json} and {png}");
    Ok(())
}

/// The network to model the traffic on: `--network`, else the topology file's `[network]`
/// (nothing else of the file is read across nodes), else ib-hdr.
fn network(o: &RunOpts) -> Result<Network> {
    if let Some(name) = &o.cluster.network {
        return Ok(Network::preset(name)?);
    }
    Ok(match Network::from_topology_file(&o.node.topology)? {
        Some(n) => n,
        None => Network::preset("ib-hdr")?,
    })
}

/// `tessera run boiling --devices-per-node K` under mpirun. Rank 0 writes the results as every
/// command does (crate::output): into a partial folder beside `--out`, moved into place only
/// on success; every rank checks `--out` first, so a refused one stops them all at once.
pub fn boiling(o: &RunOpts, k: usize, force: bool) -> Result<()> {
    crate::output::check_out(&o.out, force)?;
    let cfg = ClusterConfig {
        devices_per_node: k,
        block_pages: o.cluster.home_block_pages,
        lost_after: Duration::from_secs_f64(o.cluster.lost_after_s),
    };
    let link = open(cfg)?;
    let rank = link.rank();
    // As on one process: every rank finds the same usage errors, so all stop at once.
    crate::run::field_fits(o.size, o.page, o.partition, link.size() * k)?;
    let res = (|| -> Result<()> {
        let staged = agree(&link, o, k, force)?;
        let (mut report, sim) = run_on(link.clone(), o)?;
        if let Some(staged) = staged {
            outln!("{}", report.summary());
            if o.verify {
                let total = crate::run::simulated_frames(o);
                crate::run::verify_field(o, total, &sim.field()?)?;
                report.verified = Some(true);
            }
            write(staged, &report, &sim, o)?;
        }
        Ok(())
    })();
    res.map_err(|e| {
        // The others must not wait on this node for the pages it is home to: it goes silent,
        // and they name it once --lost-after-s has passed.
        link.kill();
        let nodes = link.size();
        // The budget a refusal names is this home's share of the device's (docs/MPI.md).
        let budget = e.chain().any(|c| {
            matches!(
                c.downcast_ref::<RuntimeError>(),
                Some(RuntimeError::BudgetTooSmall { .. } | RuntimeError::OverBudget { .. })
            )
        });
        if nodes > 1 && budget {
            e.context(format!(
                "node {rank}, whose home has 1/{nodes} of each device's --budget-mib"
            ))
        } else {
            e.context(format!("node {rank}"))
        }
    })
}

#[cfg(feature = "mpi")]
fn open(cfg: ClusterConfig) -> Result<Arc<Link>> {
    Ok(Link::start(
        || {
            tessera_mpi::mpi_transport::Mpi::init()
                .map(tessera_mpi::ForRuntime)
                .ok_or_else(|| "MPI could not be initialized".to_string())
        },
        cfg,
    )?)
}

/// What `--devices-per-node` says on a tessera built without MPI, whichever command it is given.
#[cfg(not(feature = "mpi"))]
const WITHOUT_MPI: &str = "--devices-per-node runs tessera over MPI processes (`mpirun -np N tessera run boiling --devices-per-node K`, or `tessera litmus --devices-per-node K FILE...` under mpirun), and this tessera was built without MPI: build it with `cargo build --release -p tessera-cli --features mpi` (needs openmpi-bin, libopenmpi-dev and libclang-dev; README.md, \"Multi-node\")";

#[cfg(not(feature = "mpi"))]
fn open(_cfg: ClusterConfig) -> Result<Arc<Link>> {
    Err(crate::usage(WITHOUT_MPI))
}

/// `mpirun -np N tessera litmus --devices-per-node K FILE...`: each test on the multi-node
/// engine (tessera_mpi::run_node), its threads dealt round robin to the devices of every
/// process. Rank 0 prints each test's outcomes; every rank fails if any outcome is one
/// sequential consistency forbids.
#[cfg(feature = "mpi")]
pub fn litmus(files: &[std::path::PathBuf], runs: u64, k: usize) -> Result<()> {
    use anyhow::Context;
    use tessera_mpi::Transport;
    let Some(mpi) = tessera_mpi::mpi_transport::Mpi::init() else {
        bail!("MPI could not be initialized");
    };
    let rank = mpi.rank();
    let runs = u32::try_from(runs).context("--runs is too large")?;
    let base = tessera_mpi::NodeConfig {
        devices_per_node: k,
        ..Default::default()
    };
    use tessera_mpi::litmus::FileRun;
    let tally = tessera_mpi::litmus::run_files(&mpi, files, &base, runs, 300, |file| match file {
        FileRun::Ran(report) => outln!("{report}"),
        FileRun::Skipped(e) => eprintln!("error: {e}"),
    })
    .map_err(|e| match e {
        // Ranks given other command lines: a usage error, as on `run boiling`.
        tessera_mpi::litmus::FilesError::Disagree { .. } => crate::usage(e),
        e => e.into(),
    })?;
    if rank == 0 {
        outln!("{}", tally.summary());
    }
    let said = |p: &str| {
        let line = format!("error: {p}\n");
        let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
    };
    match tessera_mpi::litmus::conclude(&mpi, &tally, said) {
        None => Ok(()),
        Some(p) => Err(crate::SaidByRankZero(p).into()),
    }
}

#[cfg(not(feature = "mpi"))]
pub fn litmus(_files: &[std::path::PathBuf], _runs: u64, _k: usize) -> Result<()> {
    open(ClusterConfig::default()).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use tessera_mpi::{ForRuntime, InProcess};

    fn opts(args: &[&str]) -> RunOpts {
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            run: RunOpts,
        }
        let mut all = vec!["tessera"];
        all.extend_from_slice(args);
        Cli::parse_from(all).run
    }

    /// A node of one device on `t`, the cluster's transport as a thread's.
    fn start(t: InProcess) -> Arc<Link> {
        Link::start(
            move || Ok(ForRuntime(t)),
            ClusterConfig {
                devices_per_node: 1,
                block_pages: 4,
                lost_after: Duration::from_secs(20),
            },
        )
        .unwrap()
    }

    /// Two ranks given different runs (mpirun's `:` gives each its own options) stop before
    /// anything runs, each with the same usage error; given the same run, rank 0 alone gets
    /// its output folder.
    #[test]
    fn ranks_given_different_runs_stop_before_running() {
        let dir = tempfile::tempdir().unwrap();
        let agreed = |blocks: [&'static str; 2]| {
            let ends = InProcess::cluster(2);
            let handles: Vec<_> = ends
                .into_iter()
                .zip(blocks)
                .enumerate()
                .map(|(r, (t, block))| {
                    let mut o = opts(&["--size", "16", "--page", "8", "--home-block-pages", block]);
                    o.out = dir.path().join(format!("out{r}"));
                    std::thread::spawn(move || {
                        let link = start(t);
                        agree(&link, &o, 1, false)
                            .map(|s| s.is_some())
                            .map_err(|e| format!("{e:#}"))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(agreed(["4", "4"]), vec![Ok(true), Ok(false)]);
        for r in agreed(["1", "4"]) {
            let e = r.unwrap_err();
            assert!(
                e.contains("rank 1 was given another run than rank 0"),
                "{e}"
            );
        }
    }

    /// Rank 0 writes as every command does: the files appear in `--out` together, an `--out`
    /// holding results is refused without `force` and left as it was, and no partial folder
    /// stays behind either way.
    #[test]
    fn rank_0_stages_its_files_and_refuses_earlier_results() {
        let _serial = crate::output::tests::STAGING
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let mut o = opts(&[
            "--size",
            "16",
            "--page",
            "8",
            "--frames",
            "1",
            "--threads",
            "1",
        ]);
        o.out = out.clone();
        let link = start(InProcess::cluster(1).pop().unwrap());
        let (report, sim) = run_on(link, &o).unwrap();
        let names = |p: &std::path::Path| {
            let mut v: Vec<String> = std::fs::read_dir(p)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        let begin = |force| crate::output::Staged::begin(&o.out, force);
        write(begin(false).unwrap(), &report, &sim, &o).unwrap();
        assert_eq!(names(&out), ["frame.png", "report.json"]);
        // The report starts with the core every run's report shares.
        let schema: serde_json::Value = serde_json::from_slice(
            &std::fs::read(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../../docs/report.schema.json"),
            )
            .unwrap(),
        )
        .unwrap();
        let written: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
        let validator = jsonschema::validator_for(&schema).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&written)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(names(dir.path()), ["out"]);
        std::fs::write(out.join("report.json"), b"earlier").unwrap();
        let Err(err) = begin(false) else {
            panic!("results already in --out were not refused");
        };
        assert!(
            format!("{err:#}").contains("already holds files"),
            "{err:#}"
        );
        assert_eq!(std::fs::read(out.join("report.json")).unwrap(), b"earlier");
        write(begin(true).unwrap(), &report, &sim, &o).unwrap();
        assert_ne!(std::fs::read(out.join("report.json")).unwrap(), b"earlier");
        assert_eq!(names(dir.path()), ["out"]);
    }
}
