//! The home store: each object's home copy, page after page, each page a whole slot's bytes.
//!
//! Two stores behind one type. [`HomeStore::Memory`] keeps every home copy in host memory (the
//! default). [`HomeStore::File`] keeps them in one memory-mapped file, so the objects of a node
//! may together exceed host RAM: the operating system pages the mapping in and out, and only
//! the pages in use stay resident. The memory manager owns the store; the device workers copy
//! pages between it and their slots under its lock ([`SharedHome`]), and nothing else uses it.
//!
//! The file is scratch memory, not a format: it is created fresh (an existing path is refused,
//! never overwritten), holds no header, and is removed when the store is dropped.

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

use memmap2::MmapMut;
use tessera_core::{CoreError, ObjectId};

use crate::error::{Result, RuntimeError};
use crate::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// The home files this process created and has not removed yet. A process-wide list, not
/// the stores' own: an exit that runs no destructor (the CLI's Ctrl-C handler ends the process
/// from its signal thread) still removes them, through [`remove_home_files`].
static CREATED: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Set by [`remove_home_files`], under `CREATED`'s lock: the process is ending, and a home file
/// created after the removal (a system still being built on another thread while the
/// interrupt handler runs) would be left behind, so none is created any more.
static CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn created() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    CREATED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Removes every home file this process created and still holds. For a process about to exit
/// without dropping its systems (an interrupt): their stores would have removed the files.
/// Only files this process created fresh are removed, never a file that was there before.
/// A home file asked for after this is refused: the process is ending.
pub fn remove_home_files() {
    let mut list = created();
    CLOSED.store(true, std::sync::atomic::Ordering::SeqCst);
    for p in std::mem::take(&mut *list) {
        let _ = std::fs::remove_file(p);
    }
}

/// Where the home copies live.
pub(crate) enum HomeStore {
    /// Each object's home copy in its own vector.
    Memory(HashMap<ObjectId, Vec<u8>>),
    /// Every home copy in one memory-mapped file.
    File(FileHome),
}

impl HomeStore {
    /// In host memory, or in a fresh file at `path`.
    pub fn open(path: Option<&Path>) -> Result<Self> {
        match path {
            None => Ok(HomeStore::Memory(HashMap::new())),
            Some(p) => Ok(HomeStore::File(FileHome::open(p)?)),
        }
    }

    /// Creates `id`'s home copy of `len` bytes, all zero, and returns it to be filled.
    pub fn create(&mut self, id: ObjectId, len: u64) -> Result<&mut [u8]> {
        match self {
            HomeStore::Memory(m) => {
                let home = m.entry(id).insert_entry(zeroed(len)?);
                Ok(home.into_mut())
            }
            HomeStore::File(f) => f.create(id, len),
        }
    }

    /// The whole home copy of `id`, page after page.
    pub fn object(&self, id: ObjectId) -> Result<&[u8]> {
        match self {
            HomeStore::Memory(m) => m.get(&id).map(Vec::as_slice).ok_or(unknown(id)),
            HomeStore::File(f) => f.object(id),
        }
    }

    /// The whole home copy of `id`, to be overwritten in place.
    pub fn object_mut(&mut self, id: ObjectId) -> Result<&mut [u8]> {
        match self {
            HomeStore::Memory(m) => m.get_mut(&id).map(Vec::as_mut_slice).ok_or(unknown(id)),
            HomeStore::File(f) => f.object_mut(id),
        }
    }

    /// Local page `local` of `id`, pages being `page_bytes` long.
    pub fn page(&self, id: ObjectId, local: u64, page_bytes: u64) -> Result<&[u8]> {
        let home = self.object(id)?;
        Ok(&home[page_range(local, page_bytes)])
    }

    /// Overwrites local page `local` of `id` with `data`, a whole page.
    pub fn write_page(&mut self, id: ObjectId, local: u64, data: &[u8]) -> Result<()> {
        self.page_mut(id, local, data.len() as u64)?
            .copy_from_slice(data);
        Ok(())
    }

    /// Local page `local` of `id` to be overwritten in place (a device worker reads a slot
    /// straight into it: one copy for a write-back).
    pub fn page_mut(&mut self, id: ObjectId, local: u64, page_bytes: u64) -> Result<&mut [u8]> {
        let home = self.object_mut(id)?;
        Ok(&mut home[page_range(local, page_bytes)])
    }

    /// Drops `id`'s home copy; its bytes are reused by later objects.
    pub fn remove(&mut self, id: ObjectId) -> Result<()> {
        match self {
            HomeStore::Memory(m) => m.remove(&id).map(drop).ok_or(unknown(id)),
            HomeStore::File(f) => f.remove(id),
        }
    }
}

/// The home store as the memory manager shares it with the device workers, so a worker copies
/// a page between home and a slot itself: one copy, where handing it over in a vector cost two
/// and a fresh allocation per page. Neither side holds a guard while waiting on another thread
/// (the manager takes it for its own short copies only; a worker's job copies and drops it),
/// so the lock adds no edge to the wait-for graph that could close a cycle.
pub(crate) type SharedHome = std::sync::Arc<RwLock<HomeStore>>;

/// Shared access to the home store; a poisoned lock (a thread panicked holding it) is an error.
pub(crate) fn read_home(home: &RwLock<HomeStore>) -> Result<RwLockReadGuard<'_, HomeStore>> {
    home.read().map_err(|_| poisoned())
}

/// Exclusive access to the home store.
pub(crate) fn write_home(home: &RwLock<HomeStore>) -> Result<RwLockWriteGuard<'_, HomeStore>> {
    home.write().map_err(|_| poisoned())
}

fn poisoned() -> RuntimeError {
    RuntimeError::ThreadGone("a thread holding the home store (it panicked)")
}

fn unknown(id: ObjectId) -> RuntimeError {
    RuntimeError::Core(CoreError::UnknownObject(id))
}

/// Byte range of a local page. The memory manager asks only for pages of live objects, so an
/// out-of-range page is its bug and panics when sliced, as indexing the vector always did.
fn page_range(local: u64, page_bytes: u64) -> Range<usize> {
    (local * page_bytes) as usize..((local + 1) * page_bytes) as usize
}

/// Home copies in ranges of one memory-mapped file.
///
/// The file's length is always the end of the last live range: a new object goes in the first
/// hole it fits (first fit, the leftover stays a hole), or else at the end, growing the file;
/// freeing the last range shrinks the file, so the disk space of freed objects comes back.
/// Every resize drops the map and maps the file again; nothing here or in the manager keeps a
/// pointer into the map across calls (slices borrow the store), so a remap moves nothing
/// anyone holds.
pub(crate) struct FileHome {
    path: PathBuf,
    file: File,
    /// None while the file is empty: a zero-length mapping is refused on some platforms.
    map: Option<MmapMut>,
    /// The file's length.
    len: u64,
    objects: HashMap<ObjectId, Range<u64>>,
    /// Free ranges below `len`, offset → length; never adjacent to each other or to `len`.
    holes: BTreeMap<u64, u64>,
}

/// Zeros written per call when the file grows.
const ZERO_CHUNK: usize = 1 << 20;

impl FileHome {
    /// Creates the file at `path`, which must not exist: the home file is scratch memory, and
    /// an existing file may be someone's data, so it is refused rather than truncated.
    pub fn open(path: &Path) -> Result<Self> {
        // Held from the creation to the file's place in the list, so that `remove_home_files`
        // either finds the file there or has closed creation before it.
        let mut list = created();
        if CLOSED.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(RuntimeError::HomeFile {
                path: path.to_path_buf(),
                action: "create",
                kind: std::io::ErrorKind::Interrupted,
                message: "the process is ending (interrupted)".into(),
            });
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| match e.kind() {
                // create_new refuses a directory as "exists" too; say which it is.
                std::io::ErrorKind::AlreadyExists if path.is_dir() => RuntimeError::HomeFile {
                    path: path.to_path_buf(),
                    action: "create",
                    kind: std::io::ErrorKind::IsADirectory,
                    message: "it is a directory; give the path of a file to create".into(),
                },
                std::io::ErrorKind::AlreadyExists => RuntimeError::HomeFileExists {
                    path: path.to_path_buf(),
                },
                _ => io_error(path, "create", e),
            })?;
        list.push(path.to_path_buf());
        Ok(Self::with_file(path, file))
    }

    fn with_file(path: &Path, file: File) -> Self {
        FileHome {
            path: path.to_path_buf(),
            file,
            map: None,
            len: 0,
            objects: HashMap::new(),
            holes: BTreeMap::new(),
        }
    }

    fn err(&self, action: &'static str, e: std::io::Error) -> RuntimeError {
        io_error(&self.path, action, e)
    }

    fn create(&mut self, id: ObjectId, len: u64) -> Result<&mut [u8]> {
        if self.objects.contains_key(&id) {
            // Object ids are never reused; replace like the in-memory store does.
            self.remove(id)?;
        }
        let hole = self
            .holes
            .iter()
            .find(|&(_, &l)| l >= len)
            .map(|(&at, &l)| (at, l));
        let range = match hole {
            Some((at, l)) => {
                self.holes.remove(&at);
                if l > len {
                    self.holes.insert(at + len, l - len);
                }
                let range = at..at + len;
                // A hole holds a freed object's bytes.
                self.slice_mut(&range)?.fill(0);
                range
            }
            None => self.grow(len)?,
        };
        self.objects.insert(id, range.clone());
        self.slice_mut(&range)
    }

    /// Appends `by` zero bytes to the file and maps it again. The zeros are written, not left
    /// to a sparse `set_len`: writing reserves the disk blocks now, so a full disk is an error
    /// here instead of a SIGBUS at some later store into the map.
    fn grow(&mut self, by: u64) -> Result<Range<u64>> {
        let start = self.len;
        let end = start
            .checked_add(by)
            .ok_or_else(|| RuntimeError::HomeFile {
                path: self.path.clone(),
                action: "grow",
                kind: std::io::ErrorKind::InvalidInput,
                message: format!("{start} + {by} bytes overflows a file offset"),
            })?;
        if let Err(e) = self.write_zeros(start, by) {
            // Give back whatever was written, so the file never holds half a range.
            let _ = self.file.set_len(start);
            return Err(self.err("grow", e));
        }
        self.remap(end)?;
        Ok(start..end)
    }

    fn write_zeros(&mut self, at: u64, mut len: u64) -> std::io::Result<()> {
        let zeros = vec![0u8; ZERO_CHUNK.min(len as usize)];
        self.file.seek(SeekFrom::Start(at))?;
        while len > 0 {
            let n = zeros.len().min(len as usize);
            self.file.write_all(&zeros[..n])?;
            len -= n as u64;
        }
        Ok(())
    }

    /// Sets the file's length to `len` and maps it again. On failure the store keeps the
    /// length it had and maps that, so it stays usable.
    fn remap(&mut self, len: u64) -> Result<()> {
        // The old map goes first: a mapped page past the end of a shrunk file is a SIGBUS when
        // touched, and some platforms refuse to resize a mapped file.
        self.map = None;
        let resized = self.file.set_len(len).map_err(|e| self.err("resize", e));
        if resized.is_ok() {
            self.len = len;
        }
        if self.len > 0 {
            // SAFETY: `MmapMut::map_mut` is unsafe because the mapped file could change under
            // the map (another process writing or truncating it). We created this file ourselves
            // with `create_new`, only this store writes or resizes it, and every resize drops the
            // map first and maps again after, so the map never outlives a length it was made for.
            // Another process modifying the file while tessera runs is undefined behaviour; the
            // file is documented as tessera's own scratch space for the run.
            let map = unsafe { MmapMut::map_mut(&self.file) }.map_err(|e| self.err("map", e))?;
            self.map = Some(map);
        }
        resized
    }

    fn slice(&self, r: &Range<u64>) -> Result<&[u8]> {
        let map: &[u8] = self.map.as_deref().unwrap_or(&[]);
        // Offsets below the mapped length fit usize: the map itself is that long.
        map.get(r.start as usize..r.end as usize)
            .ok_or_else(|| self.unmapped(r))
    }

    fn slice_mut(&mut self, r: &Range<u64>) -> Result<&mut [u8]> {
        let err = self.unmapped(r);
        let map: &mut [u8] = match self.map.as_deref_mut() {
            Some(m) => m,
            None => &mut [],
        };
        map.get_mut(r.start as usize..r.end as usize).ok_or(err)
    }

    /// Only after a failed remap can a live range lie outside the map.
    fn unmapped(&self, r: &Range<u64>) -> RuntimeError {
        RuntimeError::HomeFile {
            path: self.path.clone(),
            action: "read or write",
            kind: std::io::ErrorKind::Other,
            message: format!(
                "bytes {}..{} are not mapped (a remap failed)",
                r.start, r.end
            ),
        }
    }

    fn object(&self, id: ObjectId) -> Result<&[u8]> {
        let r = self.objects.get(&id).ok_or(unknown(id))?;
        self.slice(r)
    }

    fn object_mut(&mut self, id: ObjectId) -> Result<&mut [u8]> {
        let r = self.objects.get(&id).ok_or(unknown(id))?.clone();
        self.slice_mut(&r)
    }

    fn remove(&mut self, id: ObjectId) -> Result<()> {
        let r = self.objects.remove(&id).ok_or(unknown(id))?;
        if r.is_empty() {
            return Ok(());
        }
        let (mut start, mut len) = (r.start, r.end - r.start);
        // Merge with the hole before and the hole after.
        if let Some((&at, &l)) = self.holes.range(..start).next_back() {
            if at + l == start {
                self.holes.remove(&at);
                start = at;
                len += l;
            }
        }
        if let Some(l) = self.holes.remove(&(start + len)) {
            len += l;
        }
        if start + len == self.len {
            // The last range went: give its disk space back. If the file cannot shrink, the
            // range stays a hole.
            if self.remap(start).is_ok() {
                return Ok(());
            }
        }
        self.holes.insert(start, len);
        Ok(())
    }

    #[cfg(test)]
    fn file_len(&self) -> u64 {
        self.file.metadata().map(|m| m.len()).unwrap_or(u64::MAX)
    }
}

impl Drop for FileHome {
    fn drop(&mut self) {
        self.map = None;
        // Scratch for this node only. We created the path with `create_new`, so what we remove
        // is our own file.
        let _ = std::fs::remove_file(&self.path);
        created().retain(|p| p != &self.path);
    }
}

fn io_error(path: &Path, action: &'static str, e: std::io::Error) -> RuntimeError {
    RuntimeError::HomeFile {
        path: path.to_path_buf(),
        action,
        kind: e.kind(),
        message: e.to_string(),
    }
}

/// `len` zero bytes, or [`RuntimeError::HomeTooLarge`] where the allocator has none to give:
/// `vec![0; len]` aborted the process instead (a crafted trace asked for a 4 GiB atlas under
/// a memory limit). Zeroed memory from the allocator, as `vec!` takes it, so the pages are
/// mapped only as they are written.
pub(crate) fn zeroed(len: u64) -> Result<Vec<u8>> {
    let too_large = || RuntimeError::HomeTooLarge { bytes: len };
    let n = usize::try_from(len).map_err(|_| too_large())?;
    if n == 0 {
        return Ok(Vec::new());
    }
    let layout = std::alloc::Layout::array::<u8>(n).map_err(|_| too_large())?;
    // SAFETY: the layout's size is `n`, not zero, as `alloc_zeroed` requires.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return Err(too_large());
    }
    // SAFETY: `ptr` comes from the global allocator with the layout of `n` bytes of align 1,
    // which is a `Vec<u8>`'s layout for capacity `n`, and all `n` bytes are initialised (to
    // zero), so length and capacity `n` are both valid; the Vec now owns the allocation.
    Ok(unsafe { Vec::from_raw_parts(ptr, n, n) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A home copy the allocator cannot give is an error, not an abort.
    #[test]
    fn a_home_copy_too_large_for_memory_is_an_error() {
        assert_eq!(zeroed(16).unwrap(), vec![0u8; 16]);
        assert!(zeroed(0).unwrap().is_empty());
        for len in [u64::MAX, 1 << 62] {
            assert!(matches!(
                zeroed(len),
                Err(RuntimeError::HomeTooLarge { bytes }) if bytes == len
            ));
        }
        let mut store = HomeStore::Memory(Default::default());
        assert!(store.create(ObjectId(0), 1 << 62).is_err());
    }

    fn file_store(dir: &tempfile::TempDir) -> HomeStore {
        HomeStore::open(Some(&dir.path().join("home"))).unwrap()
    }

    fn file_len(s: &HomeStore) -> u64 {
        match s {
            HomeStore::File(f) => {
                assert_eq!(
                    f.file_len(),
                    f.len,
                    "the file is as long as the store thinks"
                );
                f.len
            }
            HomeStore::Memory(_) => unreachable!(),
        }
    }

    fn fill(s: &mut HomeStore, id: u32, len: u64, byte: u8) {
        let home = s.create(ObjectId(id), len).unwrap();
        assert!(home.iter().all(|&b| b == 0), "a new home copy is zero");
        home.fill(byte);
    }

    #[test]
    fn freed_space_is_reused_and_data_survives_remaps() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = file_store(&dir);
        fill(&mut s, 0, 100, 1);
        fill(&mut s, 1, 300, 2);
        fill(&mut s, 2, 50, 3);
        assert_eq!(file_len(&s), 450);
        s.remove(ObjectId(1)).unwrap();
        // Fits the hole left by object 1: the file does not grow, and the hole's old bytes
        // are zero again.
        fill(&mut s, 3, 200, 4);
        fill(&mut s, 4, 100, 5);
        assert_eq!(file_len(&s), 450);
        // Does not fit: appended, the file grows and is mapped again.
        fill(&mut s, 5, 1000, 6);
        assert_eq!(file_len(&s), 1450);
        for (id, len, byte) in [
            (0, 100, 1),
            (2, 50, 3),
            (3, 200, 4),
            (4, 100, 5),
            (5, 1000, 6),
        ] {
            assert_eq!(s.object(ObjectId(id)).unwrap(), vec![byte; len].as_slice());
        }
        // Freeing the tail gives the disk space back, down to the last live range.
        s.remove(ObjectId(5)).unwrap();
        assert_eq!(file_len(&s), 450);
        s.remove(ObjectId(2)).unwrap();
        assert_eq!(file_len(&s), 400);
        assert_eq!(
            s.object(ObjectId(2)),
            Err(RuntimeError::Core(CoreError::UnknownObject(ObjectId(2))))
        );
    }

    #[test]
    fn an_existing_path_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("precious");
        std::fs::write(&path, b"user data").unwrap();
        assert_eq!(
            HomeStore::open(Some(&path)).err(),
            Some(RuntimeError::HomeFileExists { path: path.clone() })
        );
        assert_eq!(std::fs::read(&path).unwrap(), b"user data");
        // Even an empty file is someone's: refused too.
        let empty = dir.path().join("empty");
        std::fs::write(&empty, b"").unwrap();
        assert!(matches!(
            HomeStore::open(Some(&empty)),
            Err(RuntimeError::HomeFileExists { .. })
        ));
        assert!(empty.exists());
    }

    #[test]
    fn unusable_paths_are_typed_errors_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            (dir.path().to_path_buf(), std::io::ErrorKind::IsADirectory),
            (
                dir.path().join("missing").join("home"),
                std::io::ErrorKind::NotFound,
            ),
        ];
        for (path, want) in cases {
            match HomeStore::open(Some(&path)) {
                Err(e @ RuntimeError::HomeFile { .. }) => {
                    let RuntimeError::HomeFile { kind, path: p, .. } = &e else {
                        unreachable!()
                    };
                    assert_eq!((*kind, p), (want, &path));
                    assert!(e.to_string().contains(&path.display().to_string()));
                }
                Err(e) => panic!("{}: unexpected error {e}", path.display()),
                Ok(_) => panic!("{} was accepted", path.display()),
            }
        }
    }

    #[test]
    fn the_file_is_removed_with_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("home");
        let mut s = HomeStore::open(Some(&path)).unwrap();
        fill(&mut s, 0, 10, 1);
        assert!(path.exists());
        drop(s);
        assert!(!path.exists());
    }

    /// /dev/full answers every write with ENOSPC: a full disk.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_full_disk_is_an_error_and_the_store_stays_usable() {
        let dir = tempfile::tempdir().unwrap();
        let full = OpenOptions::new().write(true).open("/dev/full").unwrap();
        // Named after a path of our own: dropping the store removes its path, and that must
        // never be /dev/full, even when an assertion below fails.
        let mut f = FileHome::with_file(&dir.path().join("full"), full);
        let e = f.create(ObjectId(0), 4096).unwrap_err();
        assert!(
            matches!(
                &e,
                RuntimeError::HomeFile { action: "grow", kind, .. }
                    if *kind == std::io::ErrorKind::StorageFull
            ),
            "{e:?}"
        );
        assert_eq!(f.len, 0);
        assert!(f.objects.is_empty());
    }

    #[derive(Clone, Debug)]
    enum Op {
        Create { len: u64 },
        Free { pick: usize },
        Write { pick: usize, at: usize, byte: u8 },
        WritePage { pick: usize, page: u64, byte: u8 },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (1u64..600).prop_map(|len| Op::Create { len }),
            any::<usize>().prop_map(|pick| Op::Free { pick }),
            (any::<usize>(), any::<usize>(), 1u8..).prop_map(|(pick, at, byte)| Op::Write {
                pick,
                at,
                byte
            }),
            (any::<usize>(), 0u64..4, 1u8..).prop_map(|(pick, page, byte)| Op::WritePage {
                pick,
                page,
                byte
            }),
        ]
    }

    /// Runs `ops` on `s` and on a plain model (a vector per live object), checking every
    /// object after every step.
    fn check_against_model(s: &mut HomeStore, ops: &[Op]) {
        let mut model: Vec<(ObjectId, Vec<u8>)> = Vec::new();
        let mut next = 0u32;
        for o in ops {
            match *o {
                Op::Create { len } => {
                    let id = ObjectId(next);
                    next += 1;
                    let home = s.create(id, len).unwrap();
                    assert_eq!(home.len() as u64, len);
                    assert!(home.iter().all(|&b| b == 0), "a new home copy is zero");
                    // Fill as the manager's pack does, through the slice create returns.
                    for (i, b) in home.iter_mut().enumerate() {
                        *b = (i as u8) ^ (id.0 as u8);
                    }
                    model.push((id, home.to_vec()));
                }
                Op::Free { pick } if !model.is_empty() => {
                    let (id, _) = model.remove(pick % model.len());
                    s.remove(id).unwrap();
                    assert_eq!(s.remove(id), Err(unknown(id)), "a second remove is refused");
                }
                Op::Write { pick, at, byte } if !model.is_empty() => {
                    let n = model.len();
                    let (id, m) = &mut model[pick % n];
                    let at = at % m.len();
                    // A one-byte page: write_page at any offset.
                    s.write_page(*id, at as u64, &[byte]).unwrap();
                    m[at] = byte;
                }
                Op::WritePage { pick, page, byte } if !model.is_empty() => {
                    let n = model.len();
                    let (id, m) = &mut model[pick % n];
                    // Pages of a quarter of the object, the last partial page left out.
                    let pb = (m.len() / 4).max(1) as u64;
                    if (page + 1) * pb <= m.len() as u64 {
                        let data = vec![byte; pb as usize];
                        s.write_page(*id, page, &data).unwrap();
                        m[page_range(page, pb)].copy_from_slice(&data);
                        assert_eq!(s.page(*id, page, pb).unwrap(), data.as_slice());
                    }
                }
                _ => {}
            }
            for (id, m) in &model {
                assert_eq!(s.object(*id).unwrap(), m.as_slice(), "object {id}");
            }
        }
        if let HomeStore::File(f) = s {
            let live: u64 = model.iter().map(|(_, m)| m.len() as u64).sum();
            let holes: u64 = f.holes.values().sum();
            assert_eq!(
                live + holes,
                f.len,
                "every byte of the file is live or a hole"
            );
            assert_eq!(f.file_len(), f.len);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn both_stores_match_a_plain_model(ops in proptest::collection::vec(op(), 1..60)) {
            check_against_model(&mut HomeStore::open(None).unwrap(), &ops);
            let dir = tempfile::tempdir().unwrap();
            check_against_model(&mut file_store(&dir), &ops);
        }
    }
}
