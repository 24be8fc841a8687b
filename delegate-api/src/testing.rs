//! What the tests of delegates share: a seeded generator ([`Rng`]), an element-wise
//! comparison with tolerances ([`assert_close`]) and an in-process host ([`Hosted`],
//! [`run`]) that drives a [`Delegate`](crate::Delegate) through the same steps the host
//! takes across the ABI.
//!
//! It lives here, behind the `testing` feature, so that each backend's tests and the
//! conformance kit use one copy instead of keeping their own: a fix to the comparison or
//! to the host emulation then reaches every backend. Nothing in a plugin needs it, so
//! plugins built without the feature do not carry it.

mod close;
mod host;
mod rng;

pub use close::{assert_close, assert_close_labelled};
pub use host::{compile, execute, run, supports, views, Hosted};
pub use rng::Rng;
