//! The decode products' launch shapes (the GEMV kernels of kernels/gemv.cu and
//! kernels/gemv_quant.cu): one table that the host launches from ([`DecodeShape::find`]) and that
//! writes the kernels' instantiations into the source NVRTC compiles ([`instantiations`]), so the
//! rows a block, the threads and the launch bounds of a kernel are written once. Retuning for
//! another GPU is an edit here; the measurements behind each shape are in docs/BENCHMARKS.md
//! ("Decode GEMV launch shapes"), taken with tools/gemv-lab, which compiles the same lines
//! ([`lab_source`]).

use std::fmt::Write;

use crate::tensor::DType;

/// The decode products' forms, each a kernel family of both kernel files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// `y = x . w^T`.
    Plain,
    /// `y = residual + x . w^T`.
    Add,
    /// `y = silu(x . gate^T) * (x . up^T)`, the block reading the same rows of both weights.
    Swiglu,
    /// Three products of one input (q, k and v) as one grid, their row groups back to back.
    Group3,
}

impl Family {
    pub const ALL: [Family; 4] = [Family::Plain, Family::Add, Family::Swiglu, Family::Group3];

    /// The prefix of its kernels' names.
    pub const fn prefix(self) -> &'static str {
        match self {
            Family::Plain => "gemv",
            Family::Add => "gemv_add",
            Family::Swiglu => "gemv_swiglu",
            Family::Group3 => "gemv_group3",
        }
    }

    /// The macro of its kernel file that defines one of its kernels.
    fn macro_name(self) -> &'static str {
        match self {
            Family::Plain => "PLAIN",
            Family::Add => "ADD",
            Family::Swiglu => "SWIGLU",
            Family::Group3 => "GROUP3",
        }
    }
}

/// Rows of at most this many 16-byte loads are short: a row of 4096 q4 weights (o_proj's input in
/// the LM and the depth decoder), which one load a thread of a 128-thread block covers.
pub const SHORT_ROW_LOADS: usize = 128;

/// Which row lengths, in 16-byte loads, a kernel is launched for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowLength {
    Any,
    /// At most [`SHORT_ROW_LOADS`].
    Short,
    /// More than [`SHORT_ROW_LOADS`].
    Long,
}

impl RowLength {
    fn takes(self, row_loads: usize) -> bool {
        match self {
            RowLength::Any => true,
            RowLength::Short => row_loads <= SHORT_ROW_LOADS,
            RowLength::Long => row_loads > SHORT_ROW_LOADS,
        }
    }
}

/// How many threads a block is launched with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Threads {
    /// All the launch bounds allow, whatever the row's length: the bf16 kernels sum every warp's
    /// partial sums.
    Bound,
    /// One for each `short` 16-byte loads of a short row ([`SHORT_ROW_LOADS`]), each `long` of a
    /// longer one, rounded up to a warp, within the bounds: a short row leaves no thread idle.
    PerLoads { short: usize, long: usize },
}

/// One decode-product kernel and how it is launched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeShape {
    pub name: &'static str,
    /// The weight's form: `BF16` (kernels/gemv.cu), `Q8` or `Q4` (kernels/gemv_quant.cu).
    pub dtype: DType,
    pub family: Family,
    /// The most activation rows the kernel takes (a template argument, so its sums stay in
    /// registers); a product of fewer takes the kernel with the smallest such count.
    pub m: usize,
    pub rows: RowLength,
    /// Weight rows a block owns (SwiGLU: of each of its two matrices).
    pub rows_per_block: usize,
    /// Whether every row is addressed from the block's first and the sums are reduced by halving
    /// (kernels/gemv_quant.cu's `LEAN`): fewer registers, so more blocks stay resident.
    pub lean: bool,
    /// The launch bounds: the most threads a block has, and the blocks ptxas keeps resident a
    /// multiprocessor (`None`: no minimum, which is not the same as a minimum of one to ptxas).
    pub most_threads: u32,
    pub resident_blocks: Option<u32>,
    /// Warps the block's shared partial sums have room for: its family's usual block (8 warps,
    /// SwiGLU's 4), at least the bounds' threads.
    pub partial_warps: u32,
    pub threads_per_block: Threads,
}

/// A quantized kernel of the family's usual shape: 8 rows a block (SwiGLU 4 of each matrix), a
/// pointer a row, up to 256 threads (SwiGLU 128, for its two weights' loads), no minimum of
/// resident blocks, one load a thread.
const fn quant(name: &'static str, dtype: DType, family: Family, m: usize) -> DecodeShape {
    let swiglu = matches!(family, Family::Swiglu);
    DecodeShape {
        name,
        dtype,
        family,
        m,
        rows: RowLength::Any,
        rows_per_block: if swiglu { 4 } else { 8 },
        lean: false,
        most_threads: if swiglu { 128 } else { 256 },
        resident_blocks: None,
        partial_warps: if swiglu { 4 } else { 8 },
        threads_per_block: Threads::PerLoads { short: 1, long: 1 },
    }
}

/// A bf16 kernel: 4 rows a block, the row split between 8 warps, since 4 leave a 4096-row
/// product's multiprocessors half occupied; SwiGLU's blocks, which read 8 rows at a time (4 of each
/// weight), run faster with 4 warps.
const fn bf16(name: &'static str, family: Family, m: usize) -> DecodeShape {
    let warps = if matches!(family, Family::Swiglu) { 4 } else { 8 };
    DecodeShape {
        name,
        dtype: DType::BF16,
        family,
        m,
        rows: RowLength::Any,
        rows_per_block: 4,
        lean: false,
        most_threads: warps * 32,
        resident_blocks: None,
        partial_warps: warps,
        threads_per_block: Threads::Bound,
    }
}

impl DecodeShape {
    const fn rows_per_block(mut self, rows: usize) -> Self {
        self.rows_per_block = rows;
        self
    }

    const fn lean(mut self) -> Self {
        self.lean = true;
        self
    }

    const fn bounds(mut self, most_threads: u32, resident_blocks: u32) -> Self {
        self.most_threads = most_threads;
        self.resident_blocks = Some(resident_blocks);
        self
    }

    const fn loads_per_thread(mut self, short: usize, long: usize) -> Self {
        self.threads_per_block = Threads::PerLoads { short, long };
        self
    }

    const fn for_rows(mut self, rows: RowLength) -> Self {
        self.rows = rows;
        self
    }

    const fn partial_warps(mut self, warps: u32) -> Self {
        self.partial_warps = warps;
        self
    }

    /// The same kernel for `m` activation rows, named `name`. Its threads split a row as this
    /// one's do, so each row's sums are added in the same order whatever the row count: a song's
    /// products in a batch (two rows a song) are bit for bit its products alone. Without this
    /// one's minimum of resident blocks, which would cap the registers more rows' sums need.
    const fn at_rows(mut self, name: &'static str, m: usize) -> Self {
        self.name = name;
        self.m = m;
        self.resident_blocks = None;
        self
    }
}

use DType::{Q4, Q8};
use Family::{Add, Group3, Plain, Swiglu};

/// The quantized kernels of two activation rows (the CFG pair, one song's decode step), each the
/// shape tools/gemv-lab measured fastest chained as the decode step runs them. Halving a block's
/// rows halves its registers, so more blocks stay resident to hide the loads' latency; each thread
/// then takes two loads of a row, so a block still reads as many bytes. Lean addressing saves the
/// registers of a pointer a row; q4's kernels, whose 8 loads and 16 sums a row need about 128
/// registers, spill with it unless a block owns at most 4 rows.
// q8's plain and residual-add products (o_proj, down): 4 rows, lean, 4 blocks of 256 resident.
const Q8_PLAIN: DecodeShape =
    quant("gemv_q8_m2", Q8, Plain, 2).rows_per_block(4).lean().bounds(256, 4).loads_per_thread(2, 2);
const Q8_ADD: DecodeShape =
    quant("gemv_add_q8_m2", Q8, Add, 2).rows_per_block(4).lean().bounds(256, 4).loads_per_thread(2, 2);
// q8's SwiGLU: its 8 rows (4 of each matrix) lean, 4 blocks of 128 resident.
const Q8_SWIGLU: DecodeShape = quant("gemv_swiglu_q8_m2", Q8, Swiglu, 2).lean().bounds(128, 4);
// q8's q/k/v: 8 rows lean, 3 blocks of 256 resident.
const Q8_GROUP3: DecodeShape = quant("gemv_group3_q8_m2", Q8, Group3, 2).lean().bounds(256, 3);
// q4's plain products: 4 rows, lean, 6 blocks of 128 resident (80 registers). A short row one load
// a thread; a long one (down's 384 loads) four, on 96 threads: 8 blocks a multiprocessor then hold
// the whole grid, where 128 threads leave a second wave.
const Q4_PLAIN: DecodeShape =
    quant("gemv_q4_m2", Q4, Plain, 2).rows_per_block(4).lean().bounds(128, 6).loads_per_thread(1, 4);
// q4's residual-add product of a short row (o_proj): 2 rows, lean, 8 blocks of 128 resident, two
// loads a thread, where the 4-row kernel's 6 blocks leave a second wave of its grid. The plain
// products of short rows (4096 -> 1024, 4096 -> 12288) are slower this way.
const Q4_ADD_SHORT: DecodeShape = quant("gemv_add_q4_m2_short", Q4, Add, 2)
    .for_rows(RowLength::Short)
    .rows_per_block(2)
    .lean()
    .bounds(128, 8)
    .loads_per_thread(2, 2)
    .partial_warps(4);
const Q4_ADD_LONG: DecodeShape = quant("gemv_add_q4_m2", Q4, Add, 2)
    .for_rows(RowLength::Long)
    .rows_per_block(4)
    .lean()
    .bounds(128, 6)
    .loads_per_thread(4, 4);
// q4's SwiGLU: 4 rows (2 of each matrix), lean, 6 blocks of 128 resident, two loads a thread.
const Q4_SWIGLU: DecodeShape =
    quant("gemv_swiglu_q4_m2", Q4, Swiglu, 2).rows_per_block(2).lean().bounds(128, 6).loads_per_thread(2, 2);
// q4's q/k/v: as its plain products, two loads a thread.
const Q4_GROUP3: DecodeShape =
    quant("gemv_group3_q4_m2", Q4, Group3, 2).rows_per_block(4).lean().bounds(128, 6).loads_per_thread(2, 2);

/// The quantized kernels: each pair's shape ([`Q8_PLAIN`] ...), and the same at four and eight
/// activation rows ([`DecodeShape::at_rows`]) for several songs' decode steps.
pub const QUANT: &[DecodeShape] = &[
    Q8_PLAIN,
    Q8_PLAIN.at_rows("gemv_q8_m4", 4),
    Q8_PLAIN.at_rows("gemv_q8_m8", 8),
    Q8_ADD,
    Q8_ADD.at_rows("gemv_add_q8_m4", 4),
    Q8_ADD.at_rows("gemv_add_q8_m8", 8),
    Q8_SWIGLU,
    Q8_SWIGLU.at_rows("gemv_swiglu_q8_m4", 4),
    Q8_SWIGLU.at_rows("gemv_swiglu_q8_m8", 8),
    Q8_GROUP3,
    Q8_GROUP3.at_rows("gemv_group3_q8_m4", 4),
    Q8_GROUP3.at_rows("gemv_group3_q8_m8", 8),
    Q4_PLAIN,
    Q4_PLAIN.at_rows("gemv_q4_m4", 4),
    Q4_PLAIN.at_rows("gemv_q4_m8", 8),
    Q4_ADD_SHORT,
    Q4_ADD_SHORT.at_rows("gemv_add_q4_m4_short", 4),
    Q4_ADD_SHORT.at_rows("gemv_add_q4_m8_short", 8),
    Q4_ADD_LONG,
    Q4_ADD_LONG.at_rows("gemv_add_q4_m4", 4),
    Q4_ADD_LONG.at_rows("gemv_add_q4_m8", 8),
    Q4_SWIGLU,
    Q4_SWIGLU.at_rows("gemv_swiglu_q4_m4", 4),
    Q4_SWIGLU.at_rows("gemv_swiglu_q4_m8", 8),
    Q4_GROUP3,
    Q4_GROUP3.at_rows("gemv_group3_q4_m4", 4),
    Q4_GROUP3.at_rows("gemv_group3_q4_m8", 8),
];

macro_rules! bf16_shapes {
    ($($m:literal),*) => {
        &[$(
            bf16(concat!("gemv_bf16_k8_m", $m), Plain, $m),
            bf16(concat!("gemv_add_bf16_k8_m", $m), Add, $m),
            bf16(concat!("gemv_swiglu_bf16_k8_m", $m), Swiglu, $m),
            bf16(concat!("gemv_group3_bf16_k8_m", $m), Group3, $m),
        )*]
    };
}

/// The bf16 kernels, one for each activation row count up to 8 (every decode product's weight
/// rows a multiple of 8 long): 4 rows a block, so each activation load serves 4 rows and even a
/// 1024-row product spreads over 256 blocks.
pub const BF16: &[DecodeShape] = bf16_shapes!(1, 2, 3, 4, 5, 6, 7, 8);

impl DecodeShape {
    /// Every decode-product kernel.
    pub fn all() -> impl Iterator<Item = &'static DecodeShape> {
        BF16.iter().chain(QUANT)
    }

    /// The kernel of `family`'s product of `m` activation rows against a `dtype` weight whose rows
    /// are `row_loads` 16-byte loads long.
    pub fn find(dtype: DType, family: Family, m: usize, row_loads: usize) -> Option<&'static DecodeShape> {
        let fits = |s: &&DecodeShape| s.dtype == dtype && s.family == family && s.m >= m && s.rows.takes(row_loads);
        let m = Self::all().filter(fits).map(|s| s.m).min()?;
        Self::all().filter(fits).find(|s| s.m == m)
    }

    /// The kernel file that defines it.
    pub fn file(&self) -> &'static str {
        if self.dtype == DType::BF16 { "gemv.cu" } else { "gemv_quant.cu" }
    }

    /// Threads a block is launched with over rows `row_loads` 16-byte loads long.
    pub fn threads(&self, row_loads: usize) -> u32 {
        match self.threads_per_block {
            Threads::Bound => self.most_threads,
            Threads::PerLoads { short, long } => {
                let per_thread = if row_loads <= SHORT_ROW_LOADS { short } else { long };
                (row_loads.div_ceil(per_thread).div_ceil(32) * 32).clamp(32, self.most_threads as usize) as u32
            }
        }
    }

    /// Its line of the kernel file's instantiations: the family's macro with the name, the launch
    /// bounds and the template arguments (kernels/gemv.cu and kernels/gemv_quant.cu say which).
    fn instantiation(&self) -> String {
        let bounds = match self.resident_blocks {
            Some(blocks) => format!("__launch_bounds__({}, {blocks})", self.most_threads),
            None => format!("__launch_bounds__({})", self.most_threads),
        };
        let (name, family, m, rows, warps) =
            (self.name, self.family.macro_name(), self.m, self.rows_per_block, self.partial_warps);
        match self.dtype {
            DType::Q8 | DType::Q4 => {
                let bits = if self.dtype == DType::Q8 { 8 } else { 4 };
                format!("GEMV_Q_{family}({name}, {bounds}, {bits}, {m}, {rows}, {}, {warps})\n", self.lean)
            }
            _ => format!("GEMV_BF16_{family}({name}, {bounds}, {m}, {rows}, {warps})\n"),
        }
    }
}

/// The instantiations of kernel file `file`'s decode products, appended to it for NVRTC (empty for
/// a file that has none).
pub fn instantiations(file: &str) -> String {
    let mut out = String::new();
    for shape in DecodeShape::all().filter(|s| s.file() == file) {
        if out.is_empty() {
            out.push_str("\n// The decode products' kernels, from engine/src/cuda/decode_shapes.rs.\n");
        }
        out.push_str(&shape.instantiation());
    }
    out
}

/// tools/gemv-lab/engine_shapes.cuh, which the lab compiles after the kernel files: their
/// instantiations and the host's launch shapes as a table, so the lab times the engine's kernels
/// launched as the engine launches them.
pub fn lab_source() -> String {
    let mut out = String::from(
        "// Generated from engine/src/cuda/decode_shapes.rs (its `lab_file_is_current` test rewrites it\n\
         // with SONGLOOM_WRITE_LAB=1): the decode products' kernels and their launch shapes.\n\n",
    );
    out.push_str(&instantiations("gemv.cu"));
    out.push_str(&instantiations("gemv_quant.cu"));
    let _ = writeln!(
        out,
        "\n// Rows of at most this many 16-byte loads are short.\n#define ENGINE_SHORT_ROW_LOADS {SHORT_ROW_LOADS}"
    );
    out.push_str(
        "\n// Each kernel's launch (engine/src/cuda/decode_shapes.rs, DecodeShape): weight bits (16:\n\
         // bf16), family (0 plain, 1 residual-add, 2 SwiGLU, 3 q/k/v), activation rows, rows a\n\
         // block (SwiGLU: of each matrix), row lengths (0 any, 1 short, 2 long), most threads, and\n\
         // loads a thread on a short and on a long row (0: every thread of the bounds).\n\
         struct EngineShape {\n    const char* name;\n    \
         int bits, family, m, rows_per_block, rows, most_threads, short_loads, long_loads;\n};\n\
         static const EngineShape ENGINE_SHAPES[] = {\n",
    );
    for s in DecodeShape::all() {
        let bits = match s.dtype {
            DType::Q8 => 8,
            DType::Q4 => 4,
            _ => 16,
        };
        let family = s.family as usize;
        let rows = match s.rows {
            RowLength::Any => 0,
            RowLength::Short => 1,
            RowLength::Long => 2,
        };
        let (short, long) = match s.threads_per_block {
            Threads::Bound => (0, 0),
            Threads::PerLoads { short, long } => (short, long),
        };
        let _ = writeln!(
            out,
            "    {{\"{}\", {bits}, {family}, {}, {}, {rows}, {}, {short}, {long}}},",
            s.name, s.m, s.rows_per_block, s.most_threads
        );
    }
    out.push_str("};\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::products::GEMV_KERNEL_ROWS;

    const LAB_FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tools/gemv-lab/engine_shapes.cuh");

    #[test]
    fn every_product_has_one_kernel() {
        for dtype in [DType::BF16, Q8, Q4] {
            for family in Family::ALL {
                for m in 1..=GEMV_KERNEL_ROWS {
                    for row_loads in [1, SHORT_ROW_LOADS, SHORT_ROW_LOADS + 1, 768] {
                        let shape = DecodeShape::find(dtype, family, m, row_loads)
                            .unwrap_or_else(|| panic!("no kernel for {dtype:?} {family:?} m={m} loads={row_loads}"));
                        let rivals = DecodeShape::all()
                            .filter(|s| s.dtype == dtype && s.family == family && s.m == shape.m)
                            .filter(|s| s.rows.takes(row_loads))
                            .count();
                        assert_eq!(rivals, 1, "{dtype:?} {family:?} m={m} loads={row_loads}");
                    }
                }
            }
        }
    }

    /// What orders a row's sums: the threads that split it (each summing every `threads`-th load,
    /// in order), and for bf16 the warps its partial sums are added from. Rows per block and lean
    /// addressing only place the sums (halving adds the same pairs as a butterfly).
    fn reduction(s: &DecodeShape, row_loads: usize) -> (u32, u32) {
        (s.threads(row_loads), if s.dtype == DType::BF16 { s.partial_warps } else { 0 })
    }

    #[test]
    fn a_rows_sums_do_not_depend_on_the_row_count() {
        for dtype in [DType::BF16, Q8, Q4] {
            for family in Family::ALL {
                for row_loads in [1, 64, SHORT_ROW_LOADS, SHORT_ROW_LOADS + 1, 384, 768] {
                    let pair = DecodeShape::find(dtype, family, 2, row_loads).unwrap();
                    for m in 1..=GEMV_KERNEL_ROWS {
                        let shape = DecodeShape::find(dtype, family, m, row_loads).unwrap();
                        assert_eq!(
                            reduction(shape, row_loads),
                            reduction(pair, row_loads),
                            "{} sums a row of {row_loads} loads otherwise than {}",
                            shape.name,
                            pair.name
                        );
                    }
                }
            }
        }
        // The check tells shapes apart: the q8 pair's kernel with one load a thread does not pass.
        let one_load = Q8_PLAIN.loads_per_thread(1, 1);
        assert_ne!(reduction(&one_load, 128), reduction(&Q8_PLAIN, 128));
    }

    #[test]
    fn shapes_fit_their_kernels() {
        let mut names: Vec<&str> = DecodeShape::all().map(|s| s.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), DecodeShape::all().count(), "two kernels share a name");
        for s in DecodeShape::all() {
            assert!(s.name.starts_with(s.family.prefix()), "{}", s.name);
            assert!(s.partial_warps * 32 >= s.most_threads, "{}: more warps than partial sums", s.name);
            assert!(s.most_threads.is_multiple_of(32) && s.most_threads <= 1024, "{}", s.name);
            for row_loads in [1, 64, SHORT_ROW_LOADS, SHORT_ROW_LOADS + 1, 384, 768] {
                let threads = s.threads(row_loads);
                assert!(threads.is_multiple_of(32) && threads <= s.most_threads, "{}", s.name);
            }
        }
    }

    /// The launches as the decode step runs them at two activation rows (the lab's measurements).
    #[test]
    fn the_pair_launches_as_measured() {
        let launch = |dtype, family, k: usize| {
            let per_load = if dtype == Q8 { 16 } else { 32 };
            let s = DecodeShape::find(dtype, family, 2, k / per_load).unwrap();
            (s.name, s.rows_per_block, s.threads(k / per_load))
        };
        assert_eq!(launch(Q4, Add, 4096), ("gemv_add_q4_m2_short", 2, 64));
        assert_eq!(launch(Q4, Plain, 12288), ("gemv_q4_m2", 4, 96));
        assert_eq!(launch(Q4, Plain, 4096), ("gemv_q4_m2", 4, 128));
        assert_eq!(launch(Q4, Add, 12288), ("gemv_add_q4_m2", 4, 96));
        assert_eq!(launch(Q4, Group3, 4096), ("gemv_group3_q4_m2", 4, 64));
        assert_eq!(launch(Q4, Swiglu, 4096), ("gemv_swiglu_q4_m2", 2, 64));
        assert_eq!(launch(Q8, Add, 12288), ("gemv_add_q8_m2", 4, 256));
        assert_eq!(launch(Q8, Swiglu, 4096), ("gemv_swiglu_q8_m2", 4, 128));
        assert_eq!(launch(Q8, Group3, 4096), ("gemv_group3_q8_m2", 8, 256));
        assert_eq!(launch(DType::BF16, Swiglu, 4096), ("gemv_swiglu_bf16_k8_m2", 4, 128));
        assert_eq!(launch(DType::BF16, Plain, 64), ("gemv_bf16_k8_m2", 4, 256));
    }

    #[test]
    fn kernel_files_define_the_macros() {
        for file in ["gemv.cu", "gemv_quant.cu"] {
            let (_, body, _) = crate::cuda::kernels::SOURCES.iter().find(|(f, _, _)| *f == file).unwrap();
            for line in instantiations(file).lines().filter(|l| l.starts_with("GEMV_")) {
                let name = line.split('(').next().unwrap();
                assert!(body.contains(&format!("#define {name}(")), "kernels/{file} has no macro {name}");
            }
        }
    }

    #[test]
    fn lab_file_is_current() {
        let wanted = lab_source();
        if std::env::var_os("SONGLOOM_WRITE_LAB").is_some() {
            std::fs::write(LAB_FILE, &wanted).unwrap();
        }
        let have = std::fs::read_to_string(LAB_FILE).unwrap_or_default();
        assert!(have == wanted, "{LAB_FILE} is out of date: run this test with SONGLOOM_WRITE_LAB=1");
    }
}
