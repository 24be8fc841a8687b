//! The child → parent protocol: one JSON object per line on the child's stdout, each line
//! starting with [`PREFIX`] so that whatever a plugin prints to stdout is told apart and
//! ignored.
//!
//! The parent writes the ids of the cases to run to the child's stdin, one per line, and
//! closes it. The child answers, per case, a `start` line before it begins and a `done`
//! line with the [`CaseResult`]; and once, when it first touches the plugin, a `plugin`
//! line describing it.

use serde::{Deserialize, Serialize};

use crate::outcome::CaseResult;

/// Marks protocol lines.
pub const PREFIX: &str = "@@baton-conformance@@ ";

/// One protocol line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Message {
    /// What the child found when it loaded the plugin.
    Plugin { info: PluginInfo },
    /// The child is about to run this case.
    Start { id: String },
    /// The case finished.
    Done { result: Box<CaseResult> },
}

/// The plugin as the child saw it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PluginInfo {
    pub name: Option<String>,
    pub version: Option<String>,
    pub build_id: Option<String>,
    /// `major.minor` the plugin declared (only known when the handshake passed).
    pub abi: Option<String>,
    /// `name (driver version)` of each device.
    pub devices: Vec<String>,
    /// The host's error when loading failed.
    pub load_error: Option<String>,
    /// The error when creating a context failed.
    pub create_error: Option<String>,
}

impl Message {
    /// The line to print, without its newline.
    pub fn to_line(&self) -> String {
        // Serializing these plain structs cannot fail; fall back to an empty object anyway.
        let json = serde_json::to_string(self).unwrap_or_else(|_| "{}".into());
        format!("{PREFIX}{json}")
    }

    /// Parses a line; `None` for lines that are not protocol lines (plugin noise). A
    /// protocol line glued to the end of unterminated plugin output is still found.
    pub fn parse(line: &str) -> Option<Result<Message, String>> {
        let json = &line[line.find(PREFIX)? + PREFIX.len()..];
        Some(serde_json::from_str(json).map_err(|e| format!("bad protocol line: {e}")))
    }
}
