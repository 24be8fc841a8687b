//! Host errors as a caller sees them: typed variants to match on, and messages that name
//! the thing at fault once and print dtypes and shapes as users write them.

use std::collections::BTreeMap;

use baton_delegate_api::{DType, Dim, GraphBuilder, OpKind, Tensor};
use baton_reference::KernelError;
use baton_runtime_host::error::{InputProblem, NodeProblem, TensorType};
use baton_runtime_host::{Config, Engine, HostError, Session};

/// An engine with no plugins: every node runs on the portable kernels.
fn host_only() -> Engine {
    let cfg = Config::parse("", "test.toml".as_ref(), ".".as_ref()).unwrap();
    Engine::new(cfg).unwrap()
}

#[test]
fn an_input_of_the_wrong_shape_is_a_typed_wrong_type() {
    let mut b = GraphBuilder::new("g");
    let x = b.input_fixed("x", DType::F32, &[1, 8, 64]);
    let r = b.node(OpKind::Relu, &[x], &[]).unwrap();
    b.output(r);
    let g = b.finish().unwrap();
    let engine = host_only();
    let mut s = Session::new(&engine, &g, &BTreeMap::new()).unwrap();
    let e = s.run(&[Tensor::from_f32(&[2, 2], &[0.0; 4])]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "input 'x': got f32[2, 2], expected f32[1, 8, 64]"
    );
    match e {
        HostError::Input {
            name,
            problem: InputProblem::WrongType { expected, got },
        } => {
            assert_eq!(name, "x");
            assert_eq!(expected, TensorType::of(DType::F32, &[1, 8, 64]));
            assert_eq!(got.shape, vec![Dim::Fixed(2), Dim::Fixed(2)]);
        }
        other => panic!("expected a wrong-type input error, got {other:?}"),
    }
    let e = s.run(&[]).unwrap_err();
    assert!(
        matches!(
            e,
            HostError::InputCount {
                given: 0,
                expected: 1,
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn a_failing_kernel_is_a_node_error_naming_the_node_once() {
    let mut b = GraphBuilder::new("g");
    let x = b.input_fixed("x", DType::I32, &[2]);
    let y = b.input_fixed("y", DType::I32, &[2]);
    let d = b.node(OpKind::Div, &[x, y], &[]).unwrap();
    b.output(d);
    let g = b.finish().unwrap();
    let name = g.nodes[0].name.clone();
    let engine = host_only();
    let mut s = Session::new(&engine, &g, &BTreeMap::new()).unwrap();
    let ints = |v: &[i32]| Tensor::from_bytes(DType::I32, &[2], bytemuck::cast_slice(v));
    let e = s.run(&[ints(&[4, 6]), ints(&[2, 0])]).unwrap_err();
    let text = e.to_string();
    assert_eq!(text.matches(&name).count(), 1, "{text}");
    assert!(text.starts_with(&format!("node {name} (Div): ")), "{text}");
    match e {
        HostError::Node {
            node,
            op: OpKind::Div,
            problem: NodeProblem::Kernel(KernelError::Arithmetic { .. }),
        } => assert_eq!(node, name),
        other => panic!("expected a kernel error of the Div node, got {other:?}"),
    }
}
