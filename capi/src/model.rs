//! Models: a model file read once (a `.baton` program, a `.btir` graph or an `.onnx`
//! model), described by its declared inputs and outputs.

use std::ffi::c_char;
use std::path::{Path, PathBuf};

use baton_delegate_api::Graph;
use baton_runtime_host::program::{self, Program};
use baton_runtime_host::{model, HostError};

use crate::tensor::{BatonTensorInfo, HeldInfo};
use crate::{guard, handle, put, text, BatonResult, CapiError, Tag, Tagged};

/// The header's `BatonModel`.
#[repr(C)]
pub struct BatonModel {
    tag: Tag,
    pub(crate) path: PathBuf,
    pub(crate) graph: Graph,
    /// A compiled program, until a session takes it (a later session reads the file again).
    pub(crate) program: Option<Program>,
    pub(crate) is_program: bool,
    inputs: Vec<HeldInfo>,
    outputs: Vec<HeldInfo>,
}

impl Tagged for BatonModel {
    const TAG: Tag = Tag::Model;
    const KIND: &'static str = "BatonModel";
}

impl BatonModel {
    /// Reads `path` as a program if it is one (by its magic bytes), else as a model file.
    pub(crate) fn open(path: &Path) -> Result<BatonModel, HostError> {
        let (graph, program) = if program::is_program(path) {
            let p = program::read(path, true)?;
            (p.graph.clone(), Some(p))
        } else {
            (model::load(path)?, None)
        };
        let held = |list: &[usize]| -> Vec<HeldInfo> {
            list.iter()
                .map(|&t| HeldInfo::new(&graph.tensors[t], None))
                .collect()
        };
        Ok(BatonModel {
            tag: Tag::Model,
            path: path.to_path_buf(),
            inputs: held(&graph.inputs),
            outputs: held(&graph.outputs),
            is_program: program.is_some(),
            graph,
            program,
        })
    }

    /// The program for a session: the one read at load, or read again.
    pub(crate) fn take_program(&mut self) -> Result<Program, HostError> {
        match self.program.take() {
            Some(p) => Ok(p),
            None => program::read(&self.path, true),
        }
    }
}

/// Reads a model file.
///
/// # Safety
/// See `baton.h`.
#[no_mangle]
pub unsafe extern "C" fn baton_model_load(
    path: *const c_char,
    out: *mut *mut BatonModel,
) -> BatonResult {
    guard("baton_model_load", || {
        if out.is_null() {
            return Err(CapiError::Null { arg: "out" });
        }
        let model = BatonModel::open(Path::new(text(path, "path")?)).map_err(CapiError::Model)?;
        put(out, Box::into_raw(Box::new(model)), "out")
    })
}

/// Frees a model handle.
///
/// # Safety
/// See `baton.h`.
#[no_mangle]
pub unsafe extern "C" fn baton_model_free(model: *mut BatonModel) {
    crate::free(model, "baton_model_free");
}

/// How many inputs the model declares.
///
/// # Safety
/// See `baton.h`.
#[no_mangle]
pub unsafe extern "C" fn baton_model_input_count(
    model: *const BatonModel,
    out: *mut usize,
) -> BatonResult {
    guard("baton_model_input_count", || {
        put(out, handle(model, "model")?.inputs.len(), "out")
    })
}

/// How many outputs the model declares.
///
/// # Safety
/// See `baton.h`.
#[no_mangle]
pub unsafe extern "C" fn baton_model_output_count(
    model: *const BatonModel,
    out: *mut usize,
) -> BatonResult {
    guard("baton_model_output_count", || {
        put(out, handle(model, "model")?.outputs.len(), "out")
    })
}

/// One declared input.
///
/// # Safety
/// See `baton.h`.
#[no_mangle]
pub unsafe extern "C" fn baton_model_input(
    model: *const BatonModel,
    index: usize,
    out: *mut BatonTensorInfo,
) -> BatonResult {
    guard("baton_model_input", || {
        let m = handle(model, "model")?;
        put(out, pick(&m.inputs, index, "input")?.info()?, "out")
    })
}

/// One declared output.
///
/// # Safety
/// See `baton.h`.
#[no_mangle]
pub unsafe extern "C" fn baton_model_output(
    model: *const BatonModel,
    index: usize,
    out: *mut BatonTensorInfo,
) -> BatonResult {
    guard("baton_model_output", || {
        let m = handle(model, "model")?;
        put(out, pick(&m.outputs, index, "output")?.info()?, "out")
    })
}

/// `list[index]`, or an index error naming `what`.
pub(crate) fn pick<'a, T>(list: &'a [T], index: usize, what: &'static str) -> crate::Result<&'a T> {
    list.get(index).ok_or(CapiError::Index {
        what,
        index,
        count: list.len(),
    })
}
