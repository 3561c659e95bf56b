//! Compiled kernel files kept on disk between runs, so only a machine's first run pays for
//! compiling them (NVRTC straight to the device's machine code takes seconds a file).
//!
//! An entry's name carries a digest of everything that changes the machine code (NVRTC's and the
//! driver's versions, the architecture, the options and the full source), so a changed kernel or
//! an updated driver never loads a stale entry. Each entry carries a digest of its own bytes: a
//! torn or corrupted file reads as missing and is compiled and written again.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::Result;

/// Starts every entry; the digest of the rest follows it.
const MAGIC: &[u8; 8] = b"SLKCUBN1";

/// Where the entries live: `SONGLOOM_KERNEL_CACHE` when set (empty: keep nothing), else
/// `songloom/kernels` in the user's cache folder.
pub fn default_dir() -> Option<PathBuf> {
    match std::env::var_os("SONGLOOM_KERNEL_CACHE") {
        Some(dir) if dir.is_empty() => None,
        Some(dir) => Some(PathBuf::from(dir)),
        None => dirs::cache_dir().map(|d| d.join("songloom").join("kernels")),
    }
}

/// Where a kernel file's image came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Disk,
    Compiled,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Origin::Disk => "read from the kernel cache",
            Origin::Compiled => "compiled",
        })
    }
}

/// One kernel file's identity: what names its entry.
pub struct EntryKey {
    /// Readable part of the entry's name (the kernel file and architecture).
    pub label: String,
    /// Everything the machine code depends on, hashed into the entry's name.
    pub parts: Vec<String>,
}

impl EntryKey {
    fn file_name(&self) -> String {
        let mut hash = Sha256::new();
        for part in &self.parts {
            // Length-prefixed, so no two lists of parts hash alike by shifting text between them.
            hash.update((part.len() as u64).to_le_bytes());
            hash.update(part.as_bytes());
        }
        let digest = hash.finalize();
        let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
        let label: String =
            self.label.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '-' }).collect();
        format!("{label}-{hex}.cubin")
    }
}

/// The image for `key`: read from `dir` where an intact entry is there, else made by `make` and
/// written (atomically) for the next run. A cache that cannot be read or written costs only the
/// compile: the image is still returned.
pub fn get_or_make(
    dir: Option<&Path>,
    key: &EntryKey,
    make: impl FnOnce() -> Result<Vec<u8>>,
) -> Result<(Vec<u8>, Origin)> {
    let path = dir.map(|d| d.join(key.file_name()));
    if let Some(image) = path.as_deref().and_then(read_entry) {
        return Ok((image, Origin::Disk));
    }
    let image = make()?;
    if let Some(path) = &path {
        let _ = std::fs::create_dir_all(path.parent().unwrap_or(Path::new(".")))
            .map_err(|e| crate::error::Error::io(path, e))
            .and_then(|_| crate::weights::write_atomically(path, &entry_bytes(&image)));
    }
    Ok((image, Origin::Compiled))
}

/// Removes `key`'s entry (one the driver refused to load).
pub fn forget(dir: Option<&Path>, key: &EntryKey) {
    if let Some(dir) = dir {
        let _ = std::fs::remove_file(dir.join(key.file_name()));
    }
}

/// The path `key`'s entry has in `dir`.
pub fn entry_path(dir: &Path, key: &EntryKey) -> PathBuf {
    dir.join(key.file_name())
}

fn entry_bytes(image: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(MAGIC.len() + 32 + image.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&Sha256::digest(image));
    bytes.extend_from_slice(image);
    bytes
}

/// The image of an intact entry at `path`; `None` when there is none or it is damaged.
fn read_entry(path: &Path) -> Option<Vec<u8>> {
    let bytes = std::fs::read(path).ok()?;
    let rest = bytes.strip_prefix(MAGIC.as_slice())?;
    if rest.len() <= 32 {
        return None;
    }
    let (digest, image) = rest.split_at(32);
    (Sha256::digest(image).as_slice() == digest).then(|| image.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(source: &str) -> EntryKey {
        EntryKey { label: "norm.cu sm_90".into(), parts: vec!["sm_90".into(), source.into()] }
    }

    #[test]
    fn an_entry_is_compiled_once_and_then_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut compiles = 0;
        for expected in [Origin::Compiled, Origin::Disk, Origin::Disk] {
            let (image, origin) = get_or_make(Some(dir.path()), &key("a"), || {
                compiles += 1;
                Ok(b"machine code".to_vec())
            })
            .unwrap();
            assert_eq!((image.as_slice(), origin), (b"machine code".as_slice(), expected));
        }
        assert_eq!(compiles, 1);
    }

    #[test]
    fn a_changed_source_or_architecture_is_compiled_anew() {
        let dir = tempfile::tempdir().unwrap();
        get_or_make(Some(dir.path()), &key("a"), || Ok(b"old".to_vec())).unwrap();
        let (image, origin) = get_or_make(Some(dir.path()), &key("b"), || Ok(b"new".to_vec())).unwrap();
        assert_eq!((image.as_slice(), origin), (b"new".as_slice(), Origin::Compiled));
        let other_arch = EntryKey { label: "norm.cu sm_110".into(), parts: vec!["sm_110".into(), "a".into()] };
        let (_, origin) = get_or_make(Some(dir.path()), &other_arch, || Ok(b"thor".to_vec())).unwrap();
        assert_eq!(origin, Origin::Compiled);
        // Parts are hashed with their lengths: moving text between them is a different key.
        let shifted = EntryKey { label: "norm.cu sm_90".into(), parts: vec!["sm_90a".into(), "".into()] };
        assert_ne!(shifted.file_name(), key("a").file_name());
    }

    #[test]
    fn a_damaged_entry_is_compiled_and_written_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = entry_path(dir.path(), &key("a"));
        get_or_make(Some(dir.path()), &key("a"), || Ok(b"machine code".to_vec())).unwrap();
        let whole = std::fs::read(&path).unwrap();
        let mut flipped = whole.clone();
        *flipped.last_mut().unwrap() ^= 1;
        for damaged in [whole[..whole.len() - 3].to_vec(), flipped, Vec::new(), b"SLKCUBN1".to_vec()] {
            std::fs::write(&path, &damaged).unwrap();
            let (image, origin) = get_or_make(Some(dir.path()), &key("a"), || Ok(b"machine code".to_vec())).unwrap();
            assert_eq!((image.as_slice(), origin), (b"machine code".as_slice(), Origin::Compiled));
            assert_eq!(std::fs::read(&path).unwrap(), whole, "the damaged entry was not written again");
        }
    }

    #[test]
    fn an_unwritable_cache_still_gives_the_image() {
        let dir = tempfile::tempdir().unwrap();
        // A file where the folder should be: nothing can be written under it.
        let blocked = dir.path().join("not-a-folder");
        std::fs::write(&blocked, b"").unwrap();
        for _ in 0..2 {
            let (image, origin) = get_or_make(Some(&blocked), &key("a"), || Ok(b"machine code".to_vec())).unwrap();
            assert_eq!((image.as_slice(), origin), (b"machine code".as_slice(), Origin::Compiled));
        }
        let (_, origin) = get_or_make(None, &key("a"), || Ok(b"x".to_vec())).unwrap();
        assert_eq!(origin, Origin::Compiled);
    }

    #[test]
    fn a_failed_compile_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let failed = get_or_make(Some(dir.path()), &key("a"), || Err(crate::error::Error::Gpu("syntax".into())));
        assert!(failed.is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
