//! The helper that runs a plugin configured with `isolation = "process"`: the host starts
//! it with a socket and a shared memory file, and it loads and calls the plugin for the
//! host (see `baton_runtime_host::plugin::isolated`).

#[cfg(target_os = "linux")]
fn main() {
    std::process::exit(baton_runtime_host::plugin::isolated::serve());
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("baton-plugin-host: process isolation needs Linux (memfd_create)");
    std::process::exit(2);
}
