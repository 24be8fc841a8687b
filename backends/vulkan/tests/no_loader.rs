//! With no Vulkan driver at all, `create` fails with a clear error and no panic. A test
//! binary of its own, since the loader reads the driver list from the environment once.

use baton_backend_vulkan::VulkanDelegate;
use baton_delegate_api::{Delegate, Options};

#[test]
fn no_driver_is_a_clean_create_error() {
    // Both names: VK_ICD_FILENAMES for older loaders, VK_DRIVER_FILES for newer ones.
    std::env::set_var("VK_ICD_FILENAMES", "/nonexistent/icd.json");
    std::env::set_var("VK_DRIVER_FILES", "/nonexistent/icd.json");
    let opts = Options::validate(&VulkanDelegate::options(), &[]).unwrap();
    let err = VulkanDelegate::create(&opts).expect_err("no driver, no delegate");
    let text = err.to_string();
    assert!(text.contains("Vulkan"), "{text}");
    eprintln!("create failed as expected: {text}");
}
