//! The address formulas of paper 3.3 and the global address space, against naive references.
//!
//! The references never use the formulas: the page grid is built by laying P×P tiles from the
//! lower left until they cover the texture, and the address space by scanning a `Vec<bool>` of
//! used pages.

use proptest::prelude::*;
use tessera_core::{AddressSpace, CoreError, GlobalPage, ObjectDesc, ObjectEntry, TexelFormat};

fn format() -> impl Strategy<Value = TexelFormat> {
    prop_oneof![
        Just(TexelFormat::R32Float),
        Just(TexelFormat::Rgba8Unorm),
        Just(TexelFormat::Rgba32Float),
    ]
}

/// One tile of the naive grid: its local page number and texel rectangle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Tile {
    page: u64,
    x0: u64,
    y0: u64,
    w: u64,
    h: u64,
    /// Column and row in the grid.
    col: u64,
    row: u64,
}

/// Tiles from the lower left, row by row, each row left to right, until the texture is covered.
fn naive_grid(w: u64, h: u64, p: u64) -> (Vec<Tile>, u64, u64) {
    let mut tiles = Vec::new();
    let (mut row, mut y0) = (0, 0);
    let mut cols = 0;
    while y0 < h {
        let (mut col, mut x0) = (0, 0);
        while x0 < w {
            tiles.push(Tile {
                page: tiles.len() as u64,
                x0,
                y0,
                w: (w - x0).min(p),
                h: (h - y0).min(p),
                col,
                row,
            });
            col += 1;
            x0 += p;
        }
        cols = col;
        row += 1;
        y0 += p;
    }
    (tiles, cols, row)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn every_texel_maps_to_its_tile(
        w in 1u32..=200,
        h in 1u32..=200,
        shift in 0u32..=9,
        fmt in format(),
        padding in 0u32..=5,
        slot in 0u32..1000,
    ) {
        let p = 1u32 << shift;
        let desc = ObjectDesc::texture(w, h, fmt, p).unwrap();
        // An object in front, so the texture's page offset is not zero.
        let mut space = AddressSpace::new();
        if padding > 0 {
            space.create(ObjectDesc::texture(padding, 1, fmt, 1).unwrap()).unwrap();
        }
        let id = space.create(desc).unwrap().id;
        let entry: ObjectEntry = *space.get(id).unwrap();
        prop_assert_eq!(entry.page_offset, padding as u64);

        let (w, h, p) = (w as u64, h as u64, p as u64);
        let (tiles, cols, rows) = naive_grid(w, h, p);
        prop_assert_eq!(desc.pages_xy(), (cols, rows));
        prop_assert_eq!(desc.page_count(), tiles.len() as u64);
        prop_assert_eq!(entry.pages(), padding as u64..padding as u64 + tiles.len() as u64);
        prop_assert_eq!(desc.slot_texels(), p * p);
        prop_assert_eq!(desc.page_bytes(), p * p * fmt.bytes() as u64);

        // Each texel's tile and offset, by painting the tiles: every texel exactly once.
        let mut owner: Vec<Option<(u64, u64, u64)>> = vec![None; (w * h) as usize];
        for t in &tiles {
            prop_assert_eq!(desc.page_rect(t.page), (t.x0, t.y0, t.w, t.h));
            // Partial tiles only on the right and top edges.
            prop_assert!(t.w == p || t.col == cols - 1, "narrow tile {:?} not on the right", t);
            prop_assert!(t.h == p || t.row == rows - 1, "short tile {:?} not on the top", t);
            let mut addresses = Vec::with_capacity((t.w * t.h) as usize);
            for y in t.y0..t.y0 + t.h {
                for x in t.x0..t.x0 + t.w {
                    let cell = &mut owner[(y * w + x) as usize];
                    prop_assert!(cell.is_none(), "texel ({}, {}) in two tiles", x, y);
                    *cell = Some((t.page, x - t.x0, y - t.y0));
                    let a = desc.texel_address(slot, desc.texel_offset(x, y));
                    let base = slot as u64 * desc.slot_texels();
                    prop_assert!((base..base + desc.slot_texels()).contains(&a));
                    addresses.push(a);
                }
            }
            addresses.sort_unstable();
            addresses.dedup();
            prop_assert_eq!(addresses.len() as u64, t.w * t.h, "two texels of page {} share a slot address", t.page);
        }
        for y in 0..h {
            for x in 0..w {
                let (page, ox, oy) = owner[(y * w + x) as usize].expect("every texel is in a tile");
                prop_assert_eq!(desc.local_page(x, y), page);
                prop_assert_eq!(desc.texel_offset(x, y), (ox, oy));
                prop_assert_eq!(entry.global_page(x, y), Ok(GlobalPage(entry.page_offset + page)));
                prop_assert_eq!(desc.texel_address(slot, (ox, oy)), slot as u64 * p * p + oy * p + ox);
            }
        }
        // Just outside the texture is refused, not wrapped.
        let out = |x, y| Err(CoreError::OutOfRange { object: entry.id, x, y, width: w, height: h, buffer: false });
        prop_assert_eq!(entry.global_page(w, 0), out(w, 0));
        prop_assert_eq!(entry.global_page(0, h), out(0, h));
    }
}

#[derive(Debug, Clone)]
enum Op {
    Create {
        w: u32,
        h: u32,
        shift: u32,
    },
    /// Frees the live object at this index (modulo the count) of the live list.
    Free(usize),
    /// Frees an object that is already gone, if there is one.
    FreeAgain(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (1u32..=48, 1u32..=48, 3u32..=5).prop_map(|(w, h, shift)| Op::Create { w, h, shift }),
        2 => any::<usize>().prop_map(Op::Free),
        1 => any::<usize>().prop_map(Op::FreeAgain),
    ]
}

/// First fit over the naive page map: the lowest start of `n` free pages below the end, else
/// the end.
fn naive_first_fit(used: &[bool], n: u64) -> u64 {
    let n = n as usize;
    (0..used.len())
        .find(|&s| s + n <= used.len() && used[s..s + n].iter().all(|u| !u))
        .unwrap_or(used.len()) as u64
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn create_and_free_match_a_page_map(ops in proptest::collection::vec(op(), 1..60)) {
        let mut space = AddressSpace::new();
        // The naive model: one flag per page below the end, and the live and freed objects.
        let mut used: Vec<bool> = Vec::new();
        let mut live: Vec<ObjectEntry> = Vec::new();
        let mut freed: Vec<ObjectEntry> = Vec::new();
        for op in ops {
            match op {
                Op::Create { w, h, shift } => {
                    let desc = ObjectDesc::texture(w, h, TexelFormat::R32Float, 1 << shift).unwrap();
                    let n = desc.page_count();
                    let expected = naive_first_fit(&used, n);
                    let e = space.create(desc).unwrap();
                    prop_assert_eq!(e.page_offset, expected, "not first fit");
                    prop_assert_eq!(e.desc, desc);
                    prop_assert!(
                        live.iter().chain(&freed).all(|o| o.id != e.id),
                        "object id {} reused", e.id
                    );
                    let end = (e.page_offset + n) as usize;
                    if used.len() < end {
                        used.resize(end, false);
                    }
                    for u in &mut used[e.page_offset as usize..end] {
                        prop_assert!(!*u, "object {} overlaps a live object", e.id);
                        *u = true;
                    }
                    live.push(e);
                }
                Op::Free(i) if !live.is_empty() => {
                    let e = live.swap_remove(i % live.len());
                    prop_assert_eq!(space.free(e.id), Ok(e));
                    for u in &mut used[e.pages().start as usize..e.pages().end as usize] {
                        *u = false;
                    }
                    while used.last() == Some(&false) {
                        used.pop();
                    }
                    freed.push(e);
                }
                Op::FreeAgain(i) if !freed.is_empty() => {
                    let e = freed[i % freed.len()];
                    prop_assert_eq!(space.free(e.id), Err(CoreError::DoubleFree(e.id)));
                }
                Op::Free(_) | Op::FreeAgain(_) => {}
            }

            let highest = live.iter().map(|e| e.pages().end).max().unwrap_or(0);
            prop_assert_eq!(space.page_count(), highest);
            prop_assert_eq!(used.len() as u64, highest);
            for e in &live {
                prop_assert_eq!(space.get(e.id), Ok(e));
            }
            for e in &freed {
                prop_assert_eq!(space.get(e.id), Err(CoreError::UnknownObject(e.id)));
            }
            let mut listed: Vec<_> = space.live_objects().map(|e| e.id).collect();
            let mut expected: Vec<_> = live.iter().map(|e| e.id).collect();
            listed.sort();
            expected.sort();
            prop_assert_eq!(listed, expected);
            for page in 0..highest + 2 {
                let naive = live
                    .iter()
                    .find(|e| e.pages().contains(&page))
                    .map(|e| (e.id, page - e.page_offset));
                let got = space.object_of(GlobalPage(page)).map(|(e, local)| (e.id, local));
                prop_assert_eq!(got, naive, "object_of(page{})", page);
            }
        }
    }
}
