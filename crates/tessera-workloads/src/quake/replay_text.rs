//! What `tessera trace replay` prints and writes: a replay against its recorded run, and a
//! sweep of replays over page sizes.

use std::path::Path;

use super::replay::{ReplayOptions, Replayed};
use super::trace::Trace;
use super::QuakeError;
use crate::plot::{line_chart, LineChart, PlotError, Series};

impl Trace {
    /// The trace in the file at `path`.
    pub fn read(path: &Path) -> Result<Trace, QuakeError> {
        use std::io::Read;
        let at = path.display();
        let cannot = |e: std::io::Error| QuakeError::Config(format!("cannot read {at}: {e}"));
        let mut file = std::fs::File::open(path).map_err(cannot)?;
        // The magic bytes first: a file that is not a trace (`/dev/zero`, a disk image) is
        // refused before it is read whole into memory.
        let mut bytes = Vec::new();
        (&mut file)
            .take(super::trace::MAGIC.len() as u64)
            .read_to_end(&mut bytes)
            .map_err(cannot)?;
        if bytes[..] != super::trace::MAGIC[..] {
            return Err(match Trace::decode(&bytes) {
                Err(e) => QuakeError::Config(format!("{at}: {e}")),
                Ok(_) => QuakeError::Config(format!("{at}: not a trace")),
            });
        }
        file.read_to_end(&mut bytes).map_err(cannot)?;
        Trace::decode(&bytes).map_err(|e| QuakeError::Config(format!("{at}: {e}")))
    }
}

impl ReplayOptions {
    /// The settings of a replay at `page`: those given, the recorded run's otherwise.
    /// `random`: `Some(true)` places the pages at random first (with the recorded run's seed,
    /// or 1), `Some(false)` starts them at home.
    pub fn of(
        trace: &Trace,
        page: u32,
        procedure: tessera_runtime::Procedure,
        clear_each_frame: Option<bool>,
        drop_unused: Option<bool>,
        random: Option<bool>,
    ) -> Self {
        ReplayOptions {
            page,
            clear_each_frame: clear_each_frame.unwrap_or(trace.clear_each_frame),
            drop_unused: drop_unused.unwrap_or(trace.drop_unused),
            random_placement: match random {
                None => trace.random_placement,
                Some(false) => None,
                Some(true) => Some(trace.random_placement.unwrap_or(1)),
            },
            procedure,
        }
    }

    /// The devices a replay of `trace` runs on: `asked` (adjacent strips merge), or as many
    /// as recorded; never more than recorded.
    pub fn devices(trace: &Trace, asked: Option<usize>) -> Result<usize, QuakeError> {
        let (devices, recorded) = (asked.unwrap_or(trace.devices as usize), trace.devices);
        if devices == 0 || devices > recorded as usize {
            return Err(QuakeError::Config(format!(
                "--devices {devices}: the trace was recorded on {recorded} device(s); replay on 1 to {recorded}"
            )));
        }
        Ok(devices)
    }

    /// Whether these are the recorded run's settings on `devices` devices, so that the replay
    /// must make its requests exactly.
    pub fn as_recorded(&self, trace: &Trace, devices: usize) -> bool {
        self.page == trace.page
            && devices == trace.devices as usize
            && (
                self.clear_each_frame,
                self.drop_unused,
                self.random_placement,
            ) == (
                trace.clear_each_frame,
                trace.drop_unused,
                trace.random_placement,
            )
    }
}

/// Requests per frame and device as CSV (frame,device,texture_requests).
pub fn requests_csv(requests: &[Vec<u64>]) -> String {
    let mut s = String::from("frame,device,texture_requests\n");
    for (f, per) in requests.iter().enumerate() {
        for (d, r) in per.iter().enumerate() {
            s.push_str(&format!("{f},{d},{r}\n"));
        }
    }
    s
}

/// `requests_by_level.csv`: frame, mip level, texture page requests of all devices.
pub fn levels_csv(by_level: &[Vec<u64>]) -> String {
    let mut s = String::from("frame,level,texture_requests\n");
    for (f, per) in by_level.iter().enumerate() {
        for (l, r) in per.iter().enumerate() {
            s.push_str(&format!("{f},{l},{r}\n"));
        }
    }
    s
}

impl Replayed {
    /// The replay as `tessera trace replay` prints it, run with `o` on `devices` devices in
    /// `secs` seconds.
    pub fn summary(&self, o: &ReplayOptions, devices: usize, secs: f64) -> String {
        let on = |b: bool, what: &'static str| if b { what } else { "" };
        let frames = self.requests.len().max(1) as f64;
        let mut s = format!(
            "replay: {} on {devices} device(s), page {}{}{}{}, {:.2} s\n",
            tessera_runtime::error::count(self.requests.len() as u64, "frame"),
            o.page,
            on(o.clear_each_frame, ", memory cleared each frame"),
            on(o.drop_unused, ", unused pages dropped"),
            on(o.random_placement.is_some(), ", random initial placement"),
            secs
        );
        for d in 0..devices {
            let t: u64 = self.requests.iter().map(|f| f[d]).sum();
            s += &format!(
                "device {d}: {t} texture page requests ({} per frame); at the end it alone holds {} atlas pages, {} shared\n",
                crate::plot::fmt_num(t as f64 / frames),
                self.unique_pages[d],
                self.shared_pages[d]
            );
        }
        s
    }

    /// Holds the replay against the recorded run of `trace`, made with the same settings:
    /// every frame's and device's requests must be the same. The line saying so.
    pub fn compare(&self, trace: &Trace) -> Result<&'static str, QuakeError> {
        for (f, (g, rec)) in self.requests.iter().zip(&trace.frames).enumerate() {
            for (d, (a, b)) in g.iter().zip(rec).enumerate() {
                if *a != b.requests {
                    return Err(QuakeError::Config(format!(
                        "frame {f}, device {d}: the replay made {a} requests; the recorded run made {}",
                        b.requests
                    )));
                }
            }
        }
        Ok("matches the recorded run: every frame and device")
    }
}

/// The line said of a replay at other settings than the recorded run's: each setting that
/// differs, with the recorded run's.
pub fn not_compared(options: &ReplayOptions, trace: &Trace, devices: usize) -> String {
    let yes_no = |b: bool| if b { "on" } else { "off" };
    let placement = |p: Option<u64>| match p {
        Some(seed) => format!("random (seed {seed})"),
        None => "at home".to_string(),
    };
    let mut differ = Vec::new();
    if options.page != trace.page {
        differ.push(format!("page {} (recorded: {})", options.page, trace.page));
    }
    if devices != trace.devices as usize {
        differ.push(format!("{devices} device(s) (recorded: {})", trace.devices));
    }
    if options.clear_each_frame != trace.clear_each_frame {
        differ.push(format!(
            "memory cleared each frame {} (recorded: {})",
            yes_no(options.clear_each_frame),
            yes_no(trace.clear_each_frame)
        ));
    }
    if options.drop_unused != trace.drop_unused {
        differ.push(format!(
            "unused pages dropped {} (recorded: {})",
            yes_no(options.drop_unused),
            yes_no(trace.drop_unused)
        ));
    }
    if options.random_placement != trace.random_placement {
        differ.push(format!(
            "initial placement {} (recorded: {})",
            placement(options.random_placement),
            placement(trace.random_placement)
        ));
    }
    format!(
        "(not compared with the recorded run, whose settings differ: {})",
        differ.join("; ")
    )
}

/// A sweep of replays over page sizes: its CSV and the series of its two plots, a replay at a
/// time.
pub struct PageSweep {
    pub csv: String,
    requests: Vec<Series>,
    memory: Vec<Series>,
    frames: f64,
}

impl PageSweep {
    pub fn new(devices: usize, frames: usize) -> Self {
        let series = |name: String| Series {
            name,
            points: Vec::new(),
            secondary: false,
        };
        PageSweep {
            csv: String::from(
                "page_size,device,texture_requests,texture_requests_per_frame,unique_mib,shared_mib,seconds\n",
            ),
            requests: (0..devices)
                .map(|d| series(format!("device {d}")))
                .collect(),
            memory: [
                "unique (all devices)",
                "shared (per device, summed)",
                "total",
            ]
            .iter()
            .map(|n| series(n.to_string()))
            .collect(),
            frames: frames.max(1) as f64,
        }
    }

    /// Adds the replay at `page`, which took `secs` seconds; the lines to print of it.
    pub fn add(&mut self, page: u32, got: &Replayed, secs: f64) -> String {
        let mib = |pages: u64| (pages * got.page_bytes) as f64 / (1u64 << 20) as f64;
        let frames = self.frames;
        let mut text = String::new();
        let (mut unique, mut shared) = (0.0, 0.0);
        for (d, series) in self.requests.iter_mut().enumerate() {
            let t: u64 = got.requests.iter().map(|f| f[d]).sum();
            let (u, s) = (mib(got.unique_pages[d]), mib(got.shared_pages[d]));
            unique += u;
            shared += s;
            self.csv.push_str(&format!(
                "{page},{d},{t},{:.3},{u:.4},{s:.4},{secs:.3}\n",
                t as f64 / frames
            ));
            series.points.push((page as f64, t as f64 / frames));
            text += &format!(
                "page {page}: device {d}: {:.1} requests per frame; {u:.3} MiB only it holds, {s:.3} MiB shared ({secs:.2} s)\n",
                t as f64 / frames
            );
        }
        self.memory[0].points.push((page as f64, unique));
        self.memory[1].points.push((page as f64, shared));
        self.memory[2].points.push((page as f64, unique + shared));
        text
    }

    /// Draws requests.{svg,png} and memory.{svg,png} into `dir`; `clear`: the replays cleared
    /// the memory each frame.
    pub fn plots(self, dir: &Path, clear: bool) -> Result<(), PlotError> {
        let clear = if clear {
            ", memory cleared each frame"
        } else {
            ""
        };
        line_chart(
            &dir.join("requests"),
            &LineChart {
                title: &format!("Texture page requests per frame against page size{clear}"),
                x_label: "page width (texels)",
                y_label: "requests per frame",
                x_log2: true,
                y_log: false,
                series: self.requests,
            },
        )?;
        line_chart(
            &dir.join("memory"),
            &LineChart {
                title: "Texture memory at the end against page size",
                x_label: "page width (texels)",
                y_label: "MiB",
                x_log2: true,
                y_log: false,
                series: self.memory,
            },
        )
    }
}
