// Compiled after the prelude into the per-texel pipelines on GPUs: of the invocations of a
// workgroup that translate a page, the first to claim the page's entry in a small workgroup
// table reads and writes its stamp in device memory, and the others skip it. Two pages that
// share an entry only cost extra stamps in device memory, which write the same value, so a
// page is stamped exactly when some invocation translated it and the stamps stay the CPU
// twin's. A device-memory atomic per invocation and page, thousands on one word, was about a
// fifth of boiling's paged frame on an H200. Not on CPU adapters (lavapipe), where the
// workgroup memory's zeroing and barrier cost more than the atomics they save.
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
