//! Every op the Vulkan delegate claims, on the first Vulkan device (lavapipe in CI),
//! against the host's reference executor. The cases are shared with the wgpu delegate
//! (`backends/gpu-kernels/delegate-tests/ops.rs`).

mod common;

use baton_delegate_api::ir::{Attr, DType, GraphBuilder, OpKind};
use baton_delegate_api::testing::Rng;
use baton_delegate_api::Tensor;
use common::check;

include!("../../gpu-kernels/delegate-tests/ops.rs");
