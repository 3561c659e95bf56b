//! Every `kernels/*.cu` file compiles with NVRTC for the GPUs we target, wherever the NVRTC
//! library exists (no GPU needed); elsewhere the test says why it skipped.

use songloom_engine::cuda::decode_shapes::DecodeShape;
use songloom_engine::cuda::kernels::{SOURCES, cache_entry, compile, compile_cubin, made_so_far, names_of};
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

/// NVRTC makes the device's machine code itself (an ELF image per file), so the driver compiles
/// nothing when a run starts.
#[test]
fn a_kernel_file_compiles_to_machine_code() {
    if !nvrtc_present() {
        println!("skipped: the NVRTC library (libnvrtc) is not installed here");
        return;
    }
    let (name, body, _) = SOURCES.iter().find(|(name, _, _)| *name == "elementwise.cu").unwrap();
    for arch in ["sm_90", "sm_87", "sm_110"] {
        let image = compile_cubin(name, body, arch).unwrap_or_else(|e| panic!("{arch}: {e}"));
        assert!(image.starts_with(b"\x7fELF"), "{arch}: kernels/{name} did not compile to an ELF image");
    }
    let broken = compile_cubin("broken.cu", "extern \"C\" __global__ void k() { undeclared(); }", "sm_90");
    let why = broken.expect_err("a kernel that calls an undeclared function compiled").to_string();
    assert!(why.contains("broken.cu") && why.contains("undeclared"), "the compile error does not say where: {why}");
}

/// Opening a CUDA device leaves every file it loaded in the kernel cache, for the next run to
/// read instead of compiling.
#[test]
fn opening_a_device_fills_the_kernel_cache() {
    let device = match songloom_tests::gpu_with(songloom_engine::DeviceKind::Cuda, Default::default()) {
        Ok(device) => device,
        Err(e) => return println!("skipped: {e}"),
    };
    device.synchronize().unwrap();
    let made = made_so_far();
    for (file, _, _) in SOURCES.iter().filter(|(file, _, _)| *file != "gemv_quant.cu") {
        let (_, arch, origin, seconds) =
            made.iter().find(|(f, ..)| f == file).unwrap_or_else(|| panic!("kernels/{file} was not made"));
        println!("kernels/{file} for {arch}: {origin} in {seconds:.2} s");
        let entry = cache_entry(arch, file).expect("a kernel cache folder");
        assert!(entry.exists(), "kernels/{file} is not in the cache ({})", entry.display());
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
