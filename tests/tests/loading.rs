//! A broken checkpoint is an error that names the file or tensor, never a panic.

use std::path::Path;

use safetensors::SafeTensors;
use safetensors::tensor::{Dtype, TensorView};
use songloom_engine::Error;
use songloom_engine::model_dir::{ACOUSTIC_DTYPE, ModelDir};
use songloom_tests::{copy_tiny_model, cpu};

fn vocoder_error(root: &Path) -> Error {
    let model = ModelDir::open(root).unwrap();
    match model.vocoder(&cpu()) {
        Ok(_) => panic!("loading the broken vocoder succeeded"),
        Err(e) => e,
    }
}

fn vocoder_file(root: &Path) -> std::path::PathBuf {
    root.join("vocoder").join("diffusion_pytorch_model.safetensors")
}

/// Rewrites the vocoder's weights after `edit` changed the list of (name, dtype, shape, bytes).
fn rewrite_vocoder(root: &Path, edit: impl FnOnce(&mut Vec<(String, Dtype, Vec<usize>, Vec<u8>)>)) {
    let path = vocoder_file(root);
    let bytes = std::fs::read(&path).unwrap();
    let file = SafeTensors::deserialize(&bytes).unwrap();
    let mut tensors: Vec<_> =
        file.tensors().into_iter().map(|(n, v)| (n, v.dtype(), v.shape().to_vec(), v.data().to_vec())).collect();
    edit(&mut tensors);
    let views: Vec<_> =
        tensors.iter().map(|(n, d, s, b)| (n.clone(), TensorView::new(*d, s.clone(), b).unwrap())).collect();
    std::fs::write(&path, safetensors::serialize(views, None).unwrap()).unwrap();
}

#[test]
fn missing_component_directory_is_named() {
    let dir = copy_tiny_model();
    std::fs::remove_dir_all(dir.path().join("vocoder")).unwrap();
    let err = vocoder_error(dir.path());
    assert!(matches!(err, Error::MissingComponent(_)), "{err}");
    assert!(err.to_string().contains("vocoder"), "{err}");
}

#[test]
fn missing_config_file_is_named() {
    let dir = copy_tiny_model();
    std::fs::remove_file(dir.path().join("vocoder/config.json")).unwrap();
    let err = vocoder_error(dir.path()).to_string();
    assert!(err.contains("vocoder/config.json"), "{err}");
}

#[test]
fn missing_weights_file_is_named() {
    let dir = copy_tiny_model();
    std::fs::remove_file(vocoder_file(dir.path())).unwrap();
    let err = vocoder_error(dir.path()).to_string();
    assert!(err.contains("vocoder") && err.contains(".safetensors"), "{err}");
}

#[test]
fn missing_shard_is_named() {
    let dir = copy_tiny_model();
    let shard = dir.path().join("transformer/diffusion_pytorch_model-00002-of-00002.safetensors");
    std::fs::remove_file(&shard).unwrap();
    let model = ModelDir::open(dir.path()).unwrap();
    let err = model.transformer(&cpu(), ACOUSTIC_DTYPE).err().expect("a missing shard must fail").to_string();
    assert!(err.contains("diffusion_pytorch_model-00002-of-00002.safetensors"), "{err}");
}

#[test]
fn missing_tensor_is_named() {
    let dir = copy_tiny_model();
    rewrite_vocoder(dir.path(), |tensors| tensors.retain(|t| t.0 != "dec_in_proj.bias"));
    let err = vocoder_error(dir.path());
    assert!(matches!(err, Error::MissingTensor { .. }), "{err}");
    assert!(err.to_string().contains("dec_in_proj.bias"), "{err}");
}

#[test]
fn wrong_shape_names_tensor_and_both_shapes() {
    let dir = copy_tiny_model();
    rewrite_vocoder(dir.path(), |tensors| {
        let t = tensors.iter_mut().find(|t| t.0 == "dec_in_proj.weight").unwrap();
        t.2 = vec![32, 5, 1];
        t.3 = vec![0u8; 32 * 5 * 4];
    });
    let err = vocoder_error(dir.path()).to_string();
    assert!(err.contains("dec_in_proj.weight") && err.contains("[32, 4, 1]") && err.contains("[32, 5, 1]"), "{err}");
}

#[test]
fn wrong_dtype_names_tensor_and_both_dtypes() {
    let dir = copy_tiny_model();
    rewrite_vocoder(dir.path(), |tensors| {
        let t = tensors.iter_mut().find(|t| t.0 == "dec_in_proj.weight").unwrap();
        t.1 = Dtype::I64;
        t.3 = vec![0u8; 32 * 4 * 8];
    });
    let err = vocoder_error(dir.path());
    assert!(matches!(err, Error::WrongDType { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("dec_in_proj.weight") && text.contains("I64") && text.contains("f32"), "{text}");
}

#[test]
fn truncated_file_is_named() {
    let dir = copy_tiny_model();
    let path = vocoder_file(dir.path());
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let err = vocoder_error(dir.path());
    assert!(matches!(err, Error::CorruptFile { .. }), "{err}");
    assert!(err.to_string().contains("diffusion_pytorch_model.safetensors"), "{err}");
}

#[test]
fn garbage_file_is_named() {
    let dir = copy_tiny_model();
    std::fs::write(vocoder_file(dir.path()), b"this is not a safetensors file at all").unwrap();
    let err = vocoder_error(dir.path());
    assert!(matches!(err, Error::CorruptFile { .. }), "{err}");
}

#[test]
fn broken_config_json_is_named() {
    let dir = copy_tiny_model();
    std::fs::write(dir.path().join("vocoder/config.json"), b"{ not json").unwrap();
    let err = vocoder_error(dir.path());
    assert!(matches!(err, Error::BadJson { .. }), "{err}");
    assert!(err.to_string().contains("config.json"), "{err}");
}
