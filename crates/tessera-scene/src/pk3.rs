//! The pak set: pk3 files (zips) searched as one file system, and a pk3 writer for tests.
//!
//! As in Quake 3, names are matched without regard to ASCII case, and when several pk3 files
//! hold the same name the one opened last wins; [`Pak::open_dir`] opens a directory's `*.pk3`
//! files in alphabetical order, so `pak6.pk3` overrides `pak0.pk3`.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Cursor, Read, Seek, Write};
use std::path::{Path, PathBuf};

use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipArchive, ZipWriter};

use crate::SceneError;

/// The largest entry read: far above any Quake 3 file (maps are a few MiB), low enough that a
/// forged size cannot exhaust memory.
pub const MAX_ENTRY_BYTES: u64 = 256 << 20;

trait ReadSeek: Read + Seek + Send {}
impl<T: Read + Seek + Send> ReadSeek for T {}

struct Archive {
    /// A path, or `<memory N>` for archives given as bytes.
    label: String,
    zip: ZipArchive<Box<dyn ReadSeek>>,
}

/// A set of pk3 files searched as one file system.
pub struct Pak {
    archives: Vec<Archive>,
    /// Lower-case name → (archive, entry index, name as stored); the last archive wins.
    index: HashMap<String, (usize, usize, String)>,
}

impl std::fmt::Debug for Pak {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pak")
            .field(
                "archives",
                &self.archives.iter().map(|a| &a.label).collect::<Vec<_>>(),
            )
            .field("entries", &self.index.len())
            .finish()
    }
}

impl Pak {
    /// Opens every `*.pk3` in `dir` (not recursive), in alphabetical order, later ones
    /// overriding earlier ones.
    pub fn open_dir(dir: &Path) -> Result<Pak, SceneError> {
        if dir.is_file() {
            return Err(SceneError::PakDirIsAFile {
                dir: dir.to_path_buf(),
            });
        }
        if !dir.is_dir() {
            return Err(SceneError::PakDirMissing {
                dir: dir.to_path_buf(),
            });
        }
        let io = |error| SceneError::Io {
            path: dir.to_path_buf(),
            error,
        };
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io)? {
            let path = entry.map_err(io)?.path();
            let is_pk3 = path
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("pk3"));
            if is_pk3 && path.is_file() {
                files.push(path);
            }
        }
        if files.is_empty() {
            return Err(SceneError::NoPaks {
                dir: dir.to_path_buf(),
            });
        }
        files.sort();
        Pak::open_files(&files)
    }

    /// Opens the given pk3 files; later ones override earlier ones.
    pub fn open_files(files: &[PathBuf]) -> Result<Pak, SceneError> {
        let mut pak = Pak::empty();
        for path in files {
            let file = File::open(path).map_err(|error| SceneError::Io {
                path: path.clone(),
                error,
            })?;
            pak.push(path.display().to_string(), Box::new(BufReader::new(file)))?;
        }
        Ok(pak)
    }

    /// A pak set over in-memory pk3 files (tests, or data from elsewhere); later ones override
    /// earlier ones.
    pub fn from_bytes(pk3s: Vec<Vec<u8>>) -> Result<Pak, SceneError> {
        let mut pak = Pak::empty();
        for (i, bytes) in pk3s.into_iter().enumerate() {
            pak.push(format!("<memory {i}>"), Box::new(Cursor::new(bytes)))?;
        }
        Ok(pak)
    }

    fn empty() -> Pak {
        Pak {
            archives: Vec::new(),
            index: HashMap::new(),
        }
    }

    fn push(&mut self, label: String, reader: Box<dyn ReadSeek>) -> Result<(), SceneError> {
        let zip = ZipArchive::new(reader).map_err(|error| SceneError::Zip {
            path: label.clone(),
            error,
        })?;
        let archive = self.archives.len();
        for i in 0..zip.len() {
            if let Some(name) = zip.name_for_index(i) {
                if !name.ends_with('/') {
                    self.index
                        .insert(name.to_ascii_lowercase(), (archive, i, name.to_string()));
                }
            }
        }
        self.archives.push(Archive { label, zip });
        Ok(())
    }

    /// Number of pk3 files in the set.
    pub fn archives(&self) -> usize {
        self.archives.len()
    }

    /// Whether some pk3 holds `name` (any case).
    pub fn contains(&self, name: &str) -> bool {
        self.index.contains_key(&name.to_ascii_lowercase())
    }

    /// The pk3 file that `name` would be read from.
    pub fn source_of(&self, name: &str) -> Option<&str> {
        let (archive, _, _) = self.index.get(&name.to_ascii_lowercase())?;
        Some(&self.archives[*archive].label)
    }

    /// The file `name` (any case) from the last pk3 that holds it; `Ok(None)` if none does.
    pub fn read(&mut self, name: &str) -> Result<Option<Vec<u8>>, SceneError> {
        let Some((archive, entry, stored)) = self.index.get(&name.to_ascii_lowercase()) else {
            return Ok(None);
        };
        let archive = &mut self.archives[*archive];
        let zip_error = |error| SceneError::Zip {
            path: format!("{} ({stored})", archive.label),
            error,
        };
        let file = archive.zip.by_index(*entry).map_err(zip_error)?;
        let size = file.size();
        if size > MAX_ENTRY_BYTES {
            return Err(SceneError::EntryTooLarge {
                name: stored.clone(),
                size,
                limit: MAX_ENTRY_BYTES,
            });
        }
        // The declared size only sizes the buffer; `take` bounds what is actually read.
        let mut out = Vec::with_capacity(size.min(16 << 20) as usize);
        let read = file
            .take(MAX_ENTRY_BYTES + 1)
            .read_to_end(&mut out)
            .map_err(|error| SceneError::Zip {
                path: format!("{} ({stored})", archive.label),
                error: error.into(),
            })?;
        if read as u64 > MAX_ENTRY_BYTES {
            return Err(SceneError::EntryTooLarge {
                name: stored.clone(),
                size: read as u64,
                limit: MAX_ENTRY_BYTES,
            });
        }
        Ok(Some(out))
    }

    /// The names of the maps in the set (`maps/NAME.bsp`, lower case), sorted.
    pub fn maps(&self) -> Vec<String> {
        let mut maps: Vec<String> = self
            .index
            .keys()
            .filter_map(|k| k.strip_prefix("maps/")?.strip_suffix(".bsp"))
            // A name `--map` cannot be given as, and one that would break `scene list`'s lines
            // (one map a line), is no map of the set.
            .filter(|m| !m.is_empty() && !m.contains('/') && !m.chars().any(char::is_control))
            .map(str::to_string)
            .collect();
        maps.sort();
        maps
    }
}

/// Writes files into a pk3 (a deflated zip), in the order given. Duplicate names are an error.
pub fn write<N: AsRef<str>, D: AsRef<[u8]>>(files: &[(N, D)]) -> Result<Vec<u8>, SceneError> {
    let zip_error = |error| SceneError::Zip {
        path: "<pk3 being written>".to_string(),
        error,
    };
    let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default().compression_method(CompressionMethod::Deflated);
    for (name, data) in files {
        zip.start_file(name.as_ref(), options).map_err(zip_error)?;
        zip.write_all(data.as_ref())
            .map_err(|e| zip_error(e.into()))?;
    }
    Ok(zip.finish().map_err(zip_error)?.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_pk3_overrides_and_lookup_ignores_case() {
        let a = write(&[("maps/One.bsp", b"a1".as_slice()), ("x.txt", b"ax")]).unwrap();
        let b = write(&[
            ("X.TXT", b"bx".as_slice()),
            ("maps/two.bsp", b"b2"),
            ("maps/.bsp", b"no name"),
            ("maps/two\nlines.bsp", b"a line break"),
        ])
        .unwrap();
        let mut pak = Pak::from_bytes(vec![a, b]).unwrap();
        assert_eq!(
            pak.read("x.txt").unwrap().as_deref(),
            Some(b"bx".as_slice())
        );
        assert_eq!(
            pak.read("MAPS/one.bsp").unwrap().as_deref(),
            Some(b"a1".as_slice())
        );
        assert_eq!(pak.read("nope").unwrap(), None);
        assert_eq!(pak.maps(), ["one", "two"]);
        assert_eq!(pak.source_of("x.txt"), Some("<memory 1>"));
    }

    #[test]
    fn corrupt_pk3_is_a_zip_error() {
        let err = Pak::from_bytes(vec![b"PK\x03\x04 not really a zip".to_vec()]).unwrap_err();
        assert!(matches!(err, SceneError::Zip { .. }), "{err}");
        assert!(write(&[("a", b"1"), ("a", b"2")]).is_err());
    }
}
