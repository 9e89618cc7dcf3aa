//! Objects: creation, placement, freeing, host reads, and the packing of a texture's rows into
//! pages.

use super::*;

impl Manager {
    /// A store to a replicate-read object, or any request for a remote page (which a device
    /// never makes: its accesses go in place), is refused.
    pub(super) fn check_modes(&self, device: DeviceId, pages: &[PageRequest]) -> Result<()> {
        for p in pages {
            let Some((e, _)) = self.space.object_of(p.page) else {
                continue;
            };
            match self.modes.get(&e.id) {
                Some(AccessMode::ReplicateRead) if p.access == tessera_core::Access::Write => {
                    return Err(RuntimeError::ReadOnlyObject {
                        object: e.id,
                        device,
                        page: p.page,
                    })
                }
                Some(AccessMode::Remote) => {
                    return Err(RuntimeError::RemoteRequested {
                        object: e.id,
                        device,
                        page: p.page,
                    })
                }
                _ => {}
            }
        }
        Ok(())
    }

    pub(super) fn place(&mut self, id: ObjectId, locations: Vec<Location>) -> Result<()> {
        let e = *self.space.get(id)?;
        let Some(r) = self.remote.get(id) else {
            return Err(RuntimeError::NotRemote {
                object: id,
                mode: self.modes.get(&id).copied().unwrap_or_default(),
            });
        };
        if locations.len() as u64 != e.desc.page_count() {
            return Err(RuntimeError::Locations {
                object: id,
                pages: e.desc.page_count(),
                given: locations.len(),
            });
        }
        for l in &locations {
            if let Location::Device(d) = *l {
                if d as usize >= self.workers.len() {
                    return Err(tessera_core::CoreError::UnknownDevice(DeviceId(d)).into());
                }
            }
        }
        for (local, l) in locations.into_iter().enumerate() {
            r.place(local as u64, l);
        }
        Ok(())
    }

    pub(super) fn create(
        &mut self,
        desc: ObjectDesc,
        data: Option<Vec<u8>>,
        mode: AccessMode,
    ) -> Result<ObjectEntry> {
        // Before any size is taken of it: a description built by hand is checked as its
        // constructor would have (a bad one had panicked on this thread, ending the system).
        desc.validate()?;
        if let Some((layout, _)) = desc.mip() {
            if layout.border() > 0 && mode != AccessMode::ReplicateRead {
                return Err(tessera_core::CoreError::BorderOnWritable { mode: mode.name() }.into());
            }
        }
        if let Some(d) = &data {
            check_data(&desc, d)?;
        }
        // A remote object's pages live in the shared pool, not the home store: one location,
        // no copy. Allocated first, so that an allocation that fails leaves nothing made.
        let remote_pages = match mode {
            AccessMode::Remote => Some(crate::home::zeroed(desc.page_count() * desc.page_bytes())?),
            _ => None,
        };
        let e = self.space.create(desc)?;
        let created = self.protocol.handle(Message::Create { pages: e.pages() });
        if let Err(err) = created {
            // The space and the directory disagree only if the bookkeeping is wrong; undo so
            // that at least this object does not half exist.
            self.space.free(e.id)?;
            return Err(err.into());
        }
        if let Some(mut pages) = remote_pages {
            if let Some(d) = data {
                pack(&desc, &d, &mut pages);
            }
            self.remote
                .insert(Arc::new(RemoteObject::new(&e, &pages, Location::Host)));
            self.modes.insert(e.id, mode);
            self.resize_tables()?;
            return Ok(e);
        }
        if mode != AccessMode::Migrate {
            self.modes.insert(e.id, mode);
        }
        let created = write_home(&self.home).and_then(|mut h| {
            let home = h.create(e.id, desc.page_count() * desc.page_bytes())?;
            if let Some(d) = data {
                pack(&desc, &d, home);
            }
            Ok(())
        });
        if let Err(err) = created {
            // No room for its home copy (a full disk under a home file): the object must
            // not half exist. No device holds a page of it yet, so freeing moves nothing.
            let actions = self.protocol.handle(Message::Free { pages: e.pages() })?;
            self.execute(actions)?;
            self.space.free(e.id)?;
            return Err(err);
        }
        // Freeing dropped every device's copy of reused pages, so no device maps one of them.
        self.resize_tables()?;
        self.note_demand();
        Ok(e)
    }

    /// Tells every device's memories how many bytes of pages of each size the live objects
    /// hold, so a memory made for one size leaves the others room
    /// (`DeviceMemory::set_demand`). Remote objects' pages are never copied to a device.
    fn note_demand(&mut self) {
        let mut sizes: Vec<(u64, u64)> = Vec::new();
        for e in self.space.live_objects() {
            if self.modes.get(&e.id) == Some(&AccessMode::Remote) {
                continue;
            }
            let (size, bytes) = (
                e.desc.page_bytes(),
                e.desc.page_count() * e.desc.page_bytes(),
            );
            match sizes.iter_mut().find(|s| s.0 == size) {
                Some(s) => s.1 += bytes,
                None => sizes.push((size, bytes)),
            }
        }
        for m in &mut self.memories {
            m.set_demand(sizes.iter().copied());
        }
    }

    /// Refused, changing nothing, while a device is inside a pass holding one of the object's
    /// pages or a deferred request names one (`CoreError::FreeWhileLocked`,
    /// `CoreError::FreeWhileDeferred`): free between passes. Otherwise every device's copy is
    /// dropped, without writing modified ones home, since the data goes with the object.
    pub(super) fn free(&mut self, id: ObjectId) -> Result<()> {
        let e = *self.space.get(id)?;
        self.drop_copies(&e)?;
        self.space.free(id)?;
        if self.modes.remove(&id) == Some(AccessMode::Remote) {
            self.remote.remove(id);
        } else {
            write_home(&self.home)?.remove(id)?;
        }
        self.pinned.remove(&id);
        self.resize_tables()?;
        self.note_demand();
        Ok(())
    }

    /// The protocol's `Free` of the object's pages, carried out: every device's copy dropped
    /// without a write-back, and what the manager keeps of the pages (write-backs on their
    /// way home, the policies' records) forgotten. Refused, changing nothing, while a device
    /// is inside a pass holding one of them.
    fn drop_copies(&mut self, e: &ObjectEntry) -> Result<()> {
        let actions = self.protocol.handle(Message::Free { pages: e.pages() })?;
        if let Err(err) = self.execute(actions) {
            // The directory has forgotten copies some device may still map.
            self.fail_all(err.clone());
            return Err(err);
        }
        for p in e.pages().map(GlobalPage) {
            // A write-back still on its way would land over whatever home holds next.
            self.later.forget(p);
            for ev in &mut self.evictors {
                ev.forget(p);
            }
        }
        Ok(())
    }

    /// Replaces the object's data from the host, between passes: the protocol's steps are a
    /// free of its pages and a create of them (both model-checked), so every device's copy
    /// is dropped without a write-back, since the host's bytes replace all of them, and home
    /// is the latest copy of every page again. Refused, changing nothing, while a device is
    /// inside a pass holding one of its pages, as a free is.
    pub(super) fn write(&mut self, id: ObjectId, data: Vec<u8>) -> Result<()> {
        let e = *self.space.get(id)?;
        if self.modes.get(&id) == Some(&AccessMode::Remote) {
            return Err(RuntimeError::Config(format!(
                "{id} is a remote object, whose pages live where it was placed: free it and create it again with the new data"
            )));
        }
        check_data(&e.desc, &data)?;
        self.drop_copies(&e)?;
        if let Err(err) = self.protocol.handle(Message::Create { pages: e.pages() }) {
            let err = RuntimeError::from(err);
            self.fail_all(err.clone());
            return Err(err);
        }
        pack(&e.desc, &data, write_home(&self.home)?.object_mut(id)?);
        Ok(())
    }

    pub(super) fn read(&mut self, id: ObjectId) -> Result<Vec<u8>> {
        Ok(self.read_many(&[id])?.pop().unwrap_or_default())
    }

    /// Several objects' latest data, row-major, in `ids`' order.
    pub(super) fn read_many(&mut self, ids: &[ObjectId]) -> Result<Vec<Vec<u8>>> {
        let paged: Vec<ObjectId> = ids
            .iter()
            .copied()
            .filter(|&id| self.remote.get(id).is_none())
            .collect();
        let mut packed = self.read_packed_many(&paged)?.into_iter();
        let mut out = Vec::with_capacity(ids.len());
        for &id in ids {
            let desc = self.space.get(id)?.desc;
            let pages = match self.remote.get(id) {
                Some(r) => r.bytes()?,
                None => packed.next().unwrap_or_default(),
            };
            let mut o = crate::home::zeroed(host_len(&desc))?;
            unpack(&desc, &pages, &mut o);
            out.push(o);
        }
        Ok(out)
    }

    /// The object's latest pages, packed: home copies, with modified pages from their owners.
    pub(super) fn read_packed(&mut self, id: ObjectId) -> Result<Vec<u8>> {
        Ok(self.read_packed_many(&[id])?.pop().unwrap_or_default())
    }

    /// [`Self::read_packed`] of several objects, with one job per owner for all of them.
    fn read_packed_many(&mut self, ids: &[ObjectId]) -> Result<Vec<Vec<u8>>> {
        self.settle_objects(ids)?;
        let mut packed = Vec::with_capacity(ids.len());
        let mut page_bytes = Vec::with_capacity(ids.len());
        // Per owner: where each of its modified pages goes (object's place in `ids`, page in
        // it), and the slots they are in, in the same order.
        let mut places: Vec<Vec<(usize, usize)>> = vec![Vec::new(); self.workers.len()];
        let mut slots: Vec<Vec<SlotAddr>> = vec![Vec::new(); self.workers.len()];
        for (k, &id) in ids.iter().enumerate() {
            let e = *self.space.get(id)?;
            if self.remote.get(id).is_some() {
                return Err(RuntimeError::RemotePagesNotKept { object: id });
            }
            packed.push(read_home(&self.home)?.object(id)?.to_vec());
            page_bytes.push(e.desc.page_bytes() as usize);
            for (local, page) in e.pages().enumerate() {
                if let Some(o) = self.protocol.directory().entry(GlobalPage(page))?.owner {
                    places[o.index()].push((k, local));
                    slots[o.index()].push(self.slot(o, GlobalPage(page))?);
                    self.traffic[o.index()].host_reads += 1;
                }
            }
        }
        // Modified pages come from their owners: one job per device, in one read where the
        // backend batches reads (a GPU: one wait for the objects, not one per page).
        let jobs: Vec<_> = places
            .into_iter()
            .zip(slots)
            .enumerate()
            .filter(|(_, (places, _))| !places.is_empty())
            .map(|(d, (places, slots))| {
                let job =
                    self.workers[d].submit_here(move |dev| {
                        match super::execute::read_batched(dev, &slots)? {
                            Some(data) => Ok(data),
                            None => slots.iter().map(|&at| dev.read_slot(at)).collect(),
                        }
                    });
                (places, job)
            })
            .collect();
        for (places, job) in jobs {
            for ((k, local), data) in places.into_iter().zip(job.wait()??) {
                let bytes = page_bytes[k];
                packed[k][local * bytes..(local + 1) * bytes].copy_from_slice(&data);
            }
        }
        Ok(packed)
    }

    pub(super) fn memory_use(&self) -> (Vec<DeviceMemoryUse>, Vec<DirEntry>) {
        let mut out: Vec<DeviceMemoryUse> = self
            .memories
            .iter()
            .map(|m| DeviceMemoryUse {
                reserved_bytes: m.reserved_bytes(),
                ..Default::default()
            })
            .collect();
        let entries = self.protocol.directory().entries();
        for obj in self.space.live_objects() {
            let bytes = obj.desc.page_bytes();
            for p in obj.pages() {
                let copies = entries[p as usize].copies;
                for d in copies.iter() {
                    let u = &mut out[d.index()];
                    if copies.len() == 1 {
                        u.unique_pages += 1;
                        u.unique_bytes += bytes;
                    } else {
                        u.shared_pages += 1;
                        u.shared_bytes += bytes;
                    }
                }
            }
        }
        (out, entries.to_vec())
    }
}

/// `data` as an object of `desc` takes it: its whole size ([`RuntimeError::DataSize`]).
fn check_data(desc: &ObjectDesc, data: &[u8]) -> Result<()> {
    let want = host_len(desc);
    if data.len() as u64 == want {
        return Ok(());
    }
    let object = match *desc {
        ObjectDesc::Texture {
            width,
            height,
            format,
            ..
        } => format!(
            "a {width}x{height} {}",
            crate::kernel::kind_name(Some(format))
        ),
        ObjectDesc::Buffer { len, .. } => format!("a buffer of {len} bytes"),
        ObjectDesc::Mipmapped { format, .. } => {
            format!("a mipmapped {}", crate::kernel::kind_name(Some(format)))
        }
    };
    Err(RuntimeError::DataSize {
        object,
        got: data.len(),
        want: want as usize,
    })
}

/// Bytes of an object's host layout: texels row-major from the lower left, tightly packed.
pub fn host_len(desc: &ObjectDesc) -> u64 {
    let (w, h) = desc.extent();
    w * h * desc.texel_bytes()
}

/// Copies host layout into page layout (each page a whole slot, rows from its lower left).
pub(super) fn pack(desc: &ObjectDesc, host: &[u8], pages: &mut [u8]) {
    for_each_page_row(desc, |host_off, page_off, len| {
        pages[page_off..page_off + len].copy_from_slice(&host[host_off..host_off + len]);
    });
}

pub(super) fn unpack(desc: &ObjectDesc, pages: &[u8], host: &mut [u8]) {
    for_each_page_row(desc, |host_off, page_off, len| {
        host[host_off..host_off + len].copy_from_slice(&pages[page_off..page_off + len]);
    });
}

/// Calls `f(host_offset, page_offset, bytes)` for every row segment of every page.
pub(super) fn for_each_page_row(desc: &ObjectDesc, mut f: impl FnMut(usize, usize, usize)) {
    let (w, _) = desc.extent();
    let tb = desc.texel_bytes();
    let side = desc.page_side();
    for local in 0..desc.page_count() {
        let (x0, y0, pw, ph) = desc.page_rect(local);
        for r in 0..ph {
            let host = ((y0 + r) * w + x0) * tb;
            let page = local * desc.page_bytes() + r * side * tb;
            f(host as usize, page as usize, (pw * tb) as usize);
        }
    }
}
