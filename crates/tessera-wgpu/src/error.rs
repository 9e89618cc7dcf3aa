//! What can go wrong on a wgpu device, as typed values with messages a user can act on.

use tessera_core::DeviceId;
use tessera_runtime::RuntimeError;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WgpuError {
    #[error("no GPU adapter found ({0}); on Linux install Mesa's lavapipe (apt-get install mesa-vulkan-drivers) or a GPU driver")]
    NoAdapter(String),
    #[error("adapter {adapter} refused a device: {message}")]
    RequestDevice { adapter: String, message: String },
    #[error("the GPU device was lost: {0}")]
    DeviceLost(String),
    #[error("out of GPU memory: {0}")]
    OutOfMemory(String),
    #[error("a kernel binds at most {max} physical memories; memory {memory} was asked for")]
    TooManyMemories { memory: u16, max: usize },
    #[error("kernel {kernel} has no WGSL twin")]
    NoWgsl { kernel: String },
    #[error("kernel {kernel} does not compile: {message}")]
    Shader { kernel: String, message: String },
    #[error("a launch binds at most {max} remote objects on wgpu; kernel {kernel} binds more")]
    TooManyRemote { kernel: String, max: u32 },
    #[error("remote object {object} lives on another wgpu device: the devices of a node must share one (tessera_wgpu::system, or WgpuDevice::on with one SharedGpu)")]
    RemoteAcrossDevices { object: tessera_core::ObjectId },
    #[error("wgpu: {0}")]
    Wgpu(String),
    #[error("{0}")]
    Invalid(String),
}

impl WgpuError {
    /// The runtime's error for this device.
    pub fn on(self, device: DeviceId) -> RuntimeError {
        RuntimeError::Backend {
            device,
            message: self.to_string(),
        }
    }
}
