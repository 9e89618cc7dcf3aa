//! The plain single-device stencil: two arrays, no runtime, written on its own (not through
//! the kernel) so that it checks the kernels rather than repeating them. It adds the same
//! f32s in the same order as the kernels (module docs), so results agree bit for bit.

/// `steps` steps of the radius-`r` stencil from `field` (n³ cells, (z · n + y) · n + x).
pub fn run(field: &[f32], n: u32, r: u32, steps: u32) -> Vec<f32> {
    let [w0, wx, wy, wz] = super::weights(r);
    let n = n as usize;
    let mut cur = field.to_vec();
    let mut next = vec![0.0f32; cur.len()];
    let get = |f: &[f32], x: isize, y: isize, z: isize| -> f32 {
        let inside = |c: isize| c >= 0 && (c as usize) < n;
        if inside(x) && inside(y) && inside(z) {
            f[(z as usize * n + y as usize) * n + x as usize]
        } else {
            0.0
        }
    };
    for _ in 0..steps {
        for z in 0..n as isize {
            for y in 0..n as isize {
                for x in 0..n as isize {
                    let mut c = w0 * get(&cur, x, y, z);
                    for s in 1..=r as isize {
                        let sx = get(&cur, x - s, y, z) + get(&cur, x + s, y, z);
                        let sy = get(&cur, x, y - s, z) + get(&cur, x, y + s, z);
                        let sz = get(&cur, x, y, z - s) + get(&cur, x, y, z + s);
                        c += (wx * sx + wy * sy) + wz * sz;
                    }
                    next[(z as usize * n + y as usize) * n + x as usize] = c;
                }
            }
        }
        std::mem::swap(&mut cur, &mut next);
    }
    cur
}
