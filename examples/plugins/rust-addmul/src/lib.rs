//! f32 Add, Sub and Mul with numpy broadcasting: a complete Baton plugin on the Rust SDK.
//! Everything else is declined with a typed reason. The blob is the SDK's default (the
//! subgraph itself, in BTIR), run node by node by `GraphExec` with `kernel` per node.

use baton_delegate_api::sdk::{broadcast_binary, require_operands, GraphExec, KernelFn};
use baton_delegate_api::{export_delegate, export_plugin_entry};
use baton_delegate_api::{Constants, DType, Decline, Delegate, DelegateError, Device};
use baton_delegate_api::{Graph, Node, OpKind, Options, PluginInfo, Support};
use baton_delegate_api::{TensorMut, TensorRef};

/// The plugin: no options, no state.
pub struct AddMul;

/// Whether the plugin runs `node`, and if not, why.
fn check(graph: &Graph, node: &Node) -> Result<(), Decline> {
    match node.op {
        OpKind::Add | OpKind::Sub | OpKind::Mul => require_operands(graph, node, &[DType::F32]),
        _ => Err(Decline::op(node)),
    }
}

/// One node: the element-wise op over the broadcast of its two inputs.
fn kernel(node: &Node, i: &[TensorRef<'_>], o: &mut [TensorMut<'_>]) -> Result<(), DelegateError> {
    let f: fn(f32, f32) -> f32 = match node.op {
        OpKind::Add => |a: f32, b: f32| a + b,
        OpKind::Sub => |a: f32, b: f32| a - b,
        _ => |a: f32, b: f32| a * b,
    };
    broadcast_binary(&i[0], &i[1], &mut o[0], f)
}

impl Delegate for AddMul {
    type Executable = GraphExec<KernelFn>;

    fn info() -> PluginInfo {
        PluginInfo::new("rust-addmul", "0.1.0", "rust-addmul-0.1.0")
    }

    fn create(_: &Options) -> Result<Self, DelegateError> {
        Ok(AddMul)
    }

    fn devices(&self) -> Vec<Device> {
        vec![Device::cpu("cpu (rust-addmul)", "0.1.0")]
    }

    fn supports(&self, graph: &Graph, _: Constants<'_>) -> Vec<Support> {
        let answer = |n| check(graph, n).map_or_else(Support::No, |()| Support::Yes);
        graph.nodes.iter().map(answer).collect()
    }

    fn init(
        &self,
        _: u32,
        blob: &[u8],
        consts: &[TensorRef<'_>],
    ) -> Result<Self::Executable, DelegateError> {
        GraphExec::new(blob, consts, kernel)
    }
}

export_delegate!(AddMul);
export_plugin_entry!(baton_delegate_entry);
