// Compiled after the prelude into the tile path's pipelines (`main_tiles`): of the invocations
// of a workgroup that translate the tile's written page (`g_tile_write`), only the first reads
// and writes its stamp in device memory; the others learn from a workgroup atomic that it is
// done. A device-memory atomic per invocation was the largest part of the prelude a GPU could
// do without (../shared/gpu/README.md, an H200 at 4096²: 3.79 ms a frame without stamps at
// all, against 4.75–4.97 ms without any one of the other parts). The page is stamped exactly when some invocation translated it, as
// before, so the stamps stay the CPU twin's. Its own variant keeps the per-texel entry point
// free of workgroup memory, whose zeroing costs a barrier.
var<workgroup> wg_write_stamped: atomic<u32>;

fn first_in_group(page: u32) -> bool {
    if page != g_tile_write {
        return true;
    }
    return atomicExchange(&wg_write_stamped, 1u) == 0u;
}
