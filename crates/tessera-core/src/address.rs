//! The global page address space: every object owns a contiguous range of global pages.
//!
//! It grows as objects are created and shrinks when they are freed, and freed ranges are
//! reused first-fit: the patent's dynamic virtual address space. Object ids are never reused,
//! so freeing twice is told apart from freeing an id that never existed.

use std::collections::BTreeMap;

use crate::error::{CoreError, Result};
use crate::geometry::ObjectDesc;
use crate::{GlobalPage, ObjectId};

/// Default ceiling on global pages: the page table descriptors alone would take 32 GiB per
/// device past it.
pub const DEFAULT_PAGE_LIMIT: u64 = 1 << 32;

/// A live object: its description and its texture page offset (paper eq. 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectEntry {
    pub id: ObjectId,
    pub desc: ObjectDesc,
    pub page_offset: u64,
    /// The tag of the address space that made it ([`AddressSpace::tagged`]): an entry of
    /// another system with the same id, pages and shape names other memory, and is told apart
    /// by this.
    pub space: u64,
}

impl ObjectEntry {
    /// Global page address, paper eq. 4 / thesis eq. 3.4, with the texel checked.
    #[inline]
    pub fn global_page(&self, s: u64, t: u64) -> Result<GlobalPage> {
        self.desc.check(self.id, s, t)?;
        Ok(GlobalPage(self.page_offset + self.desc.local_page(s, t)))
    }

    pub fn pages(&self) -> std::ops::Range<u64> {
        self.page_offset..self.page_offset + self.desc.page_count()
    }
}

#[derive(Clone, Debug)]
pub struct AddressSpace {
    /// What its entries carry as [`ObjectEntry::space`]; 0 unless [`AddressSpace::tagged`].
    tag: u64,
    objects: Vec<Option<ObjectEntry>>,
    /// Live objects by first page, to map a global page back to its object.
    by_offset: BTreeMap<u64, ObjectId>,
    /// Free holes below `end`, start → length; adjacent holes are always merged.
    holes: BTreeMap<u64, u64>,
    end: u64,
    limit: u64,
}

impl Default for AddressSpace {
    fn default() -> Self {
        Self::with_limit(DEFAULT_PAGE_LIMIT)
    }
}

impl AddressSpace {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_limit(limit: u64) -> Self {
        AddressSpace {
            tag: 0,
            objects: Vec::new(),
            by_offset: BTreeMap::new(),
            holes: BTreeMap::new(),
            end: 0,
            limit,
        }
    }

    /// The space with `tag`, which every entry it makes carries: its owner gives each space
    /// a tag of its own (the runtime numbers its systems), so an entry of one is refused by
    /// another. Core hands out none itself, to stay a deterministic function of its inputs.
    pub fn tagged(mut self, tag: u64) -> Self {
        self.tag = tag;
        self
    }

    /// Number of global pages spanned, holes included: the length of every page table.
    pub fn page_count(&self) -> u64 {
        self.end
    }

    /// Creates an object and gives it a range of global pages: the first hole it fits, else
    /// fresh pages at the end.
    pub fn create(&mut self, desc: ObjectDesc) -> Result<ObjectEntry> {
        desc.validate()?;
        let n = desc.page_count();
        let hole = self
            .holes
            .iter()
            .find(|(_, &len)| len >= n)
            .map(|(&s, &l)| (s, l));
        let offset = match hole {
            Some((start, len)) => {
                self.holes.remove(&start);
                if len > n {
                    self.holes.insert(start + n, len - n);
                }
                start
            }
            None => {
                if self.end + n > self.limit {
                    return Err(CoreError::PageLimit {
                        requested: n,
                        in_use: self.end - self.holes.values().sum::<u64>(),
                        limit: self.limit,
                    });
                }
                self.end += n;
                self.end - n
            }
        };
        // Ids are never reused (a stale id must not name a newer object), so a run that
        // creates and frees objects every frame spends one per object; 2^32 of them is far
        // beyond any run, and past it this is an error, not a wrap onto live objects.
        let id =
            ObjectId(u32::try_from(self.objects.len()).map_err(|_| CoreError::ObjectIdsExhausted)?);
        let entry = ObjectEntry {
            id,
            desc,
            page_offset: offset,
            space: self.tag,
        };
        self.objects.push(Some(entry));
        self.by_offset.insert(offset, id);
        Ok(entry)
    }

    /// Frees an object's pages; the space shrinks when the freed range ends it.
    pub fn free(&mut self, id: ObjectId) -> Result<ObjectEntry> {
        let slot = self
            .objects
            .get_mut(id.0 as usize)
            .ok_or(CoreError::UnknownObject(id))?;
        let entry = slot.take().ok_or(CoreError::DoubleFree(id))?;
        self.by_offset.remove(&entry.page_offset);
        let (mut start, mut len) = (entry.page_offset, entry.desc.page_count());
        if let Some((&ps, &pl)) = self.holes.range(..start).next_back() {
            if ps + pl == start {
                self.holes.remove(&ps);
                start = ps;
                len += pl;
            }
        }
        if let Some(nl) = self.holes.remove(&(start + len)) {
            len += nl;
        }
        if start + len == self.end {
            self.end = start;
        } else {
            self.holes.insert(start, len);
        }
        Ok(entry)
    }

    pub fn get(&self, id: ObjectId) -> Result<&ObjectEntry> {
        match self.objects.get(id.0 as usize) {
            None => Err(CoreError::UnknownObject(id)),
            Some(None) => Err(CoreError::UnknownObject(id)),
            Some(Some(e)) => Ok(e),
        }
    }

    /// The live object a global page belongs to, and the page's local number in it.
    pub fn object_of(&self, page: GlobalPage) -> Option<(&ObjectEntry, u64)> {
        let (_, &id) = self.by_offset.range(..=page.0).next_back()?;
        let e = self.objects[id.0 as usize].as_ref()?;
        e.pages()
            .contains(&page.0)
            .then(|| (e, page.0 - e.page_offset))
    }

    /// The live objects, in the order of their pages. Walks the live ones only: a run that
    /// creates and frees buffers every frame (the game trace, OO-VR) leaves a freed slot per
    /// object behind, and the memory manager lists the live objects on every create and free.
    pub fn live_objects(&self) -> impl Iterator<Item = &ObjectEntry> {
        self.by_offset
            .values()
            .filter_map(|id| self.objects[id.0 as usize].as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::TexelFormat;

    fn tex(w: u32, h: u32, p: u32) -> ObjectDesc {
        ObjectDesc::texture(w, h, TexelFormat::R32Float, p).unwrap()
    }

    #[test]
    fn grows_shrinks_and_reuses() {
        let mut a = AddressSpace::new();
        let x = a.create(tex(8, 8, 4)).unwrap(); // 4 pages
        let y = a.create(tex(8, 4, 4)).unwrap(); // 2 pages
        let z = a.create(tex(4, 4, 4)).unwrap(); // 1 page
        assert_eq!((x.page_offset, y.page_offset, z.page_offset), (0, 4, 6));
        assert_eq!(a.page_count(), 7);
        a.free(y.id).unwrap();
        assert_eq!(a.page_count(), 7, "hole in the middle keeps the end");
        let w = a.create(tex(4, 4, 4)).unwrap();
        assert_eq!(w.page_offset, 4, "first fit reuses the hole");
        a.free(z.id).unwrap();
        assert_eq!(
            a.page_count(),
            5,
            "freeing the last range shrinks the space, with the hole before it"
        );
        a.free(w.id).unwrap();
        assert_eq!(a.page_count(), 4, "merged holes at the end shrink too");
        assert_eq!(a.free(w.id), Err(CoreError::DoubleFree(w.id)));
        assert_eq!(
            a.free(ObjectId(99)),
            Err(CoreError::UnknownObject(ObjectId(99)))
        );
        assert_eq!(a.get(w.id).unwrap_err(), CoreError::UnknownObject(w.id));
        assert_eq!(a.object_of(GlobalPage(3)).unwrap().0.id, x.id);
        assert!(a.object_of(GlobalPage(4)).is_none());
    }

    #[test]
    fn limit_is_a_typed_error() {
        let mut a = AddressSpace::with_limit(3);
        assert!(matches!(
            a.create(tex(8, 8, 4)),
            Err(CoreError::PageLimit {
                requested: 4,
                in_use: 0,
                limit: 3
            })
        ));
    }
}
