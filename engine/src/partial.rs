//! How every temporary Songloom writes is named: `.<what>.<random>.<pid>.partial`, a file or a
//! folder that is renamed into place when complete. The process id in the name lets a later run
//! tell a killed run's leftovers (their process is gone) from a running one's.

pub const SUFFIX: &str = "partial";

/// The prefix and suffix of a temporary for `what` (tempfile puts its random part between them).
pub fn affixes(what: &str) -> (String, String) {
    (format!(".{what}."), format!(".{}.{SUFFIX}", std::process::id()))
}

/// The process id in a temporary's file name, if it is one of these temporaries.
pub fn owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix('.')?.strip_suffix(&format!(".{SUFFIX}"))?;
    rest.rsplit('.').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_temporary_names_its_process_and_nothing_else_does() {
        let (prefix, suffix) = affixes("song.wav");
        let name = format!("{prefix}Ab12Cd{suffix}");
        assert_eq!(owner(&name), Some(std::process::id()));
        for other in ["song.wav", ".song.wav", ".x.partial", ".x.abc.partial", "x.1.partial"] {
            assert_eq!(owner(other), None, "{other}");
        }
    }
}
