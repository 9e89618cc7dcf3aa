//! `--residency-png`: one picture per texture of where each page lives at the end of a run,
//! after the idea of the paper's Figure 13. A page is drawn in its device's colour when one
//! device holds it, black when several do (shared), light grey when only home has it.

use std::path::{Path, PathBuf};

use plotters::prelude::*;

use super::modeled::Run;
use crate::plot::{colour, ensure_font, PlotError};

pub(crate) const SHARED: RGBColor = RGBColor(20, 20, 20);
pub(crate) const HOME_ONLY: RGBColor = RGBColor(215, 215, 215);
pub(crate) const LEGEND_W: u32 = 230;
pub(crate) const TOP: u32 = 56;
pub(crate) const MARGIN: u32 = 16;

/// A residency picture's legend from `(x, y)` down: per holder a swatch, its name and its
/// pages.
pub(crate) fn legend<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    (x, y): (i32, i32),
    entries: &[(String, RGBColor, u64)],
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let small = ("sans-serif", 13).into_font();
    for (i, (name, c, n)) in entries.iter().enumerate() {
        let y = y + 24 * i as i32;
        root.draw(&Rectangle::new([(x, y), (x + 16, y + 16)], c.filled()))?;
        root.draw(&Rectangle::new([(x, y), (x + 16, y + 16)], BLACK))?;
        root.draw(&Text::new(
            format!("{name}: {n}"),
            (x + 24, y + 1),
            small.clone().color(&BLACK),
        ))?;
    }
    Ok(())
}

/// Writes `dir/residency-<texture>.png` for every texture of `run`, after `frames` frames of
/// a `size`² field in pages of `page`²; `split` names the partition in the subtitle; and
/// `dir/residency.csv`, the pictures' legends as numbers (`texture,holder,pages`: a holder is
/// a device's index, `shared` or `home`). Returns the paths.
pub fn write_all(
    run: &Run,
    size: u32,
    page: u32,
    frames: u32,
    split: tessera_runtime::Partition,
    dir: &Path,
) -> Result<Vec<PathBuf>, PlotError> {
    // The node the report's counters come from: in the isolated model its devices ran one at
    // a time, and under a budget they can end holding other pages than the devices that ran
    // together.
    let sim = run.modeled_sim();
    let (_, directory) = sim
        .sys
        .mm
        .memory()
        .map_err(|e| PlotError::Draw(e.to_string()))?;
    let devices = sim.sys.devices();
    let mut out = Vec::new();
    let mut csv = String::from("texture,holder,pages\n");
    for t in &run.textures {
        let (px, py) = t.desc.pages_xy();
        // Whole pixels per page, so every page is a clean block: about 512 pixels across.
        let scale = (512 / px.max(py).max(1)).clamp(1, 64) as u32;
        let (mw, mh) = (px as u32 * scale, py as u32 * scale);
        let (w, h) = (
            mw + 2 * MARGIN + LEGEND_W,
            (mh + TOP + MARGIN).max(TOP + 60 + 24 * (devices as u32 + 2)),
        );
        let mut buf = vec![255u8; (w * h * 3) as usize];
        let mut counts = vec![0u64; devices + 2];
        for local in 0..px * py {
            let e = directory.get((t.pages.start + local) as usize);
            let copies = e.map_or(0, |e| e.copies.len());
            let (c, k) = match copies {
                0 => (HOME_ONLY, devices + 1),
                1 => {
                    let d = e
                        .and_then(|e| e.copies.iter().next())
                        .map_or(0, |d| d.index());
                    (colour(d), d)
                }
                _ => (SHARED, devices),
            };
            counts[k] += 1;
            // Pages count from the lower left; image rows from the top.
            let (gx, gy) = (local % px, local / px);
            let x0 = MARGIN + gx as u32 * scale;
            let y0 = TOP + (py - 1 - gy) as u32 * scale;
            // A one-pixel gap between pages when they are big enough to show the grid.
            let inner = if scale >= 6 { scale - 1 } else { scale };
            for y in y0..y0 + inner {
                let row = (y * w) as usize * 3;
                for x in x0..x0 + inner {
                    let i = row + x as usize * 3;
                    buf[i..i + 3].copy_from_slice(&[c.0, c.1, c.2]);
                }
            }
        }
        for (k, n) in counts.iter().enumerate() {
            let holder = match k {
                k if k < devices => k.to_string(),
                k if k == devices => "shared".into(),
                _ => "home".into(),
            };
            csv.push_str(&format!("{},{holder},{n}\n", t.name));
        }
        ensure_font();
        {
            let root = BitMapBackend::with_buffer(&mut buf, (w, h)).into_drawing_area();
            let e = |e| PlotError::Draw(format!("residency picture: {e:?}"));
            let title = format!(
                "{} texture: where each page lives after {} frame(s)",
                t.name, frames
            );
            let sub = format!(
                "{s}x{s}, page {p}x{p} ({px}x{py} pages), {d} device(s), {part:?} partition",
                s = size,
                p = page,
                d = devices,
                part = split
            );
            let font = ("sans-serif", 18).into_font();
            let small = ("sans-serif", 13).into_font();
            root.draw(&Text::new(title, (MARGIN as i32, 8), font.color(&BLACK)))
                .map_err(e)?;
            root.draw(&Text::new(
                sub,
                (MARGIN as i32, 32),
                small.clone().color(&BLACK),
            ))
            .map_err(e)?;
            let lx = (MARGIN * 2 + mw) as i32;
            let mut entries: Vec<(String, RGBColor, u64)> = (0..devices)
                .map(|d| (format!("device {d} only"), colour(d), counts[d]))
                .collect();
            entries.push(("shared (2+ devices)".into(), SHARED, counts[devices]));
            entries.push(("home only".into(), HOME_ONLY, counts[devices + 1]));
            legend(&root, (lx, TOP as i32), &entries).map_err(e)?;
            root.present().map_err(e)?;
        }
        let path = dir.join(format!("residency-{}.png", t.name));
        image::save_buffer(&path, &buf, w, h, image::ExtendedColorType::Rgb8).map_err(|e| {
            PlotError::Write {
                path: path.display().to_string(),
                reason: e.to_string(),
            }
        })?;
        out.push(path);
    }
    let path = dir.join("residency.csv");
    std::fs::write(&path, csv).map_err(|e| PlotError::Write {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    out.push(path);
    Ok(out)
}
