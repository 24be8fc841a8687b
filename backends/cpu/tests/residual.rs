//! Residual Adds (an Add of a run-time tensor of the GEMM's output shape) fused into the
//! epilogue of Conv, MatMul and Gemm: the fused executable must compute what the unfused
//! one does (the same graph with every intermediate made a subgraph output, which stops
//! every fusion) or a naive product, in fewer steps, with SIMD and portable kernels.

mod common;

use baton_delegate_api::ir::{Attr, DType, Graph, GraphBuilder, OpKind, TensorId};
use baton_delegate_api::testing::{assert_close_labelled, Rng};
use baton_delegate_api::Tensor;
use common::{constant, delegate, run_counting};

fn random_input(
    b: &mut GraphBuilder,
    rng: &mut Rng,
    name: &str,
    shape: &[usize],
) -> (TensorId, Tensor) {
    let v = rng.vec(shape.iter().product());
    let t = b.input_fixed(name, DType::F32, shape);
    (t, Tensor::from_f32(shape, &v))
}

/// A mobilenet-like block, every way a conv residual runs: a pointwise and a 3x3 conv
/// whose residual Adds (of a tensor held channels-last) run in the GEMM's epilogue; a
/// 3x3 conv + residual (a subgraph input) + Relu whose result is a subgraph output (NCHW:
/// the residual is added after the conversion); a depthwise conv + residual + Clip
/// (added after the depthwise kernel). With `expose`, every intermediate is an output,
/// so nothing fuses.
fn conv_block(expose: bool) -> (Graph, Vec<Tensor>) {
    let mut rng = Rng::new(7);
    let mut b = GraphBuilder::new("block");
    let (x, xv) = random_input(&mut b, &mut rng, "x", &[1, 4, 7, 7]);
    let (y, yv) = random_input(&mut b, &mut rng, "y", &[1, 8, 7, 7]);
    let pad = || ("pads", Attr::Ints(vec![1; 4]));
    let w1 = constant(&mut b, &mut rng, &[8, 4, 3, 3], 0.3);
    let b1 = constant(&mut b, &mut rng, &[8], 1.0);
    let c1 = b.node(OpKind::Conv, &[x, w1, b1], &[pad()]).unwrap();
    let r1 = b.node(OpKind::Relu, &[c1], &[]).unwrap();
    let w2 = constant(&mut b, &mut rng, &[8, 8, 1, 1], 0.3);
    let c2 = b.node(OpKind::Conv, &[r1, w2], &[]).unwrap();
    let s2 = b.node(OpKind::Add, &[r1, c2], &[]).unwrap();
    let w3 = constant(&mut b, &mut rng, &[8, 8, 3, 3], 0.1);
    let b3 = constant(&mut b, &mut rng, &[8], 1.0);
    let c3 = b.node(OpKind::Conv, &[s2, w3, b3], &[pad()]).unwrap();
    let s3 = b.node(OpKind::Add, &[c3, y], &[]).unwrap();
    let r3 = b.node(OpKind::Relu, &[s3], &[]).unwrap();
    let wd = constant(&mut b, &mut rng, &[8, 1, 3, 3], 0.3);
    let group = ("group", Attr::Int(8));
    let dw = b.node(OpKind::Conv, &[s2, wd], &[pad(), group]).unwrap();
    let sd = b.node(OpKind::Add, &[dw, s2], &[]).unwrap();
    let clip = [("min", Attr::Float(-0.5)), ("max", Attr::Float(1.0))];
    let cd = b.node(OpKind::Clip, &[sd], &clip).unwrap();
    let gap = b.node(OpKind::GlobalAveragePool, &[cd], &[]).unwrap();
    let w4 = constant(&mut b, &mut rng, &[8, 8, 3, 3], 0.1);
    let c4 = b.node(OpKind::Conv, &[s2, w4], &[pad()]).unwrap();
    let s4 = b.node(OpKind::Add, &[s2, c4], &[]).unwrap();
    let r4 = b.node(OpKind::Relu, &[s4], &[]).unwrap();
    let gap4 = b.node(OpKind::GlobalAveragePool, &[r4], &[]).unwrap();
    let mut outs = vec![r3, gap, gap4];
    if expose {
        outs.extend([c1, r1, c2, s2, c3, s3, dw, sd, cd, c4, s4, r4]);
    }
    outs.into_iter().for_each(|t| b.output(t));
    (b.finish().unwrap(), vec![xv, yv])
}

#[test]
fn conv_residual_adds_fuse_in_every_layout() {
    let (fused, inputs) = conv_block(false);
    let (plain, _) = conv_block(true);
    for simd in [true, false] {
        let (got, steps) = run_counting(&delegate(simd), &fused, &inputs);
        let (want, plain_steps) = run_counting(&delegate(simd), &plain, &inputs);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let w: Vec<f64> = w.f32s().iter().map(|&v| v as f64).collect();
            assert_close_labelled(&format!("output {i} simd={simd}"), g.f32s(), &w, 1e-6, 1e-5);
        }
        // Fused: conv+Relu, 3 conv+Add(+Relu), depthwise+Add+Clip, 2 means.
        assert_eq!(steps, 7, "simd={simd}");
        // Unfused, each of the 15 nodes is a step.
        assert_eq!(plain_steps, 15, "simd={simd}");
    }
}

/// `a [.., m, k] · b [k, n]` in f64.
fn matmul_naive(a: &[f32], b: &[f32], k: usize, n: usize) -> Vec<f64> {
    a.chunks_exact(k)
        .flat_map(|row| {
            (0..n).map(move |j| (0..k).map(|p| row[p] as f64 * b[p * n + j] as f64).sum())
        })
        .collect()
}

/// A transformer-like pair: `h = x + (MatMul(x, w1) + bias)` (the batch folds into one
/// GEMM whose epilogue adds the bias and the input), then `Relu(h + Gemm(h', w2, c))` with two epilogue adds
/// (Gemm's `C` and the residual). A MatMul whose Add reads a tensor computed after it
/// and one whose operand broadcasts stay unfused, and still compute the right thing.
#[test]
fn matmul_and_gemm_residual_adds_match_naive() {
    let mut rng = Rng::new(3);
    let mut b = GraphBuilder::new("enc");
    let (x, xt) = random_input(&mut b, &mut rng, "x", &[2, 3, 4]);
    let w1v = rng.vec(16);
    let w1 = b.constant_f32("w1", &[4, 4], &w1v);
    let bv = rng.vec(4);
    let bias = b.constant_f32("b", &[4], &bv);
    let mm = b.node(OpKind::MatMul, &[x, w1], &[]).unwrap();
    let mb = b.node(OpKind::Add, &[mm, bias], &[]).unwrap();
    let h = b.node(OpKind::Add, &[x, mb], &[]).unwrap();
    let shape = b.constant_i64("shape", &[2], &[6, 4]);
    let h2 = b.node(OpKind::Reshape, &[h, shape], &[]).unwrap();
    let w2v = rng.vec(16);
    let cv = rng.vec(4);
    let w2 = b.constant_f32("w2", &[4, 4], &w2v);
    let c = b.constant_f32("c", &[4], &cv);
    let gm = b.node(OpKind::Gemm, &[h2, w2, c], &[]).unwrap();
    let s = b.node(OpKind::Add, &[gm, h2], &[]).unwrap();
    let r = b.node(OpKind::Relu, &[s], &[]).unwrap();
    // Unfused: the Add's other operand comes after the MatMul; a broadcast operand.
    let late_mm = b.node(OpKind::MatMul, &[x, w1], &[]).unwrap();
    let late = b.node(OpKind::Relu, &[x], &[]).unwrap();
    let late_sum = b.node(OpKind::Add, &[late_mm, late], &[]).unwrap();
    let (row, rowt) = random_input(&mut b, &mut rng, "row", &[1, 1, 4]);
    let bc_mm = b.node(OpKind::MatMul, &[x, w1], &[]).unwrap();
    let bc_sum = b.node(OpKind::Add, &[bc_mm, row], &[]).unwrap();
    for t in [r, late_sum, bc_sum] {
        b.output(t);
    }
    let g = b.finish().unwrap();

    let xv = xt.f32s().to_vec();
    let mmv = matmul_naive(&xv, &w1v, 4, 4);
    let hv: Vec<f64> = (0..24)
        .map(|i| mmv[i] + bv[i % 4] as f64 + xv[i] as f64)
        .collect();
    let hf: Vec<f32> = hv.iter().map(|&v| v as f32).collect();
    let gv = matmul_naive(&hf, &w2v, 4, 4);
    let rv: Vec<f64> = (0..24)
        .map(|i| (gv[i] + cv[i % 4] as f64 + hv[i]).max(0.0))
        .collect();
    let latev: Vec<f64> = (0..24).map(|i| mmv[i] + (xv[i] as f64).max(0.0)).collect();
    let rowv = rowt.f32s();
    let bcv: Vec<f64> = (0..24).map(|i| mmv[i] + rowv[i % 4] as f64).collect();
    for simd in [true, false] {
        let (got, steps) = run_counting(&delegate(simd), &g, &[xt.clone(), rowt.clone()]);
        assert_close_labelled(
            &format!("residual chain simd={simd}"),
            got[0].f32s(),
            &rv,
            1e-5,
            1e-5,
        );
        assert_close_labelled("late operand", got[1].f32s(), &latev, 1e-6, 1e-5);
        assert_close_labelled("broadcast operand", got[2].f32s(), &bcv, 1e-6, 1e-5);
        // MatMul+Add+Add, Gemm+Add+Relu; then MatMul, Relu, Add; MatMul, Add.
        assert_eq!(steps, 7, "simd={simd}");
    }
}
