//! Errors of the contract crate.

use thiserror::Error;

/// An IR that is not well formed, or an op whose operands do not fit together.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum IrError {
    /// A tensor index (of a graph input, or a node input or output) points past the end
    /// of the tensor table. The text says which index and where it was found.
    #[error("index out of range: {0}")]
    BadIndex(String),
    /// Every index is in range but the graph breaks a structural rule: a tensor read
    /// before it is produced (nodes out of topological order), a tensor defined twice, a
    /// graph output nothing produces. The text names the node or output at fault.
    #[error("malformed graph: {0}")]
    Malformed(String),
    /// A node's operands do not fit its op: a rank, extent, dtype or attribute that shape
    /// inference rejects.
    #[error("node {node}: {message}")]
    Shape {
        /// The node, as [`Node::label`](crate::ir::Node::label) writes it: `name (Op)`.
        node: String,
        /// What does not fit, in words for the user.
        message: String,
    },
}

/// A serialized graph that cannot be read.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum WireError {
    /// The buffer does not start with `BTIR`: not a serialized graph at all.
    #[error("not a Baton IR buffer (magic {found:?}, expected \"BTIR\")")]
    BadMagic {
        /// The first four bytes actually read.
        found: [u8; 4],
    },
    /// The buffer is BTIR of another major version, which this build cannot read; the
    /// model has to be exported again with a matching Baton version.
    #[error("IR wire format {found_major}.{found_minor} is not readable by this build (reads {supported_major}.x); re-export the model with a matching Baton version")]
    Version {
        /// Major version found in the header.
        found_major: u16,
        /// Minor version found in the header.
        found_minor: u16,
        /// The only major version this build reads ([`WIRE_MAJOR`](crate::wire::WIRE_MAJOR)).
        supported_major: u16,
    },
    /// The buffer ends in the middle of a field.
    #[error("IR buffer truncated at byte {offset} while reading {what}")]
    Truncated {
        /// Byte offset, from the start of the buffer, of the field that did not fit.
        offset: usize,
        /// Which field was being read.
        what: &'static str,
    },
    /// A field holds a value the format does not allow: an unknown op, dtype or record
    /// kind, a count larger than the remaining bytes, text that is not UTF-8, inline data
    /// outside the data segment.
    #[error("IR buffer invalid at byte {offset}: {message}")]
    Invalid {
        /// Byte offset, from the start of the buffer, that reading had reached when the
        /// value was rejected (usually just past the offending field).
        offset: usize,
        /// What is wrong, naming the tensor or node when known.
        message: String,
    },
    /// The bytes decode, but the graph they describe is not well formed (see [`IrError`]).
    #[error(transparent)]
    Ir(#[from] IrError),
}
