//! Texture images: decoding TGA and JPEG to RGBA8, and the checker placeholder.

use std::io::Cursor;

use image::{ImageFormat, ImageReader, Limits};

use crate::TextureImage;

/// Side of the checker placeholder that stands in for a texture with no image.
pub const PLACEHOLDER_SIZE: u32 = 64;

/// Larger than any Quake 3 texture, small enough that a hostile header cannot make the decoder
/// allocate gigabytes.
const MAX_SIDE: u32 = 8192;
const MAX_ALLOC: u64 = 512 << 20;

/// The image file names a shader name may have, in the order Quake 3 tries them. A name that
/// already ends in an image extension (some maps store `textures/x/y.tga`) is tried as is
/// first.
pub fn candidates(shader: &str) -> Vec<String> {
    let lower = shader.to_ascii_lowercase();
    let stem = lower
        .strip_suffix(".tga")
        .or_else(|| lower.strip_suffix(".jpg"))
        .unwrap_or(&lower);
    vec![format!("{stem}.tga"), format!("{stem}.jpg")]
}

/// Decodes a TGA or JPEG file (by `file_name`'s extension) to RGBA8; `None` if it is neither
/// or does not decode.
pub fn decode(name: &str, file_name: &str, bytes: &[u8]) -> Option<TextureImage> {
    let format = if file_name.ends_with(".jpg") {
        ImageFormat::Jpeg
    } else {
        ImageFormat::Tga
    };
    let mut reader = ImageReader::with_format(Cursor::new(bytes), format);
    let mut limits = Limits::default();
    limits.max_image_width = Some(MAX_SIDE);
    limits.max_image_height = Some(MAX_SIDE);
    limits.max_alloc = Some(MAX_ALLOC);
    reader.limits(limits);
    let rgba = reader.decode().ok()?.into_rgba8();
    Some(TextureImage {
        name: name.to_string(),
        width: rgba.width(),
        height: rgba.height(),
        rgba: rgba.into_raw(),
    })
}

/// A magenta and dark grey checker of 8 × 8 texel squares, the usual "missing texture" look.
pub fn placeholder(name: &str) -> TextureImage {
    let side = PLACEHOLDER_SIZE;
    let mut rgba = Vec::with_capacity((side * side * 4) as usize);
    for y in 0..side {
        for x in 0..side {
            let on = ((x / 8) + (y / 8)) % 2 == 0;
            rgba.extend_from_slice(if on {
                &[255, 0, 255, 255]
            } else {
                &[32, 32, 32, 255]
            });
        }
    }
    TextureImage {
        name: name.to_string(),
        width: side,
        height: side,
        rgba,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_strip_an_extension_and_lowercase() {
        assert_eq!(
            candidates("textures/Base/Wall"),
            ["textures/base/wall.tga", "textures/base/wall.jpg"]
        );
        assert_eq!(
            candidates("textures/a/b.jpg"),
            ["textures/a/b.tga", "textures/a/b.jpg"]
        );
    }

    #[test]
    fn garbage_does_not_decode_and_placeholder_is_a_checker() {
        assert_eq!(decode("x", "x.tga", b"not an image"), None);
        assert_eq!(decode("x", "x.jpg", &[0xff, 0xd8, 0xff]), None);
        let p = placeholder("x");
        assert_eq!(p.rgba.len(), 64 * 64 * 4);
        assert_eq!(&p.rgba[..4], &[255, 0, 255, 255]);
        assert_eq!(&p.rgba[8 * 4..8 * 4 + 4], &[32, 32, 32, 255]);
    }
}
