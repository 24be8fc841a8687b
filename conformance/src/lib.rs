//! The Baton conformance kit: what a backend vendor runs in CI to prove that a delegate
//! plugin computes what the reference executor computes.
//!
//! - [`cases`] generates several hundred deterministic cases: every op of
//!   [`OpKind::ALL`](baton_delegate_api::OpKind::ALL) over the shapes, attributes, dtypes and
//!   special values that matter, small whole models, and ABI behaviour checks. Each case has
//!   a stable id (`Conv/f32/2d_group2_dil2_pad1`) so reports diff well across runs.
//! - [`tolerance`] loads the comparison rules from TOML files (one per dtype class); no
//!   tolerance number lives in the code.
//! - [`runner`] runs cases in a child process, so a plugin that crashes or hangs costs one
//!   case, never the run; [`runner::exec`] is the in-process core that classifies a case.
//! - [`report`] writes `report.json`, `junit.xml` and `summary.md`.
//!
//! Every finished case gets one [`Class`]; see [`outcome`] for what each one means.

pub mod cases;
pub mod error;
pub mod expectations;
pub mod outcome;
pub mod report;
pub mod runner;
pub mod suite;
pub mod tolerance;

pub use cases::{Case, CaseBody, CaseKind};
pub use error::{Error, Result};
pub use outcome::{CaseResult, Class};
pub use report::Report;
pub use runner::{run_isolated, RunConfig, RunOutcome};
pub use tolerance::{Rule, Tolerances};

/// The version of this kit. The host library it links shares the workspace version.
pub const KIT_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The version of the Baton host library (and its reference kernels) the kit compares
/// against: the workspace version both crates share.
pub const HOST_VERSION: &str = env!("CARGO_PKG_VERSION");
