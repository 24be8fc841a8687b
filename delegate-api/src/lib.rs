//! The Baton delegate contract.
//!
//! Every plugin links this crate, so it stays small: the IR ([`ir`]) and its shape rules
//! ([`shape`]), the serialized form that crosses the ABI and fills program files
//! ([`wire`]), the C ABI itself ([`abi`], normative text in `include/baton_delegate.h`),
//! the safe SDK for Rust plugin authors ([`sdk`], [`export_delegate!`]), and how the host
//! reaches a delegate, built in or as a plugin ([`entry`]), and the checked byte reader
//! plugins' blob formats share ([`bytes`]). With the `testing` feature, `testing` holds
//! what the delegates' tests share (seeded data, comparisons, a host).
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod abi;
pub mod builder;
pub mod bytes;
pub mod dtype;
pub mod entry;
pub mod error;
pub mod ir;
pub mod minifloat;
pub mod sdk;
pub mod shape;
pub mod tensor;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;
pub mod wire;

pub use error::{IrError, WireError};
pub use ir::{
    Attr, DType, Dim, Graph, GraphBuilder, Node, NodeId, OpKind, Quant, Storage, TensorData,
    TensorDecl, TensorId,
};
pub use sdk::{
    BlobCompatibility, Constants, Decline, DeclineReason, Delegate, DelegateError, Device,
    Executable, MemoryUse, OptionDecl, Options, PluginInfo, ProfileEvent, QuantRef, RetainedBlob,
    Support, TensorMut, TensorRef,
};
pub use tensor::Tensor;
