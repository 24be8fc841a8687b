//! The expected-failure manifest of a test-data suite.
//!
//! Plain text, one case per line: `case_name  reason...` (the reason is required). Lines
//! starting with `#` and blank lines are ignored; a `#` line just above a group of cases
//! usually says what they have in common.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{Error, Result};

/// Cases expected to fail, each with the reason it fails.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Manifest {
    /// Case name to reason.
    pub entries: BTreeMap<String, String>,
}

impl Manifest {
    /// Reads a manifest file.
    pub fn load(path: &Path) -> Result<Manifest> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Usage(format!("--suite-manifest {}: {e}", path.display())))?;
        Manifest::parse(&text)
            .map_err(|e| Error::Usage(format!("--suite-manifest {}: {e}", path.display())))
    }

    /// Parses manifest text; errors name the line.
    pub fn parse(text: &str) -> std::result::Result<Manifest, String> {
        let mut entries = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, reason) = match line.split_once(char::is_whitespace) {
                Some((n, r)) if !r.trim().is_empty() => (n, r.trim()),
                _ => return Err(format!("line {}: '{line}' has no reason", i + 1)),
            };
            if entries
                .insert(name.to_string(), reason.to_string())
                .is_some()
            {
                return Err(format!("line {}: case '{name}' is listed twice", i + 1));
            }
        }
        Ok(Manifest { entries })
    }

    /// The reason `case` is expected to fail, if it is listed.
    pub fn reason(&self, case: &str) -> Option<&str> {
        self.entries.get(case).map(String::as_str)
    }
}
