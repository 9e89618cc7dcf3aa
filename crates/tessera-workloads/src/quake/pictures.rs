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

/// A residency picture ([`residency_image`]).
pub struct ResidencyPicture {
    pub width: u32,
    pub height: u32,
    /// RGBA8, rows from the bottom as the framebuffer's.
    pub rgba: Vec<u8>,
    /// The legend's counts of pages, every level: held by device 0 alone, … by the last
    /// device alone, then by several devices, by home only, and padding.
    pub counts: Vec<u64>,
}

/// The atlas's pages as an RGBA8 image after `frames` frames: each page in the colour of the one device holding
/// it, near black when several do, light grey when only home has it, white for padding (no
/// texture); a legend beside it counts each. A mipmapped atlas (filtering) shows its coarser
/// levels too, in a row under level 0 at the same scale, so that the pages distant surfaces
/// use are seen where they live.
pub fn residency_image(r: &Renderer, frames: u32) -> Result<ResidencyPicture, QuakeError> {
    use crate::boiling::residency::{legend, HOME_ONLY, LEGEND_W, MARGIN, SHARED, TOP};
    use plotters::prelude::*;
    let res = r.atlas_residency()?;
    let devices = r.sys.devices();
    let (px, py) = (r.atlas.pages_x(), r.atlas.pages_y());
    // Per level: its first page and its pages across and up.
    let grids: Vec<(u64, u32, u32)> = match r.mip_layout() {
        Some(m) => (0..m.levels())
            .map(|l| {
                let (x, y) = m.pages_xy(l)?;
                Ok((m.level_offset(l)?, x as u32, y as u32))
            })
            .collect::<Result<_, tessera_core::CoreError>>()
            .map_err(|e| QuakeError::Plot(PlotError::Draw(format!("residency picture: {e}"))))?,
        None => vec![(0, px, py)],
    };
    let scale = (512 / px.max(py).max(1)).clamp(1, 16);
    let (mw, mh) = (px * scale, py * scale);
    // Where each level's grid is drawn (left, top): level 0 under the title, the coarser
    // ones left to right in a row below it, under a line of text.
    const GAP: u32 = 8;
    const ROW_LABEL: u32 = 22;
    let row_top = TOP + mh + ROW_LABEL;
    let mut at = vec![(MARGIN, TOP)];
    let mut x = MARGIN;
    for &(_, gx, _) in grids.iter().skip(1) {
        at.push((x, row_top));
        x += gx * scale + GAP;
    }
    let row_h = grids.iter().skip(1).map(|g| g.2 * scale).max();
    let maps_w = mw.max(x.saturating_sub(GAP + MARGIN));
    let maps_bottom = row_h.map_or(TOP + mh, |h| row_top + h);
    let (w, h) = (
        maps_w + 2 * MARGIN + LEGEND_W,
        (maps_bottom + MARGIN).max(TOP + 60 + 24 * (devices as u32 + 3)),
    );
    let padding = RGBColor(255, 255, 255);
    let mut buf = vec![255u8; (w * h * 3) as usize];
    // Per device, then shared, home only and padding.
    let mut counts = vec![0u64; devices + 3];
    for (level, (&(offset, gpx, gpy), &(left, top))) in grids.iter().zip(&at).enumerate() {
        for gy in 0..gpy {
            for gx in 0..gpx {
                let local = offset + gy as u64 * gpx as u64 + gx as u64;
                let m = res.get(local as usize).copied().unwrap_or(0);
                // Only level 0 has padding: a coarser level's page averages what is under it.
                let (c, k) = if level == 0 && r.atlas.texture_of_page(local).is_none() {
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
                let y0 = top + (gpy - 1 - gy) * scale;
                for y in y0..y0 + scale {
                    let row = (y * w) as usize * 3;
                    for x in left + gx * scale..left + (gx + 1) * scale {
                        let i = row + x as usize * 3;
                        buf[i..i + 3].copy_from_slice(&[c.0, c.1, c.2]);
                    }
                }
            }
        }
    }
    crate::plot::ensure_font();
    {
        let root = BitMapBackend::with_buffer(&mut buf, (w, h)).into_drawing_area();
        let e = |e| QuakeError::Plot(PlotError::Draw(format!("residency picture: {e:?}")));
        let title = format!("atlas: where each page lives after {frames} frame(s)");
        let sub = if grids.len() > 1 {
            format!(
                "level 0: {px}x{py} pages; {} levels, {} pages; {devices} device(s)",
                grids.len(),
                grids.iter().map(|g| g.1 as u64 * g.2 as u64).sum::<u64>()
            )
        } else {
            format!("{px}x{py} pages, {devices} device(s)")
        };
        let font = ("sans-serif", 18).into_font();
        let small = ("sans-serif", 13).into_font();
        root.draw(&Text::new(title, (MARGIN as i32, 8), font.color(&BLACK)))
            .map_err(e)?;
        root.draw(&Text::new(sub, (MARGIN as i32, 32), small.color(&BLACK)))
            .map_err(e)?;
        if grids.len() > 1 {
            let label = format!("levels 1 to {}, left to right", grids.len() - 1);
            root.draw(&Text::new(
                label,
                (MARGIN as i32, (TOP + mh + 4) as i32),
                small.color(&BLACK),
            ))
            .map_err(e)?;
        }
        let mut entries: Vec<(String, RGBColor, u64)> = (0..devices)
            .map(|d| (format!("device {d} only"), colour(d), counts[d]))
            .collect();
        entries.push(("shared (2+ devices)".into(), SHARED, counts[devices]));
        entries.push(("home only".into(), HOME_ONLY, counts[devices + 1]));
        entries.push(("padding (no texture)".into(), padding, counts[devices + 2]));
        legend(&root, ((MARGIN * 2 + maps_w) as i32, TOP as i32), &entries).map_err(e)?;
        root.present().map_err(e)?;
    }
    let rgba = buf
        .chunks_exact(3 * w as usize)
        .rev()
        .flat_map(|row| row.chunks_exact(3).flat_map(|c| [c[0], c[1], c[2], 255]))
        .collect();
    Ok(ResidencyPicture {
        width: w,
        height: h,
        rgba,
        counts,
    })
}
