//! Errors of the contract crate.

use thiserror::Error;

/// An IR that is not well formed, or an op whose operands do not fit together.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum IrError {
    #[error("index out of range: {0}")]
    BadIndex(String),
    #[error("malformed graph: {0}")]
    Malformed(String),
    #[error("node {node}: {message}")]
    Shape { node: String, message: String },
}

/// A serialized graph that cannot be read.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum WireError {
    #[error("not a Baton IR buffer (magic {found:?}, expected \"BTIR\")")]
    BadMagic { found: [u8; 4] },
    #[error("IR wire format {found_major}.{found_minor} is not readable by this build (reads {supported_major}.x); re-export the model with a matching Baton version")]
    Version {
        found_major: u16,
        found_minor: u16,
        supported_major: u16,
    },
    #[error("IR buffer truncated at byte {offset} while reading {what}")]
    Truncated { offset: usize, what: &'static str },
    #[error("IR buffer invalid at byte {offset}: {message}")]
    Invalid { offset: usize, message: String },
    #[error(transparent)]
    Ir(#[from] IrError),
}
