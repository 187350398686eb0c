//! The kernels that C-source BYOC libraries call (TVM v0.8 `src/runtime/contrib/dnnl/dnnl.cc`,
//! declared `extern "C"` in `dnnl_kernel.h`): `dnnl_conv2d`, `dnnl_fused_conv2d_relu`,
//! `dnnl_fused_conv2d_bias_relu`, `dnnl_dense`, `dnnl_relu`, `dnnl_bn`, `dnnl_binary_op`. The C
//! exports are in `classic_api::dnnl`; here each call becomes a one-operator JSON graph run by the same
//! engine as `dnnl_json` ([`super::plan`]), built once per distinct parameter set and cached, so
//! repeated calls only execute.
//!
//! Semantics are TVM's for the operators, with these differences from v0.8's kernels: grouped
//! convolutions with `O != G` are computed correctly (v0.8 describes their weights as
//! `{G, 1, C/G, Kh, Kw}`); `dnnl_bn` also writes `new_mean` / `new_variance` (the moving
//! statistics, unchanged, as `nn.batch_norm` returns them; v0.8 leaves them untouched). Its
//! epsilon is an `int` in v0.8's signature (the generated code passes the float literal, which
//! C++ truncates): that is kept.

use super::ops::{self, Conv};
use super::plan::{Instance, Plan};
use crate::abi::{DLDataType, DLDevice, DLTensor};
use crate::byoc::json::graph::Graph;
use crate::error::{Error, Result};
use parking_lot::Mutex;
use serde_json::json;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, OnceLock};

/// Input shapes and output shapes.
pub type Shapes = (Vec<Vec<i64>>, Vec<Vec<i64>>);

/// One kernel call's parameters (the cache key).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// A convolution: `[N, C, H, W, O, G, Ph0, Pw0, Ph1, Pw1, Kh, Kw, Sh, Sw]`, bias, ReLU.
    Conv([i64; 14], bool, bool),
    /// `[B, I, O]`.
    Dense([i64; 3]),
    /// A shape.
    Relu(Vec<i64>),
    /// `[N, C, H, W]` and epsilon.
    BatchNorm([i64; 4], i64),
    /// 0 = add, 1 = multiply; the shape of all three.
    Binary(i64, Vec<i64>),
}

fn attr(v: &[i64]) -> serde_json::Value {
    json!([v.iter().map(|x| x.to_string()).collect::<Vec<_>>()])
}

fn node(op: &str, name: &str, shape: &[i64], inputs: &[usize], attrs: serde_json::Value) -> serde_json::Value {
    let mut a = attrs;
    a["shape"] = json!([[shape]]);
    a["dtype"] = json!([["float32"]]);
    let mut n = json!({"op": op, "name": name, "attrs": a});
    if !inputs.is_empty() {
        n["inputs"] = json!(inputs.iter().map(|&i| [i, 0, 0]).collect::<Vec<_>>());
    }
    n
}

impl Kernel {
    fn conv(&self) -> Result<Option<Conv>> {
        let Kernel::Conv(p, bias, relu) = self else { return Ok(None) };
        let c = Conv {
            n: p[0],
            ic: p[1],
            ih: p[2],
            iw: p[3],
            oc: p[4],
            groups: p[5],
            pad: [p[6], p[7], p[8], p[9]],
            kh: p[10],
            kw: p[11],
            strides: [p[12], p[13]],
            dilation: [1, 1],
            oh: 0,
            ow: 0,
            bias: *bias,
            relu: *relu,
        };
        Ok(Some(c.finish("dnnl_conv2d")?))
    }

    /// The input shapes and the output shapes of the call.
    pub fn shapes(&self) -> Result<Shapes> {
        let positive = |v: &[i64]| -> Result<()> {
            if v.is_empty() || v.len() > super::sys::MAX_NDIMS || v.iter().any(|&d| d <= 0) {
                return Err(Error::value(format!("DNNL kernel: bad shape {v:?}")));
            }
            Ok(())
        };
        Ok(match self {
            Kernel::Conv(..) => {
                let c = self.conv()?.ok_or_else(|| Error::internal("not a convolution"))?;
                let mut ins = vec![vec![c.n, c.ic, c.ih, c.iw], vec![c.oc, c.ic / c.groups, c.kh, c.kw]];
                if c.bias {
                    ins.push(vec![c.oc]);
                }
                (ins, vec![vec![c.n, c.oc, c.oh, c.ow]])
            }
            Kernel::Dense([b, i, o]) => {
                positive(&[*b, *i, *o])?;
                (vec![vec![*b, *i], vec![*o, *i]], vec![vec![*b, *o]])
            }
            Kernel::Relu(s) => {
                positive(s)?;
                (vec![s.clone()], vec![s.clone()])
            }
            Kernel::BatchNorm(s, _) => {
                positive(s)?;
                let c = vec![s[1]];
                (vec![s.to_vec(), c.clone(), c.clone(), c.clone(), c], vec![s.to_vec()])
            }
            Kernel::Binary(alg, s) => {
                positive(s)?;
                if !(0..=1).contains(alg) {
                    return Err(Error::value(format!("Unsupported dnnl algorithm: {alg}")));
                }
                (vec![s.clone(), s.clone()], vec![s.clone()])
            }
        })
    }

    /// The one-operator graph of the call.
    fn graph(&self) -> Result<Graph> {
        let (ins, outs) = self.shapes()?;
        let mut nodes: Vec<serde_json::Value> =
            ins.iter().enumerate().map(|(i, s)| node("input", &format!("in{i}"), s, &[], json!({}))).collect();
        let inputs: Vec<usize> = (0..ins.len()).collect();
        let (name, attrs) = match self {
            Kernel::Conv(..) => {
                let c = self.conv()?.ok_or_else(|| Error::internal("not a convolution"))?;
                let name = match (c.bias, c.relu) {
                    (true, _) => "dnnl.conv2d_bias_relu",
                    (false, true) => "dnnl.conv2d_relu",
                    (false, false) => "nn.conv2d",
                };
                (
                    name,
                    json!({"strides": attr(&c.strides), "padding": attr(&c.pad), "groups": attr(&[c.groups]),
                           "data_layout": [["NCHW"]], "kernel_layout": [["OIHW"]]}),
                )
            }
            Kernel::Dense(_) => ("nn.dense", json!({})),
            Kernel::Relu(_) => ("nn.relu", json!({})),
            Kernel::BatchNorm(_, eps) => ("nn.batch_norm", json!({"epsilon": [[eps.to_string()]], "axis": [["1"]]})),
            Kernel::Binary(alg, _) => (if *alg == 0 { "add" } else { "multiply" }, json!({})),
        };
        nodes.push(node("kernel", name, &outs[0], &inputs, attrs));
        let n = nodes.len();
        let text = json!({
            "nodes": nodes,
            "arg_nodes": (0..ins.len()).collect::<Vec<_>>(),
            "heads": [[n - 1, 0, 0]],
            "node_row_ptr": (0..=n).collect::<Vec<_>>(),
        });
        Graph::parse(&text.to_string(), &[])
    }
}

type Cache = Mutex<HashMap<Kernel, Arc<Instance>>>;

fn instance(k: &Kernel) -> Result<Arc<Instance>> {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(p) = cache.lock().get(k) {
        return Ok(p.clone());
    }
    let d = super::api::dnnl()?;
    let g = k.graph()?;
    let ops = ops::analyze(&g)?;
    let p = Arc::new(Instance::new(Arc::new(Plan::build(d, &g, &ops)?), Vec::new())?);
    // Bounded: a program calls its kernels with a fixed set of shapes; a pathological caller
    // only costs rebuilding.
    let mut c = cache.lock();
    if c.len() >= 256 {
        c.clear();
    }
    Ok(c.entry(k.clone()).or_insert(p).clone())
}

fn tensor(data: *mut c_void, shape: &[i64]) -> DLTensor {
    DLTensor {
        data,
        device: DLDevice { device_type: 1, device_id: 0 },
        ndim: shape.len() as i32,
        dtype: DLDataType { code: 2, bits: 32, lanes: 1 },
        shape: shape.as_ptr().cast_mut(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    }
}

/// Runs kernel `k` on the caller's buffers (inputs then outputs, float32, sizes as
/// [`Kernel::shapes`] gives).
///
/// # Safety
/// Each pointer is NULL or holds its shape's float32 elements.
pub unsafe fn run(k: &Kernel, inputs: &[*mut f32], outputs: &[*mut f32]) -> Result<()> {
    let (ins, outs) = k.shapes()?;
    if inputs.len() != ins.len() || outputs.len() != outs.len() || inputs.iter().chain(outputs).any(|p| p.is_null()) {
        return Err(Error::value("DNNL kernel: a NULL buffer"));
    }
    let p = instance(k)?;
    let it: Vec<DLTensor> = inputs.iter().zip(&ins).map(|(&d, s)| tensor(d.cast(), s)).collect();
    let ot: Vec<DLTensor> = outputs.iter().zip(&outs).map(|(&d, s)| tensor(d.cast(), s)).collect();
    let ir: Vec<&DLTensor> = it.iter().collect();
    let or: Vec<&DLTensor> = ot.iter().collect();
    p.run(&ir, &or)
}
