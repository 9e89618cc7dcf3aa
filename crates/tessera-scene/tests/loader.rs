//! The loader end to end on generated data: generated scene → BSP + pk3 → loader → the same
//! scene; typed errors for bad input. No test here needs OpenArena's files except the
//! `#[ignore]`d one at the end.

use std::io::Cursor;

use image::{ImageFormat, RgbaImage};
use tessera_scene::bsp::{self, BspError, Lump, FACE_LEN, HEADER_LEN};
use tessera_scene::{pk3, CameraPath, Pak, Scene, SceneError, TextureImage, PLACEHOLDER_SIZE};

fn encode(t: &TextureImage, format: ImageFormat) -> Vec<u8> {
    let img = RgbaImage::from_raw(t.width, t.height, t.rgba.clone()).unwrap();
    let mut out = Cursor::new(Vec::new());
    if format == ImageFormat::Jpeg {
        image::DynamicImage::ImageRgba8(img)
            .to_rgb8()
            .write_to(&mut out, format)
            .unwrap();
    } else {
        img.write_to(&mut out, format).unwrap();
    }
    out.into_inner()
}

/// The scene as a pk3: `maps/<map>.bsp` and each texture as a TGA, except those in `skip`
/// (left out) and `jpeg` (written as JPEG).
fn pk3_of(scene: &Scene, map: &str, skip: &[usize], jpeg: &[usize]) -> Vec<u8> {
    let mut files = vec![(format!("maps/{map}.bsp"), bsp::write(scene))];
    for (i, t) in scene.textures.iter().enumerate() {
        if skip.contains(&i) {
            continue;
        }
        let (ext, format) = if jpeg.contains(&i) {
            ("jpg", ImageFormat::Jpeg)
        } else {
            ("tga", ImageFormat::Tga)
        };
        files.push((format!("{}.{ext}", t.name), encode(t, format)));
    }
    pk3::write(&files).unwrap()
}

#[test]
fn generated_scene_round_trips_through_bsp_and_pk3() {
    for n in [0, 3] {
        let scene = Scene::generated(n);
        let mut pak = Pak::from_bytes(vec![pk3_of(&scene, "gen", &[], &[])]).unwrap();
        let mut loaded = Scene::load_from_pak(&mut pak, "gen").unwrap();
        assert_eq!(loaded.name, "gen");
        loaded.name = scene.name.clone();
        // Field by field first, for a readable failure, then the whole.
        assert_eq!(loaded.vertices, scene.vertices);
        assert_eq!(loaded.triangles, scene.triangles);
        for (a, b) in loaded.textures.iter().zip(&scene.textures) {
            assert_eq!((&a.name, a.width, a.height), (&b.name, b.width, b.height));
            let first = a.rgba.iter().zip(&b.rgba).position(|(x, y)| x != y);
            assert_eq!(first, None, "{}: first different byte", a.name);
        }
        assert_eq!(loaded.textures, scene.textures);
        assert_eq!(loaded.lightmaps, scene.lightmaps);
        assert_eq!(loaded.spawns, scene.spawns);
        assert_eq!(loaded, scene);
    }
}

/// A vertex coordinate that is not a finite number fails the parse, for every consumer alike:
/// `scene info` had printed bounds that skipped it while the renderers refused the map.
#[test]
fn a_vertex_that_is_not_finite_fails_the_load() {
    for bad in [f32::NAN, f32::INFINITY] {
        for coordinate in [0, 4] {
            let mut scene = Scene::generated(0);
            match coordinate {
                0 => scene.vertices[5].pos[1] = bad,
                _ => scene.vertices[5].uv[0] = bad,
            }
            let e = bsp::parse(&bsp::write(&scene)).unwrap_err();
            assert!(matches!(e, BspError::NotFinite { vertex: 5 }), "{e}");
        }
    }
}

/// A finite position beyond the world's limit fails the load too: ±3e38 had overflowed the
/// bounds' span to infinity and the orbiting camera's centre to NaN, and every renderer drew
/// nothing without a word. A position at the limit loads.
#[test]
fn a_vertex_outside_the_world_fails_the_load() {
    for (at, fails) in [
        (3e38, true),
        (-3e38, true),
        (bsp::WORLD_LIMIT * 2.0, true),
        (bsp::WORLD_LIMIT, false),
    ] {
        let mut scene = Scene::generated(0);
        scene.vertices[7].pos[2] = at;
        let got = bsp::parse(&bsp::write(&scene));
        match fails {
            true => assert!(
                matches!(got, Err(BspError::OutsideWorld { vertex: 7 })),
                "{at}: {got:?}"
            ),
            false => {
                let b = got.unwrap();
                assert!(b
                    .vertices
                    .iter()
                    .all(|v| v.pos.iter().all(|c| c.is_finite())));
            }
        }
    }
}

/// A map whose images are mostly absent (the maps package without the textures package) is
/// marked, and runs warn with the count: its atlas and requests are not the map's. A few
/// missing images (shader-script names) are not.
#[test]
fn a_map_of_mostly_placeholders_is_marked() {
    let scene = Scene::generated(2);
    let n = scene.textures.len();
    assert!(n >= 3, "{n}");
    for (skip, marked) in [
        (vec![], false),
        (vec![0], false),
        ((0..n).collect::<Vec<_>>(), true),
        ((0..n / 2 + 1).collect(), true),
    ] {
        let mut pak = Pak::from_bytes(vec![pk3_of(&scene, "m", &skip, &[])]).unwrap();
        let loaded = Scene::load_from_pak(&mut pak, "m").unwrap();
        assert_eq!(loaded.missing_textures.len(), skip.len());
        assert_eq!(loaded.mostly_placeholders(), marked, "{skip:?}");
        let warning = loaded.placeholder_warning();
        assert_eq!(warning.is_some(), marked);
        if let Some(w) = warning {
            assert!(
                w.starts_with(&format!("{} of the {n} textures of m", skip.len())),
                "{w}"
            );
            assert!(w.contains("openarena-data"), "{w}");
        }
    }
}

#[test]
fn jpeg_textures_decode_and_missing_ones_get_a_placeholder() {
    let scene = Scene::generated(2);
    // Texture 1 (128 × 64) as JPEG, texture 2 left out.
    let mut pak = Pak::from_bytes(vec![pk3_of(&scene, "gen", &[2], &[1])]).unwrap();
    let loaded = Scene::load_from_pak(&mut pak, "gen").unwrap();
    assert_eq!(loaded.missing_textures, [2]);
    let placeholder = &loaded.textures[2];
    assert_eq!(
        (placeholder.width, placeholder.height),
        (PLACEHOLDER_SIZE, PLACEHOLDER_SIZE)
    );
    assert_eq!(placeholder.name, scene.textures[2].name);
    let (jpg, orig) = (&loaded.textures[1], &scene.textures[1]);
    assert_eq!((jpg.width, jpg.height), (128, 64));
    // Lossy, but close on average and opaque.
    let diff: u64 = jpg
        .rgba
        .iter()
        .zip(&orig.rgba)
        .map(|(a, b)| a.abs_diff(*b) as u64)
        .sum();
    assert!(
        diff / (jpg.rgba.len() as u64) < 12,
        "mean difference {}",
        diff / jpg.rgba.len() as u64
    );
    assert!(jpg.rgba.chunks_exact(4).all(|p| p[3] == 255));
    assert_eq!(loaded.textures[0], scene.textures[0]);
    assert_eq!(loaded.triangles, scene.triangles);
}

#[test]
fn directory_search_path_later_pk3_wins() {
    let dir = tempfile::tempdir().unwrap();
    let scene = Scene::generated(1);
    // pak0 has the map with every texture wrong (all from another scene's first texture);
    // pak1 overrides the floor texture only.
    let wrong = Scene::generated(1).textures[4].clone();
    let mut files = vec![("maps/room.bsp".to_string(), bsp::write(&scene))];
    for t in &scene.textures {
        files.push((
            format!("{}.tga", t.name),
            encode(
                &TextureImage {
                    name: t.name.clone(),
                    ..wrong.clone()
                },
                ImageFormat::Tga,
            ),
        ));
    }
    std::fs::write(dir.path().join("pak0.pk3"), pk3::write(&files).unwrap()).unwrap();
    let floor = &scene.textures[0];
    let over = pk3::write(&[(
        format!("{}.TGA", floor.name.to_uppercase()),
        encode(floor, ImageFormat::Tga),
    )])
    .unwrap();
    std::fs::write(dir.path().join("pak1.pk3"), over).unwrap();
    std::fs::write(dir.path().join("readme.txt"), "not a pk3").unwrap();

    let loaded = Scene::load_map(dir.path(), "room").unwrap();
    assert_eq!(loaded.textures[0], scene.textures[0]);
    assert_eq!(loaded.textures[1].rgba, wrong.rgba);
    assert_eq!(loaded.triangles, scene.triangles);
}

#[test]
fn missing_directory_empty_directory_missing_map_and_corrupt_pk3_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let gone = dir.path().join("nope");
    let err = Scene::load_map(&gone, "x").unwrap_err();
    assert!(matches!(err, SceneError::PakDirMissing { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("apt-get install openarena-data openarena-081-maps"),
        "{err}"
    );
    // A file where the directory should be is said to be one, not to be missing.
    let other = tempfile::tempdir().unwrap();
    let file = other.path().join("pak0.pk3");
    std::fs::write(&file, b"not a folder").unwrap();
    let err = Scene::load_map(&file, "x").unwrap_err();
    assert!(matches!(err, SceneError::PakDirIsAFile { .. }), "{err}");
    assert!(
        err.to_string().contains("is a file, not a directory"),
        "{err}"
    );

    let err = Scene::load_map(dir.path(), "x").unwrap_err();
    assert!(matches!(err, SceneError::NoPaks { .. }), "{err}");

    let maps: Vec<(String, Vec<u8>)> = (0..12)
        .map(|i| (format!("maps/m{i:02}.bsp"), vec![0u8]))
        .collect();
    std::fs::write(dir.path().join("a.pk3"), pk3::write(&maps).unwrap()).unwrap();
    let err = Scene::load_map(dir.path(), "x").unwrap_err();
    let SceneError::MapNotFound {
        available, total, ..
    } = &err
    else {
        panic!("{err}")
    };
    assert_eq!(available.len(), 8);
    assert_eq!((available[0].as_str(), *total), ("m00", 12));
    assert!(err.to_string().contains("m00, m01"), "{err}");
    // The map exists but is one zero byte.
    let err = Scene::load_map(dir.path(), "m03").unwrap_err();
    assert!(
        matches!(
            err,
            SceneError::Bsp {
                error: BspError::Truncated { len: 1 },
                ..
            }
        ),
        "{err}"
    );

    std::fs::write(dir.path().join("b.pk3"), b"PK\x03\x04garbage").unwrap();
    let err = Scene::load_map(dir.path(), "m00").unwrap_err();
    assert!(matches!(err, SceneError::Zip { .. }), "{err}");
}

// Byte offsets into a file written by `bsp::write` (layout in bsp.rs).
fn dir_entry(lump: Lump) -> usize {
    8 + lump.index() * 8
}

fn read_i32(b: &[u8], at: usize) -> i32 {
    i32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn set_i32(b: &mut [u8], at: usize, v: i32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// Offset of field `field` (in 4-byte words) of face `face`.
fn face_field(b: &[u8], face: usize, field: usize) -> usize {
    read_i32(b, dir_entry(Lump::Faces)) as usize + face * FACE_LEN + field * 4
}

#[test]
fn corrupt_bsp_fields_are_typed_errors() {
    let good = bsp::write(&Scene::generated(1));
    assert!(bsp::parse(&good).is_ok());
    let with = |edit: &dyn Fn(&mut Vec<u8>)| {
        let mut b = good.clone();
        edit(&mut b);
        bsp::parse(&b).unwrap_err()
    };
    assert_eq!(
        bsp::parse(&good[..100]).unwrap_err(),
        BspError::Truncated { len: 100 }
    );
    assert!(matches!(with(&|b| b[0] = b'V'), BspError::BadMagic { .. }));
    assert_eq!(
        with(&|b| set_i32(b, 4, 47)),
        BspError::BadVersion { found: 47 }
    );
    // A lump reaching past the end of the file, or with a negative offset.
    let e = with(&|b| {
        let len = b.len() as i32;
        set_i32(b, dir_entry(Lump::Visdata) + 4, len)
    });
    assert!(
        matches!(
            e,
            BspError::LumpOutOfRange {
                lump: Lump::Visdata,
                ..
            }
        ),
        "{e}"
    );
    let e = with(&|b| set_i32(b, dir_entry(Lump::Planes), -4));
    assert!(
        matches!(
            e,
            BspError::LumpOutOfRange {
                lump: Lump::Planes,
                ..
            }
        ),
        "{e}"
    );
    let e = with(&|b| set_i32(b, dir_entry(Lump::Vertices), i32::MAX));
    assert!(
        matches!(
            e,
            BspError::LumpOutOfRange {
                lump: Lump::Vertices,
                ..
            }
        ),
        "{e}"
    );
    // Cut the file before the lightmaps end: the truncation shows as a lump out of range.
    let e = bsp::parse(&good[..good.len() - 8]).unwrap_err();
    assert!(matches!(e, BspError::LumpOutOfRange { .. }), "{e}");
    // A lump length that is not a whole number of records.
    let e = with(&|b| {
        let at = dir_entry(Lump::Faces) + 4;
        let l = read_i32(b, at);
        set_i32(b, at, l - 1)
    });
    assert_eq!(
        e,
        BspError::BadLumpLength {
            lump: Lump::Faces,
            length: 13 * FACE_LEN + FACE_LEN - 1,
            record: FACE_LEN
        }
    );
    // Face fields: 0 texture, 2 type, 3/4 vertex range, 5/6 meshvert range, 7 lightmap, 24/25 patch size.
    let field = |face: usize, f: usize, v: i32| {
        move |b: &mut Vec<u8>| {
            let at = face_field(b, face, f);
            set_i32(b, at, v)
        }
    };
    assert_eq!(
        with(&field(2, 0, 5)),
        BspError::IndexOutOfRange {
            face: 2,
            what: "texture",
            index: 5,
            len: 5
        }
    );
    assert_eq!(
        with(&field(2, 0, -1)),
        BspError::IndexOutOfRange {
            face: 2,
            what: "texture",
            index: -1,
            len: 5
        }
    );
    assert_eq!(
        with(&field(3, 2, 9)),
        BspError::BadFaceType { face: 3, kind: 9 }
    );
    assert!(matches!(
        with(&field(0, 3, -1)),
        BspError::IndexOutOfRange {
            face: 0,
            what: "first vertex",
            ..
        }
    ));
    assert!(matches!(
        with(&field(0, 4, 1 << 30)),
        BspError::IndexOutOfRange {
            face: 0,
            what: "end of vertex range",
            ..
        }
    ));
    assert!(matches!(
        with(&field(0, 6, -3)),
        BspError::IndexOutOfRange {
            face: 0,
            what: "end of meshvert range",
            ..
        }
    ));
    assert!(matches!(
        with(&field(0, 6, 5)),
        BspError::BadMeshvertCount { face: 0, count: 5 }
    ));
    assert!(matches!(
        with(&field(0, 7, 2)),
        BspError::IndexOutOfRange {
            face: 0,
            what: "lightmap",
            index: 2,
            len: 2
        }
    ));
    // A face's vertex range shrunk below what its meshverts use.
    assert!(matches!(
        with(&field(0, 4, 2)),
        BspError::IndexOutOfRange {
            face: 0,
            what: "meshvert offset",
            ..
        }
    ));
    // A meshvert pointing outside its face's vertices.
    let e = with(&|b| {
        let at = read_i32(b, dir_entry(Lump::Meshverts)) as usize;
        set_i32(b, at, 4)
    });
    assert_eq!(
        e,
        BspError::IndexOutOfRange {
            face: 0,
            what: "meshvert offset",
            index: 4,
            len: 4
        }
    );
    // A patch whose size does not match its 4 vertices, or has an even side.
    assert!(matches!(
        with(&|b| {
            field(0, 2, 2)(b);
            field(0, 24, 3)(b);
            field(0, 25, 3)(b)
        }),
        BspError::BadPatch { face: 0, .. }
    ));
    assert!(matches!(
        with(&|b| {
            field(0, 2, 2)(b);
            field(0, 24, 2)(b);
            field(0, 25, 2)(b)
        }),
        BspError::BadPatch { face: 0, .. }
    ));
    // Entities text that does not parse.
    let e = with(&|b| {
        let at = read_i32(b, dir_entry(Lump::Entities)) as usize;
        b[at] = b'x'
    });
    assert!(matches!(&e, BspError::Entities(x) if x.offset == 0), "{e}");
}

#[test]
fn truncations_and_byte_flips_never_panic() {
    let good = bsp::write(&Scene::generated(0));
    for len in (0..good.len()).step_by(7) {
        let _ = bsp::parse(&good[..len]);
    }
    // A fixed linear congruential generator: the same flips every run.
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) as usize
    };
    let mut accepted = 0;
    for _ in 0..2000 {
        let mut b = good.clone();
        for _ in 0..1 + next() % 4 {
            // Mostly the header and faces, where flips reach the checks.
            let at = if next() % 2 == 0 {
                next() % HEADER_LEN
            } else {
                next() % b.len()
            };
            b[at] ^= 1 << (next() % 8);
        }
        if let Ok(parsed) = bsp::parse(&b) {
            accepted += 1;
            let scene = Scene::from_bsp(&parsed, "flipped", |_| Ok(None)).unwrap();
            assert!(scene
                .triangles
                .iter()
                .flat_map(|t| t.v)
                .all(|v| (v as usize) < scene.vertices.len()));
        }
    }
    assert!(
        accepted > 0,
        "no flipped file parsed: the test reaches no loading"
    );
}

/// Needs `apt-get install openarena-data openarena-081-maps`.
#[test]
#[ignore]
fn real_openarena_map_loads_with_plausible_counts() {
    let scene = Scene::load_map(tessera_scene::DEFAULT_PAK_DIR, "oa_dm1").unwrap();
    assert!(
        scene.vertices.len() > 1000 && scene.triangles.len() > 1000,
        "{} {}",
        scene.vertices.len(),
        scene.triangles.len()
    );
    assert!(scene.textures.len() > 10 && scene.missing_textures.len() < scene.textures.len() / 2);
    assert!(!scene.lightmaps.is_empty() && scene.spawns.len() >= 2);
    assert!(scene
        .triangles
        .iter()
        .flat_map(|t| t.v)
        .all(|v| (v as usize) < scene.vertices.len()));
    let path = CameraPath::through_spawns(&scene, CameraPath::DEFAULT_FRAMES);
    assert_eq!(path.frames.len(), 500);
    let (lo, hi) = scene.bounds;
    for c in &path.frames {
        assert!(
            (0..3).all(|k| c.eye[k] >= lo[k] - 64.0 && c.eye[k] <= hi[k] + 64.0),
            "{:?}",
            c.eye
        );
    }
}

/// Needs the Debian packages too. Every map in OpenArena's pak set loads; `--nocapture` prints
/// each one's counts and load time.
#[test]
#[ignore]
fn every_openarena_map_loads() {
    let mut pak = Pak::open_dir(std::path::Path::new(tessera_scene::DEFAULT_PAK_DIR)).unwrap();
    let maps = pak.maps();
    assert!(maps.len() >= 20, "{maps:?}");
    for map in maps {
        let start = std::time::Instant::now();
        let scene = Scene::load_from_pak(&mut pak, &map).unwrap_or_else(|e| panic!("{map}: {e}"));
        println!(
            "{map}: {} vertices, {} triangles, {} textures ({} missing), {} lightmaps, {} spawns, {:.3} s",
            scene.vertices.len(),
            scene.triangles.len(),
            scene.textures.len(),
            scene.missing_textures.len(),
            scene.lightmaps.len(),
            scene.spawns.len(),
            start.elapsed().as_secs_f64()
        );
        assert!(!scene.triangles.is_empty(), "{map}");
        assert!(scene
            .triangles
            .iter()
            .flat_map(|t| t.v)
            .all(|v| (v as usize) < scene.vertices.len()));
    }
}

/// A scene `bsp::write` must renumber nothing for: surfaces with gaps (no triangle uses
/// surface 1) and surfaces sharing vertices. The loader copies each face's vertex range, so
/// shared vertices come back duplicated: compare triangles by the vertices they resolve to.
#[test]
fn writer_keeps_surface_numbers_and_shared_vertices_resolve_alike() {
    let base = Scene::generated(0);
    let mut scene = base.clone();
    // A fixed linear congruential generator: the same scene every run.
    let mut x: u64 = 7;
    let mut next = |m: u32| {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((x >> 33) as u32) % m
    };
    let n = scene.vertices.len() as u32;
    scene.triangles = (0..40)
        .map(|i| {
            let surface = [0, 2, 3, 7][i % 4];
            tessera_scene::Triangle {
                v: [next(n), next(n), next(n)],
                // Every texture used, so the loader keeps all four at their indices.
                texture: (i % 4) as u32,
                lightmap: if surface == 3 {
                    None
                } else {
                    Some(surface % 2)
                },
                surface,
            }
        })
        .collect();
    scene.triangles.sort_by_key(|t| t.surface);
    let parsed = bsp::parse(&bsp::write(&scene)).unwrap();
    // Surfaces 0..=7: the unused ones are empty faces.
    assert_eq!(parsed.faces.len(), 8);
    assert_eq!(parsed.faces[1].n_meshverts, 0);
    let loaded = Scene::from_bsp(&parsed, "x", |_| Ok(None)).unwrap();
    assert_eq!(loaded.triangles.len(), scene.triangles.len());
    for (a, b) in loaded.triangles.iter().zip(&scene.triangles) {
        assert_eq!(
            (a.texture, a.lightmap, a.surface),
            (b.texture, b.lightmap, b.surface)
        );
        let va = a.v.map(|i| loaded.vertices[i as usize]);
        let vb = b.v.map(|i| scene.vertices[i as usize]);
        assert_eq!(va, vb);
    }
}
