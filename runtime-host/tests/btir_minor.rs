//! A node whose op code needs a later BTIR minor than a plugin reads (its descriptor's
//! `btir_minor`, ABI 1.2) is declined for that plugin by the host, per node and with the
//! reason, and the plugin gets a graph it can read: its other nodes still go to it.

mod common;

use std::collections::BTreeMap;

use baton_delegate_api::{DType, GraphBuilder, OpKind, Tensor};
use baton_partitioner::Decision;
use baton_runtime_host::{Config, Engine, Session};
use common::{c_plugin, config, max_abs_diff, q};

/// x -> Relu -> Sqrt (an op of BTIR 1.1) -> Relu, planned with the C plugin (Relu and Add
/// only) declaring `btir_minor`; returns the Sqrt's reasons and the plugin's node count.
fn plan_with(btir_minor: u32) -> (Vec<String>, usize) {
    let dir = tempfile::tempdir().unwrap();
    let define = format!("-DBATON_TEST_BTIR_MINOR={btir_minor}");
    let lib = c_plugin(dir.path(), &[&define], "libc_minor.so");
    let body = format!("[[plugin]]\npath = {}\nrequired = true\n", q(&lib));
    let e = Engine::new(Config::load(&config(dir.path(), &body)).unwrap()).unwrap();
    assert_eq!(e.backends[0].ctx.lib.btir_minor(), btir_minor);

    let mut b = GraphBuilder::new("minor");
    let x = b.input_fixed("x", DType::F32, &[2, 5]);
    let r = b.node(OpKind::Relu, &[x], &[]).unwrap();
    let s = b.named_node("root", OpKind::Sqrt, &[r], &[]).unwrap();
    let y = b.node(OpKind::Relu, &[s], &[]).unwrap();
    b.output(y);
    let g = b.finish().unwrap();
    let mut session = Session::new(&e, &g, &BTreeMap::new()).unwrap();
    let sqrt = session.plan.nodes[1].clone();
    assert!(matches!(sqrt.decision, Decision::Host));
    let name = e.backends[0].name.clone();
    let on_plugin = session.nodes_per_backend().get(&name).copied().unwrap_or(0);

    let input = Tensor::from_f32(
        &[2, 5],
        &(0..10).map(|i| i as f32 - 4.5).collect::<Vec<_>>(),
    );
    let got = session.run(std::slice::from_ref(&input)).unwrap();
    let want = baton_reference::run_graph(&g, &[input]).unwrap();
    assert!(max_abs_diff(&got[0], &want[0]) < 1e-6);
    (sqrt.reasons, on_plugin)
}

#[test]
fn a_node_of_a_later_minor_is_declined_by_the_host_and_the_rest_still_delegated() {
    let (reasons, on_plugin) = plan_with(0);
    assert_eq!(on_plugin, 2, "both Relus stay on the plugin");
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("op Sqrt needs BTIR 1.1; the plugin reads BTIR 1.0")),
        "{reasons:?}"
    );
    // A plugin that reads BTIR 1.2 is asked, and declines Sqrt itself.
    let (reasons, on_plugin) = plan_with(2);
    assert_eq!(on_plugin, 2);
    assert!(
        reasons.iter().all(|r| !r.contains("needs BTIR")),
        "{reasons:?}"
    );
}
