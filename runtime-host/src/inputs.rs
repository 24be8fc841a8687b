//! Model inputs read from `.npy` files, as `baton run --input NAME=FILE.npy` reads them:
//! each file fitted to the dtype of the input it feeds, and the symbolic dimensions the
//! inputs bind.
//!
//! A file is converted to the input's dtype only when every value survives exactly: an
//! integer file feeds a wider integer input, or a narrower one whose range holds every
//! value (numpy's default int64 feeding an int32 input); integers feed a float input
//! each of whose values they are; a float file feeds another float width when each value
//! is exact in it (f16 to f32, f64 holding f32 values). Anything else, f64 values that
//! f32 would round included, is refused with the input, the file and both dtypes named:
//! a silent rounding or truncation would change the model's answer without a word.

use std::collections::BTreeMap;
use std::path::Path;

use baton_delegate_api::{DType, Dim, Graph, Tensor};
use half::{bf16, f16};

use crate::error::{HostError, NpyProblem, Result};
use crate::npy;

/// Reads `path` for the model input `name` of dtype `want`, converted to it when exact
/// (see the module docs).
pub fn read(path: &Path, name: &str, want: DType) -> Result<Tensor> {
    let t = npy::read(path)?;
    fit(t, want).map_err(|reason| HostError::Npy {
        path: path.to_path_buf(),
        problem: reason.for_input(name, want),
    })
}

/// Reads `path` for the input of `graph` called `name` (see [`read`]). `None` when the
/// graph has no such input.
pub fn read_for(graph: &Graph, name: &str, path: &Path) -> Option<Result<Tensor>> {
    let decl = graph
        .inputs
        .iter()
        .map(|&t| &graph.tensors[t])
        .find(|d| d.name == name)?;
    Some(read(path, name, decl.dtype))
}

/// The symbolic dimensions of `graph`'s inputs bound by the extents of `inputs` (in the
/// graph's input order), as a session is built for them. An input of another rank binds
/// nothing: the session refuses it with its own message.
pub fn bindings(graph: &Graph, inputs: &[Tensor]) -> BTreeMap<String, usize> {
    bind(graph, |k, _| inputs.get(k))
}

/// The symbolic dimensions bound by the inputs of `given`, by input name: some inputs
/// may be missing (`baton plan --input` binds what it is given).
pub fn bindings_by_name(
    graph: &Graph,
    given: &BTreeMap<String, Tensor>,
) -> BTreeMap<String, usize> {
    bind(graph, |_, name| given.get(name))
}

/// The value inputs of `graph` (inputs whose values decide shapes, see
/// [`baton_reference::values`]) among `inputs` (in the graph's input order), by name: what
/// [`crate::Session::with_values`] specialises the model for.
pub fn values(graph: &Graph, inputs: &[Tensor]) -> BTreeMap<String, Tensor> {
    pick_values(graph, |k, _| inputs.get(k))
}

/// [`values`] from inputs given by name; inputs not given are left out.
pub fn values_by_name(graph: &Graph, given: &BTreeMap<String, Tensor>) -> BTreeMap<String, Tensor> {
    pick_values(graph, |_, name| given.get(name))
}

fn pick_values<'t>(
    graph: &Graph,
    input: impl Fn(usize, &str) -> Option<&'t Tensor>,
) -> BTreeMap<String, Tensor> {
    let wanted = baton_reference::values::value_inputs(graph);
    let mut out = BTreeMap::new();
    for (k, &t) in graph.inputs.iter().enumerate() {
        let name = &graph.tensors[t].name;
        if let (true, Some(x)) = (wanted.contains(&t), input(k, name)) {
            out.insert(name.clone(), x.clone());
        }
    }
    out
}

fn bind<'t>(
    graph: &Graph,
    input: impl Fn(usize, &str) -> Option<&'t Tensor>,
) -> BTreeMap<String, usize> {
    let mut bindings = BTreeMap::new();
    for (k, &t) in graph.inputs.iter().enumerate() {
        let decl = &graph.tensors[t];
        let Some(x) = input(k, &decl.name) else {
            continue;
        };
        if decl.shape.len() != x.shape.len() {
            continue;
        }
        for (d, &v) in decl.shape.iter().zip(&x.shape) {
            if let Dim::Sym(s) = d {
                bindings.insert(s.clone(), v);
            }
        }
    }
    bindings
}

/// Why a tensor could not be converted to an input's dtype.
#[derive(Debug, Clone, PartialEq)]
pub struct Unfit {
    /// The tensor's dtype.
    pub got: DType,
    /// Why, e.g. "element 3 (0.1) is not exact in f32".
    pub reason: String,
}

impl Unfit {
    fn for_input(self, name: &str, want: DType) -> NpyProblem {
        NpyProblem::DtypeMismatch {
            input: name.to_string(),
            expected: want,
            got: self.got,
            reason: self.reason,
        }
    }
}

/// `t` as a tensor of `want`, when every value converts exactly (see the module docs).
pub fn fit(t: Tensor, want: DType) -> std::result::Result<Tensor, Unfit> {
    if t.dtype == want {
        return Ok(t);
    }
    let unfit = |reason: String| Unfit {
        got: t.dtype,
        reason,
    };
    let src_int = ints(&t);
    let out = match (src_int, is_float(t.dtype)) {
        (Some(v), _) if is_int(want) => match v.iter().position(|&x| !int_fits(x, want)) {
            Some(i) => {
                return Err(unfit(format!(
                    "element {i} ({}) is out of {want}'s range",
                    v[i]
                )))
            }
            None => encode_ints(want, &t.shape, &v),
        },
        (Some(v), _) if is_float(want) => {
            let as_float: Vec<f64> = v.iter().map(|&x| x as f64).collect();
            match v
                .iter()
                .position(|&x| (x as f64) as i128 != x || !float_exact(x as f64, want))
            {
                Some(i) => {
                    return Err(unfit(format!(
                        "element {i} ({}) is not exact in {want}",
                        v[i]
                    )))
                }
                None => encode_floats(want, &t.shape, &as_float),
            }
        }
        (None, true) if is_float(want) => {
            let v = t.to_f64();
            match v.iter().position(|&x| !float_exact(x, want)) {
                Some(i) => {
                    let mut reason = format!("element {i} ({}) is not exact in {want}", v[i]);
                    if t.dtype == DType::F64 && want == DType::F32 {
                        reason.push_str("; save the array with .astype(numpy.float32)");
                    }
                    return Err(unfit(reason));
                }
                None => encode_floats(want, &t.shape, &v),
            }
        }
        _ => {
            return Err(unfit(format!(
                "a {} file does not feed a {want} input",
                t.dtype
            )))
        }
    };
    Ok(out)
}

fn is_int(d: DType) -> bool {
    matches!(
        d,
        DType::I8
            | DType::I16
            | DType::I32
            | DType::I64
            | DType::U8
            | DType::U16
            | DType::U32
            | DType::U64
    )
}

fn is_float(d: DType) -> bool {
    matches!(d, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
}

/// The values of an integer tensor (`None` for any other dtype).
fn ints(t: &Tensor) -> Option<Vec<i128>> {
    fn all<T: bytemuck::Pod + Into<i128>>(t: &Tensor) -> Vec<i128> {
        t.values::<T>().iter().map(|&x| x.into()).collect()
    }
    Some(match t.dtype {
        DType::I8 => all::<i8>(t),
        DType::I16 => all::<i16>(t),
        DType::I32 => all::<i32>(t),
        DType::I64 => all::<i64>(t),
        DType::U8 => all::<u8>(t),
        DType::U16 => all::<u16>(t),
        DType::U32 => all::<u32>(t),
        DType::U64 => all::<u64>(t),
        _ => return None,
    })
}

fn int_fits(x: i128, d: DType) -> bool {
    let (lo, hi): (i128, i128) = match d {
        DType::I8 => (i8::MIN.into(), i8::MAX.into()),
        DType::I16 => (i16::MIN.into(), i16::MAX.into()),
        DType::I32 => (i32::MIN.into(), i32::MAX.into()),
        DType::I64 => (i64::MIN.into(), i64::MAX.into()),
        DType::U8 => (0, u8::MAX.into()),
        DType::U16 => (0, u16::MAX.into()),
        DType::U32 => (0, u32::MAX.into()),
        DType::U64 => (0, u64::MAX.into()),
        _ => return false,
    };
    (lo..=hi).contains(&x)
}

fn encode_ints(d: DType, shape: &[usize], v: &[i128]) -> Tensor {
    // Every value was checked to fit `d`: the casts below keep it.
    let bytes: Vec<u8> = match d {
        DType::I8 => v.iter().flat_map(|&x| (x as i8).to_le_bytes()).collect(),
        DType::I16 => v.iter().flat_map(|&x| (x as i16).to_le_bytes()).collect(),
        DType::I32 => v.iter().flat_map(|&x| (x as i32).to_le_bytes()).collect(),
        DType::I64 => v.iter().flat_map(|&x| (x as i64).to_le_bytes()).collect(),
        DType::U8 => v.iter().flat_map(|&x| (x as u8).to_le_bytes()).collect(),
        DType::U16 => v.iter().flat_map(|&x| (x as u16).to_le_bytes()).collect(),
        DType::U32 => v.iter().flat_map(|&x| (x as u32).to_le_bytes()).collect(),
        DType::U64 => v.iter().flat_map(|&x| (x as u64).to_le_bytes()).collect(),
        other => unreachable!("{other} is not an integer dtype"),
    };
    Tensor::from_bytes(d, shape, &bytes)
}

/// `x` rounded to float dtype `d` and widened back to f64.
fn round_trip(x: f64, d: DType) -> f64 {
    match d {
        DType::F16 => f16::from_f64(x).to_f64(),
        DType::BF16 => bf16::from_f64(x).to_f64(),
        DType::F32 => (x as f32) as f64,
        _ => x,
    }
}

/// Whether float dtype `d` holds `x` exactly (a NaN is a NaN in every float dtype).
fn float_exact(x: f64, d: DType) -> bool {
    let back = round_trip(x, d);
    back == x || (x.is_nan() && back.is_nan())
}

fn encode_floats(d: DType, shape: &[usize], v: &[f64]) -> Tensor {
    let bytes: Vec<u8> = match d {
        DType::F16 => v
            .iter()
            .flat_map(|&x| f16::from_f64(x).to_le_bytes())
            .collect(),
        DType::BF16 => v
            .iter()
            .flat_map(|&x| bf16::from_f64(x).to_le_bytes())
            .collect(),
        DType::F32 => v.iter().flat_map(|&x| (x as f32).to_le_bytes()).collect(),
        DType::F64 => v.iter().flat_map(|&x| x.to_le_bytes()).collect(),
        other => unreachable!("{other} is not a float dtype"),
    };
    Tensor::from_bytes(d, shape, &bytes)
}
