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

impl Partition {
    /// One rectangle per device, covering `width × height` exactly once.
    pub fn regions(self, width: u32, height: u32, devices: u32) -> Result<Vec<Domain>> {
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
        let xs = split(width, gx, "columns")?;
        let ys = split(height, gy, "rows")?;
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
