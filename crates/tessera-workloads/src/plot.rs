//! Plots as SVG and PNG.
//!
//! Text is laid out with DejaVu Sans compiled into the binary (plotters' `ab_glyph` feature
//! and the `dejavu` crate), so PNGs come out the same on a machine without any system font;
//! SVGs name the font family and let the viewer draw it.

use std::path::Path;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;
use tessera_runtime::StageTimes;

pub const WIDTH: u32 = 900;
pub const HEIGHT: u32 = 560;
/// The column right of a plot that holds its legend.
const LEGEND_WIDTH: u32 = 240;

static FONT: Once = Once::new();

/// Registers the embedded font under every family name plotters may ask for.
pub fn ensure_font() {
    FONT.call_once(|| {
        for family in ["sans-serif", "serif", "monospace"] {
            // DejaVu Sans is a valid font; a failure here would only mean text is missing,
            // which the plot tests would catch.
            let _ =
                plotters::style::register_font(family, FontStyle::Normal, dejavu::sans::regular());
            let _ = plotters::style::register_font(family, FontStyle::Bold, dejavu::sans::bold());
        }
    });
}

/// The first ten series' colours (a common plotting palette).
const PALETTE: [(u8, u8, u8); 10] = [
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (188, 189, 34),
    (23, 190, 207),
    (127, 127, 127),
];

/// How many series get a colour of their own: one per device at the most devices a node has.
pub const DISTINCT_COLOURS: usize = 64;

/// Colours a residency picture gives meanings other than a device's: a shared page, a page
/// only home holds, the background.
const RESERVED: [(u8, u8, u8); 3] = [(20, 20, 20), (215, 215, 215), (255, 255, 255)];

/// A distinct colour per series: the palette, then colours chosen one by one as far as
/// possible from every colour before them and from the reserved ones, on a grid of 32 per channel;
/// past [`DISTINCT_COLOURS`] they repeat. A darker copy of the palette, as it was, left
/// devices 30 to 39 and 40 to 47 one colour and made the ones past 30 nearly the shared
/// pages' black.
pub fn colour(i: usize) -> RGBColor {
    static ALL: std::sync::OnceLock<Vec<(u8, u8, u8)>> = std::sync::OnceLock::new();
    let all = ALL.get_or_init(|| {
        let dist = |a: (u8, u8, u8), b: (u8, u8, u8)| {
            let d = |x: u8, y: u8| (x as i32 - y as i32).pow(2);
            d(a.0, b.0) + d(a.1, b.1) + d(a.2, b.2)
        };
        let grid = (0..8u8).flat_map(|r| {
            (0..8u8).flat_map(move |g| (0..8u8).map(move |b| (r * 32, g * 32, b * 32)))
        });
        let candidates: Vec<(u8, u8, u8)> = grid
            .filter(|&c| RESERVED.iter().all(|&x| dist(c, x) >= 90 * 90))
            .collect();
        let mut chosen = PALETTE.to_vec();
        while chosen.len() < DISTINCT_COLOURS {
            let nearest = |c: (u8, u8, u8)| {
                chosen
                    .iter()
                    .chain(&RESERVED)
                    .map(|&x| dist(c, x))
                    .min()
                    .unwrap_or(i32::MAX)
            };
            // The first of the farthest, in grid order: the same colours on every run.
            let mut best = candidates[0];
            for &c in &candidates {
                if nearest(c) > nearest(best) {
                    best = c;
                }
            }
            chosen.push(best);
        }
        chosen
    });
    let (r, g, b) = all[i % all.len()];
    RGBColor(r, g, b)
}

/// One line of a line chart.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Drawn dashed-looking (thin, with hollow markers): for modeled values beside measured ones.
    pub secondary: bool,
}

pub struct LineChart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    /// A base-2 logarithmic x axis (page widths, device counts).
    pub x_log2: bool,
    /// A base-10 logarithmic y axis (values over several orders of magnitude).
    pub y_log: bool,
    pub series: Vec<Series>,
}

/// Why a plot could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("cannot draw plot: {0}")]
    Draw(String),
    #[error("cannot write {path}: {reason}")]
    Write { path: String, reason: String },
}

pub type Result<T, E = PlotError> = std::result::Result<T, E>;

fn err<E: std::fmt::Debug>(e: E) -> PlotError {
    PlotError::Draw(format!("{e:?}"))
}

/// Writes `stem.svg` and `stem.png`.
fn both(
    stem: &Path,
    draw: impl Fn(DrawingArea<SVGBackend, Shift>) -> Result<()>,
    draw_png: impl Fn(DrawingArea<BitMapBackend, Shift>) -> Result<()>,
) -> Result<()> {
    ensure_font();
    let svg = stem.with_extension("svg");
    {
        let root = SVGBackend::new(&svg, (WIDTH, HEIGHT)).into_drawing_area();
        draw(root)?;
    }
    let png = stem.with_extension("png");
    let mut buf = vec![0u8; (WIDTH * HEIGHT * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut buf, (WIDTH, HEIGHT)).into_drawing_area();
        draw_png(root)?;
    }
    image::save_buffer(&png, &buf, WIDTH, HEIGHT, image::ExtendedColorType::Rgb8).map_err(|e| {
        PlotError::Write {
            path: png.display().to_string(),
            reason: e.to_string(),
        }
    })
}

pub fn line_chart(stem: &Path, c: &LineChart) -> Result<()> {
    both(stem, |r| draw_lines(r, c), |r| draw_lines(r, c))
}

/// The range the axis must show, widened when all values are equal.
fn span(values: impl Iterator<Item = f64>, log: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return if log { (0.1, 1.0) } else { (0.0, 1.0) };
    }
    if log {
        (lo / 1.5, hi * 1.5)
    } else {
        let lo = lo.min(0.0);
        let pad = if hi > lo { (hi - lo) * 0.08 } else { 1.0 };
        (lo, hi + pad)
    }
}

fn draw_lines<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, c: &LineChart) -> Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(err)?;
    let xs = c.series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let ys = c.series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let (x0, x1) = if c.x_log2 {
        // Half a doubling of room at both ends, so the end points sit clear of the frame.
        let (lo, hi) = span(xs, true);
        (lo * 1.5 / 2f64.sqrt(), hi / 1.5 * 2f64.sqrt())
    } else {
        span(xs, false)
    };
    let (y0, y1) = span(ys, c.y_log);
    let body = root.titled(c.title, ("sans-serif", 20)).map_err(err)?;
    // The legend gets its own column: inside the plot it would hide lines.
    let (plot, legend) = body.split_horizontally(WIDTH - LEGEND_WIDTH);
    let mut b = ChartBuilder::on(&plot);
    b.margin(14).x_label_area_size(48).y_label_area_size(78);
    let n = c.series.len();
    // Earlier series are drawn wider, so a later one lying on top of it leaves it visible.
    let width = |i: usize, s: &Series| {
        if s.secondary {
            1
        } else {
            (1 + 2 * (n - 1 - i) as u32).min(7)
        }
    };
    macro_rules! finish {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(c.x_label)
                .y_desc(c.y_label)
                .axis_desc_style(("sans-serif", 16))
                .label_style(("sans-serif", 13))
                .x_label_formatter(&|v| fmt_num(*v))
                .y_label_formatter(&|v| fmt_num(*v))
                .light_line_style(RGBColor(238, 238, 238))
                .draw()
                .map_err(err)?;
            for (i, s) in c.series.iter().enumerate() {
                let col = colour(i);
                let mut pts: Vec<(f64, f64)> = s
                    .points
                    .iter()
                    .copied()
                    .filter(|(x, y)| x.is_finite() && y.is_finite() && (!c.y_log || *y > 0.0))
                    .collect();
                // A line joins its points along x, whatever order the caller's list gave
                // (`--ratios 4,1,2` drew a zig-zag).
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                let w = width(i, s);
                chart
                    .draw_series(LineSeries::new(pts.clone(), col.stroke_width(w)))
                    .map_err(err)?;
                let r = w as i32 + 2;
                if s.secondary {
                    chart
                        .draw_series(pts.iter().map(|&p| Circle::new(p, 4, col.stroke_width(1))))
                        .map_err(err)?;
                } else {
                    chart
                        .draw_series(pts.iter().map(|&p| Circle::new(p, r, col.filled())))
                        .map_err(err)?;
                }
            }
        }};
    }
    // A logarithmic x axis is marked at the values run (page widths, device counts), not at
    // powers of two alone: devices 1,3,5,7 were marked 1, 2, 4, 8, none of them run.
    let mut keys: Vec<f64> = c
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .filter(|x| x.is_finite() && *x > 0.0)
        .collect();
    keys.sort_by(f64::total_cmp);
    keys.dedup();
    let log_x = || (x0..x1).log_scale().base(2.0).with_key_points(keys.clone());
    match (c.x_log2, c.y_log) {
        (true, true) => finish!(b
            .build_cartesian_2d(log_x(), (y0..y1).log_scale())
            .map_err(err)?),
        (true, false) => finish!(b.build_cartesian_2d(log_x(), y0..y1).map_err(err)?),
        (false, true) => finish!(b
            .build_cartesian_2d(x0..x1, (y0..y1).log_scale())
            .map_err(err)?),
        (false, false) => finish!(b.build_cartesian_2d(x0..x1, y0..y1).map_err(err)?),
    }
    let font = ("sans-serif", 14).into_font();
    let mut y = 40;
    for (i, s) in c.series.iter().enumerate() {
        let col = colour(i);
        let w = width(i, s);
        legend
            .draw(&PathElement::new(
                vec![(8, y + 8), (36, y + 8)],
                col.stroke_width(w),
            ))
            .map_err(err)?;
        if s.secondary {
            legend
                .draw(&Circle::new((22, y + 8), 4, col.stroke_width(1)))
                .map_err(err)?;
        }
        // Wrap long names at a space so they stay inside the column.
        let mut line = String::new();
        let mut lines = Vec::new();
        for word in s.name.split(' ') {
            if !line.is_empty() && line.len() + word.len() > 24 {
                lines.push(std::mem::take(&mut line));
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
        lines.push(line);
        for l in lines {
            legend
                .draw(&Text::new(l, (44, y), font.clone().color(&BLACK)))
                .map_err(err)?;
            y += 18;
        }
        y += 10;
    }
    root.present().map_err(err)?;
    Ok(())
}

/// Short tick labels: integers as integers, otherwise three significant digits without
/// trailing zeros.
pub fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        return "0".into();
    }
    if !(1e-3..1e6).contains(&a) {
        return format!("{v:.2e}");
    }
    if (v - v.round()).abs() < 1e-9 * a.max(1.0) {
        return format!("{}", v.round() as i64);
    }
    let decimals = (2 - a.log10().floor() as i32).max(0) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// The stages in Table 3's order, with the paper's names.
pub fn stages(s: &StageTimes) -> [(&'static str, f64); 7] {
    [
        ("request pass", s.request_pass),
        ("uniquify", s.uniquify),
        ("read-request handling", s.read_requests),
        ("compute (write-request pass)", s.compute),
        ("write-request handling", s.write_requests),
        ("page writes", s.page_writes),
        ("display", s.display),
    ]
}

/// A stacked bar per entry of `bars`, one segment per stage: seconds, or percent of the
/// bar's total when `percent`. Writes `stem.svg` and `stem.png`.
pub fn stage_bars(
    stem: &Path,
    title: &str,
    x_label: &str,
    bars: &[(String, StageTimes)],
    percent: bool,
) -> Result<()> {
    both(
        stem,
        |r| draw_stacks(r, title, x_label, bars, percent),
        |r| draw_stacks(r, title, x_label, bars, percent),
    )
}

fn draw_stacks<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    x_label: &str,
    bars: &[(String, StageTimes)],
    percent: bool,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(err)?;
    let rows: Vec<[(&str, f64); 7]> = bars
        .iter()
        .map(|(_, s)| {
            let mut st = stages(s);
            let total: f64 = st.iter().map(|x| x.1).sum();
            if percent && total > 0.0 {
                for x in &mut st {
                    x.1 *= 100.0 / total;
                }
            }
            st
        })
        .collect();
    let top = if percent {
        100.0
    } else {
        rows.iter()
            .map(|r| r.iter().map(|x| x.1).sum::<f64>())
            .fold(0.0, f64::max)
            .max(1e-9)
            * 1.05
    };
    let n = bars.len().max(1);
    // Leave the right side to the legend: seven stage names do not fit over the bars.
    let (plot, legend) = root.split_horizontally(WIDTH - LEGEND_WIDTH);
    let mut chart = ChartBuilder::on(&plot)
        .caption(title, ("sans-serif", 20))
        .margin(14)
        .x_label_area_size(48)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..n as f64, 0f64..top)
        .map_err(err)?;
    let names: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_desc(x_label)
        .y_desc(if percent {
            "share of stage time (%)"
        } else {
            "seconds (measured, summed over frames)"
        })
        .axis_desc_style(("sans-serif", 16))
        .label_style(("sans-serif", 13))
        .x_labels(n.min(16) * 2 + 1)
        .x_label_formatter(&|v| {
            let i = v.floor();
            if (v - i - 0.5).abs() < 1e-6 && (i as usize) < names.len() {
                names[i as usize].clone()
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|v| fmt_num(*v))
        .draw()
        .map_err(err)?;
    for (i, row) in rows.iter().enumerate() {
        let mut base = 0.0;
        for (k, (_, v)) in row.iter().enumerate() {
            let x = i as f64;
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x + 0.15, base), (x + 0.85, base + v)],
                    colour(k).filled(),
                )))
                .map_err(err)?;
            base += v;
        }
    }
    legend.fill(&WHITE).map_err(err)?;
    let names = stages(&StageTimes::default());
    let font = ("sans-serif", 14).into_font();
    legend
        .draw(&Text::new("stage", (10, 60), font.clone().color(&BLACK)))
        .map_err(err)?;
    for (k, (name, _)) in names.iter().enumerate() {
        let y = 90 + 26 * k as i32;
        legend
            .draw(&Rectangle::new([(10, y), (28, y + 16)], colour(k).filled()))
            .map_err(err)?;
        legend
            .draw(&Text::new(*name, (36, y + 1), font.clone().color(&BLACK)))
            .map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every device of the largest node gets a colour no other device has, at least 40 apart
    /// in RGB, and none near the colours that mean shared, home only or background; the first
    /// ten are the palette, as every chart drew them.
    #[test]
    fn sixty_four_devices_get_sixty_four_colours_far_apart() {
        let c: Vec<(i32, i32, i32)> = (0..DISTINCT_COLOURS)
            .map(|i| {
                let c = colour(i);
                (c.0 as i32, c.1 as i32, c.2 as i32)
            })
            .collect();
        let d = |a: (i32, i32, i32), b: (i32, i32, i32)| {
            (((a.0 - b.0).pow(2) + (a.1 - b.1).pow(2) + (a.2 - b.2).pow(2)) as f64).sqrt()
        };
        for i in 0..c.len() {
            for j in i + 1..c.len() {
                assert!(d(c[i], c[j]) >= 40.0, "{i} {:?} and {j} {:?}", c[i], c[j]);
            }
            for r in RESERVED {
                let r = (r.0 as i32, r.1 as i32, r.2 as i32);
                assert!(d(c[i], r) >= 60.0, "{i} {:?} near {r:?}", c[i]);
            }
        }
        for (i, p) in PALETTE.iter().enumerate() {
            assert_eq!(colour(i), RGBColor(p.0, p.1, p.2));
        }
        assert_eq!(colour(DISTINCT_COLOURS), colour(0));
    }

    /// The SVG of a chart of one series through `points`, on a base-2 logarithmic x axis.
    fn log_x_svg(points: Vec<(f64, f64)>) -> String {
        let dir = tempfile::tempdir().unwrap();
        let stem = dir.path().join("c");
        let chart = LineChart {
            title: "t",
            x_label: "x",
            y_label: "y",
            x_log2: true,
            y_log: false,
            series: vec![Series {
                name: "s".into(),
                points,
                secondary: false,
            }],
        };
        line_chart(&stem, &chart).unwrap();
        std::fs::read_to_string(stem.with_extension("svg")).unwrap()
    }

    /// A line joins its points in x order, whatever order the list gave them in.
    #[test]
    fn a_line_joins_its_points_along_x() {
        let svg = log_x_svg(vec![(4.0, 1.0), (1.0, 3.0), (2.0, 2.0)]);
        // The series is the one polyline of three points (axes and grid lines have two).
        let lines: Vec<Vec<f64>> = svg
            .split("<polyline")
            .skip(1)
            .map(|p| {
                let p = &p[p.find("points=\"").unwrap() + 8..];
                p[..p.find('"').unwrap()]
                    .split_whitespace()
                    .map(|xy| xy.split(',').next().unwrap().parse().unwrap())
                    .collect()
            })
            .filter(|xs: &Vec<f64>| xs.len() == 3)
            .collect();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].windows(2).all(|w| w[0] < w[1]), "{lines:?}");
    }

    /// A logarithmic x axis is marked at the values run: device counts 3, 5, 7 were marked
    /// only at the powers of two between them, none of them run.
    #[test]
    fn a_log_axis_is_marked_at_the_values_run() {
        let svg = log_x_svg(vec![(3.0, 100.0), (5.0, 200.0), (7.0, 300.0)]);
        let labels: Vec<&str> = svg
            .split("</text>")
            .filter_map(|t| t.rsplit('>').next().map(str::trim))
            .collect();
        for want in ["3", "5", "7"] {
            assert!(labels.contains(&want), "{want} not in {labels:?}");
        }
        assert!(!labels.contains(&"4"), "{labels:?}");
    }

    #[test]
    fn tick_labels_are_short() {
        for (v, want) in [
            (0.0, "0"),
            (0.16, "0.16"),
            (0.125, "0.125"),
            (2.54, "2.54"),
            (362.74, "363"),
            (64.0, "64"),
            (1_048_576.0, "1.05e6"),
            (0.0004, "4.00e-4"),
        ] {
            assert_eq!(fmt_num(v), want, "{v}");
        }
    }
}
