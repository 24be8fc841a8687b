//! A plugin that misbehaves on request, so the host and the conformance kit can prove they
//! contain every kind of plugin failure.
//!
//! With `fault = "none"` it is an honest little delegate for f32 Relu and same-shape Add.
//! Every other value of the `fault` option breaks one thing: a panic or an error in one
//! entry point, a wrong output shape, NaN outputs, a claim of availability with wrong
//! results, a hang, or a hard crash (a write through a null pointer). The `*-large` faults
//! only strike subgraphs of more than two nodes, so the plugin passes its probe (small
//! graphs) and fails on real work: that is how init and execute fallbacks are tested.

use baton_delegate_api::abi::{concurrency, option_kind};
use baton_delegate_api::{
    export_delegate, wire, Constants, DType, DeclineReason, Delegate, DelegateError, Device,
    Executable, Graph, OpKind, OptionDecl, Options, PluginInfo, Support, TensorMut, TensorRef,
};

/// Every fault this plugin can act out.
pub const FAULTS: &str = "none|panic-create|panic-supports|panic-compile|panic-init|panic-execute|error-compile|error-init|error-execute|wrong-shape|nan-output|lie-available|hang-execute|crash-execute|error-init-large|error-execute-large";

/// The delegate.
pub struct Faulty {
    fault: String,
}

/// An initialised subgraph.
pub struct FaultyExec {
    graph: Graph,
    fault: String,
}

impl Delegate for Faulty {
    type Executable = FaultyExec;

    fn info() -> PluginInfo {
        PluginInfo {
            name: "faulty",
            version: env!("CARGO_PKG_VERSION"),
            build_id: "test-plugin",
            features: 0,
            concurrency: concurrency::SERIALIZED_PER_HANDLE,
        }
    }

    fn options() -> Vec<OptionDecl> {
        vec![OptionDecl {
            name: "fault",
            kind: option_kind::ENUM,
            default: "none",
            min: 0.0,
            max: 0.0,
            choices: FAULTS,
            help: "which failure to act out",
        }]
    }

    fn create(options: &Options) -> Result<Self, DelegateError> {
        let fault = options.get("fault").unwrap_or("none").to_string();
        if fault == "panic-create" {
            panic!("faulty plugin: deliberate panic in create");
        }
        Ok(Faulty { fault })
    }

    fn available(&self) -> bool {
        true
    }

    fn devices(&self) -> Vec<Device> {
        vec![Device {
            name: "faulty-device".into(),
            kind: 3,
            driver_version: "0".into(),
            memory_bytes: 0,
        }]
    }

    fn supports(&self, graph: &Graph, _constants: Constants<'_>) -> Vec<Support> {
        if self.fault == "panic-supports" {
            panic!("faulty plugin: deliberate panic in supports");
        }
        graph
            .nodes
            .iter()
            .map(|n| {
                let dtypes_ok = n
                    .inputs
                    .iter()
                    .all(|&t| graph.tensors[t].dtype == DType::F32);
                let same_shape = n
                    .inputs
                    .windows(2)
                    .all(|w| graph.tensors[w[0]].shape == graph.tensors[w[1]].shape);
                match n.op {
                    _ if !dtypes_ok => Support::no(DeclineReason::DType, "f32 only"),
                    OpKind::Relu => Support::Yes,
                    OpKind::Add if same_shape => Support::Yes,
                    OpKind::Add => Support::no(DeclineReason::Shape, "no broadcasting"),
                    op => Support::no(DeclineReason::Op, format!("{op} not implemented")),
                }
            })
            .collect()
    }

    fn compile(
        &self,
        _device: u32,
        graph: &Graph,
        _constants: Constants<'_>,
    ) -> Result<Vec<u8>, DelegateError> {
        match self.fault.as_str() {
            "panic-compile" => panic!("faulty plugin: deliberate panic in compile"),
            "error-compile" => {
                return Err(DelegateError::new(
                    "faulty plugin: deliberate compile error",
                ))
            }
            _ => {}
        }
        Ok(wire::encode(graph, wire::ConstMode::External).0)
    }

    fn init(
        &self,
        _device: u32,
        blob: &[u8],
        _constants: &[TensorRef<'_>],
    ) -> Result<FaultyExec, DelegateError> {
        match self.fault.as_str() {
            "panic-init" => panic!("faulty plugin: deliberate panic in init"),
            "error-init" => return Err(DelegateError::new("faulty plugin: deliberate init error")),
            _ => {}
        }
        let graph = wire::decode(blob).map_err(|e| DelegateError::invalid(format!("blob: {e}")))?;
        if self.fault == "error-init-large" && graph.nodes.len() > 2 {
            return Err(DelegateError::new(
                "faulty plugin: deliberate init error on a large subgraph",
            ));
        }
        Ok(FaultyExec {
            graph,
            fault: self.fault.clone(),
        })
    }
}

impl Executable for FaultyExec {
    fn execute(
        &mut self,
        inputs: &[TensorRef<'_>],
        outputs: &mut [TensorMut<'_>],
    ) -> Result<(), DelegateError> {
        match self.fault.as_str() {
            "panic-execute" => panic!("faulty plugin: deliberate panic in execute"),
            "error-execute" => {
                return Err(DelegateError::new(
                    "faulty plugin: deliberate execute error",
                ))
            }
            "hang-execute" => loop {
                std::thread::sleep(std::time::Duration::from_secs(1));
            },
            "crash-execute" => {
                // SAFETY: none; this is the point. A deliberate segfault for the isolation tests.
                unsafe { std::ptr::write_volatile(std::ptr::null_mut::<u32>(), 1) };
            }
            "error-execute-large" if self.graph.nodes.len() > 2 => {
                return Err(DelegateError::new(
                    "faulty plugin: deliberate execute error on a large subgraph",
                ))
            }
            _ => {}
        }
        // Evaluate node by node; values keyed by subgraph tensor id.
        let g = &self.graph;
        let mut values: Vec<Option<Vec<f32>>> = vec![None; g.tensors.len()];
        for (&t, v) in g.inputs.iter().zip(inputs) {
            values[t] = Some(v.f32s().to_vec());
        }
        for n in &g.nodes {
            let a = values[n.inputs[0]]
                .clone()
                .ok_or_else(|| DelegateError::invalid("missing operand"))?;
            let out = match n.op {
                OpKind::Relu => a.iter().map(|&x| if x < 0.0 { 0.0 } else { x }).collect(),
                OpKind::Add => {
                    let b = values[n.inputs[1]]
                        .as_ref()
                        .ok_or_else(|| DelegateError::invalid("missing operand"))?;
                    a.iter().zip(b).map(|(x, y)| x + y).collect()
                }
                op => return Err(DelegateError::unsupported(format!("{op}"))),
            };
            values[n.outputs[0]] = Some(out);
        }
        for (&t, out) in g.outputs.iter().zip(outputs.iter_mut()) {
            let v = values[t]
                .as_ref()
                .ok_or_else(|| DelegateError::invalid("output not computed"))?;
            let dst = out.f32s_mut();
            for (d, &s) in dst.iter_mut().zip(v) {
                *d = match self.fault.as_str() {
                    "nan-output" => f32::NAN,
                    "lie-available" => s + 1.0,
                    _ => s,
                };
            }
            if self.fault == "wrong-shape" {
                let mut shape = out.shape().to_vec();
                shape.push(1);
                out.set_shape(&shape);
            }
        }
        Ok(())
    }
}

export_delegate!(Faulty);
baton_delegate_api::export_plugin_entry!(baton_delegate_entry);
