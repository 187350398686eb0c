//! The operators of TVM v0.8's DNNL JSON runtime, checked at load time (no oneDNN needed):
//! names, arity, attributes, dtypes and shapes, with TVM's semantics.
//!
//! | operator | inputs | notes |
//! |---|---|---|
//! | `nn.conv2d`, `dnnl.conv2d_relu` | data, weight | NCHW / OIHW; strides, padding (1, 2 or 4 values), dilation, groups |
//! | `dnnl.conv2d_bias_relu` | data, weight, bias | bias: OC elements in any shape (`(OC,)`, `(1, OC, 1, 1)`) |
//! | `nn.dense` | data `(..., K)`, weight `(N, K)` | output `(..., N)` |
//! | `nn.batch_norm` | data, gamma, beta, mean, var | axis 1; `center`/`scale`; outputs 1 and 2 are mean and var |
//! | `nn.relu` | data | any rank |
//! | `add`, `multiply` | a, b | NumPy broadcasting |
//!
//! Beyond v0.8 (which miscomputes or crashes on these): general groups (v0.8 only handles
//! `groups == OC`), dilation (v0.8 ignores it), 2-value padding, `center=False` / `scale=False`,
//! dense over more than 2 dimensions, broadcasting `add` / `multiply`, and the second and
//! third outputs of `nn.batch_norm`. Only float32 is supported (as in v0.8).

use crate::byoc::json::graph::{EntryRef, Graph, Node, NodeKind};
use crate::error::{Error, Result};

/// A convolution (`nn.conv2d` and the fused composites).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conv {
    /// Batch, input channels, input height, input width.
    pub n: i64,
    pub ic: i64,
    pub ih: i64,
    pub iw: i64,
    /// Output channels, kernel height and width.
    pub oc: i64,
    pub kh: i64,
    pub kw: i64,
    /// Groups.
    pub groups: i64,
    /// Strides (h, w).
    pub strides: [i64; 2],
    /// Dilation (h, w), TVM's convention (1 = dense).
    pub dilation: [i64; 2],
    /// Padding top, left, bottom, right.
    pub pad: [i64; 4],
    /// Output height and width.
    pub oh: i64,
    pub ow: i64,
    /// Fused bias (third input) and ReLU.
    pub bias: bool,
    pub relu: bool,
}

impl Conv {
    /// Weight dims in oneDNN's convention: `oihw`, or `goihw` for groups > 1.
    pub(crate) fn weight_dims(&self) -> Vec<i64> {
        if self.groups > 1 {
            vec![self.groups, self.oc / self.groups, self.ic / self.groups, self.kh, self.kw]
        } else {
            vec![self.oc, self.ic, self.kh, self.kw]
        }
    }

    /// Checks the geometry and computes the output size; `what` names the caller in errors.
    pub fn finish(mut self, what: &str) -> Result<Conv> {
        let bad = |m: String| Error::value(format!("{what}: {m}"));
        let all = [self.n, self.ic, self.ih, self.iw, self.oc, self.kh, self.kw];
        if all.iter().any(|&d| d <= 0) {
            return Err(bad(format!(
                "sizes must be positive: N={} C={} H={} W={} O={} KH={} KW={}",
                self.n, self.ic, self.ih, self.iw, self.oc, self.kh, self.kw
            )));
        }
        if self.groups < 1 || self.ic % self.groups != 0 || self.oc % self.groups != 0 {
            return Err(bad(format!(
                "groups={} must divide the input channels ({}) and output channels ({})",
                self.groups, self.ic, self.oc
            )));
        }
        if self.strides.iter().any(|&s| s < 1)
            || self.dilation.iter().any(|&d| d < 1)
            || self.pad.iter().any(|&p| p < 0)
        {
            return Err(bad(format!(
                "strides {:?} and dilation {:?} must be >= 1, padding {:?} >= 0",
                self.strides, self.dilation, self.pad
            )));
        }
        let out = |i: i64, k: i64, d: i64, s: i64, p0: i64, p1: i64| -> Option<i64> {
            let span = k.checked_sub(1)?.checked_mul(d)?.checked_add(1)?;
            let r = i.checked_add(p0)?.checked_add(p1)?.checked_sub(span)?;
            (r >= 0).then(|| r / s + 1)
        };
        let oh = out(self.ih, self.kh, self.dilation[0], self.strides[0], self.pad[0], self.pad[2]);
        let ow = out(self.iw, self.kw, self.dilation[1], self.strides[1], self.pad[1], self.pad[3]);
        match (oh, ow) {
            (Some(oh), Some(ow)) => {
                self.oh = oh;
                self.ow = ow;
                Ok(self)
            }
            _ => Err(bad(format!(
                "the (dilated) kernel {}x{} does not fit the padded input {}x{}",
                self.kh, self.kw, self.ih, self.iw
            ))),
        }
    }
}

/// An inner product: `(M, K) x (N, K)^T`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dense {
    pub m: i64,
    pub k: i64,
    pub n: i64,
}

/// A batch normalization over axis 1.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchNorm {
    /// Channels.
    pub c: i64,
    pub epsilon: f32,
    /// Multiply by gamma (`scale`), add beta (`center`).
    pub scale: bool,
    pub center: bool,
}

/// A broadcasting binary operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binary {
    pub alg: super::api::BinaryAlg,
    /// The output shape, and both operand shapes padded with leading 1s to its rank.
    pub out: Vec<i64>,
    pub a: Vec<i64>,
    pub b: Vec<i64>,
}

/// One checked operator.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Conv(Conv),
    Dense(Dense),
    BatchNorm(BatchNorm),
    Relu,
    Binary(Binary),
}

/// The operators this backend runs.
pub(crate) const SUPPORTED: &[&str] = &[
    "nn.conv2d",
    "dnnl.conv2d_relu",
    "dnnl.conv2d_bias_relu",
    "nn.dense",
    "nn.batch_norm",
    "nn.relu",
    "add",
    "multiply",
];

fn elems(shape: &[i64]) -> Option<i64> {
    shape.iter().try_fold(1i64, |a, &d| a.checked_mul(d))
}

struct Ctx<'a> {
    g: &'a Graph,
    id: usize,
    node: &'a Node,
}

impl Ctx<'_> {
    fn err(&self, m: impl std::fmt::Display) -> Error {
        Error::value(format!("dnnl_json: node {} ({}): {m}", self.id, self.node.name))
    }

    fn arity(&self, n: usize) -> Result<()> {
        if self.node.inputs.len() != n {
            return Err(self.err(format!("expects {n} inputs, got {}", self.node.inputs.len())));
        }
        Ok(())
    }

    fn input(&self, i: usize) -> EntryRef {
        self.node.inputs[i]
    }

    fn shape(&self, i: usize) -> &[i64] {
        self.g.shape(self.input(i))
    }

    fn out_shape(&self) -> &[i64] {
        &self.node.shapes[0]
    }

    fn ints(&self, key: &str) -> Result<Vec<i64>> {
        self.node
            .attr(self.id, key)?
            .iter()
            .map(|s| {
                s.trim().parse::<i64>().map_err(|_| self.err(format!("attribute `{key}`: `{s}` is not an integer")))
            })
            .collect()
    }

    fn string(&self, key: &str) -> Result<&str> {
        Ok(self.node.attr(self.id, key)?.first().map(String::as_str).unwrap_or(""))
    }

    fn flag(&self, key: &str, default: bool) -> Result<bool> {
        match self.node.attr_opt(key).and_then(|v| v.first()).map(|s| s.trim()) {
            None => Ok(default),
            Some("1" | "true" | "True") => Ok(true),
            Some("0" | "false" | "False") => Ok(false),
            Some(other) => Err(self.err(format!("attribute `{key}`: `{other}` is not a boolean"))),
        }
    }

    fn expect_out(&self, want: &[i64]) -> Result<()> {
        if self.out_shape() != want {
            return Err(self.err(format!(
                "shape mismatch: the graph says the output is {:?}, the operator computes {want:?}",
                self.out_shape()
            )));
        }
        Ok(())
    }

    fn out_dtype_ok(&self) -> Result<()> {
        match self.node.attr_opt("out_dtype").and_then(|v| v.first()).map(String::as_str) {
            None | Some("" | "float32") => Ok(()),
            Some(o) => Err(self.err(format!("out_dtype {o} is not supported (float32 only)"))),
        }
    }
}

fn two(c: &Ctx<'_>, key: &str, default: Option<i64>) -> Result<[i64; 2]> {
    let v = match (c.node.attr_opt(key), default) {
        (None, Some(d)) => vec![d],
        _ => c.ints(key)?,
    };
    match v.as_slice() {
        [a] => Ok([*a, *a]),
        [a, b] => Ok([*a, *b]),
        _ => Err(c.err(format!("attribute `{key}` must have 1 or 2 values, not {}", v.len()))),
    }
}

fn conv(c: &Ctx<'_>, bias: bool, relu: bool) -> Result<Op> {
    c.arity(if bias { 3 } else { 2 })?;
    for (key, want) in [("data_layout", "NCHW"), ("kernel_layout", "OIHW")] {
        let got = c.string(key)?;
        if got != want {
            return Err(c.err(format!("{key} {got} is not supported (only {want}, as in TVM's DNNL runtime)")));
        }
    }
    if let Some(o) = c.node.attr_opt("out_layout").and_then(|v| v.first()) {
        if !o.is_empty() && o != "NCHW" {
            return Err(c.err(format!("out_layout {o} is not supported")));
        }
    }
    c.out_dtype_ok()?;
    let (ds, ws) = (c.shape(0), c.shape(1));
    if ds.len() != 4 || ws.len() != 4 {
        return Err(c.err(format!("data {ds:?} and weight {ws:?} must both have 4 dimensions")));
    }
    let pad = match c.ints("padding")?.as_slice() {
        [p] => [*p; 4],
        [h, w] => [*h, *w, *h, *w],
        [t, l, b, r] => [*t, *l, *b, *r],
        other => return Err(c.err(format!("padding must have 1, 2 or 4 values, not {}", other.len()))),
    };
    let groups = match c.ints("groups")?.as_slice() {
        [g] => *g,
        _ => return Err(c.err("groups must be one integer")),
    };
    let spec = Conv {
        n: ds[0],
        ic: ds[1],
        ih: ds[2],
        iw: ds[3],
        oc: ws[0],
        kh: ws[2],
        kw: ws[3],
        groups,
        strides: two(c, "strides", None)?,
        dilation: two(c, "dilation", Some(1))?,
        pad,
        oh: 0,
        ow: 0,
        bias,
        relu,
    };
    if groups >= 1 && ws[1] * groups != ds[1] {
        return Err(c.err(format!(
            "shape mismatch: weight {ws:?} with groups={groups} needs {} input channels, data {ds:?} has {}",
            ws[1] * groups,
            ds[1]
        )));
    }
    let spec = spec.finish(&format!("dnnl_json: node {} ({})", c.id, c.node.name))?;
    if let Some(ch) = c.node.attr_opt("channels").and_then(|v| v.first()).filter(|s| !s.is_empty()) {
        if ch.parse::<i64>().ok() != Some(spec.oc) {
            return Err(c.err(format!("shape mismatch: channels={ch} but the weight has {} output channels", spec.oc)));
        }
    }
    if let Some(ks) = c.node.attr_opt("kernel_size").filter(|v| v.iter().all(|s| !s.is_empty())) {
        let ks: Vec<i64> = ks.iter().filter_map(|s| s.parse().ok()).collect();
        if ks != [spec.kh, spec.kw] {
            return Err(c.err(format!("shape mismatch: kernel_size={ks:?} but the weight is {}x{}", spec.kh, spec.kw)));
        }
    }
    if bias && elems(c.shape(2)) != Some(spec.oc) {
        return Err(c.err(format!("shape mismatch: the bias {:?} must have {} elements", c.shape(2), spec.oc)));
    }
    c.expect_out(&[spec.n, spec.oc, spec.oh, spec.ow])?;
    Ok(Op::Conv(spec))
}

fn dense(c: &Ctx<'_>) -> Result<Op> {
    c.arity(2)?;
    c.out_dtype_ok()?;
    let (ds, ws) = (c.shape(0), c.shape(1));
    if ds.is_empty() || ws.len() != 2 || ds[ds.len() - 1] != ws[1] {
        return Err(c.err(format!("shape mismatch: data {ds:?} and weight {ws:?} (want (..., K) and (N, K))")));
    }
    if let Some(u) = c.node.attr_opt("units").and_then(|v| v.first()).filter(|s| !s.is_empty()) {
        if u.parse::<i64>().ok() != Some(ws[0]) {
            return Err(c.err(format!("shape mismatch: units={u} but the weight has {} rows", ws[0])));
        }
    }
    let mut out = ds.to_vec();
    *out.last_mut().unwrap_or(&mut 0) = ws[0];
    c.expect_out(&out)?;
    let m = elems(&ds[..ds.len() - 1]).ok_or_else(|| c.err("data too large"))?;
    Ok(Op::Dense(Dense { m, k: ws[1], n: ws[0] }))
}

fn batch_norm(c: &Ctx<'_>) -> Result<Op> {
    c.arity(5)?;
    let ds = c.shape(0);
    if ds.len() < 2 {
        return Err(c.err(format!("data {ds:?} needs at least 2 dimensions")));
    }
    let axis = match c.node.attr_opt("axis") {
        None => 1,
        Some(_) => match c.ints("axis")?.as_slice() {
            [a] => *a,
            _ => return Err(c.err("axis must be one integer")),
        },
    };
    let axis = if axis < 0 { axis + ds.len() as i64 } else { axis };
    if axis != 1 {
        return Err(c.err(format!("axis {axis} is not supported (oneDNN normalizes axis 1)")));
    }
    let ch = ds[1];
    for (i, what) in [(1, "gamma"), (2, "beta"), (3, "moving_mean"), (4, "moving_var")] {
        if elems(c.shape(i)) != Some(ch) {
            return Err(c.err(format!("shape mismatch: {what} {:?} must have {ch} elements", c.shape(i))));
        }
    }
    let eps = c.node.attr(c.id, "epsilon")?.first().and_then(|s| s.trim().parse::<f64>().ok());
    let epsilon = eps
        .filter(|e| e.is_finite() && *e >= 0.0)
        .ok_or_else(|| c.err("epsilon must be a non-negative number"))? as f32;
    c.expect_out(ds)?;
    match c.node.shapes.len() {
        1 => {}
        3 => {
            for i in 1..3 {
                if elems(&c.node.shapes[i]) != Some(ch) {
                    return Err(
                        c.err(format!("shape mismatch: output {i} {:?} must have {ch} elements", c.node.shapes[i]))
                    );
                }
            }
        }
        n => return Err(c.err(format!("has {n} outputs (expected 1 or 3)"))),
    }
    Ok(Op::BatchNorm(BatchNorm { c: ch, epsilon, scale: c.flag("scale", true)?, center: c.flag("center", true)? }))
}

fn binary(c: &Ctx<'_>, alg: super::api::BinaryAlg) -> Result<Op> {
    c.arity(2)?;
    let (a, b) = (c.shape(0), c.shape(1));
    let rank = a.len().max(b.len()).max(1);
    let pad = |s: &[i64]| -> Vec<i64> {
        let mut v = vec![1; rank - s.len()];
        v.extend_from_slice(s);
        v
    };
    let (pa, pb) = (pad(a), pad(b));
    let mut out = Vec::with_capacity(rank);
    for (x, y) in pa.iter().zip(&pb) {
        out.push(match (x, y) {
            (x, y) if x == y => *x,
            (1, y) => *y,
            (x, 1) => *x,
            _ => return Err(c.err(format!("shape mismatch: {a:?} and {b:?} do not broadcast"))),
        });
    }
    if c.out_shape().is_empty() && out == [1] {
        out.clear();
    }
    c.expect_out(&out)?;
    let out = pad(&out);
    Ok(Op::Binary(Binary { alg, out, a: pa, b: pb }))
}

/// Checks every kernel of `g`; `ops[i]` is node `i`'s operator (`None` for inputs/constants).
pub fn analyze(g: &Graph) -> Result<Vec<Option<Op>>> {
    let f32 = crate::abi::DLDataType { code: 2, bits: 32, lanes: 1 };
    let mut ops = Vec::with_capacity(g.nodes.len());
    for (id, node) in g.nodes.iter().enumerate() {
        if node.kind != NodeKind::Kernel {
            ops.push(None);
            continue;
        }
        let c = Ctx { g, id, node };
        for (i, &e) in node.inputs.iter().enumerate() {
            if g.dtype(e) != f32 {
                return Err(c.err(format!(
                    "input {i} is {}; the DNNL runtime supports float32 only",
                    crate::value::dtype::format(g.dtype(e)).unwrap_or_default()
                )));
            }
        }
        for (i, (t, s)) in node.dtypes.iter().zip(&node.shapes).enumerate() {
            if *t != f32 {
                return Err(c.err(format!(
                    "output {i} is {}; the DNNL runtime supports float32 only",
                    crate::value::dtype::format(*t).unwrap_or_default()
                )));
            }
            if s.len() > super::sys::MAX_NDIMS || s.contains(&0) {
                return Err(
                    c.err(format!("output {i} {s:?}: empty tensors and more than 12 dimensions are not supported"))
                );
            }
        }
        if node.shapes.len() != 1 && node.name != "nn.batch_norm" {
            return Err(c.err(format!("has {} outputs (expected 1)", node.shapes.len())));
        }
        use super::api::BinaryAlg;
        let op = match node.name.as_str() {
            "nn.conv2d" => conv(&c, false, false)?,
            "dnnl.conv2d_relu" => conv(&c, false, true)?,
            "dnnl.conv2d_bias_relu" => conv(&c, true, true)?,
            "nn.dense" => dense(&c)?,
            "nn.batch_norm" => batch_norm(&c)?,
            "nn.relu" => {
                c.arity(1)?;
                c.expect_out(c.shape(0))?;
                Op::Relu
            }
            "add" => binary(&c, BinaryAlg::Add)?,
            "multiply" => binary(&c, BinaryAlg::Mul)?,
            other => {
                return Err(
                    c.err(format!("Unsupported op: {other} (the DNNL runtime supports {})", SUPPORTED.join(", ")))
                )
            }
        };
        ops.push(Some(op));
    }
    // Inputs and constants read by kernels are float32 too (checked above); heads may be any
    // entry, also float32.
    for (i, &h) in g.heads.iter().enumerate() {
        if g.dtype(h) != f32 {
            return Err(Error::value(format!("dnnl_json: output {i} is not float32")));
        }
    }
    Ok(ops)
}
