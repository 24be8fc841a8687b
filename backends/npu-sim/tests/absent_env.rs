//! `BATON_NPU_SIM_ABSENT=1` switches the device off (in its own test binary, since it
//! changes the process environment).

use baton_runtime_host::plugin::PluginLibrary;

#[test]
fn the_environment_switch_makes_the_device_absent() {
    let exe = std::env::current_exe().expect("test binary path");
    let path = exe.parent().expect("deps").join(format!(
        "{}baton_backend_npu_sim{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    let lib = PluginLibrary::load(&path, None).unwrap();
    assert_eq!(lib.create(&[]).unwrap().devices().unwrap().len(), 1);
    std::env::set_var("BATON_NPU_SIM_ABSENT", "1");
    let ctx = lib.create(&[]).unwrap();
    assert!(!ctx.available_hint());
    assert!(ctx.devices().unwrap().is_empty());
    std::env::remove_var("BATON_NPU_SIM_ABSENT");
}
