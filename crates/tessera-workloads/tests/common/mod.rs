//! What the game trace's test binaries share; each uses part of it.
#![allow(dead_code)]

use tessera_runtime::{Procedure, System, SystemConfig};
use tessera_workloads::quake::render::RenderOptions;
use tessera_workloads::quake::Split;

/// The screen the game trace's tests render.
pub const W: u32 = 96;
pub const H: u32 = 64;

/// A node of `devices` CPU devices, two threads, memories of `memory_bytes`.
pub fn cpu(devices: usize, memory_bytes: u64) -> System {
    System::cpu(&SystemConfig::new(devices).threads(2).memory(memory_bytes)).unwrap()
}

/// The game trace's options on the W × H screen, nothing cleared or dropped between frames.
pub fn opts(page: u32, split: Split, procedure: Procedure) -> RenderOptions {
    RenderOptions {
        width: W,
        height: H,
        page,
        split,
        procedure,
        clear_each_frame: false,
        drop_unused: false,
    }
}
