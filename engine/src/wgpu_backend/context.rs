//! Opening a wgpu device: which adapter, with its real limits, and what it says of itself.

use crate::error::{Error, Result};

/// The adapter a wgpu backend runs on, and its device.
pub struct Opened {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: wgpu::AdapterInfo,
    pub limits: wgpu::Limits,
    pub features: wgpu::Features,
    /// The device-local memory of the adapter, where the platform says (Vulkan).
    pub memory: Option<u64>,
    /// The matrix shapes wgpu's experimental cooperative-matrix feature offers here (tensor
    /// cores from WGSL); none where the adapter lacks the feature.
    pub cooperative_shapes: usize,
    /// Whether f16 products and the DiT's attention run on the matrix units ([`runs_cooperative_programs`]).
    pub cooperative: bool,
}

/// Workgroup memory the cooperative programs take at most (linear_coop.wgsl: two staged slices of
/// 128 rows x 72 halves, and a fragment of f32 sums for each of its 8 subgroups).
const COOPERATIVE_WORKGROUP_BYTES: u32 = 2 * 128 * 72 * 2 + 8 * 256 * 4;

/// Whether the adapter can run the cooperative programs (linear_coop.wgsl, attention_coop.wgsl):
/// cooperative matrices of 16 x 16 x 16 f16 inputs into f32 sums, f16 arithmetic, and subgroups of
/// exactly 32 lanes (the programs count a workgroup's subgroups as runs of 32 invocations), and
/// the workgroup memory they stage their tiles in.
/// `SONGLOOM_WGPU_COOPERATIVE=0` turns them off, to time the backend without them.
fn runs_cooperative_programs(adapter: &wgpu::Adapter, info: &wgpu::AdapterInfo) -> bool {
    let wanted = wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX | wgpu::Features::SHADER_F16;
    let f16_into_f32 = |p: &wgpu::CooperativeMatrixProperties| {
        (p.m_size, p.n_size, p.k_size) == (16, 16, 16)
            && p.ab_type == wgpu::CooperativeScalarType::F16
            && p.cr_type == wgpu::CooperativeScalarType::F32
    };
    std::env::var("SONGLOOM_WGPU_COOPERATIVE").map_or(true, |v| v != "0")
        && adapter.features().contains(wanted)
        && (info.subgroup_min_size, info.subgroup_max_size) == (32, 32)
        && adapter.limits().max_compute_workgroup_storage_size >= COOPERATIVE_WORKGROUP_BYTES
        && adapter.cooperative_matrix_properties().iter().any(f16_into_f32)
}

/// How far an adapter type is preferred: real GPUs first, a software rasterizer last.
fn rank(kind: wgpu::DeviceType) -> u8 {
    match kind {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Other => 3,
        wgpu::DeviceType::Cpu => 4,
    }
}

/// Whether the adapter is a GPU rather than a CPU implementation (lavapipe, WARP, SwiftShader):
/// `auto` takes only these.
pub fn is_real_gpu(kind: wgpu::DeviceType) -> bool {
    !matches!(kind, wgpu::DeviceType::Cpu)
}

/// Opens the preferred adapter of Vulkan, Metal and DX12 (`SONGLOOM_WGPU_ADAPTER` picks one by a
/// part of its name), requesting every limit it has; with `real_gpu_only`, refuses a CPU
/// implementation before opening a device on it.
pub fn open(real_gpu_only: bool) -> Result<Opened> {
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
        backends: wgpu::Backends::PRIMARY,
        ..wgpu::InstanceDescriptor::new_without_display_handle()
    });
    let mut adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::PRIMARY));
    if let Ok(wanted) = std::env::var("SONGLOOM_WGPU_ADAPTER") {
        let wanted = wanted.to_lowercase();
        adapters.retain(|a| a.get_info().name.to_lowercase().contains(&wanted));
        if adapters.is_empty() {
            return Err(Error::Invalid(format!("no wgpu adapter's name contains `{wanted}` (SONGLOOM_WGPU_ADAPTER)")));
        }
    }
    adapters.sort_by_key(|a| rank(a.get_info().device_type));
    let adapter = adapters.into_iter().next().ok_or_else(|| {
        Error::Invalid(
            "no Vulkan, Metal or DX12 adapter (install a GPU driver, or mesa-vulkan-drivers for lavapipe)".into(),
        )
    })?;
    let info = adapter.get_info();
    if real_gpu_only && !is_real_gpu(info.device_type) {
        return Err(Error::Invalid(format!("{} is a CPU implementation, not a GPU", info.name)));
    }
    if !adapter.get_downlevel_capabilities().flags.contains(wgpu::DownlevelFlags::SHADER_F16_IN_F32) {
        return Err(Error::Invalid(format!(
            "{} cannot unpack f16 in shaders, which the weight formats need",
            info.name
        )));
    }
    let limits = adapter.limits();
    let cooperative = runs_cooperative_programs(&adapter, &info);
    let mut features = adapter.features() & (wgpu::Features::SHADER_F16 | wgpu::Features::SUBGROUP);
    if cooperative {
        features |= wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;
    }
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("songloom"),
        required_features: features,
        required_limits: limits.clone(),
        // SAFETY: wgpu asks this acknowledgement for its experimental features; the one taken,
        // cooperative matrices, is used by two programs (linear_coop.wgsl, attention_coop.wgsl),
        // which the conformance suite and the fast-precision tests check on every adapter that
        // runs them.
        experimental_features: if cooperative {
            unsafe { wgpu::ExperimentalFeatures::enabled() }
        } else {
            wgpu::ExperimentalFeatures::disabled()
        },
        ..Default::default()
    }))
    .map_err(|e| Error::Gpu(format!("opening {}: {e}", info.name)))?;
    let memory = device_local_memory(&adapter);
    let cooperative_shapes = if adapter.features().contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX) {
        adapter.cooperative_matrix_properties().len()
    } else {
        0
    };
    Ok(Opened { device, queue, info, limits, features, memory, cooperative_shapes, cooperative })
}

/// The largest device-local heap, read from Vulkan (wgpu itself does not say).
fn device_local_memory(adapter: &wgpu::Adapter) -> Option<u64> {
    // SAFETY: the raw handles are only read, while the adapter lives.
    let hal = unsafe { adapter.as_hal::<wgpu::hal::api::Vulkan>() }?;
    let instance = hal.shared_instance().raw_instance();
    // SAFETY: a valid physical device of this instance.
    let properties = unsafe { instance.get_physical_device_memory_properties(hal.raw_physical_device()) };
    properties
        .memory_heaps_as_slice()
        .iter()
        .filter(|h| h.flags.contains(ash::vk::MemoryHeapFlags::DEVICE_LOCAL))
        .map(|h| h.size)
        .max()
}

/// The platform API of an adapter, in words.
pub fn api_name(backend: wgpu::Backend) -> &'static str {
    match backend {
        wgpu::Backend::Vulkan => "Vulkan",
        wgpu::Backend::Metal => "Metal",
        wgpu::Backend::Dx12 => "DX12",
        wgpu::Backend::Gl => "OpenGL",
        wgpu::Backend::BrowserWebGpu => "WebGPU",
        wgpu::Backend::Noop => "none",
    }
}

/// What runs here, in words: the adapter, its API and type, memory, the limits that matter and
/// the optional features.
pub fn describe(opened: &Opened) -> String {
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    let kind = match opened.info.device_type {
        wgpu::DeviceType::DiscreteGpu => "discrete GPU",
        wgpu::DeviceType::IntegratedGpu => "integrated GPU",
        wgpu::DeviceType::VirtualGpu => "virtual GPU",
        wgpu::DeviceType::Cpu => "CPU adapter",
        wgpu::DeviceType::Other => "adapter",
    };
    let memory = opened.memory.map(|m| format!(" with {:.1} GiB", gib(m))).unwrap_or_default();
    let yes = |f: wgpu::Features| if opened.features.contains(f) { "yes" } else { "no" };
    let auto = if is_real_gpu(opened.info.device_type) { "" } else { "; `auto` passes it over" };
    let cooperative = match (opened.cooperative_shapes, opened.cooperative) {
        (0, _) => "no".to_string(),
        (n, true) => format!("{n} shapes, f16 products and the DiT's attention on them"),
        (n, false) => format!("{n} shapes, unused (no 16x16x16 f16 into f32 with subgroups of 32, or turned off)"),
    };
    format!(
        "{}: {} {kind}{memory}; largest binding {:.2} GiB, buffer {:.2} GiB, workgroup memory {} KiB; f16 {}, \
         subgroups {}, cooperative matrices {cooperative}{auto}",
        opened.info.name,
        api_name(opened.info.backend),
        gib(opened.limits.max_storage_buffer_binding_size),
        gib(opened.limits.max_buffer_size),
        opened.limits.max_compute_workgroup_storage_size / 1024,
        yes(wgpu::Features::SHADER_F16),
        yes(wgpu::Features::SUBGROUP),
    )
}
