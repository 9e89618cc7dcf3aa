//! The game trace's pictures: texture page requests per frame and device as a plot, and the
//! atlas's residency (the paper's Fig 13) as an image.

use std::path::Path;

use super::render::Renderer;
use super::QuakeError;
use crate::plot::{colour, line_chart, LineChart, PlotError, Series};

/// `stem.svg` and `stem.png`: requests per frame, a line per device, at pages of `page`²
/// (`clear`: device memories emptied every frame).
pub fn requests_chart(
    stem: &Path,
    requests: &[Vec<u64>],
    page: u32,
    clear: bool,
) -> Result<(), PlotError> {
    let n = requests.first().map_or(0, Vec::len);
    let title = format!(
        "Texture page requests per frame, {page}x{page} pages{}",
        if clear {
            ", memory cleared each frame"
        } else {
            ""
        }
    );
    line_chart(
        stem,
        &LineChart {
            title: &title,
            x_label: "frame",
            y_label: "page requests",
            x_log2: false,
            y_log: false,
            series: (0..n)
                .map(|d| Series {
                    name: format!("device {d}"),
                    points: requests
                        .iter()
                        .enumerate()
                        .map(|(f, per)| (f as f64, per[d] as f64))
                        .collect(),
                    secondary: false,
                })
                .collect(),
        },
    )
}

/// Texture page requests per frame by mip level (`by_level`: per frame, per level, all
/// devices), as an SVG and PNG line chart at `stem`, one line per level.
pub fn levels_chart(stem: &Path, by_level: &[Vec<u64>], page: u32) -> Result<(), PlotError> {
    let levels = by_level.first().map_or(0, Vec::len);
    let title = format!("Texture page requests per frame by mip level, {page}x{page} pages");
    line_chart(
        stem,
        &LineChart {
            title: &title,
            x_label: "frame",
            y_label: "page requests (all devices)",
            x_log2: false,
            y_log: false,
            series: (0..levels)
                .map(|l| Series {
                    name: format!("level {l}"),
                    points: by_level
                        .iter()
                        .enumerate()
                        .map(|(f, per)| (f as f64, per[l] as f64))
                        .collect(),
                    secondary: false,
                })
                .collect(),
        },
    )
}

/// The atlas's pages as an RGBA8 image, rows from the bottom as the framebuffer's, (width,
/// height, pixels), after `frames` frames: each page in the colour of the one device holding
/// it, near black when several do, light grey when only home has it, white for padding (no
/// texture); a legend beside it counts each.
pub fn residency_image(r: &Renderer, frames: u32) -> Result<(u32, u32, Vec<u8>), QuakeError> {
    use crate::boiling::residency::{legend, HOME_ONLY, LEGEND_W, MARGIN, SHARED, TOP};
    use plotters::prelude::*;
    let res = r.atlas_residency()?;
    let devices = r.sys.devices();
    let (px, py) = (r.atlas.pages_x(), r.atlas.pages_y());
    let scale = (512 / px.max(py).max(1)).clamp(1, 16);
    let (mw, mh) = (px * scale, py * scale);
    let (w, h) = (
        mw + 2 * MARGIN + LEGEND_W,
        (mh + TOP + MARGIN).max(TOP + 60 + 24 * (devices as u32 + 3)),
    );
    let padding = RGBColor(255, 255, 255);
    let mut buf = vec![255u8; (w * h * 3) as usize];
    // Per device, then shared, home only and padding.
    let mut counts = vec![0u64; devices + 3];
    for gy in 0..py {
        for gx in 0..px {
            let local = gy as u64 * px as u64 + gx as u64;
            let m = res.get(local as usize).copied().unwrap_or(0);
            let (c, k) = if r.atlas.texture_of_page(local).is_none() {
                (padding, devices + 2)
            } else {
                match m.count_ones() {
                    0 => (HOME_ONLY, devices + 1),
                    1 => {
                        let d = m.trailing_zeros() as usize;
                        (colour(d), d.min(devices))
                    }
                    _ => (SHARED, devices),
                }
            };
            counts[k] += 1;
            // Drawn top-down, with the text; page rows count from the bottom.
            let y0 = TOP + (py - 1 - gy) * scale;
            for y in y0..y0 + scale {
                let row = (y * w) as usize * 3;
                for x in MARGIN + gx * scale..MARGIN + (gx + 1) * scale {
                    let i = row + x as usize * 3;
                    buf[i..i + 3].copy_from_slice(&[c.0, c.1, c.2]);
                }
            }
        }
    }
    crate::plot::ensure_font();
    {
        let root = BitMapBackend::with_buffer(&mut buf, (w, h)).into_drawing_area();
        let e = |e| QuakeError::Plot(PlotError::Draw(format!("residency picture: {e:?}")));
        let title = format!("atlas: where each page lives after {frames} frame(s)");
        let sub = format!("{px}x{py} pages, {devices} device(s)");
        let font = ("sans-serif", 18).into_font();
        let small = ("sans-serif", 13).into_font();
        root.draw(&Text::new(title, (MARGIN as i32, 8), font.color(&BLACK)))
            .map_err(e)?;
        root.draw(&Text::new(sub, (MARGIN as i32, 32), small.color(&BLACK)))
            .map_err(e)?;
        let mut entries: Vec<(String, RGBColor, u64)> = (0..devices)
            .map(|d| (format!("device {d} only"), colour(d), counts[d]))
            .collect();
        entries.push(("shared (2+ devices)".into(), SHARED, counts[devices]));
        entries.push(("home only".into(), HOME_ONLY, counts[devices + 1]));
        entries.push(("padding (no texture)".into(), padding, counts[devices + 2]));
        legend(&root, ((MARGIN * 2 + mw) as i32, TOP as i32), &entries).map_err(e)?;
        root.present().map_err(e)?;
    }
    let img = buf
        .chunks_exact(3 * w as usize)
        .rev()
        .flat_map(|row| row.chunks_exact(3).flat_map(|c| [c[0], c[1], c[2], 255]))
        .collect();
    Ok((w, h, img))
}
