//! Fewer SMs than the GPU has, to time with or to keep some free:
//! - `SONGLOOM_CUDA_SMS=N`: a context limited to N SMs (a CUDA green context), the engine on N SMs
//!   of a larger GPU, to time what the compute-bound stages would take on a GPU with that many
//!   (Jetson Thor has 20). Everything the context launches (kernels, cuBLAS, graphs) runs on those
//!   SMs; memory and its bandwidth stay the whole GPU's.
//! - `SONGLOOM_CUDA_ACOUSTIC_SMS=N`: the products of threads of normal priority (in a streamed
//!   song, the acoustic half's; phase by phase and in `bench --what stages`, every product) planned
//!   by cuBLAS and cuBLASLt for N SMs. This reserves no SM: it tests whether products sized for
//!   fewer SMs leave SMs free when the AR half's short kernels come, that is, whether the DiT's long
//!   products refilling every SM are what slows the AR frame inside a song. Other kernels still
//!   take any SM.
//! - `SONGLOOM_CUDA_ACOUSTIC_PARTITION=N`: the streams of yielding threads (a streamed song's
//!   acoustic half) made in a green context of N SMs, so the DiT's products and attention run on
//!   those alone; the AR thread's stream stays in the whole context and takes any SM, so at least
//!   the rest are free whenever its next kernel comes. Their products are planned for the
//!   partition's SMs, or fewer where `SONGLOOM_CUDA_ACOUSTIC_SMS` asks. Phase by phase and in
//!   `bench --what stages` no thread yields. Off by default (docs/BENCHMARKS.md, session 43).

use std::sync::Arc;

use cudarc::driver::CudaContext;
use cudarc::driver::sys;

use super::context::gpu;
use crate::error::{Error, Result};

/// The environment variable that limits the SMs.
pub const SMS_VAR: &str = "SONGLOOM_CUDA_SMS";

/// The environment variable that plans the acoustic half's products for fewer SMs.
pub const ACOUSTIC_SMS_VAR: &str = "SONGLOOM_CUDA_ACOUSTIC_SMS";

/// The environment variable that confines the acoustic half to a partition of the SMs.
pub const ACOUSTIC_PARTITION_VAR: &str = "SONGLOOM_CUDA_ACOUSTIC_PARTITION";

/// The SMs asked for in [`SMS_VAR`], if any.
pub fn sms_asked() -> Result<Option<u32>> {
    asked(SMS_VAR, std::env::var(SMS_VAR).ok())
}

/// The SMs asked for in [`ACOUSTIC_SMS_VAR`], if any, checked against the `total` the context has.
pub fn product_sms_asked(total: u32) -> Result<Option<u32>> {
    fewer_than(ACOUSTIC_SMS_VAR, std::env::var(ACOUSTIC_SMS_VAR).ok(), total)
}

/// The SMs asked for in [`ACOUSTIC_PARTITION_VAR`], if any, checked against the `total` the context has.
pub fn partition_asked(total: u32) -> Result<Option<u32>> {
    fewer_than(ACOUSTIC_PARTITION_VAR, std::env::var(ACOUSTIC_PARTITION_VAR).ok(), total)
}

/// A count of SMs from variable `var`'s `value` (as [`asked`] reads it), fewer than `total`.
fn fewer_than(var: &str, value: Option<String>, total: u32) -> Result<Option<u32>> {
    match asked(var, value)? {
        Some(n) if n >= total => Err(Error::Invalid(format!("{var}={n}: the context has {total} SMs; ask for fewer"))),
        sms => Ok(sms),
    }
}

/// A count of SMs from variable `var`'s `value`: none where it is unset or blank.
fn asked(var: &str, value: Option<String>) -> Result<Option<u32>> {
    match value {
        None => Ok(None),
        Some(text) if text.trim().is_empty() => Ok(None),
        Some(text) => match text.trim().parse::<u32>() {
            Ok(n) if n > 0 => Ok(Some(n)),
            _ => Err(Error::Invalid(format!("{var}={text}: give a number of SMs, such as 20"))),
        },
    }
}

/// The process's one green context, kept for its life: the context cudarc wraps is converted
/// from it, and cudarc's drop would destroy it as an ordinary context.
static MADE: std::sync::Mutex<Option<Made>> = std::sync::Mutex::new(None);

/// The green context made: for which GPU and SM count asked, the context, the SMs it got, the
/// GPU's total.
type Made = (usize, u32, Arc<CudaContext>, u32, u32);

/// A context on GPU `ordinal` that runs on `sms` of its SMs (rounded up to the partition size the
/// GPU allows); returns it with the SMs it got and the GPU's total. Made once a process; asked
/// again, the same one.
pub fn context_on_sms(ordinal: usize, sms: u32) -> Result<(Arc<CudaContext>, u32, u32)> {
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((o, asked, ctx, granted, total)) = made.as_ref() {
        if (*o, *asked) != (ordinal, sms) {
            return Err(Error::Invalid(format!("{SMS_VAR}: one SM partition a process ({asked} SMs of GPU {o})")));
        }
        ctx.bind_to_thread().map_err(gpu)?;
        return Ok((ctx.clone(), *granted, *total));
    }
    let (ctx, granted, total) = make(ordinal, sms)?;
    *made = Some((ordinal, sms, ctx.clone(), granted, total));
    Ok((ctx, granted, total))
}

fn make(ordinal: usize, sms: u32) -> Result<(Arc<CudaContext>, u32, u32)> {
    cudarc::driver::result::init().map_err(gpu)?;
    let device = cudarc::driver::result::device::get(ordinal as i32).map_err(gpu)?;
    let (green, granted, total) = green_context(device, sms, SMS_VAR)?;
    // SAFETY: the green context and the context converted from it live as long as the process
    // (`MADE` holds the wrapper, so cudarc never drops it).
    unsafe {
        let mut raw: sys::CUcontext = std::ptr::null_mut();
        sys::cuCtxFromGreenCtx(&mut raw, green).result().map_err(gpu)?;
        let ctx = CudaContext::from_raw_context(ordinal, device, raw).map_err(gpu)?;
        Ok((ctx, granted, total))
    }
}

/// A green context on `device` of `sms` of its SMs (rounded up to the partition size the GPU
/// allows), asked for by variable `var`: the context, the SMs it got and the GPU's total. Never
/// destroyed: the process keeps it.
fn green_context(device: sys::CUdevice, sms: u32, var: &str) -> Result<(sys::CUgreenCtx, u32, u32)> {
    // SAFETY: each call gets pointers to live, zero-initialised plain-data structs of the types
    // the driver fills.
    unsafe {
        let mut whole: sys::CUdevResource = std::mem::zeroed();
        sys::cuDeviceGetDevResource(device, &mut whole, sys::CUdevResourceType::CU_DEV_RESOURCE_TYPE_SM)
            .result()
            .map_err(gpu)?;
        let total = whole.__bindgen_anon_1.sm.smCount;
        if sms >= total {
            return Err(Error::Invalid(format!("{var}={sms}: this GPU has {total} SMs; ask for fewer")));
        }
        let mut part: sys::CUdevResource = std::mem::zeroed();
        let mut rest: sys::CUdevResource = std::mem::zeroed();
        let mut groups = 1u32;
        sys::cuDevSmResourceSplitByCount(&mut part, &mut groups, &whole, &mut rest, 0, sms).result().map_err(gpu)?;
        if groups == 0 {
            return Err(Error::Gpu(format!("the GPU could not set {sms} of its {total} SMs apart")));
        }
        let granted = part.__bindgen_anon_1.sm.smCount;
        let mut desc: sys::CUdevResourceDesc = std::ptr::null_mut();
        sys::cuDevResourceGenerateDesc(&mut desc, &mut part, 1).result().map_err(gpu)?;
        let mut green: sys::CUgreenCtx = std::ptr::null_mut();
        let flags = sys::CUgreenCtxCreate_flags::CU_GREEN_CTX_DEFAULT_STREAM as u32;
        sys::cuGreenCtxCreate(&mut green, desc, device, flags).result().map_err(gpu)?;
        Ok((green, granted, total))
    }
}

/// The acoustic half's partition ([`ACOUSTIC_PARTITION_VAR`]): a green context whose streams the
/// yielding threads get. Its streams are never destroyed but handed from a thread that
/// ends to the next one: a tensor made on a thread's stream frees itself there, whenever it drops.
pub struct Partition {
    green: sys::CUgreenCtx,
    /// The SMs the partition got.
    pub granted: u32,
    free: std::sync::Mutex<Vec<PooledStream>>,
}

struct PooledStream(sys::CUstream);

// SAFETY: CUDA handles may be used from any thread; the pool's lock orders their hand-overs.
unsafe impl Send for PooledStream {}
unsafe impl Send for Partition {}
unsafe impl Sync for Partition {}

/// The partitions made, by GPU and SMs asked: one each a process, however often a backend opens.
static PARTITIONS: std::sync::Mutex<Vec<(usize, u32, Arc<Partition>)>> = std::sync::Mutex::new(Vec::new());

impl Partition {
    /// The partition of `sms` SMs of `ctx`'s GPU, made the first time while `ctx` (the primary
    /// context) is current.
    pub fn shared(ctx: &CudaContext, sms: u32) -> Result<Arc<Partition>> {
        let mut made = PARTITIONS.lock().unwrap_or_else(|e| e.into_inner());
        let ordinal = ctx.ordinal();
        if let Some((_, _, partition)) = made.iter().find(|(o, asked, _)| (*o, *asked) == (ordinal, sms)) {
            return Ok(partition.clone());
        }
        ctx.bind_to_thread().map_err(gpu)?;
        let (green, granted, _) = green_context(ctx.cu_device(), sms, ACOUSTIC_PARTITION_VAR)?;
        let partition = Arc::new(Partition { green, granted, free: std::sync::Mutex::new(Vec::new()) });
        made.push((ordinal, sms, partition.clone()));
        Ok(partition)
    }

    /// A stream of the partition's, one a thread that ends gave back or a new one.
    pub fn stream(&self) -> Result<sys::CUstream> {
        if let Some(PooledStream(s)) = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            return Ok(s);
        }
        let mut stream: sys::CUstream = std::ptr::null_mut();
        let flags = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
        // SAFETY: the green context lives as long as the process; the driver fills `stream`.
        unsafe { sys::cuGreenCtxStreamCreate(&mut stream, self.green, flags, 0) }.result().map_err(gpu)?;
        Ok(stream)
    }

    /// Takes back a stream of [`Partition::stream`]'s for the next thread.
    pub fn give_back(&self, stream: sys::CUstream) {
        self.free.lock().unwrap_or_else(|e| e.into_inner()).push(PooledStream(stream));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_of_sms_is_a_positive_number_or_nothing() {
        assert_eq!(asked(SMS_VAR, None).unwrap(), None);
        assert_eq!(asked(SMS_VAR, Some(" ".into())).unwrap(), None);
        assert_eq!(asked(SMS_VAR, Some(" 20 ".into())).unwrap(), Some(20));
        for wrong in ["0", "-3", "twenty", "1.5"] {
            let e = asked(ACOUSTIC_SMS_VAR, Some(wrong.into())).unwrap_err().to_string();
            assert!(e.contains(ACOUSTIC_SMS_VAR) && e.contains(wrong), "{e}");
        }
    }

    #[test]
    fn a_partition_leaves_some_sms_out() {
        assert_eq!(fewer_than(ACOUSTIC_PARTITION_VAR, Some("112".into()), 132).unwrap(), Some(112));
        assert_eq!(fewer_than(ACOUSTIC_PARTITION_VAR, None, 132).unwrap(), None);
        for all_or_more in ["132", "200"] {
            let e = fewer_than(ACOUSTIC_PARTITION_VAR, Some(all_or_more.into()), 132).unwrap_err().to_string();
            assert!(e.contains(ACOUSTIC_PARTITION_VAR) && e.contains("132 SMs"), "{e}");
        }
    }
}
