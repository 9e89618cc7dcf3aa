//! The plain single-device convolution: two arrays, no runtime, written on its own. It adds
//! the same f32 products in the same order as the kernels (module docs).

/// `steps` applications of the F × F filter `w` to `image` (n × n, y · n + x).
pub fn run(image: &[f32], n: u32, w: &[f32], f: u32, steps: u32) -> Vec<f32> {
    let n = n as isize;
    let r = (f / 2) as isize;
    let mut cur = image.to_vec();
    let mut next = vec![0.0f32; cur.len()];
    for _ in 0..steps {
        for y in 0..n {
            for x in 0..n {
                let mut sum = 0.0f32;
                for j in 0..f as isize {
                    let sy = (y + j - r).clamp(0, n - 1);
                    for i in 0..f as isize {
                        let sx = (x + i - r).clamp(0, n - 1);
                        sum += w[(j * f as isize + i) as usize] * cur[(sy * n + sx) as usize];
                    }
                }
                next[(y * n + x) as usize] = sum;
            }
        }
        std::mem::swap(&mut cur, &mut next);
    }
    cur
}
