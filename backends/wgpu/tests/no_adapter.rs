//! With no adapter, `create` fails with a clear error and no panic: an option naming
//! nothing, a backend this build lacks, and (a test binary of its own, since the Vulkan
//! loader reads the driver list from the environment once) no driver at all.

use baton_backend_wgpu::WgpuDelegate;
use baton_delegate_api::{Delegate, Options};

fn create(options: &[(&str, &str)]) -> Result<WgpuDelegate, String> {
    let options: Vec<(String, String)> = options
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let opts = Options::validate(&WgpuDelegate::options(), &options).unwrap();
    WgpuDelegate::create(&opts).map_err(|e| e.to_string())
}

#[test]
fn no_driver_no_match_and_unknown_backends_are_clean_create_errors() {
    // Both names: VK_ICD_FILENAMES for older loaders, VK_DRIVER_FILES for newer ones.
    std::env::set_var("VK_ICD_FILENAMES", "/nonexistent/icd.json");
    std::env::set_var("VK_DRIVER_FILES", "/nonexistent/icd.json");
    let text = create(&[("backends", "vulkan")]).expect_err("no driver, no delegate");
    assert!(text.contains("no wgpu adapter"), "{text}");
    let text = create(&[("device_filter", "no-such-gpu")]).expect_err("nothing matches");
    assert!(text.contains("no-such-gpu"), "{text}");
    let text = create(&[("backends", "vulkan,gl")]).expect_err("gl is not built");
    assert!(text.contains("vulkan,gl"), "{text}");
    eprintln!("create failed as expected: {text}");
}
