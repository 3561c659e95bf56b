//! A song's score: the codes its AR half drew and the latents each window handed the next. With
//! the recipe, it is what an edit needs of a song already made: the codes are replayed (teacher
//! forcing) to bring the language model back to any frame, and a window's seam lets the window
//! after it be rendered again without rendering every window before it.

use super::ar::Codes;
use crate::error::{Error, Result};

/// What a song is made of beyond its recipe.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Score {
    /// The model that drew the codes ([`Pipeline::model_identity`](super::Pipeline::model_identity)).
    pub model: String,
    /// Every frame's codes, the priming frame's first.
    pub codes: Codes,
    /// The latents each window hands the next (the last one's too: a longer song has a window after
    /// it), `[channels, overlap]` row-major, one entry a window; empty when not kept (a score read from an exported file), and then an edit
    /// renders the windows before its splice again to find them.
    pub seams: Vec<Vec<f32>>,
}

const MAGIC: &[u8; 8] = b"SLSCORE1";

/// The fixed part of the byte form, as JSON after the magic.
#[derive(serde::Serialize, serde::Deserialize)]
struct Header {
    model: String,
    frames: usize,
    codebooks: usize,
    seams: usize,
    seam_values: usize,
}

impl Score {
    /// The emitted frames (the priming frame not counted).
    pub fn frames(&self) -> usize {
        self.codes.frames.len().saturating_sub(1)
    }

    /// The score without its seams: the codes alone, about 24 KB a minute (what exported files
    /// carry).
    pub fn codes_only(&self) -> Score {
        Score { model: self.model.clone(), codes: self.codes.clone(), seams: Vec::new() }
    }

    /// `SLSCORE1`, a little-endian u32 length and a JSON header, the codes as little-endian u16
    /// (frame by frame), then the seams as little-endian f32.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let codebooks = self.codes.frames.first().map_or(0, Vec::len);
        if self.codes.frames.iter().any(|f| f.len() != codebooks) {
            return Err(Error::Invalid("a score's frames must all have the same number of codes".into()));
        }
        let seam_values = self.seams.first().map_or(0, Vec::len);
        if self.seams.iter().any(|s| s.len() != seam_values) {
            return Err(Error::Invalid("a score's seams must all have the same size".into()));
        }
        let header = Header {
            model: self.model.clone(),
            frames: self.codes.frames.len(),
            codebooks,
            seams: self.seams.len(),
            seam_values,
        };
        let header = serde_json::to_vec(&header).map_err(|e| Error::Invalid(format!("a score's header: {e}")))?;
        let mut out = Vec::with_capacity(12 + header.len() + self.codes.frames.len() * codebooks * 2);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
        out.extend_from_slice(&header);
        for &code in self.codes.frames.iter().flatten() {
            let code = u16::try_from(code)
                .map_err(|_| Error::Invalid(format!("code {code} does not fit a score's 16 bits")))?;
            out.extend_from_slice(&code.to_le_bytes());
        }
        for &value in self.seams.iter().flatten() {
            out.extend_from_slice(&value.to_le_bytes());
        }
        Ok(out)
    }

    /// Reads [`to_bytes`](Self::to_bytes)'s form; anything else (cut short, too long, another
    /// format) is an error saying so.
    pub fn from_bytes(bytes: &[u8]) -> Result<Score> {
        let bad = |why: &str| Error::Invalid(format!("the song's score is damaged: {why}"));
        let rest = bytes.strip_prefix(MAGIC.as_slice()).ok_or_else(|| bad("it does not start with SLSCORE1"))?;
        let (len, rest) = rest.split_at_checked(4).ok_or_else(|| bad("it is cut short"))?;
        let len = u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
        let (header, rest) = rest.split_at_checked(len).ok_or_else(|| bad("it is cut short"))?;
        let h: Header = serde_json::from_slice(header).map_err(|e| bad(&format!("its header: {e}")))?;
        let code_bytes = h.frames.checked_mul(h.codebooks).and_then(|n| n.checked_mul(2));
        let seam_bytes = h.seams.checked_mul(h.seam_values).and_then(|n| n.checked_mul(4));
        let (Some(code_bytes), Some(seam_bytes)) = (code_bytes, seam_bytes) else {
            return Err(bad("its sizes overflow"));
        };
        if rest.len() != code_bytes.saturating_add(seam_bytes) {
            return Err(bad(&format!(
                "it holds {} bytes after its header, its header says {}",
                rest.len(),
                code_bytes.saturating_add(seam_bytes)
            )));
        }
        let (codes, seams) = rest.split_at(code_bytes);
        let codes: Vec<u32> = codes.chunks_exact(2).map(|b| u16::from_le_bytes([b[0], b[1]]) as u32).collect();
        let seams: Vec<f32> = seams.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        Ok(Score {
            model: h.model,
            codes: Codes { frames: codes.chunks(h.codebooks.max(1)).map(<[u32]>::to_vec).collect() },
            seams: seams.chunks(h.seam_values.max(1)).map(<[f32]>::to_vec).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn score() -> Score {
        Score {
            model: "tiny-1234".into(),
            codes: Codes { frames: vec![vec![1, 2, 3], vec![4, 5, 65535], vec![0, 0, 9]] },
            seams: vec![vec![0.5, -1.25], vec![f32::MIN_POSITIVE, 3.0]],
        }
    }

    #[test]
    fn a_score_reads_back_as_written() {
        let s = score();
        assert_eq!(Score::from_bytes(&s.to_bytes().unwrap()).unwrap(), s);
        let codes = s.codes_only();
        assert_eq!(Score::from_bytes(&codes.to_bytes().unwrap()).unwrap(), codes);
        assert_eq!(codes.frames(), 2);
    }

    #[test]
    fn damaged_scores_are_refused() {
        let bytes = score().to_bytes().unwrap();
        for cut in [0, 5, 20, bytes.len() - 1] {
            let err = Score::from_bytes(&bytes[..cut]).unwrap_err().to_string();
            assert!(err.contains("score is damaged"), "{err}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(Score::from_bytes(&longer).is_err());
        let too_big = Score { codes: Codes { frames: vec![vec![70_000]] }, ..Score::default() };
        assert!(too_big.to_bytes().unwrap_err().to_string().contains("70000"));
    }
}
