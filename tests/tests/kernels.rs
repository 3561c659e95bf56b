//! Every `kernels/*.cu` file compiles with NVRTC for the GPUs we target, wherever the NVRTC
//! library exists (no GPU needed); elsewhere the test says why it skipped.

use songloom_engine::cuda::decode_shapes::DecodeShape;
use songloom_engine::cuda::kernels::{SOURCES, compile, names_of};
use songloom_engine::cuda::nvrtc_present;

#[test]
fn every_kernel_file_compiles() {
    if !nvrtc_present() {
        println!("skipped: the NVRTC library (libnvrtc) is not installed here");
        return;
    }
    // H100/H200, Jetson Orin, Jetson Thor.
    for arch in ["sm_90", "sm_87", "sm_110"] {
        for (name, body, _) in SOURCES {
            if let Err(e) = compile(name, body, arch) {
                panic!("{arch}: {e}");
            }
        }
    }
}

#[test]
fn every_kernel_file_is_listed() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels");
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.ends_with(".cu"))
        .collect();
    files.sort();
    let mut listed: Vec<String> = SOURCES.iter().map(|(n, _, _)| n.to_string()).collect();
    listed.sort();
    assert_eq!(files, listed);
}

/// Every kernel the launch-shape table launches, and every other kernel of its files, is in its
/// file's compiled module for every GPU we target, so the host and the kernels cannot disagree on
/// a name.
#[test]
fn every_decode_shape_has_its_kernel() {
    if !nvrtc_present() {
        println!("skipped: the NVRTC library (libnvrtc) is not installed here");
        return;
    }
    let files = SOURCES.iter().filter(|(name, _, _)| DecodeShape::all().any(|s| s.file() == *name));
    for (name, body, _) in files {
        let names = names_of(name);
        for shape in DecodeShape::all().filter(|s| s.file() == *name) {
            assert!(names.contains(&shape.name), "{} is not among kernels/{name}'s names", shape.name);
        }
        for arch in ["sm_90", "sm_87", "sm_110"] {
            let ptx = compile(name, body, arch).unwrap_or_else(|e| panic!("{arch}: {e}")).to_src();
            for kernel in &names {
                assert!(ptx.contains(&format!(".entry {kernel}(")), "{arch}: kernels/{name} has no kernel {kernel}");
            }
        }
    }
}
