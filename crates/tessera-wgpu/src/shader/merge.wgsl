// Merge (paper 3.5, third pass) on the GPU: writes a pass's temporary into the pages through
// the page table, after prelude.wgsl, whose bindings it shares. Stores whose page is not held
// writable go to `leftover` and set the page's bit in the read half of `bits`, which the
// compaction kernel turns into the list of pages to request. Stores run in parallel: two
// invocations storing to one word in one pass race, as the memory model says; of one
// invocation's stores to a word the prelude marked all but the last superseded (kind 2).
//
// LaunchInfo as used here: count = entries in the temporary (empty ones, kind 0, are
// skipped), row = entries per dispatch row,
// bit_words as in a launch; params 0..4 = words per slot of memories 0..3, params 4..8 = their
// slots, param 8 = how many memories exist. status.incomplete counts written stores and
// status.temp the leftover ones.

fn kernel_main(x: u32, y: u32) {}

// Written stores of the workgroup, added to the total once per workgroup rather than once per
// store (one global counter would serialise every store of the merge).
var<workgroup> wg_written: atomic<u32>;

// Merges entry i; true if it counts as written.
fn merge_one(i: u32) -> bool {
    let s = temp[i];
    if s.w == 0u {
        return false;
    }
    if s.x >= arrayLength(&page_table) {
        fail(ERR_OUT_OF_RANGE, s.x);
        return false;
    }
    let d = page_table[s.x];
    if (d.x & 3u) != 3u {
        let k = atomicAdd(&status.temp, 1u);
        leftover[k] = s;
        record(s.x, false);
        return false;
    }
    let m = d.x >> 16u;
    if m >= param(8u) || d.y >= param(4u + m) || s.y >= param(m) {
        fail(ERR_OUT_OF_RANGE, s.x);
        return false;
    }
    if s.w == 1u {
        mem_store(m, d.y * param(m) + s.y, s.z);
    }
    return true;
}

@compute @workgroup_size(64, 1, 1)
fn merge(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let i = gid.y * launch.row + gid.x;
    // No early return: the barrier below must be reached by the whole workgroup.
    if gid.x < launch.row && i < launch.count && merge_one(i) {
        atomicAdd(&wg_written, 1u);
    }
    workgroupBarrier();
    if li == 0u {
        let n = atomicLoad(&wg_written);
        if n != 0u {
            atomicAdd(&status.incomplete, n);
        }
    }
}
