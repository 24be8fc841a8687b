//! A plugin that misbehaves on request, so the host and the conformance kit can prove they
//! contain every kind of plugin failure.
//!
//! With `fault = "none"` it is an honest little delegate for f32 Relu and same-shape Add.
//! Every other value of the `fault` option breaks one thing: a panic or an error in one
//! entry point, a wrong output shape, NaN outputs, a claim of availability with wrong
//! results, a hang, or a hard crash (a write through a null pointer). The `*-large` faults
//! only strike subgraphs of more than two nodes, so the plugin passes its probe (small
//! graphs) and fails on real work: that is how init and execute fallbacks are tested.
//!
//! For the isolation tests and the fault matrix, three more options choose any fault at any
//! entry point: `action` (what goes wrong: `segfault`, `abort`, `hang`, `panic`, `error`,
//! `nan`, `drift`), `at` (where: `create`, `devices`, `supports`, `compile`, `init`,
//! `execute`) and `when` (`always`, or `after-probe`: only on graphs other than the host's
//! probe graphs, which are named `probe_*`, so the plugin passes its probe and fails on the
//! model). `nan` acts only at `execute` (NaN outputs); `error` at `devices` reports no
//! device. `drift` is the quiet failure `baton run --check` exists for: the plugin's Add
//! keeps only bfloat16's 8 significant bits, as a reduced-precision kernel would, while
//! its Relu stays exact, so a partition's error starts at its first Add wherever that is.

use baton_delegate_api::abi::{concurrency, option_kind};
use baton_delegate_api::{
    export_delegate, wire, Constants, DType, DeclineReason, Delegate, DelegateError, Device,
    Executable, Graph, OpKind, OptionDecl, Options, PluginInfo, Support, TensorMut, TensorRef,
};

/// Every fault this plugin can act out.
pub const FAULTS: &str = "none|panic-create|panic-supports|panic-compile|panic-init|panic-execute|error-compile|error-init|error-execute|wrong-shape|nan-output|lie-available|hang-execute|crash-execute|error-init-large|error-execute-large";

/// What `action` can do.
pub const ACTIONS: &str = "none|segfault|abort|hang|panic|error|nan|drift";
/// Where `at` can strike.
pub const ENTRY_POINTS: &str = "create|devices|supports|compile|init|execute";

/// The fault chosen by `action`, `at` and `when`.
#[derive(Clone, Debug)]
struct Strike {
    action: String,
    at: String,
    after_probe: bool,
}

impl Strike {
    fn from(options: &Options) -> Strike {
        Strike {
            action: options.get("action").unwrap_or("none").to_string(),
            at: options.get("at").unwrap_or("execute").to_string(),
            after_probe: options.get("when") == Some("after-probe"),
        }
    }

    /// Acts out the fault if it is due at `point` on a graph named `graph`.
    fn act(&self, point: &str, graph: &str) -> Result<(), DelegateError> {
        if self.at != point || (self.after_probe && graph.starts_with("probe_")) {
            return Ok(());
        }
        match self.action.as_str() {
            "segfault" => {
                // SAFETY: none; this is the point: a deliberate segfault.
                unsafe { std::ptr::write_volatile(std::ptr::null_mut::<u32>(), 1) };
                Ok(())
            }
            "abort" => std::process::abort(),
            "hang" => loop {
                std::thread::sleep(std::time::Duration::from_secs(1));
            },
            "panic" => panic!("faulty plugin: deliberate panic in {point}"),
            "error" => Err(DelegateError::new(format!(
                "faulty plugin: deliberate error in {point}"
            ))),
            _ => Ok(()),
        }
    }

    /// Whether `execute` on `graph` writes NaN.
    fn nan(&self, graph: &str) -> bool {
        self.action == "nan"
            && self.at == "execute"
            && !(self.after_probe && graph.starts_with("probe_"))
    }

    /// Whether `execute` on `graph` rounds its Add results to bfloat16.
    fn drift(&self, graph: &str) -> bool {
        self.action == "drift"
            && self.at == "execute"
            && !(self.after_probe && graph.starts_with("probe_"))
    }
}

/// `x` rounded to the nearest bfloat16 (8 significant bits, ties to even), back in f32.
fn to_bf16_precision(x: f32) -> f32 {
    if !x.is_finite() {
        return x;
    }
    let bits = x.to_bits();
    let rounded = bits.wrapping_add(0x7fff + ((bits >> 16) & 1)) & 0xffff_0000;
    f32::from_bits(rounded)
}

/// The delegate.
pub struct Faulty {
    fault: String,
    strike: Strike,
}

/// An initialised subgraph.
pub struct FaultyExec {
    graph: Graph,
    fault: String,
    strike: Strike,
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
        let choice = |name, default, choices, help| OptionDecl {
            name,
            kind: option_kind::ENUM,
            default,
            min: 0.0,
            max: 0.0,
            choices,
            help,
        };
        vec![
            choice("fault", "none", FAULTS, "which failure to act out"),
            choice("action", "none", ACTIONS, "what goes wrong at `at`"),
            choice(
                "at",
                "execute",
                ENTRY_POINTS,
                "the entry point `action` strikes",
            ),
            choice(
                "when",
                "always",
                "always|after-probe",
                "after-probe: spare the host's probe graphs",
            ),
        ]
    }

    fn create(options: &Options) -> Result<Self, DelegateError> {
        let fault = options.get("fault").unwrap_or("none").to_string();
        if fault == "panic-create" {
            panic!("faulty plugin: deliberate panic in create");
        }
        let strike = Strike::from(options);
        strike.act("create", "")?;
        Ok(Faulty { fault, strike })
    }

    fn available(&self) -> bool {
        true
    }

    fn devices(&self) -> Vec<Device> {
        if self.strike.act("devices", "").is_err() {
            return Vec::new();
        }
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
        // `supports` has no error path in the SDK: an error declines every node.
        if let Err(e) = self.strike.act("supports", &graph.name) {
            return graph
                .nodes
                .iter()
                .map(|_| Support::no(DeclineReason::Other, e.to_string()))
                .collect();
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
        self.strike.act("compile", &graph.name)?;
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
        self.strike.act("init", &graph.name)?;
        Ok(FaultyExec {
            graph,
            fault: self.fault.clone(),
            strike: self.strike.clone(),
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
        self.strike.act("execute", &self.graph.name)?;
        let nan = self.strike.nan(&self.graph.name);
        let drift = self.strike.drift(&self.graph.name);
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
                    let sum = a.iter().zip(b).map(|(x, y)| x + y);
                    if drift {
                        sum.map(to_bf16_precision).collect()
                    } else {
                        sum.collect()
                    }
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
                    _ if nan => f32::NAN,
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
