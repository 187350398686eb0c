//! The BYOC fixture builder: JSON graphs in the format of TVM's `JSONSerializer`
//! (`codegen_json.h`: attributes as lists of lists of strings, `shape`/`dtype` per output,
//! `num_inputs`/`num_outputs` as strings, entries `[node, index, 0]`), `dnnl_json` payloads
//! (symbol, graph, const names), `metadata` payloads with NDArray records, and a library whose
//! blob holds them; written here independently of the runtime. Plus plain Rust reference
//! implementations of the DNNL operators with TVM's semantics.

use serde_json::{json, Value as Json};

/// A JSON graph under construction.
#[derive(Default, Clone)]
pub struct JsonGraph {
    nodes: Vec<Json>,
    outputs: Vec<usize>,
    arg_nodes: Vec<usize>,
    heads: Vec<(usize, usize)>,
}

/// A node output.
pub type Entry = (usize, usize);

/// `[["a", "b"]]`.
pub fn attr(v: &[&str]) -> Json {
    json!([v])
}

/// An integer list attribute.
pub fn ints(v: &[i64]) -> Json {
    json!([v.iter().map(|x| x.to_string()).collect::<Vec<_>>()])
}

impl JsonGraph {
    fn leaf(&mut self, op: &str, name: &str, shape: &[i64]) -> Entry {
        self.nodes.push(json!({"op": op, "name": name, "attrs": {"dtype": [["float32"]], "shape": [[shape]]}}));
        self.outputs.push(1);
        self.arg_nodes.push(self.nodes.len() - 1);
        (self.nodes.len() - 1, 0)
    }

    /// An input node.
    pub fn input(&mut self, name: &str, shape: &[i64]) -> Entry {
        self.leaf("input", name, shape)
    }

    /// A const node.
    pub fn constant(&mut self, name: &str, shape: &[i64]) -> Entry {
        self.leaf("const", name, shape)
    }

    /// A kernel node with attributes (`(key, value)` with values made by [`attr`] / [`ints`]).
    pub fn kernel(&mut self, op: &str, inputs: &[Entry], shapes: &[&[i64]], attrs: &[(&str, Json)]) -> usize {
        let mut a = serde_json::Map::new();
        for (k, v) in attrs {
            a.insert((*k).to_owned(), v.clone());
        }
        a.insert("num_inputs".into(), json!(inputs.len().to_string()));
        a.insert("num_outputs".into(), json!(shapes.len().to_string()));
        a.insert("shape".into(), json!([shapes]));
        a.insert("dtype".into(), json!([vec!["float32"; shapes.len()]]));
        let ins: Vec<Json> = inputs.iter().map(|&(n, i)| json!([n, i, 0])).collect();
        self.nodes.push(json!({"op": "kernel", "name": op, "inputs": ins, "attrs": a}));
        self.outputs.push(shapes.len());
        self.nodes.len() - 1
    }

    /// Marks an output.
    pub fn head(&mut self, e: Entry) -> &mut Self {
        self.heads.push(e);
        self
    }

    /// The JSON text (keys in the serializer's order).
    pub fn json(&self) -> String {
        let mut row = vec![0usize];
        for n in &self.outputs {
            row.push(row.last().unwrap() + n);
        }
        let heads: Vec<Json> = self.heads.iter().map(|&(n, i)| json!([n, i, 0])).collect();
        json!({"nodes": self.nodes, "arg_nodes": self.arg_nodes, "heads": heads, "node_row_ptr": row}).to_string()
    }

    /// The raw JSON value, for damaging.
    pub fn value(&self) -> Json {
        serde_json::from_str(&self.json()).unwrap()
    }
}

fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s);
}

fn put_strs(out: &mut Vec<u8>, v: &[&str]) {
    out.extend_from_slice(&(v.len() as u64).to_le_bytes());
    v.iter().for_each(|s| put_str(out, s.as_bytes()));
}

/// A JSON runtime payload: symbol, graph JSON, const names.
pub fn json_payload(symbol: &str, graph: &str, consts: &[&str]) -> Vec<u8> {
    let mut d = Vec::new();
    put_str(&mut d, symbol.as_bytes());
    put_str(&mut d, graph.as_bytes());
    put_strs(&mut d, consts);
    d
}

/// An NDArray record of float32 data on the CPU.
pub fn ndarray_record(shape: &[i64], data: &[f32]) -> Vec<u8> {
    let mut d = Vec::new();
    d.extend_from_slice(&0xDD5E_40F0_96B4_A13F_u64.to_le_bytes());
    d.extend_from_slice(&0u64.to_le_bytes());
    d.extend_from_slice(&1i32.to_le_bytes());
    d.extend_from_slice(&0i32.to_le_bytes());
    d.extend_from_slice(&(shape.len() as i32).to_le_bytes());
    d.extend_from_slice(&[2, 32, 1, 0]);
    shape.iter().for_each(|s| d.extend_from_slice(&s.to_le_bytes()));
    d.extend_from_slice(&((data.len() * 4) as i64).to_le_bytes());
    data.iter().for_each(|x| d.extend_from_slice(&x.to_le_bytes()));
    d
}

/// A constant of a metadata module.
pub struct Var<'a> {
    pub name: &'a str,
    pub shape: Vec<i64>,
    pub data: Vec<f32>,
}

/// A metadata payload: variables and, per symbol, the names of its constants.
pub fn metadata_payload(vars: &[Var<'_>], symbols: &[(&str, Vec<&str>)]) -> Vec<u8> {
    let mut d = Vec::new();
    put_strs(&mut d, &vars.iter().map(|v| v.name).collect::<Vec<_>>());
    d.extend_from_slice(&(vars.len() as u64).to_le_bytes());
    for v in vars {
        d.extend_from_slice(&ndarray_record(&v.shape, &v.data));
    }
    put_strs(&mut d, &symbols.iter().map(|s| s.0).collect::<Vec<_>>());
    d.extend_from_slice(&(symbols.len() as u64).to_le_bytes());
    for (_, names) in symbols {
        put_strs(&mut d, names);
    }
    d
}

/// The blob of a BYOC library whose root is the metadata module, importing one module per
/// JSON region and the library: `[metadata, (key, payload)..., _lib]`.
pub fn byoc_blob(meta_key: &str, metadata: &[u8], regions: &[(&str, Vec<u8>)]) -> super::Blob {
    let mut b = super::Blob::default().module(meta_key, metadata);
    for (key, payload) in regions {
        b = b.module(key, payload);
    }
    let n = regions.len() as u64 + 2;
    let mut row = vec![0, n - 1];
    row.extend(std::iter::repeat(n - 1).take(n as usize - 1));
    b.lib().tree(&row, &(1..n).collect::<Vec<_>>())
}

/// Deterministic test data in [-1, 1).
pub fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// The number of elements of a shape.
pub fn numel(shape: &[i64]) -> usize {
    shape.iter().product::<i64>() as usize
}

/// Whether `got` is within `rtol`/`atol` of `want`; panics with the worst element if not.
pub fn assert_close(got: &[f32], want: &[f32], rtol: f32, atol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= atol + rtol * w.abs(), "{what}: element {i}: got {g}, want {w}");
    }
}

// ---------------------------------------------------------------------------------------------
// Reference operators (TVM's semantics), in f64 accumulation.

/// Convolution parameters.
#[derive(Clone, Copy)]
pub struct ConvRef {
    pub strides: [usize; 2],
    pub dilation: [usize; 2],
    /// top, left, bottom, right
    pub pad: [usize; 4],
    pub groups: usize,
}

/// NCHW x OIHW convolution with optional bias (OC elements) and ReLU.
pub fn conv2d(
    x: &[f32],
    xs: [usize; 4],
    w: &[f32],
    ws: [usize; 4],
    bias: Option<&[f32]>,
    p: ConvRef,
    relu: bool,
) -> (Vec<f32>, [usize; 4]) {
    let [n, c, h, wd] = xs;
    let [oc, icg, kh, kw] = ws;
    assert_eq!(icg * p.groups, c);
    let oh = (h + p.pad[0] + p.pad[2] - ((kh - 1) * p.dilation[0] + 1)) / p.strides[0] + 1;
    let ow = (wd + p.pad[1] + p.pad[3] - ((kw - 1) * p.dilation[1] + 1)) / p.strides[1] + 1;
    let ocg = oc / p.groups;
    let mut out = vec![0f32; n * oc * oh * ow];
    for b in 0..n {
        for o in 0..oc {
            let g = o / ocg;
            for y in 0..oh {
                for xx in 0..ow {
                    let mut acc = bias.map_or(0.0, |bv| f64::from(bv[o]));
                    for ci in 0..icg {
                        let cin = g * icg + ci;
                        for ky in 0..kh {
                            let iy = (y * p.strides[0] + ky * p.dilation[0]) as isize - p.pad[0] as isize;
                            if iy < 0 || iy >= h as isize {
                                continue;
                            }
                            for kx in 0..kw {
                                let ix = (xx * p.strides[1] + kx * p.dilation[1]) as isize - p.pad[1] as isize;
                                if ix < 0 || ix >= wd as isize {
                                    continue;
                                }
                                let xv = x[((b * c + cin) * h + iy as usize) * wd + ix as usize];
                                let wv = w[((o * icg + ci) * kh + ky) * kw + kx];
                                acc += f64::from(xv) * f64::from(wv);
                            }
                        }
                    }
                    let v = acc as f32;
                    out[((b * oc + o) * oh + y) * ow + xx] = if relu { v.max(0.0) } else { v };
                }
            }
        }
    }
    (out, [n, oc, oh, ow])
}

/// `(M, K) x (N, K)^T`.
pub fn dense(x: &[f32], m: usize, k: usize, w: &[f32], n: usize) -> Vec<f32> {
    let mut out = vec![0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = (0..k).map(|t| f64::from(x[i * k + t]) * f64::from(w[j * k + t])).sum::<f64>() as f32;
        }
    }
    out
}

/// Batch normalization over axis 1 with moving statistics.
#[allow(clippy::too_many_arguments)]
pub fn batch_norm(
    x: &[f32],
    shape: &[usize],
    gamma: &[f32],
    beta: &[f32],
    mean: &[f32],
    var: &[f32],
    eps: f32,
    scale: bool,
    center: bool,
) -> Vec<f32> {
    let c = shape[1];
    let inner: usize = shape[2..].iter().product();
    x.iter()
        .enumerate()
        .map(|(i, &v)| {
            let ch = (i / inner) % c;
            let norm = (f64::from(v) - f64::from(mean[ch])) / (f64::from(var[ch]) + f64::from(eps)).sqrt();
            let s = if scale { f64::from(gamma[ch]) } else { 1.0 };
            let b = if center { f64::from(beta[ch]) } else { 0.0 };
            (norm * s + b) as f32
        })
        .collect()
}

/// NumPy-broadcast binary operation.
pub fn broadcast(
    a: &[f32],
    sa: &[usize],
    b: &[f32],
    sb: &[usize],
    f: impl Fn(f32, f32) -> f32,
) -> (Vec<f32>, Vec<usize>) {
    let r = sa.len().max(sb.len());
    let pad = |s: &[usize]| -> Vec<usize> { std::iter::repeat(1).take(r - s.len()).chain(s.iter().copied()).collect() };
    let (pa, pb) = (pad(sa), pad(sb));
    let out: Vec<usize> = pa.iter().zip(&pb).map(|(x, y)| *x.max(y)).collect();
    let n: usize = out.iter().product();
    let index = |s: &[usize], coords: &[usize]| -> usize {
        coords.iter().zip(s).fold(0, |acc, (&c, &d)| acc * d + if d == 1 { 0 } else { c })
    };
    let mut res = Vec::with_capacity(n);
    let mut coords = vec![0usize; r];
    for _ in 0..n {
        res.push(f(a[index(&pa, &coords)], b[index(&pb, &coords)]));
        for k in (0..r).rev() {
            coords[k] += 1;
            if coords[k] < out[k] {
                break;
            }
            coords[k] = 0;
        }
    }
    (res, out)
}
