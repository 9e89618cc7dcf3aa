//! The unpaged rasterizer: the kernel's body over plain arrays, one device, no tessera node.
//! What every paged run must equal, pixel for pixel.

use tessera_core::sampler::{self, ChainTexels, Shape};
use tessera_core::{Filter, ObjectId, Sampler, Window};
use tessera_runtime::{Fault, RuntimeError};

use super::atlas::Atlas;
use super::raster::{Objects, Raster, RasterAccess};
use super::setup::setup;
use super::{Mesh, QuakeError, ViewProj, MAX_SCREEN_SIDE};
use crate::access::BufferAccess;

/// The ids the plain run gives its arrays.
pub const PLAIN: Objects = Objects {
    atlas: ObjectId(0),
    tris: ObjectId(1),
    bins: ObjectId(2),
    frame: ObjectId(3),
    access: ObjectId(4),
};

/// Plain arrays standing in for the objects.
pub struct PlainRaster<'a> {
    pub atlas: &'a [u8],
    pub atlas_width: u32,
    pub tris: &'a [u32],
    pub bins: &'a [u32],
    pub width: u32,
    /// RGBA8 rows from the lower left.
    pub frame: Vec<u8>,
    pub access: Vec<u32>,
    /// The atlas's mip chain and its shape, for a filtered kernel.
    pub chain: Option<(&'a [Vec<u32>], Shape)>,
}

fn out_of_range(what: &str, i: u64) -> Fault {
    Fault::Error(Box::new(RuntimeError::Config(format!(
        "plain rasterizer: {what} index {i} out of range"
    ))))
}

impl RasterAccess for PlainRaster<'_> {}

impl BufferAccess for PlainRaster<'_> {
    fn load_u32(&mut self, id: ObjectId, index: u32) -> Result<u32, Fault> {
        let b = if id == PLAIN.tris {
            self.tris
        } else {
            self.bins
        };
        b.get(index as usize)
            .copied()
            .ok_or_else(|| out_of_range("buffer", index as u64))
    }
    fn load_rgba8(&mut self, _id: ObjectId, x: u32, y: u32) -> Result<[u8; 4], Fault> {
        let i = (y as usize * self.atlas_width as usize + x as usize) * 4;
        self.atlas
            .get(i..i + 4)
            .map(|s| [s[0], s[1], s[2], s[3]])
            .ok_or_else(|| out_of_range("atlas", i as u64))
    }
    fn sample_window(
        &mut self,
        _id: ObjectId,
        s: Sampler,
        window: Window,
        uvl: (f32, f32, f32),
    ) -> Result<[u8; 4], Fault> {
        let Some((levels, shape)) = self.chain else {
            return Err(Fault::Error(Box::new(RuntimeError::Config(
                "plain rasterizer: a filtered sample without a mip chain".into(),
            ))));
        };
        let mut t = ChainTexels { levels, shape };
        let c = match sampler::sample(&mut t, shape, s, window, uvl) {
            Ok(c) => c,
            Err(e) => match e {},
        };
        Ok(c.to_le_bytes())
    }
    fn store_rgba8(&mut self, id: ObjectId, x: u32, y: u32, v: [u8; 4]) -> Result<(), Fault> {
        let i = y as usize * self.width as usize + x as usize;
        if id == PLAIN.access {
            *self
                .access
                .get_mut(i)
                .ok_or_else(|| out_of_range("pixel", i as u64))? = u32::from_le_bytes(v);
        } else {
            self.frame
                .get_mut(i * 4..i * 4 + 4)
                .ok_or_else(|| out_of_range("pixel", i as u64))?
                .copy_from_slice(&v);
        }
        Ok(())
    }
}

/// One frame rendered on plain arrays: RGBA8 rows from the lower left, and the access map.
pub fn render(
    mesh: &Mesh,
    atlas: &Atlas,
    vp: &ViewProj,
    width: u32,
    height: u32,
) -> Result<(Vec<u8>, Vec<u32>), QuakeError> {
    render_filtered(mesh, atlas, vp, width, height, None)
}

/// [`render`] with the paged renderer's filtering (`render::Filtering::filter`): the atlas's
/// chain is built from its texels here, as the paged renderer builds it, and sampled by the
/// same sampler. A border changes no sample, so there is none here.
pub fn render_filtered(
    mesh: &Mesh,
    atlas: &Atlas,
    vp: &ViewProj,
    width: u32,
    height: u32,
    filter: Option<Filter>,
) -> Result<(Vec<u8>, Vec<u32>), QuakeError> {
    check_screen(width, height)?;
    let texels = atlas.texels(&mesh.textures);
    let chain = match (filter, atlas.mip_desc(0)?.mip()) {
        (Some(_), Some((layout, addressing))) => {
            let shape = Shape {
                width: atlas.width,
                height: atlas.height,
                levels: layout.levels(),
                addressing,
            };
            Some((atlas.mip_chain(&texels, &layout), shape))
        }
        _ => None,
    };
    let s = setup(mesh, atlas, vp, width, height);
    let k = Raster {
        obj: PLAIN,
        width,
        height,
        tiles_x: s.tiles_x,
        filter,
        degrade: None,
    };
    let mut p = PlainRaster {
        atlas: &texels,
        atlas_width: atlas.width,
        tris: &s.tris,
        bins: &s.bins,
        width,
        frame: vec![0; (width * height * 4) as usize],
        access: vec![0; (width * height) as usize],
        chain: chain.as_ref().map(|(c, s)| (c.as_slice(), *s)),
    };
    for y in 0..height {
        for x in 0..width {
            match k.pixel(&mut p, x, y) {
                Ok(()) => {}
                Err(Fault::Error(e)) => return Err((*e).into()),
                Err(Fault::Miss | Fault::Suspend) => {
                    return Err(QuakeError::Config(
                        "plain rasterizer: a plain array missed".into(),
                    ))
                }
            }
        }
    }
    Ok((p.frame, p.access))
}

/// Screen sides from 1 to `MAX_SCREEN_SIDE`.
pub fn check_screen(width: u32, height: u32) -> Result<(), QuakeError> {
    if width == 0 || height == 0 || width > MAX_SCREEN_SIDE || height > MAX_SCREEN_SIDE {
        return Err(QuakeError::Config(format!(
            "screen {width}x{height}: each side must be 1 to {MAX_SCREEN_SIDE}"
        )));
    }
    Ok(())
}
