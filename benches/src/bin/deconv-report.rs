//! ConvTranspose on the reference executor next to the CPU delegate, on the upsampling
//! layers of a segmentation decoder (the op that dominated a Paddle2ONNX CNN's profile
//! when it fell back to the reference).
//!
//!     cargo run --release -p baton-benches --bin deconv-report
//!
//! Target (issue 12): the reference within 10x of the delegate (one thread each); the
//! reference is the oracle and the host's last resort, not an engine, but it must not be
//! a trap.

use std::time::Instant;

use baton_backend_cpu::CpuDelegate;
use baton_benches::values;
use baton_delegate_api::ir::{Attr, DType, GraphBuilder, OpKind};
use baton_delegate_api::testing::{execute, Hosted};
use baton_delegate_api::{Delegate, Options, Tensor};

/// The median of `runs` timings of `f`, in milliseconds.
fn median_ms(runs: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut t: Vec<f64> = (0..runs)
        .map(|_| {
            let t0 = Instant::now();
            f();
            t0.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[runs / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let options = [("threads".to_string(), "1".to_string())];
    let d = CpuDelegate::create(&Options::validate(&CpuDelegate::options(), &options)?)?;
    println!("| layer | reference | delegate (1 thread) | reference / delegate |");
    println!("|---|---:|---:|---:|");
    // (channels in, channels out, input side, kernel, stride, pad)
    for &(ci, co, hw, k, s, p) in &[
        (64, 32, 16, 4, 2, 1),
        (32, 16, 32, 4, 2, 1),
        (16, 8, 64, 2, 2, 0),
        (8, 8, 32, 3, 1, 1),
    ] {
        let mut b = GraphBuilder::new("deconv");
        let x = b.input_fixed("x", DType::F32, &[1, ci, hw, hw]);
        let w = b.constant_f32("w", &[ci, co, k, k], &values(ci * co * k * k));
        let bias = b.constant_f32("b", &[co], &values(co));
        let y = b.node(
            OpKind::ConvTranspose,
            &[x, w, bias],
            &[
                ("strides", Attr::Ints(vec![s as i64; 2])),
                ("pads", Attr::Ints(vec![p as i64; 4])),
            ],
        )?;
        b.output(y);
        let graph = b.finish()?;
        let input = vec![Tensor::from_f32(&[1, ci, hw, hw], &values(ci * hw * hw))];
        let hosted = Hosted::new(&graph);
        let mut exec = d.init(0, &hosted.compile(&d)?, &hosted.views())?;
        let runs = 15;
        let delegate = median_ms(runs, || {
            execute(&mut exec, &graph, &input).expect("delegate runs");
        });
        let reference = median_ms(runs, || {
            baton_reference::run_graph(&graph, &input).expect("reference runs");
        });
        println!(
            "| {ci}->{co} {hw}x{hw} k{k} s{s} | {reference:.2} ms | {delegate:.3} ms | {:.1}x |",
            reference / delegate
        );
    }
    Ok(())
}
