//! Recorded steps: a decode step's few hundred short kernels captured once as a CUDA graph and
//! replayed with one launch, so the host's cost of a step no longer grows with its kernels.
//!
//! Memory a recorded step allocates belongs to the graph (stream-ordered allocations become graph
//! memory nodes), so every buffer the step makes must also be freed inside it, and a buffer made
//! before the recording must outlive it. Kernels whose work depends on a cache position read how far
//! the replay moved it from a device integer ([`Lane::shift`](super::context::Lane)).

use std::sync::atomic::Ordering;

use cudarc::driver::sys::{self, CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaGraph, CudaSlice, DevicePtr};

use super::CudaBackend;
use super::context::gpu;
use crate::device::StepRecording;
use crate::error::{Error, Result};

/// One recorded step: the instantiated graph and, for a step whose positions move, the shift it
/// reads.
pub struct StepGraph {
    graph: CudaGraph,
    /// With the position it was recorded at.
    shift: Option<(CudaSlice<i32>, usize)>,
}

impl CudaBackend {
    pub(super) fn record(
        &self,
        position: Option<usize>,
        step: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Option<StepRecording>> {
        // Taken before this thread's lane: a recorder waiting here holds no op another waits out.
        let _one = self.capture_gate.lock().map_err(|_| Error::Gpu("the recording gate was poisoned".into()))?;
        let lane = self.lane()?;
        let shift = match position {
            Some(at) => Some((lane.stream.alloc_zeros::<i32>(1).map_err(gpu)?, at)),
            None => None,
        };
        let address = shift.as_ref().map_or(0, |(s, _)| s.device_ptr(&lane.stream).0);
        let _quiet = self.other_lanes_quiet()?;
        lane.stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL).map_err(gpu)?;
        lane.recording.store(true, Ordering::Relaxed);
        lane.shift.store(address, Ordering::Relaxed);
        let stepped = step();
        lane.recording.store(false, Ordering::Relaxed);
        lane.shift.store(0, Ordering::Relaxed);
        // The frees a failed recording made leave their errors in the context, where cudarc's
        // end_capture would return one before ending the capture, leaving the stream capturing.
        let _ = self.ctx.check_err();
        let ended = lane.stream.end_capture(CUgraphInstantiate_flags(0));
        // A recording that failed leaves the driver errors of the frees it made (recorded by the
        // buffers' drops); they are this recording's, not the next op's.
        let _ = self.ctx.check_err();
        stepped?;
        let graph = ended.map_err(gpu)?.ok_or_else(|| Error::Gpu("the recorded step is empty".into()))?;
        graph.upload().map_err(gpu)?;
        Ok(Some(StepRecording::Cuda(StepGraph { graph, shift })))
    }

    pub(super) fn replay(&self, recording: &StepGraph, position: Option<usize>) -> Result<()> {
        let lane = self.lane()?;
        let stream = lane.stream.cu_stream();
        match (&recording.shift, position) {
            (Some((shift, at)), Some(position)) => {
                let moved = i32::try_from(position as i64 - *at as i64)
                    .map_err(|_| Error::Invalid(format!("position {position} is out of the recorded step's reach")))?;
                let (address, _sync) = shift.device_ptr(&lane.stream);
                // SAFETY: `shift` holds one i32 on this context; the memset is ordered before the
                // graph on this stream, and after the previous replay that read it.
                unsafe { sys::cuMemsetD32Async(address, moved as u32, 1, stream) }.result().map_err(gpu)?;
            }
            (None, None) => {}
            (Some(_), None) => return Err(Error::Invalid("a step recorded to move needs a position".into())),
            (None, Some(_)) => return Err(Error::Invalid("a step recorded at fixed positions cannot move".into())),
        }
        // SAFETY: the graph was instantiated on this context; replays on one stream run one at a
        // time, as a graph with memory nodes requires.
        unsafe { cudarc::driver::result::graph::launch(recording.graph.cu_graph_exec(), stream) }.map_err(gpu)
    }
}
