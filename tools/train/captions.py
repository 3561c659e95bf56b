"""The caption grammar: a rendering's facts (style, ensemble, tempo, key, meter, drums) said the
many ways people write a music description. The AR half is trained on a fresh description of each
song at every step, so it learns what the facts mean rather than where a template puts them.

What varies (CAPTIONS.md beside this has the whole grammar with examples):
- the shape: a noun phrase with its modifiers in any order, a list of fields, "Key: ... Tempo: ...",
  a request ("I'd like ..."), or one of the three v2 templates;
- every field's words: synonyms for each ensemble and style, key spellings (D#, E flat, e-flat, E♭,
  Ebm), tempo as a number said many ways or as a word that matches it (slow, andante, brisk, ...);
- what is said at all: a field may be missing (the model then chooses), or the key may give only
  its mode ("a minor key");
- words that carry nothing the music can follow (moods that lean on the mode, settings, filler);
- the surface: capitals, lower case, punctuation, a misspelt word.
"""

from pathlib import Path

import numpy as np

import synth

# Frequent English words the grammar does not use (tokenizer.write_filler), and words that must
# never be filler because they would say something about the music.
FILLER = Path(__file__).resolve().parent / "data" / "filler-words.txt"
MEANINGFUL = {"no", "not", "without", "never", "none", "fast", "slow", "quick", "quickly", "slowly", "speed", "major",
              "minor", "key", "sharp", "flat", "high", "low", "loud", "quiet", "soft", "hard", "heavy", "light", "dark",
              "bright", "happy", "sad", "dance", "song", "music", "band", "rock", "jazz", "metal", "pop", "rap",
              "sound", "sounds", "voice", "sing", "singing", "guitar", "piano", "bass", "drum", "drums", "beat",
              "time", "minute", "minutes", "second", "seconds", "half", "double", "twice", "one", "two", "three",
              "four", "five", "six", "seven", "eight", "nine", "ten", "first", "last", "end", "start", "stop",
              "violin", "viola", "cello", "fiddle", "organ", "flute", "clarinet", "harp", "keyboard", "string", "tempo",
              "rhythm", "pace", "rapid", "swift", "speedy", "leisurely", "sluggish", "hurry", "hurried", "calm", "energy",
              "energetic", "lively", "gentle", "mode", "tonic", "scale", "chord", "chords", "flats", "sharps", "natural",
              "percussion", "bpm", "tone", "pitch", "octave", "melody", "harmony", "solo", "duet", "trio", "quartet",
              "ensemble", "orchestra", "choir", "vocals", "vocal", "lyrics", "instrumental", "acoustic"}
_filler_words: list[str] | None = None


def filler(rng: np.random.Generator) -> str:
    """A few frequent words that say nothing about the music."""
    global _filler_words
    if _filler_words is None:
        _filler_words = FILLER.read_text().split()
    return " ".join(_filler_words[i] for i in rng.integers(len(_filler_words), size=rng.integers(1, 7)))

# Spellings of each pitch class as a tonic: letter plus accidental, sharps and flats both.
_LETTERS = {0: "C", 2: "D", 4: "E", 5: "F", 7: "G", 9: "A", 11: "B"}
_SHARP = ["#", "♯", " sharp", "-sharp", "#"]
_FLAT = ["b", "♭", " flat", "-flat", "b"]

MODE_WORDS = {
    "major": ["major", "major", "major", "Major", "maj", "major key", "major mode"],
    "minor": ["minor", "minor", "minor", "Minor", "min", "minor key", "minor mode"],
}

# Tempo words, each with the range of tempos it is said of (the renderer's tempos are 60-160).
TEMPO_WORDS = [
    ((60, 72), ["very slow", "largo", "adagio", "grave", "very slowly", "extremely slow", "slow and stately"]),
    ((60, 86), ["slow", "slow", "slowly", "unhurried", "lento", "relaxed tempo", "laid-back", "gentle pace", "slow tempo",
                "leisurely", "sluggish", "plodding"]),
    ((80, 108), ["andante", "walking pace", "moderate", "moderate tempo", "medium tempo", "mid-tempo", "easy-going", "at a walk"]),
    ((98, 124), ["moderato", "steady", "steady tempo", "allegretto", "medium-fast", "moderately fast"]),
    ((116, 146), ["upbeat", "lively", "brisk", "allegro", "quick", "bright tempo", "energetic", "spirited", "up-tempo"]),
    ((134, 160), ["fast", "fast", "very fast", "presto", "vivace", "rapid", "quick-paced", "high tempo", "racing", "swift",
                  "speedy", "hurried", "frantic"]),
]
TEMPO_NUMBER = [
    "{t} BPM", "{t} bpm", "{t}bpm", "{t} BPM", "at {t} BPM", "at {t} bpm", "around {t} BPM", "about {t} bpm",
    "roughly {t} BPM", "~{t} bpm", "tempo {t}", "tempo: {t}", "tempo {t} BPM", "{t} beats per minute",
    "at {t} beats per minute", "♩ = {t}", "♩={t}", "at a tempo of {t}", "at a tempo of {t} BPM", "{t} BPM tempo",
    "bpm {t}", "BPM: {t}", "{t} bpm-ish", "at {t}",
]

# Per ensemble of synth.ENSEMBLES (same order): what people call it.
ENSEMBLE_WORDS = [
    ["solo piano", "piano", "piano", "acoustic piano", "grand piano", "upright piano", "piano solo", "just piano",
     "keys", "solo keys", "pianoforte", "a piano"],
    ["church organ", "organ", "organ", "pipe organ", "cathedral organ", "organ solo", "the organ", "solo organ",
     "harmonium", "chapel organ", "a pipe organ", "organ drones"],
    ["string quartet", "strings", "strings", "string ensemble", "violins and cello", "two violins, viola and cello",
     "violin, viola and cello", "chamber strings", "bowed strings", "string section", "quartet of strings",
     "a string quartet", "violins"],
    ["acoustic guitar", "guitar", "guitar", "classical guitar", "nylon-string guitar", "fingerpicked guitar",
     "steel-string guitar", "solo guitar", "fingerstyle guitar", "spanish guitar", "an acoustic guitar",
     "guitar picking"],
    ["flute and piano", "flute with piano", "piano and flute", "flute over piano", "flute with piano accompaniment",
     "flute, piano", "flute & piano", "a flute and a piano"],
    ["clarinet and strings", "clarinet with strings", "strings and clarinet", "clarinet over strings",
     "clarinet quintet", "clarinet with string accompaniment", "clarinet & strings", "a clarinet and strings"],
    ["harp", "harp", "concert harp", "celtic harp", "harp solo", "solo harp", "plucked harp", "a harp", "irish harp"],
    ["flute with plucked bass", "flute and bass", "flute over a plucked bass line", "flute and upright bass",
     "flute with pizzicato bass", "flute and double bass", "flute with a bass line", "bass and flute",
     "flute, plucked bass", "flute with walking bass", "a flute and a bass"],
    ["piano with bass", "piano and bass", "piano and double bass", "piano with upright bass", "piano and a bass line",
     "bass and piano", "piano, bass", "piano duo with bass"],
    ["clarinet and guitar", "clarinet with guitar", "guitar and clarinet", "clarinet over guitar",
     "clarinet with guitar accompaniment", "clarinet, guitar", "clarinet & guitar"],
]
assert len(ENSEMBLE_WORDS) == len(synth.ENSEMBLES)

STYLE_WORDS = {
    "folk song": ["folk song", "folk song", "folk melody", "traditional song", "folk tune", "old folk song",
                  "traditional folk song", "european folk song", "simple song", "country song", "folk"],
    "folk tune": ["folk tune", "folk melody", "traditional tune", "folk song", "old tune", "folk"],
    "folk dance": ["folk dance", "dance tune", "country dance", "village dance"],
    "irish folk tune": ["irish folk tune", "irish tune", "celtic tune", "traditional irish melody", "irish melody",
                        "trad irish tune", "irish folk", "celtic folk tune", "irish traditional music"],
    "scottish air": ["scottish air", "scottish tune", "highland air", "celtic air", "air", "slow air",
                     "scottish melody", "scots air", "highland tune"],
    "fiddle tune": ["fiddle tune", "old-time tune", "barn dance tune", "hoedown", "fiddle music", "old-time fiddle tune",
                    "country dance tune", "square dance tune"],
    "chorale": ["chorale", "chorale", "hymn", "bach chorale", "church hymn", "four-part chorale", "sacred hymn",
                "hymn tune", "chorale harmonization", "lutheran chorale", "choral piece"],
    "renaissance motet": ["renaissance motet", "motet", "renaissance polyphony", "early music", "sacred polyphony",
                          "polyphonic piece", "renaissance piece", "palestrina-style motet", "old church music"],
}

MOODS = {
    "major": ["cheerful", "happy", "bright", "joyful", "playful", "uplifting", "sunny", "carefree", "hopeful",
              "merry", "jolly", "triumphant", "light-hearted", "festive"],
    "minor": ["melancholic", "melancholy", "sad", "dark", "somber", "mournful", "wistful", "brooding", "haunting",
              "bittersweet", "sorrowful", "gloomy", "plaintive", "moody"],
    None: ["calm", "peaceful", "gentle", "nostalgic", "dreamy", "tender", "elegant", "simple", "pastoral", "majestic",
           "serene", "heartfelt", "rustic", "intimate", "warm", "lyrical", "graceful", "quiet", "soft", "stately",
           "old-fashioned", "beautiful", "lovely", "atmospheric"],
}

SETTINGS = [
    "for a rainy evening", "for a quiet morning", "for a film scene", "background music", "for studying",
    "for a wedding", "by the fireside", "for a village festival", "for a sunday service", "like an old recording",
    "for a documentary", "around a campfire", "for a children's story", "for a walk in the countryside",
    "for a period drama", "for a video game tavern", "to fall asleep to", "for a cozy cafe", "for a road trip",
    "for meditation", "as a soundtrack", "with lots of character", "nice and clean", "simple arrangement",
    "no vocals", "instrumental", "instrumental only", "high quality", "well played", "in the old style",
]

REQUESTS = ["I'd like", "I want", "Give me", "Make", "Generate", "Compose", "Create", "Play", "Can you make",
            "Please write", "Write", "Could you generate", "I need", "Looking for"]

COMMON_METERS = {
    "4/4": ["4/4", "4/4 time", "common time", "four-four time", "in four"],
    "3/4": ["3/4", "3/4 time", "three-four time", "waltz time", "in three"],
    "2/4": ["2/4", "2/4 time", "two-four time", "in two"],
    "6/8": ["6/8", "6/8 time", "six-eight time", "compound time"],
    "2/2": ["2/2", "cut time", "alla breve", "2/2 time"],
    "3/8": ["3/8", "3/8 time"],
    "9/8": ["9/8", "9/8 time", "slip jig time"],
}


def genre_words(facts: dict) -> list[str]:
    """Dance and genre names that fit the piece's meter, tempo and mode (a waltz is in three)."""
    meter, tempo, mode = facts["meter"], facts["tempo"], facts["mode"]
    out = []
    if meter in ("3/4", "3/8"):
        out += ["waltz", "waltz", "minuet", "mazurka"]
    if meter in ("6/8", "9/8") and tempo >= 96:
        out += ["jig", "jig"] + (["slip jig"] if meter == "9/8" else [])
    if meter in ("4/4", "2/2") and tempo >= 110:
        out += ["reel", "hornpipe"]
    if meter in ("2/4", "4/4") and 90 <= tempo <= 132:
        out += ["march", "polka"] if meter == "2/4" else ["march"]
    if tempo <= 84:
        out += ["lullaby", "lament"] if mode == "minor" else ["lullaby", "cradle song"]
    if facts["style"] == "chorale":
        out += ["hymn", "chorale"]
    return out


def tonic_name(pc: int, rng: np.random.Generator) -> str:
    if pc in _LETTERS:
        return _LETTERS[pc]
    if rng.random() < 0.5:
        return _LETTERS[(pc - 1) % 12] + _SHARP[rng.integers(len(_SHARP))]
    return _LETTERS[(pc + 1) % 12] + _FLAT[rng.integers(len(_FLAT))]


def key_phrase(facts: dict, rng: np.random.Generator, mode_only: bool) -> str:
    mode = facts["mode"]
    if mode_only:
        return str(rng.choice([f"in a {mode} key", f"{mode} key", f"in {mode}", f"{mode} mode", f"{mode} tonality"]))
    tonic = tonic_name(facts["tonic"], rng)
    if rng.random() < 0.08:
        key = tonic + ("m" if mode == "minor" else "")  # chord-symbol style: Am, F#m, C
    else:
        key = f"{tonic} {MODE_WORDS[mode][rng.integers(len(MODE_WORDS[mode]))]}"
    shape = rng.integers(10)
    return [f"in {key}", f"in {key}", f"{key}", f"{key}", f"key of {key}", f"in the key of {key}", f"key: {key}",
            f"key {key}", f"set in {key}", f"{key} key" if "key" not in key else key][shape]


def tempo_phrase(facts: dict, rng: np.random.Generator, as_word: bool) -> str:
    t = facts["tempo"]
    if as_word:
        fitting = [words for (low, high), words in TEMPO_WORDS if low <= t <= high]
        words = fitting[rng.integers(len(fitting))]
        return str(words[rng.integers(len(words))])
    return TEMPO_NUMBER[rng.integers(len(TEMPO_NUMBER))].format(t=t)


def meter_phrase(facts: dict, rng: np.random.Generator) -> str | None:
    words = COMMON_METERS.get(facts["meter"])
    if not words:
        return None
    w = str(rng.choice(words))
    return f"in {w}" if rng.random() < 0.4 and not w.startswith("in ") else w


def drums_phrase(facts: dict, rng: np.random.Generator) -> str | None:
    if facts["drums"]:
        return str(rng.choice(["with drums", "with drums", "with light drums", "with percussion", "and drums",
                               "with a simple drum beat", "plus drums", "drums", "with a steady beat on drums"]))
    if rng.random() < 0.12:
        return str(rng.choice(["no drums", "without drums", "no percussion", "without percussion"]))
    return None


def pick(rng, words):
    return str(words[rng.integers(len(words))])


def describe(facts: dict, rng: np.random.Generator, with_filler: bool = True) -> str:
    """One description of a song with `facts` (keys: style, ensemble (index into
    synth.ENSEMBLES), tempo, tonic, mode, meter, drums); `with_filler=False` leaves the filler
    words out (the tokenizer's vocabulary is pruned to the grammar's own words)."""
    return describe_saying(facts, rng, with_filler)[0]


def template(facts: dict, rng: np.random.Generator) -> str:
    """One of v2's three caption templates."""
    phrase = synth.ENSEMBLES[facts["ensemble"]][0]
    return synth.caption_for(facts["style"], phrase, facts["tempo"], facts["tonic"], facts["mode"], facts["meter"],
                             facts["drums"], int(rng.integers(3)))


def describe_saying(facts: dict, rng: np.random.Generator, with_filler: bool = True) -> tuple[str, bool]:
    """A description and whether it says the key (tonic and mode), the tempo and the ensemble."""
    if rng.random() < 0.15:
        return template(facts, rng), True
    says_key = rng.random() < 0.88
    mode_only = says_key and rng.random() < 0.08
    says_tempo = rng.random() < 0.88
    says_ensemble = rng.random() < 0.92
    text = compose(facts, rng, says_key, mode_only, says_tempo, says_ensemble, with_filler)
    # Title or upper case would make "in a minor key" read as A minor.
    text = surface(text, rng, allow_title=not mode_only)
    return text, says_key and not mode_only and says_tempo and says_ensemble


def compose(facts: dict, rng: np.random.Generator, says_key: bool, mode_only: bool, says_tempo: bool,
            says_ensemble: bool, with_filler: bool) -> str:
    tempo_as_word = rng.random() < 0.4
    ensemble = pick(rng, ENSEMBLE_WORDS[facts["ensemble"]])
    genres = genre_words(facts)
    style = pick(rng, genres) if genres and rng.random() < 0.3 else pick(rng, STYLE_WORDS[facts["style"]])
    says_style = rng.random() < 0.8
    mood_pool = MOODS[facts["mode"]] if rng.random() < 0.6 else MOODS[None]
    moods = [pick(rng, mood_pool) for _ in range(rng.choice([0, 0, 1, 1, 1, 2]))]
    if len(moods) == 2 and moods[0] == moods[1]:
        moods.pop()

    key = key_phrase(facts, rng, mode_only) if says_key else None
    tempo = tempo_phrase(facts, rng, tempo_as_word) if says_tempo else None
    meter = meter_phrase(facts, rng) if rng.random() < 0.2 else None
    drums = drums_phrase(facts, rng)
    setting = pick(rng, SETTINGS) if rng.random() < 0.25 else None
    extra = filler(rng) if rng.random() < 0.4 and with_filler else ""
    if extra:
        setting = extra if setting is None else f"{setting} {extra}"

    shape = rng.random()
    if shape < 0.45:
        return noun_phrase(rng, moods, style if says_style else None, ensemble if says_ensemble else None,
                           key, tempo, tempo_as_word, meter, drums, setting)
    if shape < 0.87:
        if shape < 0.75:
            fields = [f for f in [", ".join(moods) or None, style if says_style else None,
                                  ensemble if says_ensemble else None, key, tempo, meter, drums, setting] if f]
            order = rng.permutation(len(fields))
            joiner = pick(rng, [", ", ", ", ", ", ". ", " | ", "; ", " - ", " / ", ",", " "])
            text = joiner.join(fields[i] for i in order)
        else:
            text = labelled(rng, moods, style if says_style else None, ensemble if says_ensemble else None,
                            key, tempo, meter, drums)
        # With every field left out a list is empty; a bare noun ("a tune") leaves the choice to the model.
        return text or noun_phrase(rng, [], None, None, None, None, False, None, None, setting)
    head = noun_phrase(rng, moods, style if says_style else None, ensemble if says_ensemble else None,
                       key, tempo, tempo_as_word, meter, drums, setting)
    if not head.lower().startswith(("a ", "an ")):
        head = ("an " if head[0].lower() in "aeiou" else "a ") + head
    return f"{pick(rng, REQUESTS)} {head[0].lower() + head[1:]}"


def noun_phrase(rng, moods, style, ensemble, key, tempo, tempo_as_word, meter, drums, setting) -> str:
    head = " ".join(moods + ([style] if style else [])) or pick(rng, ["piece", "tune", "song", "music", "track"])
    # A tempo word before the noun ("a slow waltz"), an ensemble as an adjective ("a piano ballad").
    front = []
    if tempo and tempo_as_word and rng.random() < 0.5 and " " not in tempo:
        front.append(tempo)
        tempo = None
    if ensemble and rng.random() < 0.2 and style:
        head = f"{ensemble} {head}"
        ensemble = None
    head = " ".join(front + [head])
    article = "an" if head[0].lower() in "aeiou" else "a"
    head = f"{article} {head}" if rng.random() < 0.6 else head
    tails = []
    if ensemble:
        tails.append(pick(rng, ["for {}", "played on {}", "on {}", "performed by {}", "featuring {}", "with {}",
                                "arranged for {}", "played by {}", "for solo {}" if " " not in ensemble else "for {}"])
                     .format(ensemble))
    if key:
        tails.append(key if key.startswith(("in ", "set in", "key")) else f"in {key}")
    if tempo:
        tails.append(tempo if not tempo_as_word or " " in tempo else pick(rng, ["{}", "at a {} tempo", "{} tempo",
                                                                               "kept {}"]).format(tempo))
    for extra in (meter, drums, setting):
        if extra:
            tails.append(extra)
    order = rng.permutation(len(tails))
    text = head
    for i in order:
        text += pick(rng, [" ", ", ", ", "]) + tails[i]
    return text


def labelled(rng, moods, style, ensemble, key, tempo, meter, drums) -> str:
    parts = []
    names = {"style": ["Genre", "Style", "genre", "style"], "ensemble": ["Instruments", "Instrumentation",
             "instrument", "Instrument"], "key": ["Key", "key", "Tonality"], "tempo": ["Tempo", "tempo", "BPM",
             "Speed"], "mood": ["Mood", "mood", "Vibe"], "meter": ["Time signature", "Meter", "time"]}
    for field, value in [("mood", ", ".join(moods)), ("style", style), ("ensemble", ensemble), ("key", key),
                         ("tempo", tempo), ("meter", meter)]:
        if value:
            value = value.removeprefix("in ").removeprefix("key: ").removeprefix("key ").removeprefix("the key of ")
            parts.append(f"{pick(rng, names[field])}: {value}")
    if drums:
        parts.append(drums)
    order = rng.permutation(len(parts))
    return pick(rng, [". ", ", ", "; ", "\n", " | "]).join(parts[i] for i in order)


def surface(text: str, rng: np.random.Generator, allow_title: bool = True) -> str:
    """Capitals, punctuation and now and then a misspelt word."""
    if rng.random() < 0.1:
        words = text.split(" ")
        long = [i for i, w in enumerate(words) if len(w) >= 5 and w.isalpha()]
        if long:
            i = long[rng.integers(len(long))]
            w = words[i]
            j = int(rng.integers(1, len(w) - 1))
            edit = rng.integers(3)
            words[i] = w[:j] + w[j + 1] + w[j] + w[j + 2 :] if edit == 0 else (w[:j] + w[j + 1 :] if edit == 1
                                                                              else w[:j] + w[j] + w[j:])
            text = " ".join(words)
    case = rng.random()
    if case < 0.35:
        text = text.lower()
    elif case < 0.75:
        text = text[0].upper() + text[1:]
    elif case < 0.8 and allow_title:
        text = text.title()
    elif case < 0.82 and allow_title:
        text = text.upper()
    if rng.random() < 0.3:
        text += pick(rng, [".", ".", "!", "..."])
    return text


def facts_of(song) -> dict:
    return dict(style=song.style, ensemble=song.ensemble, tempo=song.tempo, tonic=song.tonic, mode=song.mode,
                meter=song.meter, drums=song.drums)


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    for n in range(40):
        facts = dict(style=pick(rng, list(STYLE_WORDS)), ensemble=int(rng.integers(len(synth.ENSEMBLES))),
                     tempo=int(rng.integers(60, 161)), tonic=int(rng.integers(12)), mode=pick(rng, ["major", "minor"]),
                     meter=pick(rng, ["4/4", "3/4", "6/8", "2/4", "2/2", "1/8"]), drums=bool(rng.random() < 0.2))
        print(describe(facts, rng))
