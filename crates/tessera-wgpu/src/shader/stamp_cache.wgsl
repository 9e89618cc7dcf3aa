// Compiled after the prelude into the per-texel pipelines on GPUs: of the invocations of a
// workgroup that translate a page, the first to claim the page's entry in a small workgroup
// table reads and writes its stamp in device memory, and the others skip it. Two pages that
// share an entry only cost extra stamps in device memory, which write the same value, so a
// page is stamped exactly when some invocation translated it and the stamps stay the CPU
// twin's. On an H200, leaving the stamps out took 15% off boiling's paged frame on the tile
// path, and stamps and the store array together 37% off the per-texel path: a device-memory
// atomic per invocation and page, thousands on one word. Not on CPU adapters (lavapipe), where
// workgroup memory and its barrier made the tile path about 3x slower; this variant was not
// timed there.
const STAMP_WAYS: u32 = 16u;
// Per entry: the page it holds, plus one (zero, the workgroup memory's start, is no page).
var<workgroup> wg_stamped: array<atomic<u32>, STAMP_WAYS>;

fn first_in_group(page: u32) -> bool {
    let k = page % STAMP_WAYS;
    if atomicLoad(&wg_stamped[k]) == page + 1u {
        return false;
    }
    return atomicExchange(&wg_stamped[k], page + 1u) != page + 1u;
}
