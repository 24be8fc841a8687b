//! The activation functions of a recurrent node (RNN's `f`), read from its attributes.
//!
//! They live beside the shape rules because the shape rule, the reference kernel and every
//! plugin must read `activations`, `activation_alpha` and `activation_beta` the same way:
//! which parameter goes to which function is a convention (ONNX hands them out in order to
//! the functions that take them), and two readers disagreeing would give two answers.

use crate::ir::{Attr, Node};

/// One activation function with its parameters resolved.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RecurrentActivation {
    /// `max(0, x)`.
    Relu,
    /// `tanh(x)`.
    Tanh,
    /// `1 / (1 + exp(-x))`.
    Sigmoid,
    /// `alpha * x + beta`.
    Affine {
        /// The slope (default 1).
        alpha: f64,
        /// The offset (default 0).
        beta: f64,
    },
    /// `x` for `x >= 0`, else `alpha * x`.
    LeakyRelu {
        /// The negative slope (default 0.01).
        alpha: f64,
    },
    /// `x` for `x > alpha`, else 0.
    ThresholdedRelu {
        /// The threshold (default 1).
        alpha: f64,
    },
    /// `alpha * tanh(beta * x)`.
    ScaledTanh {
        /// The output scale (default 1).
        alpha: f64,
        /// The input scale (default 1).
        beta: f64,
    },
    /// `max(0, min(1, alpha * x + beta))`.
    HardSigmoid {
        /// The slope (default 0.2).
        alpha: f64,
        /// The offset (default 0.5).
        beta: f64,
    },
    /// `x` for `x >= 0`, else `alpha * (exp(x) - 1)`.
    Elu {
        /// The negative saturation (default 1).
        alpha: f64,
    },
    /// `x / (1 + |x|)`.
    Softsign,
    /// `ln(1 + exp(x))`.
    Softplus,
}

impl RecurrentActivation {
    /// The function at `x`, in f64 (the reference's precision; plugins narrow as they need).
    pub fn apply(self, x: f64) -> f64 {
        use RecurrentActivation as A;
        match self {
            A::Relu => x.max(0.0),
            A::Tanh => x.tanh(),
            A::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            A::Affine { alpha, beta } => alpha * x + beta,
            A::LeakyRelu { alpha } => match x >= 0.0 {
                true => x,
                false => alpha * x,
            },
            A::ThresholdedRelu { alpha } => match x > alpha {
                true => x,
                false => 0.0,
            },
            A::ScaledTanh { alpha, beta } => alpha * (beta * x).tanh(),
            A::HardSigmoid { alpha, beta } => (alpha * x + beta).clamp(0.0, 1.0),
            A::Elu { alpha } => match x >= 0.0 {
                true => x,
                false => alpha * x.exp_m1(),
            },
            A::Softsign => x / (1.0 + x.abs()),
            // ln(1 + e^x) without overflow for large x: x + ln(1 + e^-x).
            A::Softplus => match x > 0.0 {
                true => x + (-x).exp().ln_1p(),
                false => x.exp().ln_1p(),
            },
        }
    }
}

/// The RNN node's activation for each of its `dirs` directions: the `activations`
/// attribute (one comma-separated string, as the importer stores ONNX's string list; one
/// name per direction, any letter case) or `Tanh`. `activation_alpha` and
/// `activation_beta` are consumed in order by the functions that take them, a function
/// past the end of a list getting the ONNX operator's default; a list longer than the
/// functions that read it is an error, since its extra values would be silently ignored.
pub fn rnn_activations(node: &Node, dirs: usize) -> Result<Vec<RecurrentActivation>, String> {
    let names: Vec<String> = match node.attrs.get("activations") {
        None => vec!["tanh".into(); dirs],
        Some(Attr::Str(s)) => s
            .split(',')
            .map(|n| n.trim().to_ascii_lowercase())
            .collect(),
        Some(other) => {
            return Err(format!(
                "activations must be a string of comma-separated names, got {other:?}"
            ))
        }
    };
    if names.len() != dirs {
        return Err(format!(
            "activations lists {} functions; {dirs} direction(s) need one each",
            names.len()
        ));
    }
    let floats = |k: &str| -> Result<Vec<f64>, String> {
        match node.attrs.get(k) {
            None => Ok(vec![]),
            Some(Attr::Floats(v)) => Ok(v.iter().map(|&v| f64::from(v)).collect()),
            Some(Attr::Float(v)) => Ok(vec![f64::from(*v)]),
            Some(other) => Err(format!("{k} must be floats, got {other:?}")),
        }
    };
    let (alphas, betas) = (floats("activation_alpha")?, floats("activation_beta")?);
    let (mut next_alpha, mut next_beta) = (alphas.iter().copied(), betas.iter().copied());
    let (mut used_alpha, mut used_beta) = (0, 0);
    let mut out = Vec::with_capacity(dirs);
    for name in &names {
        let mut alpha = |default: f64| {
            used_alpha += 1;
            next_alpha.next().unwrap_or(default)
        };
        let mut beta = |default: f64| {
            used_beta += 1;
            next_beta.next().unwrap_or(default)
        };
        use RecurrentActivation as A;
        out.push(match name.as_str() {
            "relu" => A::Relu,
            "tanh" => A::Tanh,
            "sigmoid" => A::Sigmoid,
            "affine" => A::Affine {
                alpha: alpha(1.0),
                beta: beta(0.0),
            },
            "leakyrelu" => A::LeakyRelu { alpha: alpha(0.01) },
            "thresholdedrelu" => A::ThresholdedRelu { alpha: alpha(1.0) },
            "scaledtanh" => A::ScaledTanh {
                alpha: alpha(1.0),
                beta: beta(1.0),
            },
            "hardsigmoid" => A::HardSigmoid {
                alpha: alpha(0.2),
                beta: beta(0.5),
            },
            "elu" => A::Elu { alpha: alpha(1.0) },
            "softsign" => A::Softsign,
            "softplus" => A::Softplus,
            other => return Err(format!("unknown activation '{other}'")),
        });
    }
    if alphas.len() > used_alpha || betas.len() > used_beta {
        return Err(format!(
            "activation_alpha has {} and activation_beta {} values; the activations \
             {names:?} read {used_alpha} and {used_beta}",
            alphas.len(),
            betas.len()
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::OpKind;
    use std::collections::BTreeMap;

    fn node(attrs: &[(&str, Attr)]) -> Node {
        Node {
            name: "rnn".into(),
            op: OpKind::RNN,
            inputs: vec![],
            outputs: vec![],
            attrs: attrs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect::<BTreeMap<_, _>>(),
        }
    }

    #[test]
    fn defaults_to_tanh_per_direction() {
        let a = rnn_activations(&node(&[]), 2).unwrap();
        assert_eq!(a, vec![RecurrentActivation::Tanh; 2]);
    }

    #[test]
    fn parameters_go_in_order_to_the_functions_that_take_them() {
        let n = node(&[
            ("activations", Attr::Str("Relu,ScaledTanh".into())),
            ("activation_alpha", Attr::Floats(vec![2.0])),
            ("activation_beta", Attr::Floats(vec![0.5])),
        ]);
        let a = rnn_activations(&n, 2).unwrap();
        assert_eq!(
            a,
            vec![
                RecurrentActivation::Relu,
                RecurrentActivation::ScaledTanh {
                    alpha: 2.0,
                    beta: 0.5
                }
            ]
        );
        // Missing parameters take the ONNX defaults.
        let n = node(&[("activations", Attr::Str("hardsigmoid".into()))]);
        let a = rnn_activations(&n, 1).unwrap();
        assert_eq!(
            a,
            vec![RecurrentActivation::HardSigmoid {
                alpha: 0.2,
                beta: 0.5
            }]
        );
    }

    #[test]
    fn bad_lists_are_errors() {
        let unknown = node(&[("activations", Attr::Str("Gelu".into()))]);
        assert!(rnn_activations(&unknown, 1)
            .unwrap_err()
            .contains("unknown activation 'gelu'"));
        let too_few = node(&[("activations", Attr::Str("Tanh".into()))]);
        assert!(rnn_activations(&too_few, 2).is_err());
        let unread = node(&[("activation_alpha", Attr::Floats(vec![1.0]))]);
        assert!(rnn_activations(&unread, 1).is_err());
    }

    #[test]
    fn values_match_hand_computed_ones() {
        use RecurrentActivation as A;
        // Computed by hand: tanh(0.5) = 0.46211715726, ln(1 + e^2) = 2.12692801104,
        // 0.2 * -1 + 0.5 = 0.3, e^-1 - 1 = -0.63212055883.
        let close = |a: f64, b: f64| (a - b).abs() < 1e-10;
        assert!(close(A::Tanh.apply(0.5), 0.46211715726));
        assert!(close(A::Softplus.apply(2.0), 2.12692801104));
        assert!(close(A::Softplus.apply(-800.0), 0.0));
        assert!(close(A::Softplus.apply(800.0), 800.0));
        assert!(close(
            A::HardSigmoid {
                alpha: 0.2,
                beta: 0.5
            }
            .apply(-1.0),
            0.3
        ));
        assert!(close(A::Elu { alpha: 1.0 }.apply(-1.0), -0.63212055883));
        assert!(close(A::ThresholdedRelu { alpha: 1.0 }.apply(1.0), 0.0));
        assert!(close(A::LeakyRelu { alpha: 0.01 }.apply(-2.0), -0.02));
        assert!(close(A::Softsign.apply(-3.0), -0.75));
    }
}
