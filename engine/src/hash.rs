//! The hashes the engine uses, in one place: FNV-1a over bytes (names to seeds, file
//! fingerprints), the splitmix64 finalizer (seeds to streams, an index to a uniform value), and
//! SHA-256 of files (the checksums a recipe records). `kernels/elementwise.cu` (`fill_uniform_*`)
//! computes [`uniform`] the same way on the GPU.

use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

pub const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x100_0000_01b3;
/// The golden-ratio increment of splitmix64.
pub const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// FNV-1a of `bytes`, continuing from `state` (start from [`fnv1a`] for a fresh hash).
pub fn fnv1a_continue(state: u64, bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(state, |h, b| (h ^ b as u64).wrapping_mul(FNV_PRIME))
}

/// FNV-1a of `bytes`.
pub fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
    fnv1a_continue(FNV_OFFSET, bytes)
}

/// The splitmix64 output function: a well-mixed 64-bit value of `z`.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// One step of splitmix64: advances `state` and returns the next value.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(GOLDEN);
    mix64(*state)
}

/// Uniform in [-1, 1) from `seed` and an index, with 24 random bits (synthetic weights).
pub fn uniform(seed: u64, index: u64) -> f32 {
    let z = mix64(seed.wrapping_add(index.wrapping_mul(GOLDEN)));
    (z >> 40) as f32 * (1.0 / 16_777_216.0) * 2.0 - 1.0
}

/// SHA-256 of the files' bytes one after another, in lower-case hex (`sha256sum`'s for one file).
pub fn sha256_files(paths: &[&Path]) -> Result<String> {
    let mut hash = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    for path in paths {
        let mut file = std::fs::File::open(path).map_err(|e| Error::io(*path, e))?;
        loop {
            let n = file.read(&mut buffer).map_err(|e| Error::io(*path, e))?;
            if n == 0 {
                break;
            }
            hash.update(&buffer[..n]);
        }
    }
    Ok(hash.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hashes_give_their_published_values() {
        // FNV-1a 64 of "a" (the reference test vector).
        assert_eq!(fnv1a(*b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(*b""), FNV_OFFSET);
        // splitmix64 from 0: its first published output.
        assert_eq!(splitmix64(&mut 0), 0xe220_a839_7b1d_cdaf);
        let u: Vec<f32> = (0..1000).map(|i| uniform(7, i)).collect();
        assert!(u.iter().all(|v| (-1.0..1.0).contains(v)));
        assert!(u.iter().sum::<f32>().abs() < 60.0, "centred");
    }

    #[test]
    fn file_checksums_are_sha256_of_the_bytes_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(&a, b"ab").unwrap();
        std::fs::write(&b, b"c").unwrap();
        // SHA-256 of "abc" (FIPS 180-2's first example).
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(sha256_files(&[&a, &b]).unwrap(), abc);
        let err = sha256_files(&[&dir.path().join("missing")]).unwrap_err().to_string();
        assert!(err.contains("missing"), "{err}");
    }
}
