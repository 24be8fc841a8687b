//! LSTM and GRU (layout 0, default activations) and RNN (layout 0, any of its
//! activations), in f64 throughout.

use baton_delegate_api::ir::Attr;
use baton_delegate_api::shape::{rnn_activations, RecurrentActivation};
use baton_delegate_api::{Node, OpKind, TensorMut, TensorRef};

use super::super::data::{load, load_f32, store_f64, sum_f64};
use super::super::{shape_err, unsupported, KernelError};
use super::present;

/// Runs an LSTM, GRU or RNN node into its outputs (`Y`, `Y_h`, and `Y_c` for LSTM; a
/// prefix may be asked for).
///
/// Per direction `d` (forward, reverse, or both: direction 0 forward, 1 reverse) and
/// batch entry `b`, the steps run over `t` in `0..len` (reversed for the reverse
/// direction), `len` being `sequence_lens[b]` or the sequence length. With
/// `Xt . W_g` the product of the step's input with gate `g`'s rows of `W` (likewise
/// `H . R_g`), biases `Wb_g`, `Rb_g` from `B = [Wb, Rb]`, `clip` bounding every gate's
/// pre-activation to `[-clip, clip]` when set, `σ` the logistic function:
///
/// LSTM (gate order i, o, f, c in W, R and B; peepholes `P = [Pi, Po, Pf]`):
/// `i = σ(Xt.Wi + H.Ri + Wbi + Rbi + Pi*C)`, `f = σ(... + Pf*C)` (or `1 - i` with
/// `input_forget`), `c~ = tanh(Xt.Wc + H.Rc + Wbc + Rbc)`, `C' = f*C + i*c~`,
/// `o = σ(... + Po*C')`, `H' = o * tanh(C')`.
///
/// GRU (gate order z, r, h): `z = σ(Xt.Wz + H.Rz + Wbz + Rbz)`, `r` likewise,
/// `h~ = tanh(Xt.Wh + (r*H).Rh + Rbh + Wbh)`, or with `linear_before_reset`
/// `tanh(Xt.Wh + r*(H.Rh + Rbh) + Wbh)`; `H' = (1 - z)*h~ + z*H`.
///
/// RNN (one gate): `H' = f(Xt.W + H.R + Wb + Rb)`, `f` the direction's activation (see
/// [`rnn_activations`]), clipped before it like the gates above.
pub(super) fn recurrent(
    node: &Node,
    inputs: &[TensorRef<'_>],
    outputs: &mut [TensorMut<'_>],
) -> Result<(), KernelError> {
    let lstm = node.op == OpKind::LSTM;
    let rnn = node.op == OpKind::RNN;
    if !rnn {
        check_activations(node, lstm)?;
    }
    let (x, w, r) = (&inputs[0], &inputs[1], &inputs[2]);
    let (seq, batch, input) = (x.shape[0], x.shape[1], x.shape[2]);
    let (dirs, gh, hidden) = (w.shape[0], w.shape[1], r.shape[2]);
    let opt = |i: usize| present(inputs, i).then(|| to_f64(load_f32(&inputs[i])));
    let (xv, wv, rv) = (
        to_f64(load_f32(x)),
        to_f64(load_f32(w)),
        to_f64(load_f32(r)),
    );
    let bias = opt(3);
    let lens: Vec<usize> = match present(inputs, 4) {
        true => load::<i32>(&inputs[4])
            .into_iter()
            .map(|l| usize::try_from(l).ok().filter(|&l| (1..=seq).contains(&l)))
            .collect::<Option<_>>()
            .ok_or_else(|| shape_err(node, format!("sequence_lens must lie in 1..={seq}")))?,
        false => vec![seq; batch],
    };
    let (init_h, init_c, peep) = (opt(5), if lstm { opt(6) } else { None }, opt(7));
    let cell = Cell {
        clip: node
            .attrs
            .contains_key("clip")
            .then(|| node.attr_float("clip", 0.0) as f64),
        input_forget: node.attr_int("input_forget", 0) != 0,
        linear_before_reset: node.attr_int("linear_before_reset", 0) != 0,
        hidden,
    };
    let reverse_only = node.attr_str("direction", "forward") == "reverse";
    let acts = match rnn {
        true => rnn_activations(node, dirs).map_err(|e| unsupported(node, e))?,
        false => vec![],
    };

    let mut y = vec![0.0f64; seq * dirs * batch * hidden];
    let mut y_h = vec![0.0f64; dirs * batch * hidden];
    let mut y_c = vec![0.0f64; dirs * batch * hidden];
    for d in 0..dirs {
        let reverse = reverse_only || d == 1;
        let wd = &wv[d * gh * input..(d + 1) * gh * input];
        let rd = &rv[d * gh * hidden..(d + 1) * gh * hidden];
        let zeros = vec![0.0; 2 * gh];
        let bd = bias
            .as_ref()
            .map_or(&zeros[..], |b| &b[d * 2 * gh..(d + 1) * 2 * gh]);
        let pd = peep
            .as_ref()
            .map(|p| &p[d * 3 * hidden..(d + 1) * 3 * hidden]);
        for b in 0..batch {
            let state = |v: &Option<Vec<f64>>| {
                let at = (d * batch + b) * hidden;
                v.as_ref()
                    .map_or(vec![0.0; hidden], |v| v[at..at + hidden].to_vec())
            };
            let (mut h, mut c) = (state(&init_h), state(&init_c));
            for step in 0..lens[b] {
                let t = if reverse { lens[b] - 1 - step } else { step };
                let xt = &xv[(t * batch + b) * input..(t * batch + b + 1) * input];
                // Gate rows g*H..(g+1)*H of W and R, biases Wb then Rb.
                let pre = |g: usize, j: usize, hin: &[f64]| -> (f64, f64, f64) {
                    let row = g * hidden + j;
                    let xw = sum_f64((0..input).map(|k| xt[k] * wd[row * input + k]));
                    let hr = sum_f64((0..hidden).map(|k| hin[k] * rd[row * hidden + k]));
                    (xw + bd[row], hr, bd[gh + row])
                };
                if lstm {
                    (h, c) = cell.lstm_step(&pre, &h, &c, pd);
                } else if rnn {
                    h = cell.rnn_step(&pre, &h, acts[d]);
                } else {
                    h = cell.gru_step(&pre, &h);
                }
                let at = ((t * dirs + d) * batch + b) * hidden;
                y[at..at + hidden].copy_from_slice(&h);
            }
            let at = (d * batch + b) * hidden;
            y_h[at..at + hidden].copy_from_slice(&h);
            y_c[at..at + hidden].copy_from_slice(&c);
        }
    }
    for (out, values) in outputs.iter_mut().zip([&y, &y_h, &y_c]) {
        if out.shape().iter().product::<usize>() != values.len() {
            return Err(shape_err(node, "output view does not fit the recurrence"));
        }
        store_f64(out, values);
    }
    Ok(())
}

/// Refuses an `activations` attribute other than the defaults, the only ones implemented.
fn check_activations(node: &Node, lstm: bool) -> Result<(), KernelError> {
    let Some(a) = node.attrs.get("activations") else {
        return Ok(());
    };
    let default = if lstm {
        "sigmoid,tanh,tanh"
    } else {
        "sigmoid,tanh"
    };
    let ok = match a {
        // The IR has no string lists: a comma-separated string, one triple or pair per
        // direction.
        Attr::Str(s) => {
            let s = s.to_ascii_lowercase().replace(' ', "");
            s.split(',')
                .collect::<Vec<_>>()
                .chunks(if lstm { 3 } else { 2 })
                .all(|c| c.join(",") == default)
        }
        _ => false,
    };
    match ok {
        true => Ok(()),
        false => Err(unsupported(
            node,
            format!("activations {a:?}: only {default}"),
        )),
    }
}

fn to_f64(v: Vec<f32>) -> Vec<f64> {
    v.into_iter().map(f64::from).collect()
}

fn sigmoid(v: f64) -> f64 {
    1.0 / (1.0 + (-v).exp())
}

/// `pre(g, j, h)`: gate `g`'s unit `j` before activation, as `(Xt.W + Wb, h.R, Rb)`.
type GatePre<'a> = dyn Fn(usize, usize, &[f64]) -> (f64, f64, f64) + 'a;

/// The per-node settings of one recurrence step.
struct Cell {
    clip: Option<f64>,
    input_forget: bool,
    linear_before_reset: bool,
    hidden: usize,
}

impl Cell {
    fn clip(&self, v: f64) -> f64 {
        match self.clip {
            Some(c) => v.clamp(-c.abs(), c.abs()),
            None => v,
        }
    }

    /// One LSTM step from state `h`, `c`.
    fn lstm_step(
        &self,
        pre: &GatePre<'_>,
        h: &[f64],
        c: &[f64],
        peep: Option<&[f64]>,
    ) -> (Vec<f64>, Vec<f64>) {
        let hn = self.hidden;
        let p = |k: usize, j: usize| peep.map_or(0.0, |p| p[k * hn + j]);
        let gate = |g: usize, j: usize| {
            let (xw, hr, rb) = pre(g, j, h);
            xw + hr + rb
        };
        let (mut h2, mut c2) = (vec![0.0; hn], vec![0.0; hn]);
        for j in 0..hn {
            let i = sigmoid(self.clip(gate(0, j) + p(0, j) * c[j]));
            let f = match self.input_forget {
                true => 1.0 - i,
                false => sigmoid(self.clip(gate(2, j) + p(2, j) * c[j])),
            };
            let cand = self.clip(gate(3, j)).tanh();
            c2[j] = f * c[j] + i * cand;
            let o = sigmoid(self.clip(gate(1, j) + p(1, j) * c2[j]));
            h2[j] = o * c2[j].tanh();
        }
        (h2, c2)
    }

    /// One RNN step, with `pre` as for [`Cell::lstm_step`] and `f` the direction's
    /// activation.
    fn rnn_step(&self, pre: &GatePre<'_>, h: &[f64], f: RecurrentActivation) -> Vec<f64> {
        (0..self.hidden)
            .map(|j| {
                let (xw, hr, rb) = pre(0, j, h);
                f.apply(self.clip(xw + hr + rb))
            })
            .collect()
    }

    /// One GRU step, with `pre` as for [`Cell::lstm_step`].
    fn gru_step(&self, pre: &GatePre<'_>, h: &[f64]) -> Vec<f64> {
        let hn = self.hidden;
        let gate = |g: usize, j: usize, hin: &[f64]| {
            let (xw, hr, rb) = pre(g, j, hin);
            xw + hr + rb
        };
        let z: Vec<f64> = (0..hn).map(|j| sigmoid(self.clip(gate(0, j, h)))).collect();
        let r: Vec<f64> = (0..hn).map(|j| sigmoid(self.clip(gate(1, j, h)))).collect();
        let rh: Vec<f64> = r.iter().zip(h).map(|(r, h)| r * h).collect();
        (0..hn)
            .map(|j| {
                let cand = match self.linear_before_reset {
                    false => gate(2, j, &rh),
                    true => {
                        let (xw, hr, rb) = pre(2, j, h);
                        xw + r[j] * (hr + rb)
                    }
                };
                let cand = self.clip(cand).tanh();
                (1.0 - z[j]) * cand + z[j] * h[j]
            })
            .collect()
    }
}
