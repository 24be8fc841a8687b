//! ONNX ops with no IR op of their own, rewritten into IR ops with the same result.
//!
//! - **Sum** of n operands: a chain of Adds (one operand: Identity).
//! - **LRN** over channels: `Y = X / (bias + alpha / size * S)^beta`, `S` the sum of
//!   squares over the channel window `[c - floor((size-1)/2), c + ceil((size-1)/2)]`.
//!   `S / size` is an AveragePool of `X*X` with the channels as a spatial axis (a
//!   dimension of 1 inserted before them) and the window's off-edge part counted as
//!   zeros (`count_include_pad`).
//! - **Upsample** (opsets 7-9): Resize with `asymmetric` coordinates and, for `nearest`,
//!   `floor` rounding, which is what Upsample defines.
//! - **PRelu** `x < 0 ? x * slope : x` (before opset 7 a `[C]` slope runs along axis 1);
//!   **Elu** and **Selu** `x > 0 ? x : alpha * (exp(x) - 1)` (Selu then times `gamma`);
//!   **Softplus** `relu(x) + log(1 + exp(-|x|))`, which does not overflow;
//!   **Max**/**Min** of n operands, a chain of `Where(a > b, a, b)` (`<` for Min): a NaN
//!   operand wins only in second place;
//!   **InstanceNormalization** `(x - mean) / sqrt(var + epsilon) * scale + B` with the
//!   mean and (population) variance over the spatial axes of each `(n, c)`.
//! - **Dropout** at inference is the identity; its optional mask output is all true
//!   (bool from opset 10, before that of the input's type).
//! - **Softmax/LogSoftmax before opset 13** flatten the input to 2-D at `axis`: the
//!   rewrite flattens, takes the op over the last axis and reshapes back.
//! - **LSTM/GRU/RNN with `layout` 1** (batch first): `X`, `initial_h` and `initial_c` are
//!   transposed to the sequence-first layout 0, and `Y` (`[seq, dirs, batch, H]` to
//!   `[batch, seq, dirs, H]`), `Y_h` and `Y_c` back.

use std::collections::BTreeMap;

use baton_delegate_api::{Attr, DType, OpKind, Tensor};

use super::super::onnx_data_type;
use super::super::proto::NodeProto;
use super::super::OnnxError;
use super::Importer;

impl Importer<'_> {
    /// Imports a node whose op is rewritten here (see the module docs).
    pub(super) fn lower(
        &mut self,
        name: &str,
        n: &NodeProto,
        attrs: &BTreeMap<String, Attr>,
    ) -> Result<(), OnnxError> {
        match n.op_type.as_str() {
            "Sum" => self.sum(name, n),
            "LRN" => self.lrn(name, n, attrs),
            "Upsample" => self.upsample(name, n, attrs),
            "PRelu" => self.prelu(name, n),
            "Elu" | "Selu" => self.elu(name, n, attrs),
            "Softplus" => self.softplus(name, n),
            "Max" | "Min" => self.extremum(name, n),
            "InstanceNormalization" => self.instance_norm(name, n, attrs),
            other => Err(self.node_error(name, n, format!("op {other} is not lowered"))),
        }
    }

    fn sum(&mut self, name: &str, n: &NodeProto) -> Result<(), OnnxError> {
        let out = self.single_output(name, n)?;
        let Some((first, rest)) = n.input.split_first() else {
            return Err(self.node_error(name, n, "Sum needs at least one input".into()));
        };
        if rest.is_empty() {
            return self.add(name, OpKind::Identity, &n.input, &[out], BTreeMap::new(), n);
        }
        let mut acc = first.clone();
        for (k, operand) in rest.iter().enumerate() {
            let inputs = [acc.clone(), operand.clone()];
            if k + 1 == rest.len() {
                return self.add(name, OpKind::Add, &inputs, &[out], BTreeMap::new(), n);
            }
            acc = self.emit(name, &format!("partial{k}"), OpKind::Add, &inputs, &[], n)?;
        }
        unreachable!("the loop returns at the last operand")
    }

    fn lrn(
        &mut self,
        name: &str,
        n: &NodeProto,
        attrs: &BTreeMap<String, Attr>,
    ) -> Result<(), OnnxError> {
        let out = self.single_output(name, n)?;
        let x = n.input.first().cloned().unwrap_or_default();
        let float = |k: &str, default: f32| match attrs.get(k) {
            Some(Attr::Float(v)) => *v,
            Some(Attr::Int(v)) => *v as f32,
            _ => default,
        };
        let (alpha, beta, bias) = (
            float("alpha", 1e-4),
            float("beta", 0.75),
            float("bias", 1.0),
        );
        let size = match attrs.get("size") {
            Some(Attr::Int(s)) if *s >= 1 => *s,
            _ => {
                return Err(self.node_error(
                    name,
                    n,
                    "attribute 'size' is required and must be at least 1".into(),
                ))
            }
        };
        let rank = self.rank_of(&x).filter(|&r| r >= 3);
        let (Some(rank), Some(DType::F32)) = (rank, self.dtype_of(&x)) else {
            return Err(self.node_error(
                name,
                n,
                "LRN is supported on f32 inputs of known rank 3 or more".into(),
            ));
        };
        let sq = self.emit(name, "square", OpKind::Mul, &[x.clone(), x.clone()], &[], n)?;
        let planes = self.emit(
            name,
            "channels_as_space",
            OpKind::Unsqueeze,
            &[sq],
            &[("axes", Attr::Ints(vec![1]))],
            n,
        )?;
        // Spatial axes of the pool: the channels, then the input's own spatial axes.
        let spatial = rank - 1;
        let mut kernel = vec![1; spatial];
        kernel[0] = size;
        let mut pads = vec![0; 2 * spatial];
        pads[0] = (size - 1) / 2;
        pads[spatial] = size - 1 - (size - 1) / 2;
        let mean = self.emit(
            name,
            "window_mean",
            OpKind::AveragePool,
            &[planes],
            &[
                ("kernel_shape", Attr::Ints(kernel)),
                ("pads", Attr::Ints(pads)),
                ("count_include_pad", Attr::Int(1)),
            ],
            n,
        )?;
        let mean = self.emit(
            name,
            "mean",
            OpKind::Squeeze,
            &[mean],
            &[("axes", Attr::Ints(vec![1]))],
            n,
        )?;
        let alpha_c = self.named_constant(name, "alpha", Tensor::from_f32(&[], &[alpha]));
        let bias_c = self.named_constant(name, "bias", Tensor::from_f32(&[], &[bias]));
        let beta_c = self.named_constant(name, "beta", Tensor::from_f32(&[], &[beta]));
        let scaled = self.emit(name, "scaled", OpKind::Mul, &[mean, alpha_c], &[], n)?;
        let base = self.emit(name, "base", OpKind::Add, &[scaled, bias_c], &[], n)?;
        let denom = self.emit(name, "denominator", OpKind::Pow, &[base, beta_c], &[], n)?;
        self.add(name, OpKind::Div, &[x, denom], &[out], BTreeMap::new(), n)
    }

    fn upsample(
        &mut self,
        name: &str,
        n: &NodeProto,
        attrs: &BTreeMap<String, Attr>,
    ) -> Result<(), OnnxError> {
        if self.opset < 7 {
            return Err(self.node_error(
                name,
                n,
                "Upsample before opset 7 (width_scale/height_scale) is not supported".into(),
            ));
        }
        let out = self.single_output(name, n)?;
        let mode = match attrs.get("mode") {
            Some(Attr::Str(m)) => m.clone(),
            _ => "nearest".into(),
        };
        if !matches!(mode.as_str(), "nearest" | "linear") {
            return Err(self.node_error(name, n, format!("attribute 'mode' '{mode}'")));
        }
        let mut resize_attrs = BTreeMap::from([
            ("mode".to_string(), Attr::Str(mode)),
            (
                "coordinate_transformation_mode".to_string(),
                Attr::Str("asymmetric".into()),
            ),
            ("nearest_mode".to_string(), Attr::Str("floor".into())),
        ]);
        let x = n.input.first().cloned().unwrap_or_default();
        let mut inputs = vec![x, String::new(), String::new()];
        match (attrs.get("scales"), n.input.get(1)) {
            // Opsets 7 and 8: the scales are an attribute.
            (Some(Attr::Floats(s)), _) => {
                resize_attrs.insert("scales".into(), Attr::Floats(s.clone()));
            }
            // Opset 9: input 1, constant or not.
            (_, Some(s)) if !s.is_empty() => match self.const_f32s(s) {
                Some(v) => {
                    resize_attrs.insert("scales".into(), Attr::Floats(v));
                }
                None => inputs[2] = s.clone(),
            },
            _ => return Err(self.node_error(name, n, "Upsample needs scales".into())),
        }
        self.add(name, OpKind::Resize, &inputs, &[out], resize_attrs, n)
    }

    fn prelu(&mut self, name: &str, n: &NodeProto) -> Result<(), OnnxError> {
        let out = self.single_output(name, n)?;
        let (x, rank) = self.f32_operand(name, n)?;
        let mut slope = n.input.get(1).cloned().unwrap_or_default();
        let per_channel = self
            .static_shape_of(&slope)
            .is_some_and(|s| s.len() == 1 && s[0] > 1);
        if self.opset < 7 && per_channel && self.known_rank(name, n, rank)? > 2 {
            let rank = self.known_rank(name, n, rank)?;
            let axes = (1..rank as i64 - 1).collect();
            slope = self.emit(
                name,
                "slope",
                OpKind::Unsqueeze,
                &[slope],
                &[("axes", Attr::Ints(axes))],
                n,
            )?;
        }
        let zero = self.named_constant(name, "zero", Tensor::from_f32(&[], &[0.0]));
        let negative = self.emit(name, "negative", OpKind::Less, &[x.clone(), zero], &[], n)?;
        let scaled = self.emit(name, "scaled", OpKind::Mul, &[x.clone(), slope], &[], n)?;
        let inputs = [negative, scaled, x];
        self.add(name, OpKind::Where, &inputs, &[out], BTreeMap::new(), n)
    }

    fn elu(
        &mut self,
        name: &str,
        n: &NodeProto,
        attrs: &BTreeMap<String, Attr>,
    ) -> Result<(), OnnxError> {
        let out = self.single_output(name, n)?;
        let (x, _) = self.f32_operand(name, n)?;
        let selu = n.op_type == "Selu";
        let float = |k: &str, default: f32| match attrs.get(k) {
            Some(Attr::Float(v)) => *v,
            _ => default,
        };
        let alpha = float("alpha", if selu { 1.673_263_2 } else { 1.0 });
        let zero = self.named_constant(name, "zero", Tensor::from_f32(&[], &[0.0]));
        let one = self.named_constant(name, "one", Tensor::from_f32(&[], &[1.0]));
        let alpha = self.named_constant(name, "alpha", Tensor::from_f32(&[], &[alpha]));
        let positive = self.emit(
            name,
            "positive",
            OpKind::Greater,
            &[x.clone(), zero],
            &[],
            n,
        )?;
        let e = self.emit(name, "exp", OpKind::Exp, std::slice::from_ref(&x), &[], n)?;
        let em1 = self.emit(name, "exp_minus_1", OpKind::Sub, &[e, one], &[], n)?;
        let negative = self.emit(name, "negative", OpKind::Mul, &[em1, alpha], &[], n)?;
        let inputs = [positive, x, negative];
        if !selu {
            return self.add(name, OpKind::Where, &inputs, &[out], BTreeMap::new(), n);
        }
        let gamma = float("gamma", 1.050_701);
        let gamma = self.named_constant(name, "gamma", Tensor::from_f32(&[], &[gamma]));
        let y = self.emit(name, "unscaled", OpKind::Where, &inputs, &[], n)?;
        self.add(name, OpKind::Mul, &[y, gamma], &[out], BTreeMap::new(), n)
    }

    fn softplus(&mut self, name: &str, n: &NodeProto) -> Result<(), OnnxError> {
        let out = self.single_output(name, n)?;
        let (x, _) = self.f32_operand(name, n)?;
        let one = self.named_constant(name, "one", Tensor::from_f32(&[], &[1.0]));
        let abs = self.emit(name, "abs", OpKind::Abs, std::slice::from_ref(&x), &[], n)?;
        let neg = self.emit(name, "neg_abs", OpKind::Neg, &[abs], &[], n)?;
        let e = self.emit(name, "exp", OpKind::Exp, &[neg], &[], n)?;
        let sum = self.emit(name, "one_plus", OpKind::Add, &[e, one], &[], n)?;
        let log = self.emit(name, "log", OpKind::Log, &[sum], &[], n)?;
        let relu = self.emit(name, "relu", OpKind::Relu, &[x], &[], n)?;
        self.add(name, OpKind::Add, &[relu, log], &[out], BTreeMap::new(), n)
    }

    fn extremum(&mut self, name: &str, n: &NodeProto) -> Result<(), OnnxError> {
        let out = self.single_output(name, n)?;
        let compare = match n.op_type.as_str() {
            "Max" => OpKind::Greater,
            _ => OpKind::Less,
        };
        let Some((first, rest)) = n.input.split_first() else {
            return Err(self.node_error(name, n, "at least one input is needed".into()));
        };
        if rest.is_empty() {
            return self.add(name, OpKind::Identity, &n.input, &[out], BTreeMap::new(), n);
        }
        let mut acc = first.clone();
        for (k, b) in rest.iter().enumerate() {
            let pick = self.emit(
                name,
                &format!("pick{k}"),
                compare,
                &[acc.clone(), b.clone()],
                &[],
                n,
            )?;
            let inputs = [pick, acc, b.clone()];
            if k + 1 == rest.len() {
                return self.add(name, OpKind::Where, &inputs, &[out], BTreeMap::new(), n);
            }
            acc = self.emit(name, &format!("partial{k}"), OpKind::Where, &inputs, &[], n)?;
        }
        unreachable!("the loop returns at the last operand")
    }

    fn instance_norm(
        &mut self,
        name: &str,
        n: &NodeProto,
        attrs: &BTreeMap<String, Attr>,
    ) -> Result<(), OnnxError> {
        let out = self.single_output(name, n)?;
        let (x, rank) = self.f32_operand(name, n)?;
        let rank = self.known_rank(name, n, rank)?;
        if rank < 3 {
            return Err(self.node_error(
                name,
                n,
                format!("input of rank {rank}; 3 or more needed"),
            ));
        }
        let eps = match attrs.get("epsilon") {
            Some(Attr::Float(v)) => *v,
            _ => 1e-5,
        };
        let operand = |k: usize| n.input.get(k).cloned().unwrap_or_default();
        let spatial: Vec<i64> = (2..rank as i64).collect();
        let reduce = [("axes", Attr::Ints(spatial)), ("keepdims", Attr::Int(1))];
        let mean = self.emit(
            name,
            "mean",
            OpKind::ReduceMean,
            std::slice::from_ref(&x),
            &reduce,
            n,
        )?;
        let d = self.emit(name, "centered", OpKind::Sub, &[x, mean], &[], n)?;
        let sq = self.emit(
            name,
            "squared",
            OpKind::Mul,
            &[d.clone(), d.clone()],
            &[],
            n,
        )?;
        let var = self.emit(name, "variance", OpKind::ReduceMean, &[sq], &reduce, n)?;
        let eps = self.named_constant(name, "epsilon", Tensor::from_f32(&[], &[eps]));
        let var = self.emit(name, "variance_eps", OpKind::Add, &[var, eps], &[], n)?;
        let std = self.emit(name, "std", OpKind::Sqrt, &[var], &[], n)?;
        let normed = self.emit(name, "normalized", OpKind::Div, &[d, std], &[], n)?;
        // Scale and B [C] run along axis 1.
        let per_channel = [("axes", Attr::Ints((1..rank as i64 - 1).collect()))];
        let scale = self.emit(
            name,
            "scale",
            OpKind::Unsqueeze,
            &[operand(1)],
            &per_channel,
            n,
        )?;
        let bias = self.emit(
            name,
            "bias",
            OpKind::Unsqueeze,
            &[operand(2)],
            &per_channel,
            n,
        )?;
        let scaled = self.emit(name, "scaled", OpKind::Mul, &[normed, scale], &[], n)?;
        self.add(
            name,
            OpKind::Add,
            &[scaled, bias],
            &[out],
            BTreeMap::new(),
            n,
        )
    }

    /// Operand 0 and its rank (`None` while it is known only once the host binds the
    /// inputs: the elementwise rewrites do not need it); an error unless it is f32 (the
    /// rewrites' constants are f32).
    pub(super) fn f32_operand(
        &self,
        name: &str,
        n: &NodeProto,
    ) -> Result<(String, Option<usize>), OnnxError> {
        let x = n.input.first().cloned().unwrap_or_default();
        match self.dtype_of(&x) {
            Some(DType::F32) => Ok((x.clone(), self.rank_of(&x))),
            _ => Err(self.node_error(name, n, format!("{} is supported on f32 inputs", n.op_type))),
        }
    }

    /// The rank of operand 0 where a rewrite needs it at import; an error naming the op
    /// otherwise.
    fn known_rank(
        &self,
        name: &str,
        n: &NodeProto,
        rank: Option<usize>,
    ) -> Result<usize, OnnxError> {
        rank.ok_or_else(|| {
            self.node_error(
                name,
                n,
                format!(
                    "{} needs the input's rank at import; it is known only at run time",
                    n.op_type
                ),
            )
        })
    }

    /// Dropout at inference: the identity, and an all-true mask when one is asked for.
    /// Training mode (random dropping) is refused unless its ratio is a constant 0.
    /// OptionalHasElement and OptionalGetElement where the operand is a tensor or absent.
    /// The IR has no optional type: every value is a tensor, and an optional with nothing
    /// in it can only be an operand left out (no input, or the empty name). So whether
    /// it has an element is known at import, a constant; getting the element of a tensor
    /// is the tensor itself. Optional-typed graph inputs and the Optional op are refused
    /// where they are read, with the value named.
    pub(super) fn optional(&mut self, name: &str, n: &NodeProto) -> Result<(), OnnxError> {
        if self.opset < 15 {
            let message = format!("{} exists from opset 15", n.op_type);
            return Err(self.node_error(name, n, message));
        }
        let x = n.input.first().filter(|s| !s.is_empty()).cloned();
        let Some(y) = n.output.first().filter(|s| !s.is_empty()).cloned() else {
            return Err(self.node_error(name, n, "the node has no output".into()));
        };
        if n.op_type == "OptionalHasElement" {
            let present = u8::from(x.is_some());
            self.constant(&y, Tensor::from_bytes(DType::Bool, &[], &[present]));
            return Ok(());
        }
        let Some(x) = x else {
            return Err(self.node_error(
                name,
                n,
                "the operand is absent: an empty optional has no element to get".into(),
            ));
        };
        self.add(name, OpKind::Identity, &[x], &[y], BTreeMap::new(), n)
    }

    pub(super) fn dropout(&mut self, name: &str, n: &NodeProto) -> Result<(), OnnxError> {
        let training = match self.opset {
            // Before opset 7, `is_test` (default 0: training) chose the mode.
            ..=6 => n
                .attribute
                .iter()
                .find(|a| a.name == "is_test")
                .is_none_or(|a| a.i == 0),
            // From opset 12, the optional operand 2 (default false).
            _ => n.input.get(2).filter(|t| !t.is_empty()).is_some_and(|t| {
                self.const_bytes(t) != Some((baton_delegate_api::DType::Bool, &[0][..]))
            }),
        };
        let no_ratio = n
            .input
            .get(1)
            .filter(|r| !r.is_empty())
            .is_some_and(|r| self.scalar_f32(r) == Some(0.0));
        if training && !no_ratio {
            return Err(self.node_error(
                name,
                n,
                "training mode (random dropping) is not supported; only inference, or a ratio of 0"
                    .into(),
            ));
        }
        let x = n.input.first().cloned().unwrap_or_default();
        let y = n.output.first().cloned().unwrap_or_default();
        self.add(
            name,
            OpKind::Identity,
            std::slice::from_ref(&x),
            &[y],
            BTreeMap::new(),
            n,
        )?;
        let Some(mask) = n.output.get(1).filter(|m| !m.is_empty()) else {
            return Ok(());
        };
        let dtype = match self.opset {
            ..=9 => self.dtype_of(&x).unwrap_or(DType::F32),
            _ => DType::Bool,
        };
        let shape = self.emit(name, "shape", OpKind::Shape, &[x], &[], n)?;
        let attrs = BTreeMap::from([
            ("value".to_string(), Attr::Float(1.0)),
            (
                "value_dtype".to_string(),
                Attr::Int(onnx_data_type(dtype) as i64),
            ),
        ]);
        let mask_node = format!("{name}/mask");
        self.add(
            &mask_node,
            OpKind::ConstantOfShape,
            &[shape],
            std::slice::from_ref(mask),
            attrs,
            n,
        )
    }

    /// Softmax and LogSoftmax before opset 13: over the 2-D view `[prod(dims[..axis]),
    /// prod(dims[axis..])]` (default axis 1). Where `axis` is the last dimension this is
    /// the opset-13 op; otherwise the input is flattened and the result reshaped back. An
    /// input whose rank is known only once the host binds the inputs (its shape comes from
    /// a value input, say) is flattened too, and reshaped back to `Shape(x)`, which the
    /// host folds when it specialises the model.
    pub(super) fn softmax_2d(
        &mut self,
        name: &str,
        n: &NodeProto,
        mut attrs: BTreeMap<String, Attr>,
    ) -> Result<(), OnnxError> {
        let op = OpKind::from_name(&n.op_type).expect("Softmax, LogSoftmax and Hardmax are IR ops");
        let out = self.single_output(name, n)?;
        let x = n.input.first().cloned().unwrap_or_default();
        let axis = match attrs.remove("axis") {
            Some(Attr::Int(a)) => a,
            _ => 1,
        };
        // An input whose rank is known only once the inputs are bound (a provisional
        // shape) keeps `axis` as given: Flatten reads a negative one against the rank the
        // host binds, and the result is reshaped back to the input's shape, folded then.
        let rank = self.rank_of(&x).map(|r| r as i64);
        let axis = match rank {
            Some(rank) => {
                let axis = if axis < 0 { axis + rank } else { axis };
                if !(0..rank.max(1)).contains(&axis) {
                    return Err(self.node_error(
                        name,
                        n,
                        format!("attribute 'axis' is out of range for rank {rank}"),
                    ));
                }
                axis
            }
            None => axis,
        };
        attrs.insert("axis".into(), Attr::Int(-1));
        if rank.is_some_and(|rank| axis >= rank - 1) {
            return self.add(name, op, &[x], &[out], attrs, n);
        }
        let shape = self.static_shape_of(&x);
        let flat = self.emit(
            name,
            "flat",
            OpKind::Flatten,
            std::slice::from_ref(&x),
            &[("axis", Attr::Int(axis))],
            n,
        )?;
        let attr_list: Vec<(&str, Attr)> =
            attrs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        let y = self.emit(name, "flat_out", op, &[flat], &attr_list, n)?;
        let Some(shape) = shape else {
            // The shape is known at specialisation: a Reshape to `Shape(x)`, which folds.
            let dims = self.emit(name, "shape", OpKind::Shape, &[x], &[], n)?;
            return self.add(
                name,
                OpKind::Reshape,
                &[y, dims],
                &[out],
                BTreeMap::new(),
                n,
            );
        };
        let dims = shape.iter().map(|&d| d as i64).collect();
        let reshape_attrs = BTreeMap::from([("shape".to_string(), Attr::Ints(dims))]);
        self.add(name, OpKind::Reshape, &[y], &[out], reshape_attrs, n)
    }

    /// LSTM, GRU or RNN with `layout` 1, run in layout 0 between transposes.
    pub(super) fn recurrent_batch_first(
        &mut self,
        name: &str,
        op: OpKind,
        n: &NodeProto,
        mut attrs: BTreeMap<String, Attr>,
    ) -> Result<(), OnnxError> {
        attrs.remove("layout");
        let mut inputs = n.input.clone();
        // X [batch, seq, input]; initial_h, initial_c [batch, dirs, H].
        for k in [0, 5, 6] {
            if let Some(i) = inputs.get(k).filter(|i| !i.is_empty()).cloned() {
                inputs[k] = self.emit(
                    name,
                    &format!("input{k}_seq_first"),
                    OpKind::Transpose,
                    &[i],
                    &[("perm", Attr::Ints(vec![1, 0, 2]))],
                    n,
                )?;
            }
        }
        let inner: Vec<String> = n
            .output
            .iter()
            .enumerate()
            .map(|(k, o)| match o.is_empty() {
                true => String::new(),
                false => format!("{name}/output{k}_seq_first"),
            })
            .collect();
        self.add(name, op, &inputs, &inner, attrs, n)?;
        for (k, (o, i)) in n.output.iter().zip(&inner).enumerate() {
            if o.is_empty() {
                continue;
            }
            // Y [seq, dirs, batch, H] -> [batch, seq, dirs, H]; Y_h, Y_c swap like initial_h.
            let perm = match k {
                0 => vec![2, 0, 1, 3],
                _ => vec![1, 0, 2],
            };
            let attrs = BTreeMap::from([("perm".to_string(), Attr::Ints(perm))]);
            let node = format!("{name}/output{k}_batch_first");
            self.add(
                &node,
                OpKind::Transpose,
                std::slice::from_ref(i),
                std::slice::from_ref(o),
                attrs,
                n,
            )?;
        }
        Ok(())
    }

    /// The node's one output name; an error when it has several or none.
    pub(super) fn single_output(&self, name: &str, n: &NodeProto) -> Result<String, OnnxError> {
        match n.output.as_slice() {
            [o] if !o.is_empty() => Ok(o.clone()),
            _ => Err(self.node_error(name, n, format!("{} has exactly one output", n.op_type))),
        }
    }
}
