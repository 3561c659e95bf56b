"""Songs with sections: what the lyrics' structure tags are to mean to Songloom Mini (round 7,
`train_sections.py`; not yet learnt well enough to ship), and lyrics to train on.

The rule the training songs follow: the tags, in order, are the song's sections, and
each lasts SECTION_SECONDS, its start moved to the nearest quarter note (whatever the meter, so
that a listener's tempo is enough to place it); the last one lasts to the end of
the song. The lines between tags are not sung (the model has no voice); only the tags count. A tag
sets the section's texture:

| tag (and its other spellings)  | voices                  | level | drums        | texture level |
|--------------------------------|-------------------------|-------|--------------|---------------|
| intro                          | the melody alone        | 0.45  | none         | 0             |
| verse                          | melody and accompaniment| 0.6   | none         | 1             |
| chorus (hook, refrain)         | everything, the melody doubled an octave up | 1.0 | if the song has them | 2 |
| bridge                         | the accompaniment alone | 0.6   | none         | 1             |
| outro (ending, outro fade)     | the melody alone, fading from 0.6 to 0.15 | | none | 0       |

The texture level is both how loud and how dense (how much of the spectrum sounds) a section is.
Lyrics without any of these tags (`[instrumental]`, plain lines, nothing) leave the song in one
texture, as before. `TEXTURE_LEVEL` is the change of loudness and density a boundary asks for
(`section_check.py`).
"""

import functools
import re
from pathlib import Path

import numpy as np

SECTION_SECONDS = 6.0
KINDS = ["intro", "verse", "chorus", "bridge", "outro"]
TEXTURE_LEVEL = {"intro": 0, "verse": 1, "chorus": 2, "bridge": 1, "outro": 0}
SPELLINGS = {
    "intro": ["intro", "Intro", "INTRO", "intro"],
    "verse": ["verse", "Verse", "VERSE", "verse 1", "Verse 2", "verse 3"],
    "chorus": ["chorus", "Chorus", "CHORUS", "hook", "refrain", "Chorus x2"],
    "bridge": ["bridge", "Bridge", "BRIDGE"],
    "outro": ["outro", "Outro", "OUTRO", "ending", "outro fade"],
}
_WORD_TO_KIND = {"intro": "intro", "verse": "verse", "chorus": "chorus", "hook": "chorus", "refrain": "chorus",
                 "bridge": "bridge", "outro": "outro", "ending": "outro"}
FORMS = [
    ["intro", "verse", "chorus", "outro"],
    ["verse", "chorus", "verse", "chorus"],
    ["intro", "verse", "chorus", "bridge", "chorus", "outro"],
    ["verse", "chorus", "bridge", "chorus"],
    ["intro", "verse", "verse", "chorus"],
    ["verse", "verse", "chorus", "outro"],
    ["intro", "chorus", "verse", "chorus"],
    ["chorus", "verse", "chorus", "outro"],
]
PLAIN_LYRICS = ["[instrumental]", "", "[start]", "[Instrumental]"]
_TAG = re.compile(r"\[([^\]]+)\]")


def kind_of(tag: str) -> str | None:
    """A tag's section kind, from its first word ("Verse 2" is a verse), or None."""
    words = re.findall(r"[a-z]+", tag.lower())
    return _WORD_TO_KIND.get(words[0]) if words else None


def kinds_in(lyrics: str) -> list[str]:
    """The section kinds of the lyrics' tags, in order (unknown tags are skipped)."""
    return [k for k in (kind_of(t) for t in _TAG.findall(lyrics)) if k is not None]


def plan(kinds: list[str], quarter_seconds: float, length_seconds: float) -> list[tuple[str, float, float]]:
    """(kind, start s, end s) of each section that starts before the song ends."""
    out = []
    for k, kind in enumerate(kinds):
        start = 0.0 if k == 0 else round(k * SECTION_SECONDS / quarter_seconds) * quarter_seconds
        if start >= length_seconds:
            break
        out.append([kind, start, length_seconds])
        if k > 0:
            out[-2][2] = start
    return [tuple(s) for s in out]


def texture(kind: str, fraction: float) -> tuple[bool, bool, float, bool, bool]:
    """(melody on, accompaniment on, gain, drums allowed, melody doubled an octave up) `fraction`
    of the way into a section."""
    if kind == "intro":
        return True, False, 0.45, False, False
    if kind == "verse":
        return True, True, 0.6, False, False
    if kind == "chorus":
        return True, True, 1.0, True, True
    if kind == "bridge":
        return False, True, 0.6, False, False
    return True, False, 0.6 - 0.45 * min(max(fraction, 0.0), 1.0), False, False  # outro


@functools.lru_cache(maxsize=1)
def lyric_words() -> list[str]:
    """Words for the lines between tags: frequent English words (the caption grammar's filler)."""
    return (Path(__file__).resolve().parent / "data" / "filler-words.txt").read_text().split()


def _line(rng: np.random.Generator, words: list[str]) -> str:
    line = " ".join(words[rng.integers(len(words))] for _ in range(int(rng.integers(2, 8))))
    if rng.random() < 0.6:
        line = line[:1].upper() + line[1:]
    if rng.random() < 0.2:
        line += rng.choice([",", ".", "!", "?"])
    return line


def lyrics_for(rng: np.random.Generator, words: list[str]) -> tuple[str, list[str]]:
    """Lyrics with structure tags as people write them, and their section kinds: a common song
    form or (half the time) tags in any order, each followed by up to four lines of words."""
    if rng.random() < 0.5:
        kinds = list(FORMS[rng.integers(len(FORMS))])
    else:
        kinds = [KINDS[i] for i in rng.integers(len(KINDS), size=int(rng.integers(2, 7)))]
    parts = []
    for kind in kinds:
        spelling = SPELLINGS[kind][rng.integers(len(SPELLINGS[kind]))]
        tag = f"[{spelling}]"
        count = int(rng.integers(0, 2)) if kind in ("intro", "outro") else int(rng.integers(0, 5))
        lines = [_line(rng, words) for _ in range(count)]
        if lines and rng.random() < 0.15:
            parts.append(f"{tag} {lines[0]}")  # text on a tag's line: the reference drops it
            parts.extend(lines[1:])
        else:
            parts.append(tag)
            parts.extend(lines)
        if rng.random() < 0.3:
            parts.append("")
    return "\n".join(parts), kinds
