//! Embeds the default model (`models/songloom-mini`, trained by `tools/train`; or the folder named
//! by SONGLOOM_EMBED_MODEL, relative to the workspace, as the GPU machine's packs name the tiny test
//! model to stay small) in the binary: generates a list of its files with `include_bytes!` (the
//! model card and other `.md` files stay out). And says whether the browser page's
//! bundle (web/dist, made by scripts/build-web.sh) is there to embed (`cfg(web_bundle)`), so
//! `songloom serve` needs no files beside it; without it the binary says how to build it.

use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> =
        std::fs::read_dir(dir).expect("default model directory").map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            files(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn main() {
    // Read when the script runs, not when it is compiled: a build script compiled for one checkout
    // may be reused by another (a shared target folder).
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rerun-if-env-changed=SONGLOOM_EMBED_MODEL");
    let chosen = std::env::var("SONGLOOM_EMBED_MODEL").unwrap_or_else(|_| "models/songloom-mini".into());
    let wanted = Path::new(&manifest).join("..").join(&chosen);
    let root = wanted.canonicalize().unwrap_or_else(|e| panic!("the model to embed, {}: {e}", wanted.display()));
    println!("cargo:rerun-if-changed={}", root.display());
    let mut list = Vec::new();
    files(&root, &mut list);
    list.retain(|p| p.extension().is_none_or(|e| e != "md"));
    let mut code =
        String::from("/// (path inside the model directory, contents)\npub const FILES: &[(&str, &[u8])] = &[\n");
    for path in &list {
        println!("cargo:rerun-if-changed={}", path.display());
        let rel = path.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/");
        code.push_str(&format!("    ({rel:?}, include_bytes!({:?})),\n", path.display().to_string()));
    }
    code.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("default_model_files.rs");
    std::fs::write(out, code).unwrap();

    println!("cargo::rustc-check-cfg=cfg(web_bundle)");
    // The web folder, which always exists (a missing path would rerun this script every build).
    let web = Path::new(&manifest).join("../web");
    println!("cargo:rerun-if-changed={}", web.display());
    let dist = web.join("dist");
    if ["songloom_web.js", "songloom_web_bg.wasm"].iter().all(|f| dist.join(f).is_file()) {
        println!("cargo::rustc-cfg=web_bundle");
    }
}
