//! Steps recorded once and replayed ([`Backend::record_step`](super::Backend::record_step)): the
//! AR loop's decode steps launch a few hundred short kernels each, and issuing them one by one costs
//! the host about as long as the GPU takes to run them.

use super::Device;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// How many times a step is recorded before it runs op by op for good.
const RECORDING_TRIES: u32 = 4;

/// A step a backend recorded, to replay.
pub enum StepRecording {
    Cuda(crate::cuda::StepGraph),
}

/// A recording with the buffers it reads its input from and writes its output to, and the
/// positions it was recorded at.
pub struct ReadyStep {
    recording: StepRecording,
    input: Tensor,
    output: Tensor,
    positions: Vec<usize>,
}

/// A step run recorded where the device records steps, and directly elsewhere. The recording reads
/// its input from, and writes its output to, buffers of its own, and bakes in the addresses of
/// everything else the step touches: it lives as long as those (a cache's buffers, the weights).
#[derive(Default)]
pub enum RecordedStep {
    /// Not run yet.
    #[default]
    Untried,
    /// Run once op by op, which loads what the step's kernels need (modules, scratch, library
    /// workspaces) before a recording, where loading cannot happen.
    Warm,
    // Boxed: the recording and its two buffers are large beside the other states.
    Ready(Box<ReadyStep>),
    /// Recording failed `failures` times, the last for `why` (another thread's first use of a
    /// kernel can end a recording); run op by op for `wait` more runs, then recorded again.
    Retry {
        failures: u32,
        wait: u32,
        why: String,
    },
    /// Run op by op, and why: the backend records no steps, the caller asked, or recording failed
    /// every time it was tried.
    Direct(String),
}

impl RecordedStep {
    /// Runs `step` on `input`, returning its output of shape `output_shape` as a tensor of the
    /// caller's. The first run runs it op by op, the second records it and replays the recording,
    /// later runs only replay. `positions` are the first cache row the step writes in each cache it
    /// appends to, where replays move them (a decode step), none where every replay writes the rows
    /// the recording did. A replay moves every cache by as much as the first: where the caches
    /// moved apart since the recording (or are others), the recording is dropped and the step runs
    /// op by op, to be recorded again.
    ///
    /// The step must not read host values that change between runs: a replay repeats what the
    /// recording saw, but for the positions.
    pub fn run(
        &mut self,
        device: &Device,
        positions: &[usize],
        input: &Tensor,
        output_shape: &[usize],
        step: &mut dyn FnMut(&Tensor) -> Result<Tensor>,
    ) -> Result<Tensor> {
        match self {
            RecordedStep::Untried => {
                *self = RecordedStep::Warm;
                return step(input);
            }
            RecordedStep::Warm => *self = Self::record(device, positions, input, output_shape, step, 0)?,
            RecordedStep::Retry { failures, wait: 0, .. } => {
                let failures = *failures;
                *self = Self::record(device, positions, input, output_shape, step, failures)?;
            }
            RecordedStep::Retry { wait, .. } => *wait -= 1,
            _ => {}
        }
        if let RecordedStep::Ready(ready) = self
            && moved_apart(&ready.positions, positions)
        {
            // The recording's caches are not where it put them: it no longer stands for this step.
            *self = RecordedStep::Untried;
            return step(input);
        }
        match self {
            RecordedStep::Ready(ready) => {
                let ReadyStep { recording, input: fixed, output, .. } = &mut **ready;
                if input.shape() != fixed.shape() {
                    return Err(Error::Invalid(format!(
                        "a recorded step takes inputs of shape {:?}, not {:?}",
                        fixed.shape(),
                        input.shape()
                    )));
                }
                device.write_rows(fixed, input, 1, 0)?;
                device.replay_step(recording, positions.first().copied())?;
                // A copy: the next replay overwrites the output.
                device.slice_rows(output, 0, output.shape()[0])
            }
            _ => step(input),
        }
    }

    fn record(
        device: &Device,
        positions: &[usize],
        input: &Tensor,
        output_shape: &[usize],
        step: &mut dyn FnMut(&Tensor) -> Result<Tensor>,
        failures: u32,
    ) -> Result<RecordedStep> {
        if output_shape.len() != 2 || input.shape().len() != 2 {
            return Ok(RecordedStep::Direct("only steps over matrices are recorded".into()));
        }
        // Made before the recording, so the graph owns neither.
        let fixed = device.slice_rows(input, 0, input.shape()[0])?;
        let mut output = device.upload(Tensor::zeros(output_shape))?;
        let recorded = device.record_step(positions.first().copied(), &mut || {
            let out = step(&fixed)?;
            device.write_rows(&mut output, &out, 1, 0)
        });
        Ok(match recorded {
            Ok(Some(recording)) => RecordedStep::Ready(Box::new(ReadyStep {
                recording,
                input: fixed,
                output,
                positions: positions.to_vec(),
            })),
            Ok(None) => RecordedStep::Direct("the device records no steps".into()),
            Err(e) if failures + 1 >= RECORDING_TRIES => {
                RecordedStep::Direct(format!("recording failed {RECORDING_TRIES} times, the last: {e}"))
            }
            Err(e) => RecordedStep::Retry { failures: failures + 1, wait: 8 << failures, why: e.to_string() },
        })
    }

    /// How the step runs, in words.
    pub fn describe(&self) -> String {
        match self {
            RecordedStep::Untried | RecordedStep::Warm => "not recorded yet".into(),
            RecordedStep::Ready(_) => "recorded once, replayed".into(),
            RecordedStep::Retry { why, .. } => format!("run op by op until recorded again (recording failed: {why})"),
            RecordedStep::Direct(why) => format!("run op by op ({why})"),
        }
    }

    /// A step that will run op by op, as a baseline for the recorded one.
    pub fn op_by_op() -> Self {
        RecordedStep::Direct("as asked".into())
    }

    pub fn is_replayed(&self) -> bool {
        matches!(self, RecordedStep::Ready(_))
    }
}

/// Whether caches recorded at `at` stand at `now` other than all moved by one amount.
fn moved_apart(at: &[usize], now: &[usize]) -> bool {
    let mut moves = now.iter().zip(at).map(|(&now, &then)| now as i64 - then as i64);
    let first = moves.next();
    at.len() != now.len() || moves.any(|m| Some(m) != first)
}
