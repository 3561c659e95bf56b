//! How an output is held against its expected values: bit for bit, or within a tolerance, with
//! NaN and the infinities required where they are expected and nowhere else, and the sentinel of
//! a never-written element always a failure.

use songloom_engine::device::SENTINEL_BITS;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Tolerance {
    /// The same bits (any NaN matches any NaN: kernels need not keep a NaN's payload).
    Exact,
    /// `|got - want| <= tol * (1 + |want|)`, non-finite values matching exactly.
    Close(f32),
    /// As `Close`, but a NaN and an infinity may stand for each other (both non-finite; never
    /// either where a finite value is expected).
    CloseNanOrInf(f32),
}

/// The first element that does not match, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    pub index: usize,
    pub got: f32,
    pub want: f32,
    pub why: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "element {}: got {:e}, expected {:e} ({})", self.index, self.got, self.want, self.why)
    }
}

/// Whether `v` is the sentinel a fresh buffer holds before an op writes it.
pub fn is_sentinel(v: f32) -> bool {
    SENTINEL_BITS.contains(&v.to_bits())
}

/// `got` against `want` under `tol`; on success, the worst `|got - want| / (1 + |want|)`.
pub fn compare(got: &[f32], want: &[f32], tol: Tolerance) -> Result<f32, Mismatch> {
    if got.len() != want.len() {
        let index = got.len().min(want.len());
        return Err(Mismatch {
            index,
            got: f32::NAN,
            want: f32::NAN,
            why: format!("{} elements, expected {}", got.len(), want.len()),
        });
    }
    let mut worst = 0.0f32;
    for (index, (&g, &w)) in got.iter().zip(want).enumerate() {
        let fail = |why: String| Err(Mismatch { index, got: g, want: w, why });
        if is_sentinel(g) && !is_sentinel(w) {
            return fail("never written: the sentinel is still there".into());
        }
        if matches!(tol, Tolerance::CloseNanOrInf(_))
            && ((w.is_infinite() && g.is_nan()) || (w.is_nan() && g.is_infinite()))
        {
            continue;
        }
        if w.is_nan() || g.is_nan() {
            if w.is_nan() != g.is_nan() {
                return fail(if w.is_nan() { "a NaN was expected".into() } else { "a NaN where none belongs".into() });
            }
            continue;
        }
        if w.is_infinite() || g.is_infinite() {
            if g != w {
                return fail("the infinities differ".into());
            }
            continue;
        }
        match tol {
            Tolerance::Exact if g.to_bits() != w.to_bits() => return fail("bits differ".into()),
            Tolerance::Exact => {}
            Tolerance::Close(t) | Tolerance::CloseNanOrInf(t) => {
                let err = (g - w).abs() / (1.0 + w.abs());
                if err > t {
                    return fail(format!("relative error {err:.3e} over the tolerance {t:.0e}"));
                }
                worst = worst.max(err);
            }
        }
    }
    Ok(worst)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SENTINEL: f32 = f32::from_bits(SENTINEL_BITS[0]);

    #[test]
    fn close_accepts_what_lies_within_and_matching_non_finite_values() {
        let want = [1.0, -2.0, f32::NAN, f32::INFINITY, 0.0];
        let got = [1.0 + 1e-6, -2.0, -f32::NAN, f32::INFINITY, 1e-7];
        assert!(compare(&got, &want, Tolerance::Close(1e-5)).is_ok());
    }

    /// The negative controls of `Close`: each deliberately wrong result is caught.
    #[test]
    fn close_rejects_each_kind_of_wrong_result() {
        let want = [1.0, -2.0, 3.0];
        let wrong: [(&[f32], &str); 6] = [
            (&[1.0, -2.0 - 1e-3, 3.0], "relative error"),
            (&[1.0, f32::NAN, 3.0], "NaN where none"),
            (&[1.0, -2.0, f32::INFINITY], "infinities"),
            (&[1.0, SENTINEL, 3.0], "never written"),
            (&[1.0, -2.0], "elements"),
            (&[1.0, -2.0, 3.0, 4.0], "elements"),
        ];
        for (got, why) in wrong {
            let m = compare(got, &want, Tolerance::Close(1e-5)).unwrap_err();
            assert!(m.why.contains(why), "{got:?}: {m}");
        }
        let m = compare(&[1.0, 2.0], &[f32::NAN, 2.0], Tolerance::Close(1e-5)).unwrap_err();
        assert!(m.why.contains("NaN was expected"), "{m}");
        // A NaN and an infinity may stand for each other only where the tolerance says so, never
        // for a finite value.
        assert!(compare(&[f32::NAN], &[f32::INFINITY], Tolerance::Close(1e-5)).is_err());
        assert!(compare(&[f32::NAN], &[f32::INFINITY], Tolerance::CloseNanOrInf(1e-5)).is_ok());
        assert!(compare(&[f32::NEG_INFINITY], &[f32::NAN], Tolerance::CloseNanOrInf(1e-5)).is_ok());
        assert!(compare(&[f32::NAN], &[1.0], Tolerance::CloseNanOrInf(1e-5)).is_err());
        assert!(compare(&[f32::INFINITY], &[f32::NAN], Tolerance::Close(1e-5)).is_err());
        let m = compare(&[f32::NEG_INFINITY], &[f32::INFINITY], Tolerance::Close(1e-5)).unwrap_err();
        assert!(m.why.contains("infinities"), "{m}");
    }

    /// The negative controls of `Exact`: one ulp, or the sign of zero, is a difference.
    #[test]
    fn exact_rejects_one_ulp_and_a_signed_zero() {
        let want = [0.5f32, 0.0, f32::NAN];
        assert!(compare(&[0.5, 0.0, f32::from_bits(0x7fc0_0001)], &want, Tolerance::Exact).is_ok());
        let one_ulp = f32::from_bits(0.5f32.to_bits() + 1);
        assert!(compare(&[one_ulp, 0.0, f32::NAN], &want, Tolerance::Exact).unwrap_err().why.contains("bits"));
        assert!(compare(&[0.5, -0.0, f32::NAN], &want, Tolerance::Exact).unwrap_err().why.contains("bits"));
        assert!(
            compare(&[0.5, SENTINEL, f32::NAN], &want, Tolerance::Exact).unwrap_err().why.contains("never written")
        );
    }

    /// An element expected to keep the sentinel (a row an append must not touch) may keep it.
    #[test]
    fn a_sentinel_is_accepted_only_where_it_is_expected() {
        assert!(compare(&[SENTINEL, 1.0], &[SENTINEL, 1.0], Tolerance::Exact).is_ok());
        assert!(compare(&[1.0, 1.0], &[SENTINEL, 1.0], Tolerance::Exact).is_err(), "an untouched row was written");
    }
}
