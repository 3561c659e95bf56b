//! When an op's work goes to the thread pool. The engine's AR and acoustic threads are not the
//! pool's own, so a parallel op hands its work over and sleeps until it is done, even when it makes
//! one task. A small model's decode step is made of such ops (Songloom Mini's hidden is 256 wide),
//! and handing them over cost more than the work; below `POOL_MIN_WORK` an op runs on the thread
//! that called it. Rows and chunks are computed the same way on either path, so results do not
//! depend on it.

use rayon::prelude::*;

/// Multiply-adds (or elements, for element-by-element ops) below which an op stays on its thread:
/// tens of microseconds of work, about what a hand-over and wake-up cost.
pub const POOL_MIN_WORK: usize = 1 << 15;

/// `f(i, chunk)` over `y`'s chunks of `len` elements, on the pool when `work` is worth it.
pub fn for_chunks(y: &mut [f32], len: usize, work: usize, f: impl Fn(usize, &mut [f32]) + Sync + Send) {
    let len = len.max(1);
    if work < POOL_MIN_WORK {
        y.chunks_mut(len).enumerate().for_each(|(i, c)| f(i, c));
    } else {
        y.par_chunks_mut(len).enumerate().for_each(|(i, c)| f(i, c));
    }
}

/// `f(scratch, i)` for `i` in `0..n`, in order, with a scratch value `init` makes per task: on the
/// pool in tasks of at least `min_len` when `work` is worth it.
pub fn map_indices<T: Send, S>(
    n: usize,
    work: usize,
    min_len: usize,
    init: impl Fn() -> S + Sync + Send,
    f: impl Fn(&mut S, usize) -> T + Sync + Send,
) -> Vec<T> {
    if work < POOL_MIN_WORK {
        let mut scratch = init();
        (0..n).map(|i| f(&mut scratch, i)).collect()
    } else {
        (0..n).into_par_iter().with_min_len(min_len.max(1)).map_init(init, f).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_paths_give_the_same_chunks_and_rows() {
        for work in [0, POOL_MIN_WORK] {
            let mut y = vec![0.0f32; 1000];
            for_chunks(&mut y, 64, work, |i, c| c.iter_mut().enumerate().for_each(|(j, v)| *v = (i * 64 + j) as f32));
            assert!(y.iter().enumerate().all(|(i, &v)| v == i as f32), "work {work}");
            let rows = map_indices(
                100,
                work,
                4,
                || 0usize,
                |calls, i| {
                    *calls += 1;
                    i * i
                },
            );
            assert_eq!(rows, (0..100).map(|i| i * i).collect::<Vec<_>>(), "work {work}");
        }
    }
}
