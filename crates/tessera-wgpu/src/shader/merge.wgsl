// Merge (paper 3.5, third pass) on the GPU: writes a pass's temporary into the pages through
// the page table, after invocation.wgsl, whose bindings it shares. Stores whose page is not held
// writable go to `leftover` and set the page's bit in the read half of `bits`, which the
// compaction kernel turns into the list of pages to request. Stores run in parallel: two
// invocations storing to one word in one pass race, as the memory model says; of one
// invocation's stores to a word the prelude marked all but the last superseded (kind 2).
//
// Its own parameters are in `merge_info` (MergeInfo, from the generated header); of the
// launch's it uses bit_words alone, through `record`. status.incomplete counts written stores
// and status.temp the leftover ones.

@group(0) @binding(12) var<uniform> merge_info: MergeInfo;

fn kernel_main(x: u32, y: u32) {}

// Written stores of the workgroup, added to the total once per workgroup rather than once per
// store (one global counter would serialise every store of the merge).
var<workgroup> wg_written: atomic<u32>;
var<workgroup> wg_gate_merge: u32;

// Merges entry i; true if it counts as written.
fn merge_one(i: u32) -> bool {
    let s = temp[i];
    if s.w == 0u {
        return false;
    }
    if s.x >= arrayLength(&page_table) {
        fail(ERR_BAD_SLOT, s.x, 0u, 0u, 0u);
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
    if m >= merge_info.memories || d.y >= merge_info.capacity[m]
        || s.y >= merge_info.slot_words[m] {
        fail(ERR_BAD_SLOT, s.x, 0u, 0u, 0u);
        return false;
    }
    if s.w == 1u {
        mem_store(m, d.y * merge_info.slot_words[m] + s.y, s.z);
    }
    return true;
}

@compute @workgroup_size(64, 1, 1)
fn merge(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let i = gid.y * merge_info.row + gid.x;
    g_idx = i;
    // `record` skips the bit it set last, and a private starts at 0, which is the key of a
    // read of page 0: unset, a store left over for page 0 recorded no request, so the merge
    // reported nothing missing and the store was never merged. The kernels' entry points set
    // it per invocation (`invocation`); the merge's must too.
    g_rec = NONE;
    // The gate, read once per workgroup rather than by every stored texel: thousands of
    // atomic loads of one word (on an H200 the two-pass frame went from 12.9-13.1 to
    // 12.0-12.1 ms, docs/WGPU.md).
    if li == 0u {
        wg_gate_merge = atomicLoad(&queue_gate);
    }
    let open = launch.seq == 0u || workgroupUniformLoad(&wg_gate_merge) >= launch.seq;
    // No early return: the barrier below must be reached by the whole workgroup. A queued
    // merge behind work that faulted or asked for a page merges nothing.
    if open && gid.x < merge_info.row && i < merge_info.count && merge_one(i) {
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
