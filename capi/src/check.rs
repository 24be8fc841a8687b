//! `baton_session_check`: the delegated partitions against the reference executor, as
//! rows (`baton run --check` in the C API).

use std::ffi::{c_char, CString};
use std::ptr;

use baton_delegate_api::{DType, Tensor};
use baton_runtime_host::error::InputProblem;
use baton_runtime_host::HostError;

use crate::model::pick;
use crate::session::{BatonSession, Kind};
use crate::tensor::{input_shapes, input_views, BatonTensor};
use crate::{guard, handle, handle_mut, put, slice, BatonResult, CapiError};

/// The header's `BatonCheckRow`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BatonCheckRow {
    pub partition: i64,
    pub backend: *const c_char,
    pub nodes: i64,
    pub output: *const c_char,
    pub dtype: u32,
    pub passed: u32,
    pub max_abs: f64,
    pub max_rel: f64,
    pub max_ulp: u64,
    pub past: u64,
    pub elements: u64,
    pub tolerance_abs: f64,
    pub tolerance_rel: f64,
    pub tolerance_ulp: u64,
    pub first_node: *const c_char,
    pub first_op: *const c_char,
}

/// One row with its strings held by the session.
pub(crate) struct HeldCheck {
    row: BatonCheckRow,
    backend: CString,
    output: CString,
    first: Option<(CString, CString)>,
}

impl HeldCheck {
    fn row(&self) -> BatonCheckRow {
        let mut r = self.row;
        r.backend = self.backend.as_ptr();
        r.output = self.output.as_ptr();
        (r.first_node, r.first_op) = match &self.first {
            Some((n, o)) => (n.as_ptr(), o.as_ptr()),
            None => (ptr::null(), ptr::null()),
        };
        r
    }
}

/// Checks the session's partitions on `inputs`; the rows replace the last check's.
///
/// # Safety
/// See `baton.h`.
#[no_mangle]
pub unsafe extern "C" fn baton_session_check(
    session: *mut BatonSession,
    inputs: *const BatonTensor,
    n_inputs: usize,
    n_rows: *mut usize,
) -> BatonResult {
    guard("baton_session_check", || {
        if n_rows.is_null() {
            return Err(CapiError::Null { arg: "n_rows" });
        }
        let s = handle_mut(session, "session")?;
        let Kind::Fixed(fixed) = &mut s.kind else {
            return Err(CapiError::Argument(
                "a bounded session cannot check: make a session with its dims bound".into(),
            ));
        };
        let inputs = slice(inputs, n_inputs, "inputs")?;
        let shapes = input_shapes(inputs)?;
        let views = input_views(inputs, &shapes)?;
        let mut owned = Vec::with_capacity(views.len());
        for (k, v) in views.iter().enumerate() {
            let len = v.shape.iter().product::<usize>() * v.dtype.size();
            if v.data.len() != len {
                return Err(HostError::Input {
                    name: format!("input {k}"),
                    problem: InputProblem::BufferSize {
                        expected: len,
                        got: v.data.len(),
                    },
                }
                .into());
            }
            owned.push(Tensor::from_bytes(v.dtype, v.shape, v.data));
        }
        let report = fixed.check(&owned)?;
        let c = crate::c_string;
        let mut rows = Vec::new();
        for p in &report {
            for e in &p.outputs {
                let dtype = DType::from_name(&e.dtype).map_or(0, DType::code);
                rows.push(HeldCheck {
                    row: BatonCheckRow {
                        partition: p.partition as i64,
                        backend: ptr::null(),
                        nodes: p.nodes as i64,
                        output: ptr::null(),
                        dtype,
                        passed: e.passed() as u32,
                        max_abs: e.max_abs,
                        max_rel: e.max_rel,
                        max_ulp: e.max_ulp,
                        past: e.past as u64,
                        elements: e.elements as u64,
                        tolerance_abs: e.tolerance.abs,
                        tolerance_rel: e.tolerance.rel,
                        tolerance_ulp: e.tolerance.ulp,
                        first_node: ptr::null(),
                        first_op: ptr::null(),
                    },
                    backend: c(&p.backend),
                    output: c(&e.tensor),
                    first: p.first_node_past.as_ref().map(|f| (c(&f.node), c(&f.op))),
                });
            }
        }
        s.checks = rows;
        put(n_rows, s.checks.len(), "n_rows")
    })
}

/// One row of the last check.
///
/// # Safety
/// See `baton.h`.
#[no_mangle]
pub unsafe extern "C" fn baton_session_check_row(
    session: *const BatonSession,
    index: usize,
    out: *mut BatonCheckRow,
) -> BatonResult {
    guard("baton_session_check_row", || {
        let s = handle(session, "session")?;
        put(out, pick(&s.checks, index, "check row")?.row(), "out")
    })
}
