//! An `ObjectDesc`'s variants are public, so a user can build one without its constructor's
//! checks. The system holds such a description to those checks: a typed error, never a panic
//! on the memory manager's thread, which would end the system for every later call.
// With `shuttle` the runtime's threads run only inside a shuttle run (tests/shuttle.rs).
#![cfg(not(feature = "shuttle"))]

use tessera_core::{Addressing, CoreError, MipLayout, ObjectDesc, PageSize, TexelFormat};
use tessera_runtime::{RuntimeError, System, SystemConfig};

#[test]
fn a_hand_built_description_is_checked_and_the_system_goes_on() {
    let sys = System::cpu(&SystemConfig::new(2)).unwrap();
    let page = PageSize::new(16).unwrap();
    let bad = [
        // Pages of no bytes: a division by zero when the pages were counted.
        ObjectDesc::Buffer {
            len: 10,
            page_bytes: 0,
        },
        // Not a power of two, and not whole words.
        ObjectDesc::Buffer {
            len: 64,
            page_bytes: 12,
        },
        ObjectDesc::Buffer {
            len: 10,
            page_bytes: 4,
        },
        // Its size overflowed 64 bits when its host bytes were counted.
        ObjectDesc::Texture {
            width: u32::MAX,
            height: u32::MAX,
            format: TexelFormat::Rgba32Float,
            page,
        },
        ObjectDesc::Texture {
            width: 0,
            height: 0,
            format: TexelFormat::R32Float,
            page,
        },
        // A chain the samplers cannot read: only RGBA8 is mipmapped.
        ObjectDesc::Mipmapped {
            layout: MipLayout::new(64, 64, 16, None, 0).unwrap(),
            format: TexelFormat::R32Float,
            addressing: Addressing::Wrap,
        },
    ];
    for desc in bad {
        match sys.create(desc, None) {
            Err(RuntimeError::Core(e)) => assert!(
                matches!(
                    e,
                    CoreError::BadBufferPageSize(_)
                        | CoreError::BufferNotWords(_)
                        | CoreError::Oversized { .. }
                        | CoreError::ZeroSized { .. }
                        | CoreError::MipFormat { .. }
                ),
                "{desc:?}: {e:?}"
            ),
            other => panic!("{desc:?} gave {other:?}"),
        }
    }
    // The zero-sized texture is called what it is, not an empty page range.
    let e = sys
        .create(
            ObjectDesc::Texture {
                width: 0,
                height: 0,
                format: TexelFormat::R32Float,
                page,
            },
            None,
        )
        .unwrap_err();
    assert!(
        matches!(e, RuntimeError::Core(CoreError::ZeroSized { .. })),
        "{e:?}"
    );
    // The memory manager is alive: a good object is made and read back.
    let good = ObjectDesc::buffer(64, 16).unwrap();
    let data: Vec<u8> = (0..64).collect();
    let o = sys.create(good, Some(data.clone())).unwrap();
    assert_eq!(sys.read(&o).unwrap(), data);
}
