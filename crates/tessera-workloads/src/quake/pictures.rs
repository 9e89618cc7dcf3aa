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

/// The atlas's pages as an RGBA8 image, (width, height, pixels): each page in the colour of
/// the one device holding it, near black when several do, light grey when only home has it,
/// white for padding (no texture).
pub fn residency_image(r: &Renderer) -> Result<(u32, u32, Vec<u8>), QuakeError> {
    let res = r.atlas_residency()?;
    let (px, py) = (r.atlas.pages_x(), r.atlas.pages_y());
    let scale = (512 / px.max(py).max(1)).clamp(1, 16);
    let (w, h) = (px * scale, py * scale);
    let mut img = vec![255u8; (w * h * 4) as usize];
    for gy in 0..py {
        for gx in 0..px {
            let local = gy as u64 * px as u64 + gx as u64;
            let m = res.get(local as usize).copied().unwrap_or(0);
            let c = if r.atlas.texture_of_page(local).is_none() {
                [255, 255, 255]
            } else {
                match m.count_ones() {
                    0 => [215, 215, 215],
                    1 => {
                        let c = colour(m.trailing_zeros() as usize);
                        [c.0, c.1, c.2]
                    }
                    _ => [20, 20, 20],
                }
            };
            for y in gy * scale..(gy + 1) * scale {
                for x in gx * scale..(gx + 1) * scale {
                    let i = ((y * w + x) * 4) as usize;
                    img[i..i + 4].copy_from_slice(&[c[0], c[1], c[2], 255]);
                }
            }
        }
    }
    Ok((w, h, img))
}
