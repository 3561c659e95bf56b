//! Every `kernels/*.cu` file compiles with NVRTC for the GPUs we target, wherever the NVRTC
//! library exists (no GPU needed); elsewhere the test says why it skipped.

use songloom_engine::cuda::kernels::{SOURCES, compile};
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
