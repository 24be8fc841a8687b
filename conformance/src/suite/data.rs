//! A case's test data: the `.pb` tensors of its `test_data_set_*` directories (or a
//! light model's generated inputs and stored outputs), ordered as the graph's inputs and
//! outputs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use baton_delegate_api::{Graph, Tensor};
use baton_onnx::{self as onnx, proto, OnnxError};

use super::{DataSet, RawOutcome, SuiteClass};

fn is_dtype_error(e: &OnnxError) -> bool {
    match e {
        OnnxError::UnsupportedDtype { .. } => true,
        OnnxError::InFile { source, .. } => is_dtype_error(source),
        _ => false,
    }
}

/// Reads every `test_data_set_*` of a case directory.
pub(crate) fn read_data_sets(
    dir: &Path,
    op: &str,
) -> std::result::Result<Vec<DataSet>, RawOutcome> {
    let sets = match data_sets(dir) {
        Ok(s) if !s.is_empty() => s,
        Ok(_) => {
            return Err(RawOutcome::new(
                op,
                SuiteClass::FailRun,
                "no test_data_set_* directory",
            ))
        }
        Err(e) => return Err(RawOutcome::new(op, SuiteClass::FailRun, e)),
    };
    let mut out = Vec::with_capacity(sets.len());
    for set in &sets {
        let set_name = set
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let read = |prefix: &str| {
            let files =
                numbered(set, prefix).map_err(|e| RawOutcome::new(op, SuiteClass::FailRun, e))?;
            read_tensors(&files, op)
        };
        out.push((set_name, read("input_")?, read("output_")?));
    }
    Ok(out)
}

/// The one data set of a light model: generated inputs (see the module docs) and the
/// stored outputs.
pub(crate) fn light_data_set(
    g: &proto::GraphProto,
    outputs: &[PathBuf],
    op: &str,
) -> std::result::Result<Vec<DataSet>, RawOutcome> {
    use proto::type_proto::Value;
    let initializers: std::collections::HashSet<&str> =
        g.initializer.iter().map(|t| t.name.as_str()).collect();
    let mut inputs = Vec::new();
    for v in g
        .input
        .iter()
        .filter(|v| !initializers.contains(v.name.as_str()))
    {
        let t = match v.r#type.as_ref().and_then(|t| t.value.as_ref()) {
            Some(Value::TensorType(t))
                if t.elem_type == proto::tensor_proto::DataType::Float as i32 =>
            {
                t
            }
            _ => {
                return Err(RawOutcome::new(
                    op,
                    SuiteClass::FailRun,
                    format!("input '{}': light models are fed float inputs only", v.name),
                ))
            }
        };
        let shape: Vec<usize> = t
            .shape
            .iter()
            .flat_map(|s| &s.dim)
            .map(|d| match d.value {
                Some(proto::tensor_shape_proto::dimension::Value::DimValue(n)) if n >= 0 => {
                    n as usize
                }
                _ => 1,
            })
            .collect();
        let n: usize = shape.iter().product();
        let values: Vec<f32> = (0..n).map(|i| (i as f64 / n as f64) as f32).collect();
        inputs.push((v.name.clone(), Tensor::from_f32(&shape, &values)));
    }
    if outputs.is_empty() {
        return Err(RawOutcome::new(
            op,
            SuiteClass::FailRun,
            "no light_*_output_N.pb file",
        ));
    }
    let expected = read_tensors(outputs, op)?;
    Ok(vec![("generated inputs".to_string(), inputs, expected)])
}

/// Reads `.pb` tensor files; an ONNX type with no Baton dtype is `unsupported-dtype`.
fn read_tensors(
    files: &[PathBuf],
    op: &str,
) -> std::result::Result<Vec<(String, Tensor)>, RawOutcome> {
    files
        .iter()
        .map(|f| {
            onnx::read_tensor_pb(f).map_err(|e| {
                let class = if is_dtype_error(&e) {
                    SuiteClass::UnsupportedDtype
                } else {
                    SuiteClass::FailRun
                };
                RawOutcome::new(op, class, e.to_string())
            })
        })
        .collect()
}

/// The `test_data_set_*` directories of a case, sorted by number.
fn data_sets(dir: &Path) -> std::result::Result<Vec<PathBuf>, String> {
    let mut sets: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .filter_map(|p| {
            let n = p
                .file_name()?
                .to_str()?
                .strip_prefix("test_data_set_")?
                .parse()
                .ok()?;
            Some((n, p))
        })
        .collect();
    sets.sort();
    Ok(sets.into_iter().map(|(_, p)| p).collect())
}

/// `<prefix>N.pb` files of a data set, sorted by N.
fn numbered(dir: &Path, prefix: &str) -> std::result::Result<Vec<PathBuf>, String> {
    let mut files: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter_map(|p| {
            let n = p
                .file_name()?
                .to_str()?
                .strip_prefix(prefix)?
                .strip_suffix(".pb")?
                .parse()
                .ok()?;
            Some((n, p))
        })
        .collect();
    files.sort();
    Ok(files.into_iter().map(|(_, p)| p).collect())
}

/// Orders test-data tensors as the Baton graph's `ids`: by the `.pb` tensor names where
/// they are given, else by position in the ONNX graph's inputs (or outputs).
pub(crate) fn bind(
    graph: &Graph,
    ids: &[usize],
    onnx_order: &[&str],
    data: Vec<(String, Tensor)>,
    what: &str,
) -> std::result::Result<Vec<Tensor>, String> {
    let mut by_name: BTreeMap<String, Tensor> = BTreeMap::new();
    for (i, (name, t)) in data.into_iter().enumerate() {
        let key = if name.is_empty() {
            match onnx_order.get(i) {
                Some(n) => n.to_string(),
                None => {
                    return Err(format!(
                        "{what}_{i}.pb has no name and no matching graph {what}"
                    ))
                }
            }
        } else {
            name
        };
        by_name.insert(key, t);
    }
    ids.iter()
        .map(|&id| {
            let name = &graph.tensors[id].name;
            by_name
                .remove(name)
                .ok_or_else(|| format!("no {what} data for graph {what} '{name}'"))
        })
        .collect()
}
