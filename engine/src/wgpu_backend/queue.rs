//! Recording work: every op's dispatches and copies go into one open command encoder, with their
//! parameters in one uniform buffer, and are submitted together when the host needs a value
//! back, when the device is waited for, or when a batch grows long. So a decode step, a depth
//! frame or a DiT forward is a few submissions, not one per op. The parameters sit at a dynamic
//! offset, so a program's dispatches over the same buffers share one bind group, made once: in a
//! decode step the pool hands out the same buffers frame after frame.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::shaders::Program;
use crate::error::{Error, Result};
use crate::tensor::DType;

/// Bytes of parameters each dispatch gets (the largest uniform offset alignment WebGPU allows).
const PARAM_SLOT: u64 = 256;
/// Dispatches a batch holds at most before it is submitted without waiting.
const BATCH_DISPATCHES: usize = 1024;
/// Dispatches a batch holds by default: the device starts on a decode step's first ops while the
/// host still records the rest, each submission costing the host its own overhead.
const SUBMIT_DISPATCHES: usize = 64;

/// Dispatches a batch holds before it is submitted without waiting: [`SUBMIT_DISPATCHES`], or
/// `SONGLOOM_WGPU_SUBMIT_DISPATCHES` (at most [`BATCH_DISPATCHES`]), to time others.
fn batch_dispatches() -> usize {
    std::env::var("SONGLOOM_WGPU_SUBMIT_DISPATCHES")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .map_or(SUBMIT_DISPATCHES, |n| n.clamp(1, BATCH_DISPATCHES))
}

/// Dispatches one compute pass holds: a pass a dispatch costs the host microseconds each, and
/// lavapipe's recording of one pass grows worse than linearly with its dispatches.
const PASS_DISPATCHES: usize = 64;
/// Workgroups one dimension of a dispatch can hold.
pub const MAX_WORKGROUPS: u32 = 65_535;

/// Readers a program has at most.
const MAX_READERS: usize = 4;

/// Override constants a program has at most.
const MAX_OVERRIDES: usize = 3;

/// A program, the formats of its readers and the values of its override constants, without
/// allocating.
type PipelineKey = (Program, [Option<DType>; MAX_READERS], [u32; MAX_OVERRIDES]);

fn pipeline_key(program: Program, formats: &[DType], overrides: &[u32]) -> PipelineKey {
    assert!(formats.len() <= MAX_READERS, "a program has at most {MAX_READERS} readers");
    assert_eq!(overrides.len(), program.overrides().len(), "{}: a value for each override", program.name());
    (
        program,
        std::array::from_fn(|i| formats.get(i).copied()),
        std::array::from_fn(|i| overrides.get(i).copied().unwrap_or(0)),
    )
}

/// Bind groups kept at most: past this many the cache starts over.
const MAX_BIND_GROUPS: usize = 4096;

/// A compiled program and its bind group layout.
pub struct Pipeline {
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
}

/// A bind group's pipeline (by address: pipelines live as long as the queue) and its buffers.
type BindGroupKey = (usize, Vec<(u32, wgpu::Buffer)>);

/// The bind groups made so far. A bind group holds its buffers alive, so the pool clears the
/// cache before it frees buffers ([`BindGroups::clear`]).
#[derive(Default)]
pub struct BindGroups(Mutex<HashMap<BindGroupKey, wgpu::BindGroup>>);

impl BindGroups {
    pub fn clear(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

/// The bind group layout entries `source` declares: the parameters (binding 0) at a dynamic
/// offset, and each storage buffer read-only or not as declared.
fn layout_entries(source: &str) -> Vec<wgpu::BindGroupLayoutEntry> {
    const BINDING: &str = "@binding(";
    source
        .match_indices(BINDING)
        .filter_map(|(at, _)| {
            let rest = &source[at + BINDING.len()..];
            let binding = rest[..rest.find(')')?].parse().ok()?;
            let declared = &rest[rest.find("var<")? + "var<".len()..];
            let ty = match declared[..declared.find('>')?].replace(' ', "").as_str() {
                "uniform" => wgpu::BufferBindingType::Uniform,
                "storage,read" => wgpu::BufferBindingType::Storage { read_only: true },
                "storage,read_write" => wgpu::BufferBindingType::Storage { read_only: false },
                _ => return None,
            };
            let has_dynamic_offset = ty == wgpu::BufferBindingType::Uniform;
            Some(wgpu::BindGroupLayoutEntry {
                binding,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer { ty, has_dynamic_offset, min_binding_size: None },
                count: None,
            })
        })
        .collect()
}

struct Batch {
    encoder: Option<wgpu::CommandEncoder>,
    /// The compute pass the dispatches go into, open until a copy, the submission or
    /// [`PASS_DISPATCHES`] ends it.
    pass: Option<wgpu::ComputePass<'static>>,
    /// Dispatches in the open pass.
    in_pass: usize,
    params: Vec<u8>,
    dispatches: usize,
}

impl Batch {
    fn end_pass(&mut self) {
        self.pass = None;
        self.in_pass = 0;
    }
}

pub struct Queue {
    device: wgpu::Device,
    queue: wgpu::Queue,
    batch: Mutex<Batch>,
    params: wgpu::Buffer,
    /// Dispatches a batch holds before it is submitted ([`batch_dispatches`]).
    batch_dispatches: usize,
    pipelines: Mutex<HashMap<PipelineKey, Arc<Pipeline>>>,
    bind_groups: Arc<BindGroups>,
    /// The first error the device reported outside an error scope (a bug, or a lost device).
    error: Arc<Mutex<Option<String>>>,
}

/// `n` workgroups as a two-dimensional dispatch whose rows hold at most [`MAX_WORKGROUPS`]
/// (shaders index them with `workgroup_index`, and skip the ones past the end); none for none.
pub fn fold(n: u32) -> Result<(u32, u32)> {
    if n == 0 {
        return Ok((0, 0));
    }
    let x = n.min(MAX_WORKGROUPS);
    let y = n.div_ceil(x);
    if y > MAX_WORKGROUPS {
        return Err(Error::Gpu(format!("{n} workgroups are more than one dispatch can hold")));
    }
    Ok((x, y))
}

impl Queue {
    pub fn new(device: wgpu::Device, queue: wgpu::Queue, bind_groups: Arc<BindGroups>) -> Self {
        let error: Arc<Mutex<Option<String>>> = Arc::default();
        let sink = error.clone();
        device.on_uncaptured_error(Arc::new(move |e| {
            let mut first = sink.lock().unwrap_or_else(|e| e.into_inner());
            first.get_or_insert_with(|| e.to_string());
        }));
        let params = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("params"),
            size: PARAM_SLOT * BATCH_DISPATCHES as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Queue {
            device,
            queue,
            batch: Mutex::new(Batch { encoder: None, pass: None, in_pass: 0, params: Vec::new(), dispatches: 0 }),
            params,
            batch_dispatches: batch_dispatches(),
            pipelines: Mutex::default(),
            bind_groups,
            error,
        }
    }

    /// `program` with readers in `formats` and its override constants (in the order of
    /// [`Program::overrides`]) at `overrides`, compiled at its first use.
    pub fn pipeline(&self, program: Program, formats: &[DType], overrides: &[u32]) -> Result<Arc<Pipeline>> {
        let key = pipeline_key(program, formats, overrides);
        if let Some(p) = self.pipelines.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return Ok(p.clone());
        }
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let source = program.source(formats);
        let layout = self.device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some(program.name()),
            entries: &layout_entries(&source),
        });
        let pipeline_layout = self.device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(program.name()),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let descriptor = wgpu::ShaderModuleDescriptor {
            label: Some(program.name()),
            source: wgpu::ShaderSource::Wgsl(source.into()),
        };
        // SAFETY: the programs index only within the sizes the host checked and passed them, and
        // every loop ends (the conformance suite runs each); without the runtime checks wgpu would
        // add, bounds clamps on every access and counters on every loop, the loops unroll.
        let module =
            unsafe { self.device.create_shader_module_trusted(descriptor, wgpu::ShaderRuntimeChecks::unchecked()) };
        let constants: Vec<(&str, f64)> =
            program.overrides().iter().zip(overrides).map(|(&name, &value)| (name, f64::from(value))).collect();
        let pipeline = self.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(program.name()),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some("main"),
            compilation_options: wgpu::PipelineCompilationOptions { constants: &constants, ..Default::default() },
            cache: None,
        });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::Gpu(format!("building shader {} for {formats:?}: {e}", program.name())));
        }
        let built = Arc::new(Pipeline { pipeline, layout });
        // Should another thread have built the same program meanwhile, its pipeline is kept: the
        // bind groups are keyed by the address of the one pipeline of each key.
        Ok(self.pipelines.lock().unwrap_or_else(|e| e.into_inner()).entry(key).or_insert(built).clone())
    }

    fn batch(&self) -> std::sync::MutexGuard<'_, Batch> {
        self.batch.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records one dispatch of `workgroups` (x, y) with `params` at binding 0 and `buffers` at
    /// their bindings.
    pub fn dispatch(
        &self,
        pipeline: &Pipeline,
        params: &[u32],
        buffers: &[(u32, &wgpu::Buffer)],
        workgroups: (u32, u32),
    ) -> Result<()> {
        assert!(params.len() * 4 <= PARAM_SLOT as usize, "parameters fit their slot");
        let mut batch = self.batch();
        if batch.dispatches == self.batch_dispatches {
            self.submit(&mut batch, None)?;
        }
        let offset = (batch.dispatches as u64) * PARAM_SLOT;
        batch.params.resize(offset as usize, 0);
        batch.params.extend(params.iter().flat_map(|v| v.to_le_bytes()));
        batch.dispatches += 1;
        let group = self.bind_group(pipeline, buffers);
        if batch.in_pass == PASS_DISPATCHES {
            batch.end_pass();
        }
        if batch.pass.is_none() {
            let pass = self.encoder(&mut batch).begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            batch.pass = Some(pass.forget_lifetime());
        }
        batch.in_pass += 1;
        let pass = batch.pass.as_mut().expect("a pass was just opened");
        pass.set_pipeline(&pipeline.pipeline);
        pass.set_bind_group(0, &group, &[offset as u32]);
        pass.dispatch_workgroups(workgroups.0, workgroups.1, 1);
        Ok(())
    }

    /// The bind group of `pipeline` over `buffers` (with the parameters at binding 0), made on
    /// first use.
    fn bind_group(&self, pipeline: &Pipeline, buffers: &[(u32, &wgpu::Buffer)]) -> wgpu::BindGroup {
        let key =
            (std::ptr::from_ref(pipeline) as usize, buffers.iter().map(|&(binding, b)| (binding, b.clone())).collect());
        let mut cache = self.bind_groups.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(group) = cache.get(&key) {
            return group.clone();
        }
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: &self.params,
                offset: 0,
                size: wgpu::BufferSize::new(PARAM_SLOT),
            }),
        }];
        entries.extend(
            buffers
                .iter()
                .map(|&(binding, buffer)| wgpu::BindGroupEntry { binding, resource: buffer.as_entire_binding() }),
        );
        let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.layout,
            entries: &entries,
        });
        if cache.len() >= MAX_BIND_GROUPS {
            cache.clear();
        }
        cache.insert(key, group.clone());
        group
    }

    fn encoder<'a>(&self, batch: &'a mut Batch) -> &'a mut wgpu::CommandEncoder {
        batch.encoder.get_or_insert_with(|| self.device.create_command_encoder(&Default::default()))
    }

    /// Records a copy of `bytes` between buffers.
    pub fn copy(&self, src: &wgpu::Buffer, src_offset: u64, dst: &wgpu::Buffer, dst_offset: u64, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let mut batch = self.batch();
        batch.end_pass();
        self.encoder(&mut batch).copy_buffer_to_buffer(src, src_offset, dst, dst_offset, bytes);
    }

    /// Submits what is recorded, with `then` (a copy into a staging buffer) at the end; the
    /// submission's index.
    fn submit(
        &self,
        batch: &mut Batch,
        then: Option<(&wgpu::Buffer, &wgpu::Buffer, u64)>,
    ) -> Result<wgpu::SubmissionIndex> {
        batch.end_pass();
        let mut encoder =
            batch.encoder.take().unwrap_or_else(|| self.device.create_command_encoder(&Default::default()));
        if let Some((src, staging, bytes)) = then {
            encoder.copy_buffer_to_buffer(src, 0, staging, 0, bytes);
        }
        if !batch.params.is_empty() {
            self.queue.write_buffer(&self.params, 0, &batch.params);
        }
        let index = self.queue.submit([encoder.finish()]);
        batch.params.clear();
        batch.dispatches = 0;
        self.check()?;
        Ok(index)
    }

    /// Submits what is recorded.
    pub fn flush(&self) -> Result<()> {
        let mut batch = self.batch();
        if batch.encoder.is_none() {
            return self.check();
        }
        self.submit(&mut batch, None).map(drop)
    }

    /// Waits until the device has done everything submitted.
    pub fn wait(&self) -> Result<()> {
        self.flush()?;
        self.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| Error::Gpu(e.to_string()))?;
        self.check()
    }

    /// The first `bytes` of `buffer`, after everything recorded before.
    pub fn read(&self, buffer: &wgpu::Buffer, bytes: u64) -> Result<Vec<u8>> {
        if bytes == 0 {
            return Ok(Vec::new());
        }
        let size = bytes.div_ceil(4) * 4;
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("read back"),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let index = self.submit(&mut self.batch(), Some((buffer, &staging, size)))?;
        let (done, result) = std::sync::mpsc::channel();
        staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            let _ = done.send(r);
        });
        // This read's own submission, not the latest: in a streamed song the other half may
        // submit after it, and the AR half's read of its codes would wait for a DiT step.
        let own = wgpu::PollType::Wait { submission_index: Some(index), timeout: None };
        self.device.poll(own).map_err(|e| Error::Gpu(e.to_string()))?;
        result
            .recv()
            .map_err(|_| Error::Gpu("the read-back never completed".into()))?
            .map_err(|e| Error::Gpu(format!("reading back: {e}")))?;
        let bytes =
            staging.slice(..).get_mapped_range().map_err(|e| Error::Gpu(e.to_string()))?[..bytes as usize].to_vec();
        staging.unmap();
        self.check()?;
        Ok(bytes)
    }

    /// The device's first uncaptured error, as an error.
    fn check(&self) -> Result<()> {
        match self.error.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            Some(e) => Err(Error::Gpu(format!("the wgpu device reported: {e}"))),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::layout_entries;
    use crate::wgpu_backend::shaders::every_variant;

    /// Every binding every program declares is in its layout: the parameters at binding 0 at a
    /// dynamic offset, the rest storage buffers, the outputs writable.
    #[test]
    fn every_declared_binding_is_in_the_layout() {
        for (program, formats) in every_variant() {
            let source = program.source(&formats);
            let entries = layout_entries(&source);
            assert_eq!(entries.len(), source.matches("@binding(").count(), "{} {formats:?}", program.name());
            let uniform = wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Uniform,
                has_dynamic_offset: true,
                min_binding_size: None,
            };
            assert!(entries.iter().any(|e| e.binding == 0 && e.ty == uniform), "{}", program.name());
            let writable = wgpu::BufferBindingType::Storage { read_only: false };
            let writes = entries.iter().any(|e| matches!(e.ty, wgpu::BindingType::Buffer { ty, .. } if ty == writable));
            assert!(writes, "{}: no output", program.name());
        }
        // A declaration the parser does not know is left out, and the count above catches it.
        let unknown = "@group(0) @binding(3) var<storage, read_write_twice> y: array<f32>;";
        assert!(layout_entries(unknown).is_empty());
    }
}
