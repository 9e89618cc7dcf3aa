//! `run boiling`'s `frames.gif`: the display texture sampled every few frames, so that a run shows the
//! simulation evolving rather than its last frame alone.

use std::cell::RefCell;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use image::codecs::gif::{GifEncoder, Repeat};
use image::imageops::{self, FilterType};
use image::{Delay, Frame, RgbaImage};

/// Why the GIF could not be written.
#[derive(Debug, thiserror::Error)]
pub enum AnimationError {
    #[error("cannot write {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("a {w}x{h} frame needs {bytes} bytes")]
    FrameSize { w: u32, h: u32, bytes: u64 },
}

type Result<T, E = AnimationError> = std::result::Result<T, E>;

fn write_error(
    path: &Path,
) -> impl FnOnce(Box<dyn std::error::Error + Send + Sync>) -> AnimationError + '_ {
    move |source| AnimationError::Write {
        path: path.to_path_buf(),
        source,
    }
}

/// Wider fields are scaled down to this side: an 8192² GIF frame would take the colour
/// quantiser seconds per frame and the file hundreds of MiB, and shows no more of the boiling.
pub const MAX_SIDE: u32 = 512;
/// 12.5 GIF frames per second: a few dozen samples play in a few seconds.
const DELAY_MS: u32 = 80;
/// NeuQuant's sampling step (1 best, 30 fastest). The display's smooth colour ramp survives 10,
/// and it quantises a 512² frame several times faster than 1.
const SPEED: i32 = 10;

/// The file, shared with the encoder: the encoder writes the GIF trailer only when dropped and
/// has no way to hand its writer back, so the file is kept here to flush it and see the error.
#[derive(Clone)]
struct Shared(Rc<RefCell<BufWriter<File>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.borrow_mut().flush()
    }
}

/// Writes the frames of an animated GIF as they are sampled, so a long run never holds them
/// all in memory.
pub struct Animation {
    path: PathBuf,
    file: Shared,
    encoder: GifEncoder<Shared>,
    frames: u32,
}

impl Animation {
    pub fn create(path: &Path) -> Result<Self> {
        let file = File::create(path).map_err(|e| write_error(path)(e.into()))?;
        let file = Shared(Rc::new(RefCell::new(BufWriter::new(file))));
        let mut encoder = GifEncoder::new_with_speed(file.clone(), SPEED);
        encoder
            .set_repeat(Repeat::Infinite)
            .map_err(|e| write_error(path)(e.into()))?;
        Ok(Animation {
            path: path.to_path_buf(),
            file,
            encoder,
            frames: 0,
        })
    }

    /// Adds a frame from RGBA8 rows stored from the lower left, as the display texture holds
    /// them.
    pub fn push(&mut self, w: u32, h: u32, rgba_lower_left: &[u8]) -> Result<()> {
        let img = RgbaImage::from_raw(w, h, rgba_lower_left.to_vec()).ok_or(
            AnimationError::FrameSize {
                w,
                h,
                bytes: w as u64 * h as u64 * 4,
            },
        )?;
        let mut img = imageops::flip_vertical(&img);
        if w.max(h) > MAX_SIDE {
            let scale = MAX_SIDE as f64 / w.max(h) as f64;
            let (sw, sh) = (
                ((w as f64 * scale).round() as u32).max(1),
                ((h as f64 * scale).round() as u32).max(1),
            );
            img = imageops::resize(&img, sw, sh, FilterType::Triangle);
        }
        let delay = Delay::from_numer_denom_ms(DELAY_MS, 1);
        self.encoder
            .encode_frame(Frame::from_parts(img, 0, 0, delay))
            .map_err(|e| write_error(&self.path)(e.into()))?;
        self.frames += 1;
        Ok(())
    }

    /// Ends the GIF and flushes the file; returns its path and how many frames it holds.
    pub fn finish(self) -> Result<(PathBuf, u32)> {
        let Animation {
            path,
            mut file,
            encoder,
            frames,
        } = self;
        drop(encoder);
        file.flush().map_err(|e| write_error(&path)(e.into()))?;
        Ok((path, frames))
    }
}

/// Whether frame `n` (1-based, warm-up included) of `total` is sampled when sampling every
/// `every`th frame: the multiples of `every`, and the last frame so that the animation ends on
/// frame.png's picture.
pub fn sampled(n: u32, total: u32, every: u32) -> bool {
    every != 0 && (n.is_multiple_of(every) || n == total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_every_kth_frame_and_the_last() {
        let picked: Vec<u32> = (1..=25).filter(|&n| sampled(n, 25, 10)).collect();
        assert_eq!(picked, vec![10, 20, 25]);
        let picked: Vec<u32> = (1..=20).filter(|&n| sampled(n, 20, 10)).collect();
        assert_eq!(picked, vec![10, 20]);
        assert!((1..=20).all(|n| !sampled(n, 20, 0)));
    }

    #[test]
    fn frames_are_flipped_upright_and_wide_ones_scaled_down() {
        use image::AnimationDecoder;

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.gif");
        let (w, h) = (2 * MAX_SIDE, 4);
        // Bottom row (stored first) white, the rest black.
        let mut rgba = vec![0u8; (w * h * 4) as usize];
        for px in rgba.chunks_exact_mut(4) {
            px[3] = 255;
        }
        rgba[..(w * 4) as usize].fill(255);
        let mut a = Animation::create(&path).unwrap();
        a.push(w, h, &rgba).unwrap();
        a.push(w, h, &rgba).unwrap();
        assert_eq!(a.finish().unwrap().1, 2);
        let file = std::io::BufReader::new(File::open(&path).unwrap());
        let frames = image::codecs::gif::GifDecoder::new(file)
            .unwrap()
            .into_frames()
            .collect_frames()
            .unwrap();
        assert_eq!(frames.len(), 2);
        let img = frames[0].buffer();
        assert_eq!(img.dimensions(), (MAX_SIDE, 2));
        assert!(img.get_pixel(7, 1).0[0] > 100, "the bottom row is white");
        assert!(img.get_pixel(7, 0).0[0] < 100, "the top row is dark");
    }
}
