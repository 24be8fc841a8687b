//! Every op the wgpu delegate claims, on the first adapter (lavapipe through wgpu's
//! Vulkan backend in CI), against the host's reference executor: the same cases as the
//! Vulkan delegate's (`backends/gpu-kernels/delegate-tests/ops.rs`).

mod common;

use baton_delegate_api::ir::{Attr, DType, GraphBuilder, OpKind};
use baton_delegate_api::testing::Rng;
use baton_delegate_api::Tensor;
use common::check;

include!("../../gpu-kernels/delegate-tests/ops.rs");
