//! The kit's error type. Plugin misbehaviour is never an error here: it is a case result
//! ([`crate::Class`]). These are failures of the kit's own inputs and environment.

use std::path::PathBuf;

use thiserror::Error;

/// Errors of the conformance kit.
#[derive(Debug, Error)]
pub enum Error {
    /// A tolerance file is missing, unreadable or malformed.
    #[error("tolerances {path}: {message}")]
    Tolerance { path: String, message: String },
    /// A case generator built an invalid graph (a bug in the kit).
    #[error("case {id}: {message}")]
    Case { id: String, message: String },
    /// A bad command-line value (`--shard`, `--ops`, `--option`, ...).
    #[error("{0}")]
    Usage(String),
    /// Reading or writing a file failed. The cause is part of the message, so it is a
    /// plain field rather than also an error source (a reporter printing the chain would
    /// say it twice).
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    /// The child process could not be started or talked to.
    #[error("child process: {0}")]
    Child(String),
    /// A report could not be serialized.
    #[error("report: {0}")]
    Report(String),
}

/// Shorthand for results of the kit.
pub type Result<T, E = Error> = std::result::Result<T, E>;
