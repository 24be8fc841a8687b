//! Helpers shared by the integration tests: locating the built plugins and the kit
//! executable, building C test plugins, and a tiny XML well-formedness parser.
#![allow(dead_code)] // each test binary uses a different subset

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use baton_conformance::cases::{self, Case};
use baton_conformance::RunConfig;

/// The directory cargo put this test's dependencies' artifacts in (`target/<profile>`).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test>-<hash>
    exe.parent()
        .and_then(Path::parent)
        .expect("test executable lives in target/<profile>/deps")
        .to_path_buf()
}

/// A cdylib built by the workspace (`baton_faulty_plugin` → `libbaton_faulty_plugin.so`).
pub fn cdylib(crate_name: &str) -> PathBuf {
    let file = format!(
        "{}{crate_name}{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    let path = profile_dir().join(&file);
    assert!(
        path.is_file(),
        "{} is missing: build the workspace first (`cargo build --workspace`, same profile as the tests), then run the tests",
        path.display()
    );
    path
}

/// The faulty test plugin.
pub fn faulty_plugin() -> PathBuf {
    cdylib("baton_faulty_plugin")
}

/// The kit executable cargo built for these tests.
pub fn kit_exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_baton-conformance"))
}

/// A run configuration for `plugin` with `options` and a timeout in seconds.
pub fn config(plugin: &Path, options: &[(&str, &str)], timeout_s: f64) -> RunConfig {
    RunConfig {
        child_exe: kit_exe(),
        plugin: plugin.to_path_buf(),
        options: options
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        timeout: Duration::from_secs_f64(timeout_s),
        tolerances_dir: None,
        isolation: Default::default(),
    }
}

/// The catalogue cases (ABI checks included) with these ids, in the given order.
pub fn cases_by_id(ids: &[&str]) -> Vec<Case> {
    let mut all = cases::catalogue(true).expect("catalogue");
    ids.iter()
        .map(|id| {
            let pos = all
                .iter()
                .position(|c| c.id == *id)
                .unwrap_or_else(|| panic!("no case {id}"));
            all.swap_remove(pos)
        })
        .collect()
}

/// The workspace root (the parent of this crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("crate inside the workspace")
        .to_path_buf()
}

/// The C test plugin source of the delegate-api crate, when it exists in this checkout.
pub fn c_plugin_source() -> Option<PathBuf> {
    let p = workspace_root().join("delegate-api/tests/c_plugin/relu_add_plugin.c");
    p.is_file().then_some(p)
}

/// Compiles a C plugin with `gcc -std=c99 -O2 -shared -fPIC` and `-D<define>` into `dir`.
pub fn build_c_plugin(source: &Path, define: Option<&str>, dir: &Path, name: &str) -> PathBuf {
    let out = dir.join(format!(
        "{}{name}{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    let mut cmd = Command::new("gcc");
    cmd.args(["-std=c99", "-O2", "-shared", "-fPIC", "-I"])
        .arg(workspace_root().join("delegate-api/include"));
    if let Some(d) = define {
        cmd.arg(format!("-D{d}"));
    }
    cmd.arg(source).arg("-o").arg(&out);
    let output = cmd
        .output()
        .expect("running gcc (the C plugin tests need a C compiler on PATH)");
    assert!(
        output.status.success(),
        "gcc failed on {}:\n{}",
        source.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    out
}

/// An XML element.
#[derive(Debug)]
pub struct Element {
    pub name: String,
    pub attrs: Vec<(String, String)>,
    pub children: Vec<Element>,
    pub text: String,
}

impl Element {
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Parses a document (an optional `<?xml …?>` prolog and one root element), rejecting
/// unbalanced tags, unknown entities, raw `<` or `&` in text and attributes, and
/// characters XML 1.0 forbids. Returns the root with entities decoded.
pub fn parse_xml(doc: &str) -> Result<Element, String> {
    let mut p = XmlParser {
        s: doc.as_bytes(),
        i: 0,
    };
    for ch in doc.chars() {
        let c = ch as u32;
        if c < 0x20 && !matches!(ch, '\t' | '\n' | '\r') {
            return Err(format!("forbidden character U+{c:04X}"));
        }
    }
    p.skip_ws();
    if p.s[p.i..].starts_with(b"<?xml") {
        let end = doc[p.i..].find("?>").ok_or("unterminated prolog")?;
        p.i += end + 2;
    }
    p.skip_ws();
    let root = p.element()?;
    p.skip_ws();
    if p.i != p.s.len() {
        return Err(format!("content after the root element at byte {}", p.i));
    }
    Ok(root)
}

struct XmlParser<'a> {
    s: &'a [u8],
    i: usize,
}

impl XmlParser<'_> {
    fn skip_ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn name(&mut self) -> Result<String, String> {
        let start = self.i;
        while self.i < self.s.len()
            && (self.s[self.i].is_ascii_alphanumeric() || b"-_:.".contains(&self.s[self.i]))
        {
            self.i += 1;
        }
        if start == self.i {
            return Err(format!("expected a name at byte {start}"));
        }
        Ok(String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
    }

    fn expect(&mut self, b: u8) -> Result<(), String> {
        if self.s.get(self.i) != Some(&b) {
            return Err(format!("expected '{}' at byte {}", b as char, self.i));
        }
        self.i += 1;
        Ok(())
    }

    fn element(&mut self) -> Result<Element, String> {
        self.expect(b'<')?;
        let name = self.name()?;
        let mut el = Element {
            name,
            attrs: Vec::new(),
            children: Vec::new(),
            text: String::new(),
        };
        loop {
            self.skip_ws();
            match self.s.get(self.i) {
                Some(b'/') => {
                    self.i += 1;
                    self.expect(b'>')?;
                    return Ok(el);
                }
                Some(b'>') => {
                    self.i += 1;
                    break;
                }
                Some(_) => {
                    let k = self.name()?;
                    self.expect(b'=')?;
                    self.expect(b'"')?;
                    let start = self.i;
                    while self.i < self.s.len() && self.s[self.i] != b'"' {
                        if self.s[self.i] == b'<' {
                            return Err(format!("raw '<' in attribute {k}"));
                        }
                        self.i += 1;
                    }
                    let raw =
                        std::str::from_utf8(&self.s[start..self.i]).map_err(|e| e.to_string())?;
                    self.expect(b'"')?;
                    if el.attrs.iter().any(|(n, _)| *n == k) {
                        return Err(format!("duplicate attribute {k}"));
                    }
                    el.attrs.push((k, decode(raw)?));
                }
                None => return Err("unterminated start tag".into()),
            }
        }
        loop {
            let start = self.i;
            while self.i < self.s.len() && self.s[self.i] != b'<' {
                self.i += 1;
            }
            let raw = std::str::from_utf8(&self.s[start..self.i]).map_err(|e| e.to_string())?;
            el.text.push_str(&decode(raw)?);
            if self.i >= self.s.len() {
                return Err(format!("element <{}> is never closed", el.name));
            }
            if self.s[self.i..].starts_with(b"</") {
                self.i += 2;
                let close = self.name()?;
                if close != el.name {
                    return Err(format!("<{}> closed by </{close}>", el.name));
                }
                self.skip_ws();
                self.expect(b'>')?;
                return Ok(el);
            }
            let child = self.element()?;
            el.children.push(child);
        }
    }
}

fn decode(raw: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = raw;
    while let Some(pos) = rest.find('&') {
        out.push_str(&rest[..pos]);
        let end = rest[pos..].find(';').ok_or("unterminated entity")? + pos;
        out.push(match &rest[pos + 1..end] {
            "amp" => '&',
            "lt" => '<',
            "gt" => '>',
            "quot" => '"',
            "apos" => '\'',
            other => return Err(format!("unknown entity &{other};")),
        });
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}
