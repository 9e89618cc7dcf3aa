//! Remote mode is not built on wgpu: a launch binding a remote object is refused with a typed
//! error before anything runs, and the node goes on serving migrate objects.
//!
//! Without an adapter this test prints that it skipped and passes, unless
//! `TESSERA_REQUIRE_VULKAN=1`.

mod common;

use tessera_core::{AccessMode, ObjectDesc, ObjectId, TexelFormat};
use tessera_runtime::{Fault, Invocation, Kernel, RuntimeError, SystemConfig};

struct Copy {
    from: ObjectId,
    to: ObjectId,
}

impl Kernel for Copy {
    fn name(&self) -> &'static str {
        "remote_wgpu_copy"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        let v = inv.load_f32(self.from, x, y)?;
        inv.store_f32(self.to, x, y, v)
    }
}

#[test]
fn a_launch_binding_a_remote_object_is_refused_on_wgpu() {
    let Some(sys) = common::system(&SystemConfig {
        devices: 2,
        ..Default::default()
    }) else {
        return;
    };
    let desc = ObjectDesc::texture(8, 8, TexelFormat::R32Float, 4).unwrap();
    let remote = sys.create_with(desc, None, AccessMode::Remote).unwrap();
    let out = sys.create(desc, None).unwrap();
    let err = sys
        .run_kernel(
            Copy {
                from: remote.id,
                to: out.id,
            },
            &[&remote, &out],
            8,
            8,
        )
        .unwrap_err();
    assert_eq!(
        err,
        RuntimeError::RemoteNotBuilt {
            backend: "wgpu".into(),
            object: remote.id,
        }
    );
    assert_eq!(
        err.to_string(),
        format!(
            "remote mode is not built on the wgpu backend (object {} is remote)",
            remote.id
        )
    );
}
