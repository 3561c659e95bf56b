//! Several songs at once: a song made in a batch is the song made alone with the same recipe and
//! seed, bit for bit on the CPU (its codes and its audio), whether it started with the batch or
//! joined it while it ran, and whatever the other songs of the batch do (end, fail, cancel).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use songloom_engine::model_dir::ModelDir;
use songloom_engine::pipeline::{
    BatchSong, Cancel, Event, MemoryRequest, Observer, Pipeline, Request, Stage, Stats, no_arrivals,
};
use songloom_engine::plan::{Plan, WeightsChoice, Workload};
use songloom_engine::{DeviceKind, Error, Precision, Result};
use songloom_tests::{cpu, gpu_with, tiny_model_dir};

/// What a run of one song made: its codes and its interleaved audio.
#[derive(Clone, Default, PartialEq)]
struct Made {
    codes: Vec<Vec<u32>>,
    audio: Vec<f32>,
}

/// Collects a song's events into what it made; checks the audio comes in order.
fn collector(made: Arc<Mutex<Made>>) -> impl Fn(Event) + Send + Sync {
    move |e: Event| {
        let mut made = made.lock().unwrap();
        match e {
            Event::Audio { first_sample, samples, .. } => {
                assert_eq!(first_sample * 2, made.audio.len(), "audio arrives in order, without gaps");
                made.audio.extend(samples);
            }
            Event::Score(score) => made.codes = score.codes.frames.clone(),
            _ => {}
        }
    }
}

fn requests() -> Vec<Request> {
    let req = |description: &str, lyrics: &str, duration_s: f64, seed: u64| Request {
        description: description.into(),
        lyrics: lyrics.into(),
        duration_s,
        seed,
        steps: 2,
        guidance: None,
    };
    vec![
        req("warm lo-fi piano", "[verse]\nla la la", 10.08, 5),
        req("a fast jig on the fiddle", "[chorus]\nhey ho\n[verse]\nround we go", 4.0, 11),
        req("slow choir, candle light", "[intro]\n[verse]\nhush now", 6.5, 5),
    ]
}

/// Five songs: [`requests`] and two more, so a batch holds ten CFG rows (two launches of each
/// decode product on CUDA, whose kernels take eight).
fn five_requests() -> Vec<Request> {
    let mut reqs = requests();
    let more = |seed: u64, duration_s: f64| Request { seed, duration_s, ..reqs[0].clone() };
    reqs.extend([more(6, 5.0), more(7, 7.5)]);
    reqs
}

fn alone(pipeline: &Pipeline, req: &Request) -> Made {
    let made = Arc::new(Mutex::new(Made::default()));
    let events = collector(made.clone());
    pipeline.generate(req, Observer { events: &events, cancel: &Cancel::default() }).unwrap();
    made.lock().unwrap().clone()
}

/// A song of a batch and where what it makes goes.
struct Entry {
    song: BatchSong<'static>,
    made: Arc<Mutex<Made>>,
    outcome: Arc<Mutex<Option<Result<Stats>>>>,
}

fn entry(req: &Request, cancel: Cancel) -> Entry {
    let made = Arc::new(Mutex::new(Made::default()));
    let outcome = Arc::new(Mutex::new(None));
    let told = outcome.clone();
    let song = BatchSong {
        req: req.clone(),
        prompt: None,
        events: Arc::new(collector(made.clone())),
        cancel,
        started: Instant::now(),
        done: Box::new(move |result| *told.lock().unwrap() = Some(result)),
    };
    Entry { song, made, outcome }
}

/// The check: the same codes and the same audio, bit for bit.
fn same_song(a: &Made, b: &Made) -> bool {
    !a.codes.is_empty() && a.codes == b.codes && a.audio == b.audio
}

/// How `made` differs from `alone`, in words, for a failed check.
fn difference(made: &Made, alone: &Made) -> String {
    let frame = made.codes.iter().zip(&alone.codes).position(|(a, b)| a != b);
    let largest = made.audio.iter().zip(&alone.audio).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    format!(
        "{} frames against {}, first differing frame {frame:?}; {} samples against {}, largest difference {largest:e}",
        made.codes.len(),
        alone.codes.len(),
        made.audio.len(),
        alone.audio.len()
    )
}

/// Runs `reqs` as one batch: what each song made and how it ended.
fn run_batch(pipeline: &Pipeline, reqs: &[Request]) -> Vec<(Made, Option<Result<Stats>>)> {
    let entries: Vec<Entry> = reqs.iter().map(|r| entry(r, Cancel::default())).collect();
    let (songs, rest): (Vec<BatchSong>, Vec<_>) = entries.into_iter().map(|e| (e.song, (e.made, e.outcome))).unzip();
    pipeline.generate_batch(songs, &no_arrivals);
    rest.into_iter().map(|(made, outcome)| (made.lock().unwrap().clone(), outcome.lock().unwrap().take())).collect()
}

#[test]
fn a_song_in_a_batch_is_the_song_alone() {
    let pipeline = Pipeline::load(&tiny_model_dir(), cpu()).unwrap();
    let reqs = requests();
    let singles: Vec<Made> = reqs.iter().map(|r| alone(&pipeline, r)).collect();
    assert!(singles.iter().all(|m| m.audio.iter().all(|v| v.is_finite())));
    let lengths: Vec<usize> = singles.iter().map(|m| m.codes.len()).collect();
    assert!(lengths[0] != lengths[1] && lengths[1] != lengths[2], "the songs have different lengths: {lengths:?}");
    for n in 1..=3 {
        let results = run_batch(&pipeline, &reqs[..n]);
        for (i, (made, outcome)) in results.iter().enumerate() {
            let stats = outcome.as_ref().expect("every song is told its outcome").as_ref().unwrap();
            assert_eq!(stats.frames + 1, made.codes.len(), "song {i} of {n}: frames and codes");
            assert!(same_song(made, &singles[i]), "song {i} of a batch of {n} differs from the song alone");
        }
        if n >= 2 {
            // Negative control: the check tells the songs apart, so rows swapped between songs fail it.
            assert!(!same_song(&results[0].0, &singles[1]) && !same_song(&results[1].0, &singles[0]));
        }
    }
}

/// How far `made`'s audio is from `alone`'s: the RMS of the difference over the RMS of `alone`
/// (infinite when the lengths differ).
fn audio_distance(made: &Made, alone: &Made) -> f64 {
    if made.audio.len() != alone.audio.len() {
        return f64::INFINITY;
    }
    let sum = |f: &dyn Fn(usize) -> f64| (0..alone.audio.len()).map(f).sum::<f64>();
    let error = sum(&|i| (made.audio[i] as f64 - alone.audio[i] as f64).powi(2));
    (error / sum(&|i| (alone.audio[i] as f64).powi(2))).sqrt()
}

/// The windows of a batch's songs take their flow steps together, several songs' CFG pairs in one
/// DiT pass (a GPU's default, asked for here on the CPU): each song keeps its codes, and its audio
/// is the song alone's within the f32 rounding of products blocked by the batch. Bound: 1e-5
/// (measured on lavapipe 3.3e-7 with four steps); songs swapped are ~1 apart. The tally shows the
/// passes took more than one window; asked not to, every pass takes one.
#[test]
fn windows_of_the_songs_of_a_batch_step_together() {
    let pipeline = Pipeline::load(&tiny_model_dir(), cpu()).unwrap();
    // One length: their windows are ready at the same frames.
    let reqs: Vec<Request> = requests().into_iter().map(|r| Request { steps: 6, duration_s: 9.0, ..r }).collect();
    let singles: Vec<Made> = reqs.iter().map(|r| alone(&pipeline, r)).collect();
    for together in [true, false] {
        pipeline.set_windows_together(together);
        let before = pipeline.acoustic_tally();
        let results = run_batch(&pipeline, &reqs);
        let tally = pipeline.acoustic_tally();
        let (passes, windows) = (tally.passes - before.passes, tally.windows_stepped - before.windows_stepped);
        let mut farthest = 0.0f64;
        for (i, (made, outcome)) in results.iter().enumerate() {
            outcome.as_ref().expect("every song is told its outcome").as_ref().unwrap();
            assert_eq!(made.codes, singles[i].codes, "song {i} (together: {together}): codes");
            let distance = audio_distance(made, &singles[i]);
            assert!(distance <= 1e-5, "song {i} (together: {together}): audio {distance:e} from the song alone");
            farthest = farthest.max(distance);
        }
        // Negative control: the bound tells songs apart.
        assert!(audio_distance(&results[0].0, &singles[2]) > 1e-2 && audio_distance(&results[2].0, &singles[0]) > 1e-2);
        if together {
            assert!(windows > passes, "{windows} windows in {passes} passes: no pass took two windows");
        } else {
            assert_eq!(windows, passes, "asked not to, a pass took several windows");
        }
        println!(
            "together: {together}: {windows} windows stepped in {passes} DiT passes, audio at most {farthest:e} from alone"
        );
    }
}

#[test]
fn a_song_that_joins_a_running_batch_is_the_song_alone() {
    let pipeline = Pipeline::load(&tiny_model_dir(), cpu()).unwrap();
    let reqs = requests();
    let single = alone(&pipeline, &reqs[2]);
    let first = entry(&reqs[0], Cancel::default());
    let joiner = Mutex::new(Some(entry(&reqs[2], Cancel::default())));
    let joiner_made = joiner.lock().unwrap().as_ref().map(|e| (e.made.clone(), e.outcome.clone())).unwrap();
    // The first song's progress, watched to hand the second over mid-song.
    let frames_of_first = Arc::new(AtomicUsize::new(0));
    let seen = frames_of_first.clone();
    let first_made = first.made.clone();
    let first_made_result = first.made.clone();
    let first_song = BatchSong {
        events: Arc::new(move |e: Event| {
            if let Event::Stage { stage: Stage::ArFrames, done, .. } = e {
                seen.store(done, Ordering::SeqCst);
            }
            collector(first_made.clone())(e)
        }),
        ..first.song
    };
    let joined_at = Mutex::new(None);
    let arrivals = |running: usize| {
        let done = frames_of_first.load(Ordering::SeqCst);
        if done < 40 {
            return None;
        }
        let song = joiner.lock().unwrap().take()?.song;
        *joined_at.lock().unwrap() = Some((done, running));
        Some(song)
    };
    pipeline.generate_batch(vec![first_song], &arrivals);
    let (done, running) = joined_at.lock().unwrap().expect("the second song was handed over");
    assert_eq!(running, 1, "it joined while the first song ran");
    let first = first_made_result.lock().unwrap().clone();
    assert!(done < first.codes.len() - 1, "it joined before the first song's AR loop ended");
    let made = joiner_made.0.lock().unwrap().clone();
    assert!(joiner_made.1.lock().unwrap().take().unwrap().is_ok());
    assert!(same_song(&made, &single), "a song that joined differs from the song alone");
    assert!(same_song(&first, &alone(&pipeline, &reqs[0])), "the song joined differs from the song alone");
}

#[test]
fn a_cancelled_or_refused_song_leaves_the_others_as_they_are() {
    let pipeline = Pipeline::load(&tiny_model_dir(), cpu()).unwrap();
    let reqs = requests();
    let cancel = Cancel::default();
    let cancelled = entry(&reqs[0], cancel.clone());
    let watched = cancelled.made.clone();
    let cancelled_song = BatchSong {
        events: Arc::new(move |e: Event| {
            if let Event::Stage { stage: Stage::ArFrames, done: 30, .. } = e {
                cancel.cancel();
            }
            collector(watched.clone())(e)
        }),
        ..cancelled.song
    };
    let kept = entry(&reqs[2], Cancel::default());
    let empty = entry(&Request { description: String::new(), ..reqs[1].clone() }, Cancel::default());
    let bad_steps = entry(&Request { steps: 0, ..reqs[1].clone() }, Cancel::default());
    pipeline.generate_batch(vec![cancelled_song, kept.song, empty.song, bad_steps.song], &no_arrivals);
    let outcome = |o: &Arc<Mutex<Option<Result<Stats>>>>| o.lock().unwrap().take().expect("told");
    assert!(matches!(outcome(&cancelled.outcome), Err(Error::Cancelled)));
    let refused = outcome(&bad_steps.outcome).unwrap_err().to_string();
    assert!(refused.contains("steps"), "{refused}");
    // An empty description is the model's to take (the reference allows it); it is made as alone.
    let (kept_made, kept_outcome) = (kept.made.lock().unwrap().clone(), outcome(&kept.outcome));
    assert!(kept_outcome.is_ok());
    assert!(same_song(&kept_made, &alone(&pipeline, &reqs[2])), "a song beside a cancelled one changed");
    let empty_made = empty.made.lock().unwrap().clone();
    let empty_req = Request { description: String::new(), ..reqs[1].clone() };
    match outcome(&empty.outcome) {
        Ok(_) => assert!(same_song(&empty_made, &alone(&pipeline, &empty_req))),
        Err(e) => assert!(pipeline.check_song(&empty_req).is_err(), "refused in a batch only: {e}"),
    }
}

/// On CUDA, in every AR weight format: a song in a batch of 1, 2, 3 and 5 songs (ten CFG rows, two
/// launches of each decode product) is the song alone, codes and audio bit for bit. The decode
/// products sum each row in the same order whatever the row count (cuda/decode_shapes.rs); the
/// DiT's products over several songs' windows have given each window's rows as alone so far (this
/// test and `bench --what batch` at full size on the H100, docs/gpu-runs/2026-12-05-26-dit-windows),
/// though only the f32 bound is promised for them.
#[test]
fn on_cuda_a_song_in_a_batch_is_the_song_alone() {
    let model = tiny_model_dir();
    let reqs = five_requests();
    for weights in [WeightsChoice::Bf16, WeightsChoice::EightBit, WeightsChoice::FourBitAll] {
        let device = match gpu_with(DeviceKind::Cuda, Precision::Reference) {
            Ok(device) => device,
            Err(e) => {
                println!("cuda skipped: {e}");
                return;
            }
        };
        let memory = MemoryRequest { weights, max_memory_bytes: None, mode: None };
        let plan = Pipeline::plan(&model, &device, memory, Some(&reqs[0])).unwrap();
        let pipeline = Pipeline::load_planned(&model, device, &plan, &|_| {}).unwrap();
        let singles: Vec<Made> = reqs.iter().map(|r| alone(&pipeline, r)).collect();
        for n in [1, 2, 3, 5] {
            let results = run_batch(&pipeline, &reqs[..n]);
            for (i, (made, outcome)) in results.iter().enumerate() {
                let stats = outcome.as_ref().expect("every song is told its outcome").as_ref().unwrap();
                assert_eq!(stats.frames + 1, made.codes.len(), "{weights:?}: song {i} of {n}: frames and codes");
                assert!(
                    same_song(made, &singles[i]),
                    "{weights:?}: song {i} of a batch of {n} differs from the song alone: {}",
                    difference(made, &singles[i])
                );
            }
            if n >= 2 {
                // Negative control: songs swapped between rows fail the check.
                assert!(!same_song(&results[0].0, &singles[1]) && !same_song(&results[1].0, &singles[0]));
            }
        }
        println!("cuda {weights:?}: batches of 1, 2, 3 and 5 songs equal the songs alone");
    }
}

/// Under a budget that holds one song's KV cache but not two, the second song of a batch waits for
/// the first to leave the AR loop, then runs: it is not refused, and it is the song alone.
#[test]
fn a_song_that_does_not_fit_beside_the_others_waits_for_room() {
    let model = tiny_model_dir();
    let reqs = requests();
    let memory = |max_memory_bytes| MemoryRequest { weights: WeightsChoice::Auto, max_memory_bytes, mode: None };
    let peak = |req: &Request| Pipeline::plan(&model, &cpu(), memory(None), Some(req)).unwrap().peak_bytes;
    let budget = peak(&reqs[0]).max(peak(&reqs[2])) + 1;
    let plan = Pipeline::plan(&model, &cpu(), memory(Some(budget)), Some(&reqs[0])).unwrap();
    let pipeline = Pipeline::load_planned(&model, cpu(), &plan, &|_| {}).unwrap();
    assert_eq!(pipeline.batch_capacity(8), 1, "the budget holds one song");
    assert!(pipeline.check_batch(&reqs[..2]).is_err(), "two songs do not fit at once");
    let results = run_batch(&pipeline, &[reqs[0].clone(), reqs[2].clone()]);
    for (i, (_, outcome)) in results.iter().enumerate() {
        assert!(outcome.as_ref().expect("told").is_ok(), "song {i}: {:?}", outcome.as_ref().unwrap().as_ref().err());
    }
    assert!(same_song(&results[1].0, &alone(&pipeline, &reqs[2])), "the song that waited differs from the song alone");
}

/// Two songs under a GPU's plan on the CPU (only the plan's arithmetic differs), with a budget
/// that holds either alone but not the second beside the first's audio: the pipeline and the two
/// requests.
fn room_for_one_song() -> (Pipeline, Request, Request) {
    let model = tiny_model_dir();
    let reqs = requests();
    // The shorter song first, so the longer one fits alone under the budget.
    let (first, second) = (reqs[2].clone(), reqs[0].clone());
    let loaded = Pipeline::load(&model, cpu()).unwrap();
    let size = |req: &Request| {
        let prompt = loaded.encode_prompt(&req.description, &req.lyrics).unwrap();
        (prompt.cond.len(), loaded.max_frames(req.duration_s).unwrap())
    };
    let geometry = ModelDir::open(&model).unwrap().geometry().unwrap();
    let unbudgeted = loaded.loaded_plan().clone();
    let on_gpu = Plan { workload: Workload { gpu: true, ..unbudgeted.workload }, ..unbudgeted };
    let peak = |songs: &[(usize, usize)], rendering| on_gpu.for_batch(&geometry, songs, rendering).unwrap().peak_bytes;
    let (a, b) = (size(&first), size(&second));
    let budget = peak(&[a], 0).max(peak(&[b], 0));
    assert!(peak(&[b], 1) > budget, "the budget must not hold the second song beside the first's audio");
    let planned = Plan { budget_bytes: Some(budget), ..on_gpu };
    (Pipeline::load_planned(&model, cpu(), &planned, &|_| {}).unwrap(), first, second)
}

/// What happened to two songs, in order: (song, "joined" | "finished" | "told").
type Log = Arc<Mutex<Vec<(usize, &'static str)>>>;

/// `entries` with their joins, their `Finished` events and their outcomes logged in `log`.
fn logged(mut entries: Vec<Entry>, log: &Log) -> Vec<Entry> {
    for (i, e) in entries.iter_mut().enumerate() {
        let (seen, inner) = (log.clone(), e.song.events.clone());
        e.song.events = Arc::new(move |event: Event| {
            match &event {
                Event::Stage { stage: Stage::Tokenize, .. } => seen.lock().unwrap().push((i, "joined")),
                Event::Finished { .. } => seen.lock().unwrap().push((i, "finished")),
                _ => {}
            }
            inner(event)
        });
        let (told, done) = (log.clone(), std::mem::replace(&mut e.song.done, Box::new(|_| {})));
        e.song.done = Box::new(move |result| {
            told.lock().unwrap().push((i, "told"));
            done(result)
        });
    }
    entries
}

/// Streamed on a GPU, a song that has left the AR loop keeps its acoustic workspace until its last
/// window. Under a budget with room for one song, the next song waits for that song's audio to end,
/// not only for it to leave the loop, and is then the song alone.
#[test]
fn a_song_waits_for_room_held_by_the_audio_of_the_song_before() {
    let (pipeline, first, second) = room_for_one_song();
    let log = Log::default();
    let entries = logged([&first, &second].iter().map(|r| entry(r, Cancel::default())).collect(), &log);
    let (songs, rest): (Vec<BatchSong>, Vec<_>) = entries.into_iter().map(|e| (e.song, (e.made, e.outcome))).unzip();
    pipeline.generate_batch(songs, &no_arrivals);
    for (i, (_, outcome)) in rest.iter().enumerate() {
        let outcome = outcome.lock().unwrap();
        assert!(outcome.as_ref().expect("told").is_ok(), "song {i}: {:?}", outcome.as_ref().unwrap().as_ref().err());
    }
    let log = log.lock().unwrap().clone();
    let at = |what| log.iter().position(|&e| e == what).unwrap_or_else(|| panic!("no {what:?} in {log:?}"));
    assert!(
        at((1, "joined")) > at((0, "finished")),
        "the second song joined while the first still made its audio: {log:?}"
    );
    let made = rest[1].0.lock().unwrap().clone();
    assert!(same_song(&made, &alone(&pipeline, &second)), "the song that waited differs from the song alone");
}

/// A song waiting for the room another song's audio holds is cancelled while that audio is still
/// being made: it is told at once, not when the other song ends. The first song's `Score` event
/// (after it left the AR loop, before its work ends) cancels the second and holds the first's
/// audio until the second is told, or 10 s pass.
#[test]
fn a_song_waiting_for_room_hears_its_cancel() {
    let (pipeline, first, second) = room_for_one_song();
    let log = Log::default();
    let cancel = Cancel::default();
    let mut entries = logged(vec![entry(&first, Cancel::default()), entry(&second, cancel.clone())], &log);
    let second_told = entries[1].outcome.clone();
    let inner = entries[0].song.events.clone();
    entries[0].song.events = Arc::new(move |event: Event| {
        if let Event::Score(_) = event {
            cancel.cancel();
            let deadline = Instant::now() + std::time::Duration::from_secs(10);
            while second_told.lock().unwrap().is_none() && Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
        inner(event)
    });
    let (songs, rest): (Vec<BatchSong>, Vec<_>) = entries.into_iter().map(|e| (e.song, (e.made, e.outcome))).unzip();
    pipeline.generate_batch(songs, &no_arrivals);
    let outcome = |i: usize| rest[i].1.lock().unwrap().take().expect("every song is told");
    assert!(outcome(0).is_ok(), "the first song is unaffected");
    assert!(matches!(outcome(1), Err(Error::Cancelled)), "the waiting song is told it was cancelled");
    let log = log.lock().unwrap().clone();
    let at = |what| log.iter().position(|&e| e == what).unwrap_or_else(|| panic!("no {what:?} in {log:?}"));
    assert!(at((1, "told")) < at((0, "finished")), "the cancel was heard only after the first song ended: {log:?}");
    assert!(!log.contains(&(1, "joined")), "the cancelled song never joined: {log:?}");
}
