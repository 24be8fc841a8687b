//! The wgpu plugin through the host: loaded as a cdylib, handshaken, probed; and, with no
//! usable adapter, refused with its reason so that the host falls back to the CPU. The
//! same tests as the Vulkan delegate's (`backends/gpu-kernels/delegate-tests/host.rs`).

mod common;

include!("../../gpu-kernels/delegate-tests/host.rs");
