// Compaction: turns a launch's request bit fields (read at [0, n), write at [n, 2n)) into a
// compact list of (page, 1 if write else 0), so only the list is read back. A page asked for
// both ways is one write request, as RequestBits::uniquify does. Clears the fields for the
// next launch. The list's order is unspecified; the host sorts it.

// CompactInfo and RequestsHead come from the header tessera_wgpu::abi generates.
struct Requests {
    head: RequestsHead,
    items: array<vec2<u32>>,
}

@group(0) @binding(0) var<uniform> cp: CompactInfo;
@group(0) @binding(1) var<storage, read_write> cbits: array<u32>;
@group(0) @binding(2) var<storage, read_write> requests: Requests;

@compute @workgroup_size(64, 1, 1)
fn compact(@builtin(global_invocation_id) gid: vec3<u32>) {
    let w = gid.y * cp.row + gid.x;
    if gid.x >= cp.row || w >= cp.words {
        return;
    }
    let r = cbits[w];
    let wr = cbits[cp.words + w];
    var any = r | wr;
    if any == 0u {
        return;
    }
    cbits[w] = 0u;
    cbits[cp.words + w] = 0u;
    while any != 0u {
        let b = firstTrailingBit(any);
        any &= any - 1u;
        let k = atomicAdd(&requests.head.count, 1u);
        if k < arrayLength(&requests.items) {
            requests.items[k] = vec2<u32>(w * 32u + b, (wr >> b) & 1u);
        }
    }
}
