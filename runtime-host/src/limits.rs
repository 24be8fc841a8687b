//! Size limits: the largest tensor and the largest arena the host will allocate.
//!
//! Every size the host allocates from comes from data it does not control: a model's
//! shapes and constants, an input file's header, a `--dim` flag, a program's stored
//! layout. A typo (`--dim seq=1000000000000`) or a hostile file must end in an error that
//! names the tensor and the limit, never in an allocator abort, a `capacity overflow`
//! panic or a size that wrapped to zero. So sizes are computed with checked arithmetic
//! and compared with these limits before anything is allocated.
//!
//! The defaults follow the machine: `max_tensor_bytes` is half and `max_arena_bytes` all
//! of the physical memory (`MemTotal` of `/proc/meminfo` on Linux; elsewhere, or when it
//! cannot be read, 4 GiB and 8 GiB). Both are config keys (see [`crate::config`]).

use baton_delegate_api::shape::checked_product;
use std::collections::BTreeMap;

use baton_delegate_api::{DType, Dim, Graph};

use crate::error::{HostError, Result};

/// Tensor bytes assumed when the machine's memory cannot be read.
const FALLBACK_TENSOR_BYTES: usize = 4 << 30;
/// Arena bytes assumed when the machine's memory cannot be read.
const FALLBACK_ARENA_BYTES: usize = 8 << 30;

/// The largest allocations the host makes for one tensor and for one arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of any one tensor (a constant, an input, an intermediate, a state).
    pub max_tensor_bytes: usize,
    /// Bytes of a session's arena (all the tensors that cross a step boundary).
    pub max_arena_bytes: usize,
}

impl Default for Limits {
    /// The defaults for this machine (see the module docs).
    fn default() -> Limits {
        match mem_total() {
            Some(total) => Limits {
                max_tensor_bytes: total / 2,
                max_arena_bytes: total,
            },
            None => Limits {
                max_tensor_bytes: FALLBACK_TENSOR_BYTES,
                max_arena_bytes: FALLBACK_ARENA_BYTES,
            },
        }
    }
}

impl Limits {
    /// Checks that a tensor of `dtype` and `shape` fits `max_tensor_bytes`; returns its
    /// byte size. `what` names it in the error (`tensor 'y' (output of node Expand_3)`).
    pub fn tensor(&self, what: &str, dtype: DType, shape: &[usize]) -> Result<usize> {
        let bytes = byte_size(dtype, shape);
        match bytes {
            Some(b) if b <= self.max_tensor_bytes => Ok(b),
            _ => Err(HostError::TooLarge {
                what: format!("{what}, {dtype} {shape:?}"),
                needed: bytes,
                limit: self.max_tensor_bytes,
                key: "max_tensor_bytes",
            }),
        }
    }

    /// Checks that an arena of `bytes` (`None`: its size overflowed) fits
    /// `max_arena_bytes`. `what` names the model or program.
    pub fn arena(&self, what: &str, bytes: Option<usize>) -> Result<usize> {
        match bytes {
            Some(b) if b <= self.max_arena_bytes => Ok(b),
            _ => Err(HostError::TooLarge {
                what: format!("{what}: the arena"),
                needed: bytes,
                limit: self.max_arena_bytes,
                key: "max_arena_bytes",
            }),
        }
    }

    /// Checks the inputs of `graph` as `bindings` size them, before the graph is
    /// specialised: a binding too large for an input is named as such, rather than by
    /// whatever shape arithmetic it breaks first. Inputs with an unbound dimension are
    /// left to the check that refuses them.
    pub fn check_inputs(&self, graph: &Graph, bindings: &BTreeMap<String, usize>) -> Result<()> {
        for &t in &graph.inputs {
            let decl = &graph.tensors[t];
            let shape: Option<Vec<usize>> = decl
                .shape
                .iter()
                .map(|d| match d {
                    Dim::Fixed(v) => Some(*v),
                    Dim::Sym(s) => bindings.get(s).copied(),
                })
                .collect();
            if let Some(shape) = shape {
                self.tensor(&format!("input '{}'", decl.name), decl.dtype, &shape)?;
            }
        }
        Ok(())
    }

    /// Checks every tensor of a specialised `graph` (constants, inputs, every node's
    /// outputs) against `max_tensor_bytes`, naming the tensor and the node making it.
    /// Tensors whose shape is still symbolic are left to the check that refuses them.
    pub fn check_graph(&self, graph: &Graph) -> Result<()> {
        let producers = graph.producers();
        for (t, decl) in graph.tensors.iter().enumerate() {
            let Some(shape) = decl.static_shape() else {
                continue;
            };
            let what = match producers[t] {
                Some(n) => format!(
                    "tensor '{}' (output of node {})",
                    decl.name,
                    graph.nodes[n].label()
                ),
                None if graph.inputs.contains(&t) => format!("input '{}'", decl.name),
                None => format!("tensor '{}'", decl.name),
            };
            self.tensor(&what, decl.dtype, &shape)?;
        }
        Ok(())
    }
}

/// Bytes of a dense tensor, `None` if the count overflows.
pub fn byte_size(dtype: DType, shape: &[usize]) -> Option<usize> {
    checked_product(shape)?.checked_mul(dtype.size())
}

pub(crate) fn describe(bytes: Option<usize>) -> String {
    match bytes {
        Some(b) => format!("{b} bytes"),
        None => "more bytes than the address space holds".into(),
    }
}

/// Physical memory in bytes, from `/proc/meminfo` (Linux only; read once).
pub fn mem_total() -> Option<usize> {
    static TOTAL: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *TOTAL.get_or_init(|| {
        if !cfg!(target_os = "linux") {
            return None;
        }
        let text = std::fs::read_to_string("/proc/meminfo").ok()?;
        parse_mem_total(&text)
    })
}

fn parse_mem_total(meminfo: &str) -> Option<usize> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut words = line["MemTotal:".len()..].split_whitespace();
    let value: usize = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => value.checked_mul(1024),
        None => Some(value),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_total_is_read_in_kib() {
        let text = "MemFree: 5 kB\nMemTotal:       24683664 kB\n";
        assert_eq!(parse_mem_total(text), Some(24683664 * 1024));
        assert_eq!(parse_mem_total("MemFree: 5 kB\n"), None);
        if cfg!(target_os = "linux") {
            let l = Limits::default();
            assert!(l.max_tensor_bytes > 0 && l.max_tensor_bytes <= l.max_arena_bytes);
        }
    }

    #[test]
    fn sizes_are_checked_before_they_wrap() {
        let l = Limits {
            max_tensor_bytes: 1 << 20,
            max_arena_bytes: 1 << 21,
        };
        assert_eq!(l.tensor("t", DType::F32, &[2, 3]).unwrap(), 24);
        let e = l.tensor("t", DType::F32, &[1 << 62]).unwrap_err();
        assert!(e.to_string().contains("address space"), "{e}");
        let e = l.tensor("t", DType::F32, &[1 << 20]).unwrap_err();
        assert!(e.to_string().contains("max_tensor_bytes"), "{e}");
        assert!(l.arena("m", None).is_err() && l.arena("m", Some(1 << 22)).is_err());
    }

    #[test]
    fn inputs_are_checked_as_the_bindings_size_them() {
        let mut b = baton_delegate_api::GraphBuilder::new("g");
        let x = b.input("x", DType::F32, &[Dim::Fixed(1), Dim::Sym("seq".into())]);
        let y = b.node(baton_delegate_api::OpKind::Relu, &[x], &[]).unwrap();
        b.output(y);
        let g = b.finish().unwrap();
        let l = Limits {
            max_tensor_bytes: 1 << 20,
            max_arena_bytes: 1 << 21,
        };
        let bind = |v: usize| BTreeMap::from([("seq".to_string(), v)]);
        assert!(l.check_inputs(&g, &bind(16)).is_ok());
        assert!(l.check_inputs(&g, &BTreeMap::new()).is_ok());
        for v in [1 << 20, usize::MAX] {
            let e = l.check_inputs(&g, &bind(v)).unwrap_err().to_string();
            assert!(
                e.contains("input 'x'") && e.contains("max_tensor_bytes"),
                "{e}"
            );
        }
    }
}
