//! A deterministic camera path through a scene's spawn points, and the camera's matrices.

use std::f32::consts::PI;

use crate::{Scene, Spawn};

/// A player's eye above the spawn origin (Quake 3's default view height).
pub const EYE_HEIGHT: f32 = 26.0;

/// A camera in Quake coordinates (Z up).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Camera {
    /// Eye position.
    pub eye: [f32; 3],
    /// Radians counter-clockwise from +X seen from above (0 looks along +X, π/2 along +Y).
    pub yaw: f32,
    /// Radians above the horizon (positive looks up).
    pub pitch: f32,
    /// Vertical field of view, radians.
    pub fov_y: f32,
}

impl Camera {
    /// Near and far clip distances, Quake units.
    pub const NEAR: f32 = 4.0;
    pub const FAR: f32 = 16384.0;
    /// The default vertical field of view: 73.74° is Quake's 90° horizontal at 4:3.
    pub const FOV_Y: f32 = 1.287_002_2;

    /// The unit view direction.
    pub fn forward(&self) -> [f32; 3] {
        let (sp, cp) = self.pitch.sin_cos();
        let (sy, cy) = self.yaw.sin_cos();
        [cp * cy, cp * sy, sp]
    }

    /// World to clip space, column-major (`m[column][row]`, as WGSL's `mat4x4<f32>` and
    /// glam store it): `clip = m · (x, y, z, 1)`.
    ///
    /// The view is right-handed: the camera looks down its −Z, +X is to the right of the view
    /// and +Y up on screen (world Z up, with no roll). The projection is perspective with
    /// depth 0 at [`Camera::NEAR`] and 1 at [`Camera::FAR`] (wgpu's, Vulkan's and D3D's clip
    /// space), NDC x right and y up. `aspect` is width / height.
    pub fn view_proj(&self, aspect: f32) -> [[f32; 4]; 4] {
        let f = self.forward();
        // Right depends on yaw only, so looking straight up or down does not degenerate.
        let (sy, cy) = self.yaw.sin_cos();
        let r = [sy, -cy, 0.0];
        let u = cross(r, f);
        let e = self.eye;
        let view = [
            [r[0], r[1], r[2], -dot(r, e)],
            [u[0], u[1], u[2], -dot(u, e)],
            [-f[0], -f[1], -f[2], dot(f, e)],
            [0.0, 0.0, 0.0, 1.0],
        ];
        let t = 1.0 / (self.fov_y / 2.0).tan();
        let (n, fa) = (Self::NEAR, Self::FAR);
        let proj = [
            [t / aspect, 0.0, 0.0, 0.0],
            [0.0, t, 0.0, 0.0],
            [0.0, 0.0, fa / (n - fa), n * fa / (n - fa)],
            [0.0, 0.0, -1.0, 0.0],
        ];
        // Row-major product, then transposed to columns.
        let mut m = [[0.0f32; 4]; 4];
        for (c, column) in m.iter_mut().enumerate() {
            for (row, out) in column.iter_mut().enumerate() {
                *out = (0..4).map(|k| proj[row][k] * view[k][c]).sum();
            }
        }
        m
    }
}

fn dot(a: [f32; 3], b: [f32; 3]) -> f32 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

fn cross(a: [f32; 3], b: [f32; 3]) -> [f32; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

/// One camera per frame.
#[derive(Clone, Debug, PartialEq)]
pub struct CameraPath {
    pub frames: Vec<Camera>,
}

/// Wraps an angle in degrees into (−180, 180].
fn wrap_degrees(a: f32) -> f32 {
    let w = a.rem_euclid(360.0);
    if w > 180.0 {
        w - 360.0
    } else {
        w
    }
}

/// Uniform Catmull–Rom between `p1` (u = 0) and `p2` (u = 1).
fn catmull_rom(p0: f32, p1: f32, p2: f32, p3: f32, u: f32) -> f32 {
    let (u2, u3) = (u * u, u * u * u);
    0.5 * (2.0 * p1
        + (p2 - p0) * u
        + (2.0 * p0 - 5.0 * p1 + 4.0 * p2 - p3) * u2
        + (3.0 * p1 - p0 - 3.0 * p2 + p3) * u3)
}

impl CameraPath {
    pub const DEFAULT_FRAMES: usize = 500;

    /// A closed loop through the scene's spawn points at eye height, in a fixed order (sorted
    /// by x, then y, z and yaw), so the same scene always gives the same path. Positions follow
    /// a uniform Catmull–Rom spline through the points, which frame `k · frames / spawns`
    /// reaches exactly when that is a whole number; yaw turns from each spawn's facing to the
    /// next one's the short way round; pitch is 0. With fewer than two spawns the camera
    /// orbits the centre of the scene's bounds at a quarter of its larger horizontal extent
    /// (at least 64 units), looking at the centre.
    pub fn through_spawns(scene: &Scene, frames: usize) -> CameraPath {
        let mut spawns: Vec<Spawn> = scene.spawns.clone();
        spawns.sort_by(|a, b| {
            let key = |s: &Spawn| [s.origin[0], s.origin[1], s.origin[2], s.yaw_degrees];
            key(a)
                .iter()
                .zip(key(b).iter())
                .map(|(x, y)| x.total_cmp(y))
                .find(|o| o.is_ne())
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        let camera = |eye, yaw_degrees: f32| Camera {
            eye,
            yaw: wrap_degrees(yaw_degrees).to_radians(),
            pitch: 0.0,
            fov_y: Camera::FOV_Y,
        };
        let k = spawns.len();
        let frames = (0..frames)
            .map(|i| {
                if k < 2 {
                    let (lo, hi) = scene.bounds;
                    let centre = [0, 1, 2].map(|a| (lo[a] + hi[a]) / 2.0);
                    let radius = ((hi[0] - lo[0]).max(hi[1] - lo[1]) / 4.0).max(64.0);
                    let theta = 2.0 * PI * i as f32 / frames as f32;
                    let eye = [
                        centre[0] + radius * theta.cos(),
                        centre[1] + radius * theta.sin(),
                        centre[2],
                    ];
                    return camera(eye, theta.to_degrees() + 180.0);
                }
                // Exact integer segment, so frames at spawn points land on them exactly.
                let seg = i * k / frames;
                let u = (i * k - seg * frames) as f32 / frames as f32;
                let p = |d: usize| spawns[(seg + k + d - 1) % k];
                let (p0, p1, p2, p3) = (p(0), p(1), p(2), p(3));
                let mut eye = [0, 1, 2].map(|a| {
                    catmull_rom(p0.origin[a], p1.origin[a], p2.origin[a], p3.origin[a], u)
                });
                eye[2] += EYE_HEIGHT;
                let turn = wrap_degrees(p2.yaw_degrees - p1.yaw_degrees);
                camera(eye, p1.yaw_degrees + turn * u)
            })
            .collect();
        CameraPath { frames }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(m: &[[f32; 4]; 4], p: [f32; 3]) -> [f32; 3] {
        let v = [p[0], p[1], p[2], 1.0];
        let clip: [f32; 4] = std::array::from_fn(|r| (0..4).map(|c| m[c][r] * v[c]).sum());
        [clip[0] / clip[3], clip[1] / clip[3], clip[2] / clip[3]]
    }

    fn close(a: [f32; 3], b: [f32; 3]) -> bool {
        (0..3).all(|k| (a[k] - b[k]).abs() < 1e-5)
    }

    #[test]
    fn view_proj_maps_hand_computed_points() {
        let cam = Camera {
            eye: [0.0, 0.0, 0.0],
            yaw: 0.0,
            pitch: 0.0,
            fov_y: PI / 2.0,
        };
        let m = cam.view_proj(1.0);
        // Straight ahead at 10: centre; depth far/(far-near)·(1 - near/10) = 16384/16380·0.6.
        assert!(close(
            apply(&m, [10.0, 0.0, 0.0]),
            [0.0, 0.0, 16384.0 / 16380.0 * 0.6]
        ));
        // 45° to the left (+Y) is the left edge, 45° up the top edge (fov 90°, aspect 1).
        assert!((apply(&m, [10.0, 10.0, 0.0])[0] + 1.0).abs() < 1e-5);
        assert!((apply(&m, [10.0, 0.0, 10.0])[1] - 1.0).abs() < 1e-5);
        // Near and far planes.
        assert!(apply(&m, [Camera::NEAR, 0.0, 0.0])[2].abs() < 1e-5);
        assert!((apply(&m, [Camera::FAR, 0.0, 0.0])[2] - 1.0).abs() < 1e-4);
        // Turned to look along +Y from (5, 5, 5), aspect 2: a point 10 ahead and 10 to the
        // right (+X) lands at x = 10 / 10 / 2 = 0.5.
        let cam = Camera {
            eye: [5.0, 5.0, 5.0],
            yaw: PI / 2.0,
            ..cam
        };
        let p = apply(&cam.view_proj(2.0), [15.0, 15.0, 5.0]);
        assert!((p[0] - 0.5).abs() < 1e-5 && p[1].abs() < 1e-5, "{p:?}");
    }

    fn scene_with(spawns: Vec<Spawn>) -> Scene {
        Scene {
            name: "t".into(),
            vertices: Vec::new(),
            triangles: Vec::new(),
            textures: Vec::new(),
            missing_textures: Vec::new(),
            lightmaps: Vec::new(),
            spawns,
            bounds: ([0.0, 0.0, 0.0], [400.0, 200.0, 100.0]),
        }
    }

    #[test]
    fn path_passes_through_sorted_spawns_turning_the_short_way() {
        let s = |x: f32, y: f32, yaw| Spawn {
            origin: [x, y, 10.0],
            yaw_degrees: yaw,
        };
        // Given out of order: sorted by x they are a, b, c, d.
        let scene = scene_with(vec![
            s(300.0, 0.0, 10.0),
            s(0.0, 0.0, 350.0),
            s(200.0, 50.0, 90.0),
            s(100.0, 0.0, 0.0),
        ]);
        let path = CameraPath::through_spawns(&scene, 400);
        assert_eq!(path.frames.len(), 400);
        let expect = [
            (0.0, 0.0, -10.0),
            (100.0, 0.0, 0.0),
            (200.0, 50.0, 90.0),
            (300.0, 0.0, 10.0),
        ];
        for (k, (x, y, yaw)) in expect.into_iter().enumerate() {
            let c = path.frames[k * 100];
            assert!(
                close(c.eye, [x, y, 10.0 + EYE_HEIGHT]),
                "frame {}: {:?}",
                k * 100,
                c.eye
            );
            assert!(
                (c.yaw - f32::to_radians(yaw)).abs() < 1e-5,
                "frame {}: {}",
                k * 100,
                c.yaw
            );
            assert_eq!(c.pitch, 0.0);
        }
        // From 350° to 0° the short way: halfway is -5°, not 175°.
        assert!((path.frames[50].yaw - f32::to_radians(-5.0)).abs() < 1e-5);
        // Closing the loop, 10° back to 350°: halfway is 0°.
        assert!(path.frames[350].yaw.abs() < 1e-5);
        assert_eq!(path, CameraPath::through_spawns(&scene, 400));
    }

    #[test]
    fn no_or_one_spawn_orbits_the_centre() {
        for spawns in [
            vec![],
            vec![Spawn {
                origin: [1.0, 2.0, 3.0],
                yaw_degrees: 0.0,
            }],
        ] {
            let path = CameraPath::through_spawns(&scene_with(spawns), CameraPath::DEFAULT_FRAMES);
            assert_eq!(path.frames.len(), 500);
            for c in &path.frames {
                // Centre (200, 100, 50), radius 400 / 4 = 100.
                let r = ((c.eye[0] - 200.0).powi(2) + (c.eye[1] - 100.0).powi(2)).sqrt();
                assert!((r - 100.0).abs() < 1e-3 && c.eye[2] == 50.0);
                let f = c.forward();
                let to_centre = [(200.0 - c.eye[0]) / 100.0, (100.0 - c.eye[1]) / 100.0];
                assert!((f[0] - to_centre[0]).abs() < 1e-3 && (f[1] - to_centre[1]).abs() < 1e-3);
            }
        }
        assert!(CameraPath::through_spawns(&scene_with(vec![]), 0)
            .frames
            .is_empty());
    }
}
