//! The synthetic workload every node runs: rounds of batches over word pages, race-free within
//! a round as tessera's passes are (no page is written by two devices, nor read by a device
//! while another writes it), so the result does not depend on how the devices interleave and
//! a sequential reference computes it.

/// In round `r`, page `p` is read-only when `(p + r) % 3 == 0`, else written by exactly one
/// device.
pub fn writer(page: u64, round: u32, devices: usize) -> Option<usize> {
    if (page + round as u64).is_multiple_of(3) {
        return None;
    }
    Some((mix(page * 131 + round as u64 * 7) % devices as u64) as usize)
}

/// Device `d`'s batch in round `r`: the pages it reads (read-only pages, about half of them)
/// and the pages it writes (which it also reads).
pub fn batch(d: usize, round: u32, pages: u64, devices: usize) -> (Vec<u64>, Vec<u64>) {
    let mut reads = Vec::new();
    let mut writes = Vec::new();
    for p in 0..pages {
        match writer(p, round, devices) {
            Some(w) if w == d => writes.push(p),
            Some(_) => {}
            None if mix(p ^ (d as u64) << 20 ^ (round as u64) << 40).is_multiple_of(2) => {
                reads.push(p)
            }
            None => {}
        }
    }
    (reads, writes)
}

/// A written page's new words from its old words and the pages the device read.
pub fn compute(d: usize, round: u32, old: &[u32], read: &[&[u32]]) -> Vec<u32> {
    old.iter()
        .enumerate()
        .map(|(i, &w)| {
            let sum = read.iter().fold(0u32, |s, r| s.wrapping_add(r[i]));
            w.wrapping_mul(31)
                .wrapping_add(sum)
                .wrapping_add(d as u32 * 1_000_003 + round * 7)
        })
        .collect()
}

/// A page's initial words.
pub fn initial(page: u64, words: usize) -> Vec<u32> {
    (0..words)
        .map(|i| mix(page << 16 | i as u64) as u32)
        .collect()
}

/// Every page after `rounds` rounds, computed on plain vectors, one device after another.
pub fn reference(pages: u64, words: usize, devices: usize, rounds: u32) -> Vec<Vec<u32>> {
    let mut mem: Vec<Vec<u32>> = (0..pages).map(|p| initial(p, words)).collect();
    for r in 0..rounds {
        for d in 0..devices {
            let (reads, writes) = batch(d, r, pages, devices);
            for &w in &writes {
                let read: Vec<&[u32]> = reads.iter().map(|&q| mem[q as usize].as_slice()).collect();
                let new = compute(d, r, &mem[w as usize], &read);
                mem[w as usize] = new;
            }
        }
    }
    mem
}

/// Order-independent checksum of some pages (a sum of per-page hashes), so nodes can each sum
/// their home pages and the sums add up to the whole memory's.
pub fn checksum<'a>(pages: impl Iterator<Item = (u64, &'a [u32])>) -> u64 {
    pages.fold(0u64, |s, (p, words)| {
        let h = words.iter().fold(mix(p), |h, &w| mix(h ^ w as u64));
        s.wrapping_add(h)
    })
}

fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d049bb133111eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_round_is_race_free() {
        for r in 0..6 {
            let devices = 4;
            let mut written = [0; 30];
            let mut read = [false; 30];
            for d in 0..devices {
                let (reads, writes) = batch(d, r, 30, devices);
                writes.iter().for_each(|&p| written[p as usize] += 1);
                reads.iter().for_each(|&p| read[p as usize] = true);
            }
            for p in 0..30 {
                assert!(
                    written[p] <= 1 && !(written[p] == 1 && read[p]),
                    "round {r} page {p}"
                );
            }
            assert!(written.iter().sum::<i32>() >= 15, "most pages are written");
        }
    }

    #[test]
    fn the_reference_by_hand_for_one_device_and_one_page() {
        // Page 0 is read-only in rounds 0 and 3, written by device 0 in rounds 1 and 2.
        let w0 = initial(0, 1)[0];
        let after = reference(1, 1, 1, 3)[0][0];
        let r1 = w0.wrapping_mul(31).wrapping_add(7);
        let r2 = r1.wrapping_mul(31).wrapping_add(14);
        assert_eq!(after, r2);
    }
}
