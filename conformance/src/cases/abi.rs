//! The ABI behaviour checks, as cases with op `ABI`. What each one does is in
//! `runner::abi`; here they get their ids and sample graphs.

use baton_delegate_api::{DType, Graph, Tensor};

use super::{Case, CaseBody};

/// One ABI behaviour check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AbiCheck {
    /// The library loads and passes the handshake (ABI major, descriptor size, entry
    /// symbol). A refusal is `load-fail` with the host's typed message.
    LoadHandshake,
    /// A context is created with the given options.
    CreateContext,
    /// The plugin reports at least one device, each with a name.
    Devices,
    /// `supports` answers for one graph of every op without failing.
    SupportsEveryOp,
    /// `init` refuses a garbage blob with an error status (and does not crash).
    InitRejectsGarbage,
    /// Running the same supported graph twice gives bit-identical outputs.
    DeterministicRerun,
}

impl AbiCheck {
    /// Every check, in run order.
    pub const ALL: [AbiCheck; 6] = [
        AbiCheck::LoadHandshake,
        AbiCheck::CreateContext,
        AbiCheck::Devices,
        AbiCheck::SupportsEveryOp,
        AbiCheck::InitRejectsGarbage,
        AbiCheck::DeterministicRerun,
    ];

    /// The case id, `ABI/...`.
    pub fn id(self) -> &'static str {
        match self {
            AbiCheck::LoadHandshake => "ABI/load_handshake",
            AbiCheck::CreateContext => "ABI/create_context",
            AbiCheck::Devices => "ABI/devices",
            AbiCheck::SupportsEveryOp => "ABI/supports_every_op",
            AbiCheck::InitRejectsGarbage => "ABI/init_rejects_garbage_blob",
            AbiCheck::DeterministicRerun => "ABI/deterministic_rerun",
        }
    }
}

/// The checks, each carrying the first f32 op case of every op as samples.
pub fn checks(cases: &[Case]) -> Vec<Case> {
    let mut samples: Vec<(Graph, Vec<Tensor>)> = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for c in cases {
        if let CaseBody::Op { graph, inputs } = &c.body {
            if c.dtype == Some(DType::F32) && !seen.contains(&c.op.as_str()) {
                seen.push(&c.op);
                samples.push((graph.clone(), inputs.clone()));
            }
        }
    }
    AbiCheck::ALL
        .iter()
        .map(|&check| Case {
            id: check.id().to_string(),
            op: "ABI".into(),
            dtype: None,
            body: CaseBody::Abi {
                check,
                samples: samples.clone(),
            },
        })
        .collect()
}
