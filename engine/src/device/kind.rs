//! The compute backends by name. A leaf: it imports nothing, so the error type and the tensor can
//! name a backend without depending on one.

/// The compute backends, by the name the CLI, the window and the recipe use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    Cpu,
    Cuda,
    Wgpu,
}

impl DeviceKind {
    pub const ALL: [DeviceKind; 3] = [DeviceKind::Cpu, DeviceKind::Cuda, DeviceKind::Wgpu];

    pub fn name(self) -> &'static str {
        match self {
            DeviceKind::Cpu => "cpu",
            DeviceKind::Cuda => "cuda",
            DeviceKind::Wgpu => "wgpu",
        }
    }
}

impl std::fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
