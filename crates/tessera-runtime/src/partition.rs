//! Splitting a pass's domain across devices (paper 3.6, "Partitioning").

use serde::Serialize;

use crate::backend::Domain;
use crate::error::{Result, RuntimeError};
use crate::kernel::MAX_DOMAIN_SIDE;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Partition {
    /// Horizontal bands, device 0 at the bottom.
    Rows,
    /// Vertical bands, device 0 on the left.
    Cols,
    /// A grid as square as the device count allows, more columns than rows.
    Tiles,
}

/// The option's word (`--split rows`).
impl std::fmt::Display for Partition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Partition::Rows => "rows",
            Partition::Cols => "cols",
            Partition::Tiles => "tiles",
        })
    }
}

impl std::str::FromStr for Partition {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "rows" => Ok(Partition::Rows),
            "cols" => Ok(Partition::Cols),
            "tiles" => Ok(Partition::Tiles),
            _ => Err(format!(
                "unknown partition {s:?} (expected rows, cols or tiles)"
            )),
        }
    }
}

fn split(len: u32, parts: u32, what: &'static str) -> Result<Vec<(u32, u32)>> {
    if parts == 0 || parts > len {
        return Err(RuntimeError::SplitTooFine {
            len,
            what,
            parts: parts as usize,
        });
    }
    Ok((0..parts)
        .map(|i| {
            (
                (len as u64 * i as u64 / parts as u64) as u32,
                (len as u64 * (i + 1) as u64 / parts as u64) as u32,
            )
        })
        .collect())
}

/// [`split`], with every cut moved to the nearest multiple of `page`, where that leaves no
/// band empty and none more than a quarter longer than an even share. A page written by two
/// devices' bands goes back and forth between them every pass (a fault, a relaunch, a copy):
/// the ray tracer at 320×240 on two devices with 32-row pages relaunched a page row, 7,680
/// invocations, every frame. One band a page row longer costs less than that, but not
/// whatever it costs: 256 rows of 64-row pages over three devices would give one band twice
/// another's rows, so such a split stays even.
fn split_on_pages(len: u32, parts: u32, page: u32, what: &'static str) -> Result<Vec<(u32, u32)>> {
    let even = split(len, parts, what)?;
    if page <= 1 {
        return Ok(even);
    }
    let cut = |v: u32| -> u32 {
        if v == len {
            return len;
        }
        // The nearest multiple, halves up, but never the end: that band would be empty.
        let down = v / page * page;
        let up = down as u64 + page as u64;
        if 2 * (v - down) as u64 >= page as u64 && up < len as u64 {
            up as u32
        } else {
            down
        }
    };
    let aligned: Vec<(u32, u32)> = even.iter().map(|&(a, b)| (cut(a), cut(b))).collect();
    // A band of `b - a` rows is at most 5/4 of `len / parts` when 4·parts·(b − a) ≤ 5·len.
    let fits = aligned
        .iter()
        .all(|&(a, b)| a < b && 4 * parts as u64 * (b - a) as u64 <= 5 * len as u64);
    Ok(if fits { aligned } else { even })
}

impl Partition {
    /// One rectangle per device, covering `width × height` exactly once, the bands as even
    /// as the counts allow.
    pub fn regions(self, width: u32, height: u32, devices: u32) -> Result<Vec<Domain>> {
        self.regions_on_pages(width, height, devices, 1)
    }

    /// [`Partition::regions`], the cuts on multiples of `page` (a texture's page side, in
    /// invocations) wherever that keeps every band within a quarter of an even share, so
    /// that no page of a texture the pass writes at its invocations' coordinates is written
    /// by two devices. `page` 1 is the even split.
    pub fn regions_on_pages(
        self,
        width: u32,
        height: u32,
        devices: u32,
        page: u32,
    ) -> Result<Vec<Domain>> {
        self.cut(width, height, devices, page, false)
    }

    /// [`Partition::regions_on_pages`] for a pass with fewer rows (or columns) than the
    /// devices it is split across: the first devices take one each and the others an empty
    /// rectangle, so they sit the pass out. An empty domain is still refused.
    pub fn regions_for_pass(
        self,
        width: u32,
        height: u32,
        devices: u32,
        page: u32,
    ) -> Result<Vec<Domain>> {
        self.cut(width, height, devices, page, true)
    }

    fn cut(
        self,
        width: u32,
        height: u32,
        devices: u32,
        page: u32,
        idle: bool,
    ) -> Result<Vec<Domain>> {
        if width > MAX_DOMAIN_SIDE || height > MAX_DOMAIN_SIDE {
            return Err(RuntimeError::Config(format!(
                "a pass of {width}x{height} invocations: each side may be at most {MAX_DOMAIN_SIDE}"
            )));
        }
        let (gx, gy) = match self {
            Partition::Rows => (1, devices),
            Partition::Cols => (devices, 1),
            Partition::Tiles => {
                let gy = (1..=devices)
                    .filter(|g| devices.is_multiple_of(*g) && g * g <= devices)
                    .max()
                    .unwrap_or(1);
                (devices / gy.max(1), gy)
            }
        };
        let side = |len: u32, parts: u32, what: &'static str| -> Result<Vec<(u32, u32)>> {
            if !idle || len == 0 || parts <= len {
                return split_on_pages(len, parts, page, what);
            }
            let mut bands = split(len, len, what)?;
            bands.resize(parts as usize, (len, len));
            Ok(bands)
        };
        let xs = side(width, gx, "columns")?;
        let ys = side(height, gy, "rows")?;
        Ok(ys
            .iter()
            .flat_map(|&(y0, y1)| {
                xs.iter()
                    .map(move |&(x0, x1)| Domain::Rect { x0, y0, x1, y1 })
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cover(p: Partition, w: u32, h: u32, n: u32) -> Vec<u32> {
        let mut hits = vec![0u32; (w * h) as usize];
        for d in p.regions(w, h, n).unwrap() {
            if let Domain::Rect { x0, y0, x1, y1 } = d {
                for y in y0..y1 {
                    for x in x0..x1 {
                        hits[(y * w + x) as usize] += 1;
                    }
                }
            }
        }
        hits
    }

    #[test]
    fn every_texel_exactly_once() {
        for p in [Partition::Rows, Partition::Cols, Partition::Tiles] {
            for n in 1..=8 {
                assert!(cover(p, 13, 9, n).iter().all(|&c| c == 1), "{p:?} {n}");
            }
        }
        assert_eq!(Partition::Tiles.regions(8, 8, 4).unwrap().len(), 4);
        assert!(Partition::Rows.regions(8, 3, 4).is_err());
    }

    #[test]
    fn a_pass_short_of_devices_covers_every_texel_once_and_leaves_the_rest_idle() {
        for p in [Partition::Rows, Partition::Cols, Partition::Tiles] {
            for (w, h) in [(1, 1), (3, 2), (2, 3), (8, 1), (1, 8)] {
                for n in 1..=9 {
                    let regions = p.regions_for_pass(w, h, n, 1).unwrap();
                    assert_eq!(regions.len(), n as usize, "{p:?} {w}x{h} on {n}");
                    let mut hits = vec![0u32; (w * h) as usize];
                    for d in &regions {
                        let Domain::Rect { x0, y0, x1, y1 } = *d else {
                            panic!("a pass's regions are rectangles")
                        };
                        for y in y0..y1 {
                            for x in x0..x1 {
                                hits[(y * w + x) as usize] += 1;
                            }
                        }
                    }
                    assert!(hits.iter().all(|&c| c == 1), "{p:?} {w}x{h} on {n}");
                    // Where the split has a device for each row (or column), each takes one.
                    let busy = regions.iter().filter(|d| !d.is_empty()).count();
                    if p == Partition::Rows {
                        assert_eq!(busy, n.min(h) as usize, "{w}x{h} on {n}");
                    }
                }
            }
        }
        // What fits is cut exactly as the strict cut does.
        assert_eq!(
            format!(
                "{:?}",
                Partition::Rows.regions_for_pass(64, 80, 2, 16).unwrap()
            ),
            format!(
                "{:?}",
                Partition::Rows.regions_on_pages(64, 80, 2, 16).unwrap()
            )
        );
        assert!(Partition::Rows.regions_for_pass(4, 0, 2, 1).is_err());
    }

    fn rows(p: Partition, w: u32, h: u32, n: u32, page: u32) -> Vec<(u32, u32)> {
        p.regions_on_pages(w, h, n, page)
            .unwrap()
            .iter()
            .map(|d| match d {
                &Domain::Rect { y0, y1, .. } => (y0, y1),
                Domain::List(_) => unreachable!("regions are rectangles"),
            })
            .collect()
    }

    #[test]
    fn cuts_fall_on_pages_where_the_bands_stay_near_even() {
        // 240 rows of 32-row pages over two devices: 128 + 112, not 120 + 120 with a page
        // row written by both.
        assert_eq!(
            rows(Partition::Rows, 320, 240, 2, 32),
            [(0, 128), (128, 240)]
        );
        // 1000 rows of 64 over eight: every cut on a page, no band over 125 · 5/4.
        let r = rows(Partition::Rows, 8, 1000, 8, 64);
        assert!(r.iter().all(|&(a, _)| a % 64 == 0), "{r:?}");
        assert!(r.iter().all(|&(a, b)| (b - a) * 4 * 8 <= 5 * 1000), "{r:?}");
        // 256 rows of 64 over three: on pages one band would be 128 against 85: even.
        assert_eq!(
            rows(Partition::Rows, 8, 256, 3, 64),
            [(0, 85), (85, 170), (170, 256)]
        );
        // More devices than page rows: even.
        assert_eq!(
            rows(Partition::Rows, 8, 64, 4, 32),
            [(0, 16), (16, 32), (32, 48), (48, 64)]
        );
        // Columns and tiles cut on pages the same way.
        let c = Partition::Cols.regions_on_pages(240, 8, 2, 32).unwrap();
        assert!(matches!(c[0], Domain::Rect { x1: 128, .. }), "{c:?}");
        let t = Partition::Tiles.regions_on_pages(240, 240, 4, 32).unwrap();
        assert!(t
            .iter()
            .all(|d| matches!(d, &Domain::Rect { x0, y0, .. } if x0 % 32 == 0 && y0 % 32 == 0)));
    }

    #[test]
    fn bands_on_pages_cover_every_texel_once_and_stay_near_even() {
        for p in [Partition::Rows, Partition::Cols, Partition::Tiles] {
            for n in 1..=8 {
                for page in [1, 4, 16, 64] {
                    for (w, h) in [(13, 9), (100, 70), (240, 320), (1000, 1000)] {
                        let Ok(regions) = p.regions_on_pages(w, h, n, page) else {
                            assert!(p.regions(w, h, n).is_err(), "{p:?} {w}x{h} {n} {page}");
                            continue;
                        };
                        let mut hits = vec![0u32; (w * h) as usize];
                        for d in &regions {
                            let &Domain::Rect { x0, y0, x1, y1 } = d else {
                                unreachable!("regions are rectangles")
                            };
                            for y in y0..y1 {
                                for x in x0..x1 {
                                    hits[(y * w + x) as usize] += 1;
                                }
                            }
                        }
                        assert!(hits.iter().all(|&c| c == 1), "{p:?} {w}x{h} {n} {page}");
                        // Each band within 5/4 of an even share of its side, or the even
                        // split itself.
                        let even = p.regions(w, h, n).unwrap();
                        let near = |d: &Domain, e: &Domain| match (d, e) {
                            (
                                &Domain::Rect { x0, y0, x1, y1 },
                                &Domain::Rect {
                                    x0: a0,
                                    y0: b0,
                                    x1: a1,
                                    y1: b1,
                                },
                            ) => {
                                (x1 - x0) * 4 <= 5 * (a1 - a0) + 5
                                    && (y1 - y0) * 4 <= 5 * (b1 - b0) + 5
                            }
                            _ => false,
                        };
                        assert!(
                            regions.iter().zip(&even).all(|(d, e)| near(d, e)),
                            "{p:?} {w}x{h} {n} {page}: {regions:?}"
                        );
                    }
                }
            }
        }
    }

    /// A side past `MAX_DOMAIN_SIDE` would put a relaunch list's marks into its coordinates.
    #[test]
    fn a_pass_wider_or_taller_than_the_largest_domain_is_refused() {
        for (w, h) in [(MAX_DOMAIN_SIDE + 1, 1), (1, MAX_DOMAIN_SIDE + 1)] {
            assert!(matches!(
                Partition::Rows.regions(w, h, 1),
                Err(RuntimeError::Config(_))
            ));
        }
        let at_most = Partition::Rows.regions(1, MAX_DOMAIN_SIDE, 1).unwrap();
        assert!(matches!(
            at_most[..],
            [Domain::Rect {
                x0: 0,
                y0: 0,
                x1: 1,
                y1: MAX_DOMAIN_SIDE
            }]
        ));
    }
}
