//! BYOC through the C API: TVM's `cnn_dnnl.so` (GraphExecutorFactory > metadata > [dnnl_json,
//! dnnl_json, library]) against TVM's expected output, alone and from several threads; every
//! DNNL operator and attribute combination on graphs written by the fixture builder
//! (`common/byoc.rs`) against a plain Rust reference; damaged payloads; the `const_loader` key;
//! the JSON backends this runtime does not have; a process without oneDNN (child process);
//! the `dnnl_*` kernels of C-source BYOC libraries; the oneDNN constants against its headers.

mod common;

use common::byoc::*;
use common::*;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;

const F32: i32 = 2;
const CPU: i32 = 1;

/// Whether oneDNN can be opened here; without it the tests that need it skip (and fail under
/// `CI=true`, where the test script installs it).
fn have_dnnl() -> bool {
    match tvm_runtime::byoc::dnnl::api::dnnl() {
        Ok(d) => {
            println!("using {}", d.lib.describe());
            true
        }
        Err(e) => {
            assert!(std::env::var("CI").as_deref() != Ok("true"), "oneDNN missing under CI: {e}");
            println!("SKIP: {e}");
            false
        }
    }
}

fn array(shape: &[i64], data: &[f32]) -> DevArray {
    let a = DevArray::new(shape, F32, CPU);
    a.write(data.as_ptr().cast(), data.len() * 4);
    a
}

// ---------------------------------------------------------------------------------------------
// cnn_dnnl.so, TVM's own export

struct Cnn {
    lib: SendMod,
    input: (Vec<i64>, Vec<f32>),
    want: (Vec<i64>, Vec<f32>),
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn cnn() -> Option<Cnn> {
    let so = fixture("cnn_dnnl.so")?;
    let (is, ib) = read_npy_f32(&fixture("cnn_dnnl.input.data.npy")?);
    let (ws, wb) = read_npy_f32(&fixture("cnn.output.0.npy")?);
    let lib = load(&so).unwrap_or_else(|e| panic!("loading cnn_dnnl.so: {e}"));
    Some(Cnn { lib: SendMod(lib), input: (is, f32s(&ib)), want: (ws, f32s(&wb)) })
}

fn executor(factory: &Mod) -> Mod {
    let f = get_function(factory, "default", false).expect("default");
    match call(&f, &[Arg::Device(CPU, 0)]).expect("default(cpu)") {
        Ret::Module(h) => Mod(h),
        other => panic!("default returned {other:?}"),
    }
}

/// set_input("data"), run, get_output(0).
fn run_executor(ex: &Mod, input: &DevArray, out_shape: &[i64]) -> Vec<f32> {
    let out = DevArray::new(out_shape, F32, CPU);
    call(&get_function(ex, "set_input", false).unwrap(), &[Arg::Str("data"), Arg::Array(input.0.cast())]).unwrap();
    call(&get_function(ex, "run", false).unwrap(), &[]).expect("run");
    call(&get_function(ex, "get_output", false).unwrap(), &[Arg::Int(0), Arg::Array(out.0.cast())]).unwrap();
    out.f32s(numel(out_shape))
}

#[test]
fn cnn_dnnl_matches_tvm() {
    if !have_dnnl() {
        return;
    }
    let Some(c) = cnn() else { return };
    // The module tree of TVM's export.
    assert_eq!(type_key(&c.lib.0), "GraphExecutorFactory");
    let meta = import(&c.lib.0, 0);
    assert_eq!(type_key(&meta), "metadata");
    let keys: Vec<String> = (0..imports_size(&meta)).map(|i| type_key(&import(&meta, i))).collect();
    assert_eq!(keys, ["dnnl_json", "dnnl_json", "library"]);
    let ex = executor(&c.lib.0);
    let x = array(&c.input.0, &c.input.1);
    for _ in 0..3 {
        let got = run_executor(&ex, &x, &c.want.0);
        assert_close(&got, &c.want.1, 1e-4, 1e-4, "cnn_dnnl output");
    }
    // The regions answer the JSON runtime functions.
    let region = import(&meta, 0);
    let sym = match call(&get_function(&region, "get_symbol", false).unwrap(), &[]).unwrap() {
        Ret::Str(s) => s,
        other => panic!("get_symbol: {other:?}"),
    };
    assert_eq!(sym, "tvmgen_default_dnnl_main_0");
    let src = call_global("runtime.ModuleGetSource", &[Arg::Module(&region), Arg::Str("json")]).unwrap();
    assert!(matches!(src, Ret::Str(s) if s.contains("dnnl.conv2d_bias_relu")));
}

/// Four executors of one factory, each on its own thread, many runs each.
#[test]
fn cnn_dnnl_four_executors_on_four_threads() {
    if !have_dnnl() {
        return;
    }
    let Some(c) = cnn() else { return };
    let c = std::sync::Arc::new(c);
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let c = c.clone();
            std::thread::spawn(move || {
                let ex = executor(&c.lib.0);
                let x = array(&c.input.0, &c.input.1);
                for _ in 0..25 {
                    let got = run_executor(&ex, &x, &c.want.0);
                    assert_close(&got, &c.want.1, 1e-4, 1e-4, "cnn_dnnl output on a thread");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread");
    }
}

/// A module handle shared by threads (the C API is thread-safe).
struct SendMod(Mod);
// SAFETY: the handle is only used through the thread-safe C API.
unsafe impl Send for SendMod {}
// SAFETY: as above.
unsafe impl Sync for SendMod {}

// ---------------------------------------------------------------------------------------------
// Fixture-built regions

/// A library whose blob is `[metadata, dnnl_json regions..., _lib]` rooted at the metadata.
fn build(name: &str, meta_key: &str, vars: &[Var<'_>], regions: &[(&str, &JsonGraph, Vec<&str>)]) -> PathBuf {
    let symbols: Vec<(&str, Vec<&str>)> = regions.iter().map(|(s, _, c)| (*s, c.clone())).collect();
    let meta = metadata_payload(vars, &symbols);
    let payloads: Vec<(&str, Vec<u8>)> =
        regions.iter().map(|(s, g, c)| ("dnnl_json", json_payload(s, &g.json(), c))).collect();
    build_testlib(name, Some(&byoc_blob(meta_key, &meta, &payloads).bytes()))
}

/// Runs `symbol` of a loaded BYOC library on `inputs`, returning the outputs.
fn run_region(m: &Mod, symbol: &str, inputs: &[(&[i64], &[f32])], outputs: &[&[i64]]) -> Result<Vec<Vec<f32>>, String> {
    let f = try_get_function(m, symbol)?.ok_or_else(|| format!("{symbol} not found"))?;
    let ins: Vec<DevArray> = inputs.iter().map(|(s, d)| array(s, d)).collect();
    let outs: Vec<DevArray> = outputs.iter().map(|s| array(s, &vec![f32::NAN; numel(s)])).collect();
    let args: Vec<Arg<'_>> = ins.iter().chain(&outs).map(|a| Arg::Array(a.0.cast())).collect();
    call(&f, &args)?;
    Ok(outs.iter().zip(outputs).map(|(a, s)| a.f32s(numel(s))).collect())
}

/// `TVMModGetFunction(m, name, 1)`, with its error.
fn try_get_function(m: &Mod, name: &str) -> Result<Option<Func>, String> {
    let n = c(name);
    let mut out = std::ptr::null_mut();
    // SAFETY: a live module, a valid string and out-pointer.
    let rc = unsafe { tvm_runtime::classic_api::runtime_api::TVMModGetFunction(m.0, n.as_ptr(), 1, &mut out) };
    if rc != 0 {
        return Err(last_error());
    }
    Ok((!out.is_null()).then_some(Func(out)))
}

fn var<'a>(name: &'a str, shape: &[i64], seed: u64) -> Var<'a> {
    Var { name, shape: shape.to_vec(), data: data(numel(shape), seed) }
}

fn us(s: &[i64]) -> Vec<usize> {
    s.iter().map(|&d| d as usize).collect()
}

fn conv_attrs(
    strides: &[i64],
    padding: &[i64],
    dilation: &[i64],
    groups: i64,
) -> Vec<(&'static str, serde_json::Value)> {
    vec![
        ("strides", ints(strides)),
        ("padding", ints(padding)),
        ("dilation", ints(dilation)),
        ("groups", ints(&[groups])),
        ("channels", attr(&[""])),
        ("kernel_size", attr(&["", ""])),
        ("data_layout", attr(&["NCHW"])),
        ("kernel_layout", attr(&["OIHW"])),
        ("out_layout", attr(&[""])),
        ("out_dtype", attr(&[""])),
    ]
}

struct ConvCase {
    op: &'static str,
    x: [i64; 4],
    w: [i64; 4],
    strides: [i64; 2],
    padding: Vec<i64>,
    dilation: [i64; 2],
    groups: i64,
    /// Weights as a constant (from the metadata) or as a graph input.
    const_weight: bool,
    /// Bias shape (conv2d_bias_relu).
    bias: Option<Vec<i64>>,
}

fn pad4(p: &[i64]) -> [usize; 4] {
    match *p {
        [a] => [a as usize; 4],
        [h, w] => [h as usize, w as usize, h as usize, w as usize],
        [t, l, b, r] => [t as usize, l as usize, b as usize, r as usize],
        _ => unreachable!(),
    }
}

fn check_conv(case: &ConvCase, tag: &str) {
    let p = ConvRef {
        strides: [case.strides[0] as usize, case.strides[1] as usize],
        dilation: [case.dilation[0] as usize, case.dilation[1] as usize],
        pad: pad4(&case.padding),
        groups: case.groups as usize,
    };
    let xd = data(numel(&case.x), 1);
    let wd = data(numel(&case.w), 2);
    let bd = case.bias.as_ref().map(|b| data(numel(b), 3));
    let relu = case.op != "nn.conv2d";
    let (want, os) =
        conv2d(&xd, us(&case.x).try_into().unwrap(), &wd, us(&case.w).try_into().unwrap(), bd.as_deref(), p, relu);
    let os: Vec<i64> = os.iter().map(|&d| d as i64).collect();
    let mut g = JsonGraph::default();
    let x = g.input("x", &case.x);
    let w = if case.const_weight { g.constant("sym_const_0", &case.w) } else { g.input("w", &case.w) };
    let mut inputs = vec![x, w];
    if let Some(bs) = &case.bias {
        inputs.push(g.input("b", bs));
    }
    let k = g.kernel(case.op, &inputs, &[&os], &conv_attrs(&case.strides, &case.padding, &case.dilation, case.groups));
    g.head((k, 0));
    let consts = if case.const_weight { vec!["sym_const_0"] } else { vec![] };
    let vars = if case.const_weight {
        vec![Var { name: "sym_const_0", shape: case.w.to_vec(), data: wd.clone() }]
    } else {
        vec![]
    };
    let lib = load(&build(tag, "metadata", &vars, &[("sym", &g, consts)])).unwrap();
    let mut ins: Vec<(&[i64], &[f32])> = vec![(&case.x, &xd)];
    if !case.const_weight {
        ins.push((&case.w, &wd));
    }
    if let (Some(bs), Some(b)) = (&case.bias, &bd) {
        ins.push((bs, b));
    }
    for _ in 0..2 {
        let got = run_region(&lib, "sym", &ins, &[&os]).unwrap_or_else(|e| panic!("{tag}: {e}"));
        assert_close(&got[0], &want, 1e-4, 1e-4, tag);
    }
}

#[test]
fn convolutions() {
    if !have_dnnl() {
        return;
    }
    let base = ConvCase {
        op: "nn.conv2d",
        x: [2, 3, 9, 8],
        w: [8, 3, 3, 3],
        strides: [1, 1],
        padding: vec![1, 1, 1, 1],
        dilation: [1, 1],
        groups: 1,
        const_weight: true,
        bias: None,
    };
    check_conv(&base, "conv-batch2");
    check_conv(&ConvCase { const_weight: false, ..base.clone_case() }, "conv-weight-input");
    check_conv(&ConvCase { padding: vec![0, 1, 2, 1], strides: [2, 1], ..base.clone_case() }, "conv-asym-pad-strides");
    check_conv(&ConvCase { padding: vec![2, 1], ..base.clone_case() }, "conv-pad-2-values");
    check_conv(&ConvCase { padding: vec![1], dilation: [2, 1], ..base.clone_case() }, "conv-dilation");
    check_conv(
        &ConvCase { x: [2, 4, 7, 7], w: [6, 2, 3, 3], groups: 2, padding: vec![1, 0, 0, 1], ..base.clone_case() },
        "conv-groups-2",
    );
    check_conv(
        &ConvCase { x: [1, 8, 10, 10], w: [8, 1, 3, 3], groups: 8, strides: [2, 2], ..base.clone_case() },
        "conv-depthwise",
    );
    check_conv(
        &ConvCase { x: [1, 4, 6, 6], w: [8, 1, 3, 3], groups: 4, const_weight: false, ..base.clone_case() },
        "conv-groups-multiplier-weight-input",
    );
    check_conv(&ConvCase { op: "dnnl.conv2d_relu", ..base.clone_case() }, "conv-relu");
    check_conv(
        &ConvCase { op: "dnnl.conv2d_bias_relu", bias: Some(vec![1, 8, 1, 1]), ..base.clone_case() },
        "conv-bias-relu",
    );
    check_conv(
        &ConvCase {
            op: "dnnl.conv2d_bias_relu",
            bias: Some(vec![9]),
            groups: 3,
            x: [3, 6, 5, 5],
            w: [9, 2, 2, 2],
            padding: vec![0, 1, 1, 0],
            ..base.clone_case()
        },
        "conv-bias-relu-groups-batch3",
    );
}

impl ConvCase {
    fn clone_case(&self) -> ConvCase {
        ConvCase { padding: self.padding.clone(), bias: self.bias.clone(), ..*self }
    }
}

#[test]
fn dense_relu_batch_norm_binary() {
    if !have_dnnl() {
        return;
    }
    // Dense, 2-D batch 3 and 3-D, weights constant.
    for (xs, tag) in [(vec![3i64, 5], "dense-2d"), (vec![2, 3, 5], "dense-3d")] {
        let ws = [4i64, 5];
        let mut g = JsonGraph::default();
        let x = g.input("x", &xs);
        let w = g.constant("d_const_0", &ws);
        let mut os = xs.clone();
        *os.last_mut().unwrap() = 4;
        let k = g.kernel("nn.dense", &[x, w], &[&os], &[("units", attr(&[""])), ("out_dtype", attr(&[""]))]);
        g.head((k, 0));
        let (xd, wd) = (data(numel(&xs), 4), data(20, 5));
        let lib = load(&build(
            tag,
            "metadata",
            &[Var { name: "d_const_0", shape: ws.to_vec(), data: wd.clone() }],
            &[("d", &g, vec!["d_const_0"])],
        ))
        .unwrap();
        let got = run_region(&lib, "d", &[(&xs, &xd)], &[&os]).unwrap();
        let m = numel(&xs) / 5;
        assert_close(&got[0], &dense(&xd, m, 5, &wd, 4), 1e-5, 1e-5, tag);
    }
    // ReLU on 2-D and 4-D.
    for s in [vec![3i64, 7], vec![2, 3, 4, 5]] {
        let mut g = JsonGraph::default();
        let x = g.input("x", &s);
        let k = g.kernel("nn.relu", &[x], &[&s], &[]);
        g.head((k, 0));
        let lib = load(&build("relu", "metadata", &[], &[("r", &g, vec![])])).unwrap();
        let xd = data(numel(&s), 6);
        let got = run_region(&lib, "r", &[(&s, &xd)], &[&s]).unwrap();
        let want: Vec<f32> = xd.iter().map(|v| v.max(0.0)).collect();
        assert_eq!(got[0], want);
    }
    // Batch norm with its three outputs, and with center / scale off.
    for (center, scale) in [(true, true), (false, true), (true, false)] {
        let s = [2i64, 3, 4, 4];
        let mut g = JsonGraph::default();
        let x = g.input("x", &s);
        let params: Vec<_> = ["gamma", "beta", "mean", "var"].iter().map(|n| g.input(n, &[3])).collect();
        let flag = |b: bool| attr(&[if b { "1" } else { "0" }]);
        let k = g.kernel(
            "nn.batch_norm",
            &[x, params[0], params[1], params[2], params[3]],
            &[&s, &[3], &[3]],
            &[
                ("axis", ints(&[1])),
                ("epsilon", attr(&["1.0000000000000001e-05"])),
                ("center", flag(center)),
                ("scale", flag(scale)),
            ],
        );
        g.head((k, 0)).head((k, 2));
        let lib = load(&build("bn", "metadata", &[], &[("bn", &g, vec![])])).unwrap();
        let xd = data(96, 7);
        let (gm, bt, mn) = (data(3, 8), data(3, 9), data(3, 10));
        let vr: Vec<f32> = data(3, 11).iter().map(|v| v.abs() + 0.5).collect();
        let got = run_region(&lib, "bn", &[(&s, &xd), (&[3], &gm), (&[3], &bt), (&[3], &mn), (&[3], &vr)], &[&s, &[3]])
            .unwrap();
        let want = batch_norm(&xd, &us(&s), &gm, &bt, &mn, &vr, 1e-5, scale, center);
        assert_close(&got[0], &want, 1e-4, 1e-4, "batch_norm");
        assert_eq!(got[1], vr, "batch_norm output 2 is the moving variance");
    }
    // add / multiply: same shapes, the second or the first broadcast, both broadcast.
    let cases: [(&str, Vec<i64>, Vec<i64>); 5] = [
        ("add", vec![2, 3, 4], vec![2, 3, 4]),
        ("multiply", vec![2, 3, 4], vec![2, 3, 4]),
        ("add", vec![2, 3, 4, 4], vec![1, 3, 1, 1]),
        ("multiply", vec![3, 1, 1], vec![2, 3, 4, 5]),
        ("add", vec![3, 1], vec![1, 4]),
    ];
    for (op, sa, sb) in cases {
        let (ad, bd) = (data(numel(&sa), 12), data(numel(&sb), 13));
        let f = |x: f32, y: f32| if op == "add" { x + y } else { x * y };
        let (want, os) = broadcast(&ad, &us(&sa), &bd, &us(&sb), f);
        let os: Vec<i64> = os.iter().map(|&d| d as i64).collect();
        let mut g = JsonGraph::default();
        let a = g.input("a", &sa);
        let b = g.constant("bin_const_0", &sb);
        let k = g.kernel(op, &[a, b], &[&os], &[]);
        g.head((k, 0));
        let lib = load(&build(
            "binary",
            "metadata",
            &[Var { name: "bin_const_0", shape: sb.clone(), data: bd.clone() }],
            &[("bin", &g, vec!["bin_const_0"])],
        ))
        .unwrap();
        let got = run_region(&lib, "bin", &[(&sa, &ad)], &[&os]).unwrap();
        assert_close(&got[0], &want, 1e-6, 1e-6, &format!("{op} {sa:?} {sb:?}"));
    }
}

/// A chain where oneDNN picks blocked layouts between operators: conv -> batch_norm -> relu ->
/// conv -> add(skip) with an intermediate also returned, an input returned as is, and the same
/// entry returned twice; two regions sharing one metadata module; the const_loader key.
#[test]
fn chains_and_outputs() {
    if !have_dnnl() {
        return;
    }
    let xs = [2i64, 16, 8, 8];
    let ws = [16i64, 16, 3, 3];
    let mut g = JsonGraph::default();
    let x = g.input("x", &xs);
    let w1 = g.constant("c_const_0", &ws);
    let c1 = g.kernel("nn.conv2d", &[x, w1], &[&xs], &conv_attrs(&[1, 1], &[1, 1, 1, 1], &[1, 1], 1));
    let bn: Vec<_> = (1..5).map(|i| g.constant(&format!("c_const_{i}"), &[16])).collect();
    let b1 = g.kernel(
        "nn.batch_norm",
        &[(c1, 0), bn[0], bn[1], bn[2], bn[3]],
        &[&xs, &[16], &[16]],
        &[("axis", ints(&[1])), ("epsilon", attr(&["0.001"])), ("center", attr(&["1"])), ("scale", attr(&["1"]))],
    );
    let r1 = g.kernel("nn.relu", &[(b1, 0)], &[&xs], &[]);
    let w2 = g.constant("c_const_5", &ws);
    let c2 = g.kernel("dnnl.conv2d_relu", &[(r1, 0), w2], &[&xs], &conv_attrs(&[1, 1], &[1, 1, 1, 1], &[1, 1], 1));
    let s = g.kernel("add", &[(c2, 0), (c1, 0)], &[&xs], &[]);
    g.head((s, 0)).head((r1, 0)).head(x).head((s, 0));
    let names = ["c_const_0", "c_const_1", "c_const_2", "c_const_3", "c_const_4", "c_const_5"];
    let mut vars: Vec<Var<'_>> = vec![var("c_const_0", &ws, 20)];
    for (i, n) in names[1..5].iter().enumerate() {
        let mut v = var(n, &[16], 21 + i as u64);
        if i == 3 {
            v.data.iter_mut().for_each(|x| *x = x.abs() + 0.5);
        }
        vars.push(v);
    }
    vars.push(var("c_const_5", &ws, 30));
    // A second region in the same library: a dense with its own constant.
    let mut g2 = JsonGraph::default();
    let dx = g2.input("x", &[2, 6]);
    let dw = g2.constant("e_const_0", &[3, 6]);
    let dk = g2.kernel("nn.dense", &[dx, dw], &[&[2, 3]], &[]);
    g2.head((dk, 0));
    vars.push(var("e_const_0", &[3, 6], 40));
    let xd = data(numel(&xs), 41);
    // The reference.
    let p = ConvRef { strides: [1, 1], dilation: [1, 1], pad: [1; 4], groups: 1 };
    let xs_u: [usize; 4] = us(&xs).try_into().unwrap();
    let (y1, _) = conv2d(&xd, xs_u, &vars[0].data, [16, 16, 3, 3], None, p, false);
    let y2 = batch_norm(&y1, &xs_u, &vars[1].data, &vars[2].data, &vars[3].data, &vars[4].data, 0.001, true, true);
    let y3: Vec<f32> = y2.iter().map(|v| v.max(0.0)).collect();
    let (y4, _) = conv2d(&y3, xs_u, &vars[5].data, [16, 16, 3, 3], None, p, true);
    let y5: Vec<f32> = y4.iter().zip(&y1).map(|(a, b)| a + b).collect();
    for key in ["metadata", "const_loader"] {
        let lib = load(&build("chain", key, &vars, &[("chain", &g, names.to_vec()), ("dn", &g2, vec!["e_const_0"])]))
            .unwrap();
        assert_eq!(type_key(&lib), key);
        let got = run_region(&lib, "chain", &[(&xs, &xd)], &[&xs, &xs, &xs, &xs]).unwrap();
        assert_close(&got[0], &y5, 1e-3, 1e-3, "chain output");
        assert_close(&got[1], &y3, 1e-3, 1e-3, "chain intermediate");
        assert_eq!(got[2], xd, "an input returned as is");
        assert_eq!(got[3], got[0], "the same entry twice");
        let dxd = data(12, 42);
        let got = run_region(&lib, "dn", &[(&[2, 6], &dxd)], &[&[2, 3]]).unwrap();
        assert_close(&got[0], &dense(&dxd, 2, 6, &vars[6].data, 3), 1e-5, 1e-5, "second region");
    }
}

/// Four threads calling one region's function at once, each with its own data.
#[test]
fn one_function_from_four_threads() {
    if !have_dnnl() {
        return;
    }
    let (xs, ws) = ([1i64, 8, 12, 12], [8i64, 8, 3, 3]);
    let mut g = JsonGraph::default();
    let x = g.input("x", &xs);
    let w = g.constant("t_const_0", &ws);
    let k = g.kernel("dnnl.conv2d_relu", &[x, w], &[&xs], &conv_attrs(&[1, 1], &[1, 1, 1, 1], &[1, 1], 1));
    let r = g.kernel("nn.relu", &[(k, 0)], &[&xs], &[]);
    g.head((r, 0));
    let wv = var("t_const_0", &ws, 50);
    let wd = wv.data.clone();
    let lib = std::sync::Arc::new(SendMod(
        load(&build("threads", "metadata", &[wv], &[("t", &g, vec!["t_const_0"])])).unwrap(),
    ));
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let lib = lib.clone();
            let wd = wd.clone();
            std::thread::spawn(move || {
                let f = get_function(&lib.0, "t", true).unwrap();
                let p = ConvRef { strides: [1, 1], dilation: [1, 1], pad: [1; 4], groups: 1 };
                for i in 0..20 {
                    let xd = data(numel(&xs), 100 * t + i);
                    let (want, _) = conv2d(&xd, [1, 8, 12, 12], &wd, [8, 8, 3, 3], None, p, true);
                    let (xa, ya) = (array(&xs, &xd), DevArray::new(&xs, F32, CPU));
                    call(&f, &[Arg::Array(xa.0.cast()), Arg::Array(ya.0.cast())]).unwrap();
                    assert_close(&ya.f32s(want.len()), &want, 1e-4, 1e-4, "threaded call");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread");
    }
}

// ---------------------------------------------------------------------------------------------
// Damaged payloads and missing backends

fn simple_graph() -> JsonGraph {
    let mut g = JsonGraph::default();
    let x = g.input("x", &[1, 4]);
    let w = g.constant("s_const_0", &[3, 4]);
    let k = g.kernel("nn.dense", &[x, w], &[&[1, 3]], &[]);
    g.head((k, 0));
    g
}

fn load_err(tag: &str, meta: &[u8], regions: &[(&str, Vec<u8>)]) -> String {
    let lib = build_testlib(tag, Some(&byoc_blob("metadata", meta, regions).bytes()));
    match load(&lib) {
        Ok(_) => panic!("{tag}: loaded"),
        Err(e) => e,
    }
}

#[test]
fn damaged_payloads() {
    if !have_dnnl() {
        return;
    }
    let g = simple_graph();
    let vars = [var("s_const_0", &[3, 4], 60)];
    let meta = metadata_payload(&vars, &[("s", vec!["s_const_0"])]);
    let good = json_payload("s", &g.json(), &["s_const_0"]);
    assert!(load(&build_testlib("good", Some(&byoc_blob("metadata", &meta, &[("dnnl_json", good.clone())]).bytes())))
        .is_ok());
    let text = g.json();
    // Truncated JSON.
    let e = load_err("trunc", &meta, &[("dnnl_json", json_payload("s", &text[..text.len() / 2], &["s_const_0"]))]);
    assert!(e.contains("not valid JSON"), "{e}");
    // A payload whose const-name list runs past the end of the blob.
    let mut cut = json_payload("s", &text, &[]);
    cut.truncate(cut.len() - 8);
    cut.extend_from_slice(&1000u64.to_le_bytes());
    let e = load_err("cut", &meta, &[("dnnl_json", cut)]);
    assert!(e.contains("Loading the const name list failed"), "{e}");
    // A const name the metadata module does not hold.
    let bad_meta = metadata_payload(&vars, &[("s", vec!["s_const_0", "nope"])]);
    let e = load_err("missing-var", &bad_meta, &[("dnnl_json", good.clone())]);
    assert!(e.contains("Found not recorded constant variable: nope"), "{e}");
    // Wrong arity.
    let mut v = g.value();
    v["nodes"][2]["inputs"] = json!([[0, 0, 0]]);
    v["nodes"][2]["attrs"]["num_inputs"] = json!("1");
    let e = load_err("arity", &meta, &[("dnnl_json", json_payload("s", &v.to_string(), &["s_const_0"]))]);
    assert!(e.contains("expects 2 inputs, got 1"), "{e}");
    // An operator the DNNL runtime does not have.
    let mut v = g.value();
    v["nodes"][2]["name"] = json!("nn.softmax");
    let e = load_err("op", &meta, &[("dnnl_json", json_payload("s", &v.to_string(), &["s_const_0"]))]);
    assert!(e.contains("Unsupported op: nn.softmax"), "{e}");
    // The declared output shape disagrees with the operator's.
    let mut v = g.value();
    v["nodes"][2]["attrs"]["shape"] = json!([[[1, 5]]]);
    let e = load_err("shape", &meta, &[("dnnl_json", json_payload("s", &v.to_string(), &["s_const_0"]))]);
    assert!(e.contains("shape mismatch"), "{e}");
    // Non-float32.
    let mut v = g.value();
    v["nodes"][0]["attrs"]["dtype"] = json!([["int8"]]);
    let e = load_err("dtype", &meta, &[("dnnl_json", json_payload("s", &v.to_string(), &["s_const_0"]))]);
    assert!(e.contains("float32 only"), "{e}");
    // A constant array whose shape differs from the graph's.
    let wrong = metadata_payload(&[var("s_const_0", &[4, 3], 61)], &[("s", vec!["s_const_0"])]);
    let lib = load(&build_testlib(
        "const-shape",
        Some(&byoc_blob("metadata", &wrong, &[("dnnl_json", good.clone())]).bytes()),
    ))
    .unwrap();
    let e = run_region(&lib, "s", &[(&[1, 4], &[0.0; 4])], &[&[1, 3]]).unwrap_err();
    assert!(e.contains("constant s_const_0 is [4, 3]") && e.contains("__init_s failed"), "{e}");
    // Calls with the wrong tensors.
    let lib =
        load(&build_testlib("calls", Some(&byoc_blob("metadata", &meta, &[("dnnl_json", good.clone())]).bytes())))
            .unwrap();
    let e = run_region(&lib, "s", &[(&[1, 5], &[0.0; 5])], &[&[1, 3]]).unwrap_err();
    assert!(e.contains("argument 0 (input 0): got [1, 5]"), "{e}");
    let e = run_region(&lib, "s", &[], &[&[1, 3]]).unwrap_err();
    assert!(e.contains("1 given, 2 required"), "{e}");
    let f = get_function(&lib, "s", true).unwrap();
    let e = call(&f, &[Arg::Int(1), Arg::Int(2)]).unwrap_err();
    assert!(e.contains("Expect NDArray or DLTensor"), "{e}");
    // The region's own module, before initialisation (looked up directly, not through the
    // metadata module).
    let region = import(&lib, 0);
    let fresh =
        load(&build_testlib("fresh", Some(&byoc_blob("metadata", &meta, &[("dnnl_json", good)]).bytes()))).unwrap();
    let fresh_region = import(&fresh, 0);
    let f = get_function(&fresh_region, "s", false).unwrap();
    let (xa, ya) = (array(&[1, 4], &[0.0; 4]), DevArray::new(&[1, 3], F32, CPU));
    let e = call(&f, &[Arg::Array(xa.0.cast()), Arg::Array(ya.0.cast())]).unwrap_err();
    assert!(e.contains("The module has not been initialized"), "{e}");
    let consts = call(&get_function(&region, "get_const_vars", false).unwrap(), &[]).unwrap();
    assert!(matches!(consts, Ret::Other(8, _)), "{consts:?}");
}

#[test]
fn json_backends_this_runtime_does_not_have() {
    let payload = json_payload("tvmgen_default_tensorrt_main_0", &simple_graph().json(), &["s_const_0"]);
    let meta = metadata_payload(&[var("s_const_0", &[3, 4], 1)], &[]);
    let e = load_err("trt", &meta, &[("tensorrt", payload.clone())]);
    assert!(e.contains("tensorrt") && e.contains("TensorRT") && e.contains("tvmgen_default_tensorrt_main_0"), "{e}");
    let e = load_err("acl", &meta, &[("arm_compute_lib", payload)]);
    assert!(e.contains("Arm Compute Library") && e.contains("dnnl_json"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// Without oneDNN (a child process with TVM_DNNL_LIBRARY naming a missing library)

#[test]
fn without_onednn_everything_else_works() {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args(["--exact", "child_without_onednn", "--nocapture", "--test-threads=1"])
        .env("TVMRT_BYOC_CHILD", "1")
        .env("TVM_DNNL_LIBRARY", "/nonexistent/libdnnl-for-test.so.2")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("child checks passed"),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn child_without_onednn() {
    if std::env::var_os("TVMRT_BYOC_CHILD").is_none() {
        return;
    }
    let g = simple_graph();
    let meta = metadata_payload(&[var("s_const_0", &[3, 4], 1)], &[("s", vec!["s_const_0"])]);
    let e = load_err("no-dnnl", &meta, &[("dnnl_json", json_payload("s", &g.json(), &["s_const_0"]))]);
    assert!(e.contains("/nonexistent/libdnnl-for-test.so.2") && e.contains("TVM_DNNL_LIBRARY"), "{e}");
    // A C-source kernel reports the same through the last error and writes nothing.
    let mut out = [7f32; 4];
    let x = [1f32; 4];
    let v = StdVec::new(&[4]);
    // SAFETY: buffers of 4 floats and a vector as C++ passes it.
    unsafe { tvm_runtime::classic_api::dnnl::dnnl_relu(x.as_ptr().cast_mut(), out.as_mut_ptr(), &v.raw) };
    assert_eq!(out, [7.0; 4]);
    assert!(last_error().contains("cannot open oneDNN"), "{}", last_error());
    // Everything else still works: a plain library, and the metadata module itself.
    let plain = build_testlib("no-dnnl-plain", None);
    assert!(load(&plain).is_ok());
    if let Some(cnn) = fixture("cnn.so") {
        let lib = load(&cnn).unwrap();
        let (is, ib) = read_npy_f32(&fixture("cnn.input.data.npy").unwrap());
        let (ws, wb) = read_npy_f32(&fixture("cnn.output.0.npy").unwrap());
        let got = run_executor(&executor(&lib), &array(&is, &f32s(&ib)), &ws);
        assert_close(&got, &f32s(&wb), 1e-5, 1e-5, "cnn.so without oneDNN");
    }
    println!("child checks passed");
}

// ---------------------------------------------------------------------------------------------
// The dnnl_* kernels of C-source BYOC libraries, called as C++ code calls them

/// A `std::vector<int64_t>` as passed by value (a pointer to `{begin, end, end_of_storage}`).
struct StdVec {
    _data: Vec<i64>,
    raw: tvm_runtime::classic_api::dnnl::StdVectorI64,
}

impl StdVec {
    fn new(v: &[i64]) -> StdVec {
        let data = v.to_vec();
        let begin = data.as_ptr();
        // SAFETY: one past the end of the vector's elements.
        let end = unsafe { begin.add(data.len()) };
        StdVec { raw: tvm_runtime::classic_api::dnnl::StdVectorI64::from_raw_parts(begin, end, end), _data: data }
    }
}

#[test]
fn c_source_kernels() {
    if !have_dnnl() {
        return;
    }
    use tvm_runtime::classic_api::dnnl as k;
    let (xs, ws) = ([2usize, 4, 7, 6], [6usize, 2, 3, 2]);
    let x = data(xs.iter().product(), 70);
    let w = data(ws.iter().product(), 71);
    let b = data(6, 72);
    let p = ConvRef { strides: [2, 1], dilation: [1, 1], pad: [1, 0, 0, 1], groups: 2 };
    for (fused, bias) in [(0, false), (1, false), (2, true)] {
        let (want, os) = conv2d(&x, xs, &w, ws, bias.then_some(&b[..]), p, fused > 0);
        let mut out = vec![f32::NAN; os.iter().product()];
        let (xp, wp, bp, op) = (x.as_ptr().cast_mut(), w.as_ptr().cast_mut(), b.as_ptr().cast_mut(), out.as_mut_ptr());
        // SAFETY: buffers of the sizes the parameters give.
        unsafe {
            match fused {
                0 => k::dnnl_conv2d(xp, wp, op, 2, 4, 7, 6, 6, 2, 1, 0, 0, 1, 3, 2, 2, 1),
                1 => k::dnnl_fused_conv2d_relu(xp, wp, op, 2, 4, 7, 6, 6, 2, 1, 0, 0, 1, 3, 2, 2, 1),
                _ => k::dnnl_fused_conv2d_bias_relu(xp, wp, bp, op, 2, 4, 7, 6, 6, 2, 1, 0, 0, 1, 3, 2, 2, 1),
            }
        }
        assert_close(&out, &want, 1e-4, 1e-4, "C-source conv");
    }
    let mut out = vec![0f32; 3 * 6];
    let xd = data(3 * 5, 73);
    let wd = data(6 * 5, 74);
    // SAFETY: (3, 5) x (6, 5)^T into (3, 6).
    unsafe { k::dnnl_dense(xd.as_ptr().cast_mut(), wd.as_ptr().cast_mut(), out.as_mut_ptr(), 3, 5, 6) };
    assert_close(&out, &dense(&xd, 3, 5, &wd, 6), 1e-5, 1e-5, "C-source dense");
    let shape = StdVec::new(&[2, 3, 5]);
    let a = data(30, 75);
    let c = data(30, 76);
    let mut out = vec![0f32; 30];
    // SAFETY: 30 floats each and a vector as C++ passes it.
    unsafe { k::dnnl_relu(a.as_ptr().cast_mut(), out.as_mut_ptr(), &shape.raw) };
    assert_eq!(out, a.iter().map(|v| v.max(0.0)).collect::<Vec<_>>());
    for (algo, f) in [(0, (|x, y| x + y) as fn(f32, f32) -> f32), (1, |x, y| x * y)] {
        // SAFETY: as above.
        unsafe { k::dnnl_binary_op(a.as_ptr().cast_mut(), c.as_ptr().cast_mut(), out.as_mut_ptr(), algo, &shape.raw) };
        assert_eq!(out, a.iter().zip(&c).map(|(x, y)| f(*x, *y)).collect::<Vec<_>>());
    }
    // Algorithm 7 does not exist: an error, nothing written.
    out.fill(9.0);
    // SAFETY: as above.
    unsafe { k::dnnl_binary_op(a.as_ptr().cast_mut(), c.as_ptr().cast_mut(), out.as_mut_ptr(), 7, &shape.raw) };
    assert!(out.iter().all(|&v| v == 9.0) && last_error().contains("Unsupported dnnl algorithm: 7"));
    let s = [2usize, 3, 2, 2];
    let xd = data(24, 77);
    let (g, bt, m) = (data(3, 78), data(3, 79), data(3, 80));
    let v: Vec<f32> = data(3, 81).iter().map(|x| x.abs() + 1.0).collect();
    let (mut out, mut nm, mut nv) = (vec![0f32; 24], vec![0f32; 3], vec![0f32; 3]);
    // SAFETY: NCHW data of 24 floats, 3 per channel statistic; epsilon 1 (an int in v0.8).
    unsafe {
        k::dnnl_bn(
            xd.as_ptr().cast_mut(),
            g.as_ptr().cast_mut(),
            bt.as_ptr().cast_mut(),
            m.as_ptr().cast_mut(),
            v.as_ptr().cast_mut(),
            out.as_mut_ptr(),
            nm.as_mut_ptr(),
            nv.as_mut_ptr(),
            2,
            3,
            2,
            2,
            1,
        )
    };
    assert_close(&out, &batch_norm(&xd, &s, &g, &bt, &m, &v, 1.0, true, true), 1e-5, 1e-5, "C-source bn");
    assert_eq!((nm, nv), (m, v));
}

// ---------------------------------------------------------------------------------------------
// The hand-written oneDNN bindings against the installed headers

#[test]
fn onednn_constants_match_the_headers() {
    let header = Path::new("/usr/include/oneapi/dnnl/dnnl.h");
    if !header.exists() {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "oneDNN headers missing under CI");
        println!("SKIP: {} not found", header.display());
        return;
    }
    use tvm_runtime::byoc::dnnl::sys;
    let src = r#"#include <stdio.h>
#include <oneapi/dnnl/dnnl.h>
#define P(x) printf("%s %ld\n", #x, (long)(x));
int main(void) {
  P(DNNL_VERSION_MAJOR) P(sizeof(dnnl_memory_desc_t)) P(sizeof(dnnl_convolution_desc_t))
  P(sizeof(dnnl_inner_product_desc_t)) P(sizeof(dnnl_batch_normalization_desc_t)) P(sizeof(dnnl_eltwise_desc_t))
  P(sizeof(dnnl_binary_desc_t)) P(sizeof(dnnl_exec_arg_t)) P(DNNL_MAX_NDIMS) P(dnnl_success) P(dnnl_unimplemented)
  P(dnnl_f32) P(dnnl_format_tag_any) P(dnnl_cpu) P(dnnl_stream_default_flags) P(dnnl_forward_inference)
  P(dnnl_convolution_direct) P(dnnl_binary_add) P(dnnl_binary_mul) P(dnnl_use_global_stats) P(dnnl_scratchpad_mode_user)
  P(dnnl_query_src_md) P(dnnl_query_weights_md) P(dnnl_query_dst_md) P(dnnl_query_scratchpad_md) P(DNNL_ARG_SRC)
  P(DNNL_ARG_SRC_1) P(DNNL_ARG_DST) P(DNNL_ARG_WEIGHTS) P(DNNL_ARG_BIAS) P(DNNL_ARG_MEAN) P(DNNL_ARG_VARIANCE)
  P(DNNL_ARG_SCALE) P(DNNL_ARG_SHIFT) P(DNNL_ARG_SCRATCHPAD) P(dnnl_eltwise_relu) P(dnnl_use_scale) P(dnnl_use_shift)
  return 0;
}
"#;
    let dir = out_dir();
    let c = dir.join("dnnl_consts.c");
    let exe = dir.join(format!("dnnl_consts-{}", std::process::id()));
    std::fs::write(&c, src).unwrap();
    let st = Command::new("cc").arg(&c).arg("-o").arg(&exe).status().unwrap();
    assert!(st.success());
    let out = String::from_utf8(Command::new(&exe).output().unwrap().stdout).unwrap();
    let vals: std::collections::HashMap<&str, i64> =
        out.lines().filter_map(|l| l.split_once(' ')).map(|(k, v)| (k, v.parse().unwrap())).collect();
    let major = vals["DNNL_VERSION_MAJOR"];
    assert_eq!(major, 2, "the installed headers are oneDNN {major}.x; this check covers 2.x");
    let want: [(&str, i64); 32] = [
        ("sizeof(dnnl_memory_desc_t)", sys::V2_MEMORY_DESC_BYTES as i64),
        ("sizeof(dnnl_exec_arg_t)", std::mem::size_of::<sys::ExecArg>() as i64),
        ("DNNL_MAX_NDIMS", sys::MAX_NDIMS as i64),
        ("dnnl_success", i64::from(sys::SUCCESS)),
        ("dnnl_unimplemented", i64::from(sys::UNIMPLEMENTED)),
        ("dnnl_f32", i64::from(sys::F32)),
        ("dnnl_format_tag_any", i64::from(sys::TAG_ANY)),
        ("dnnl_cpu", i64::from(sys::CPU)),
        ("dnnl_stream_default_flags", i64::from(sys::STREAM_DEFAULT)),
        ("dnnl_forward_inference", i64::from(sys::FORWARD_INFERENCE)),
        ("dnnl_convolution_direct", i64::from(sys::CONVOLUTION_DIRECT)),
        ("dnnl_binary_add", i64::from(sys::BINARY_ADD)),
        ("dnnl_binary_mul", i64::from(sys::BINARY_MUL)),
        ("dnnl_use_global_stats", i64::from(sys::USE_GLOBAL_STATS)),
        ("dnnl_scratchpad_mode_user", i64::from(sys::SCRATCHPAD_USER)),
        ("dnnl_query_src_md", i64::from(sys::QUERY_SRC_MD)),
        ("dnnl_query_weights_md", i64::from(sys::QUERY_WEIGHTS_MD)),
        ("dnnl_query_dst_md", i64::from(sys::QUERY_DST_MD)),
        ("dnnl_query_scratchpad_md", i64::from(sys::QUERY_SCRATCHPAD_MD)),
        ("DNNL_ARG_SRC", i64::from(sys::ARG_SRC)),
        ("DNNL_ARG_SRC_1", i64::from(sys::ARG_SRC_1)),
        ("DNNL_ARG_DST", i64::from(sys::ARG_DST)),
        ("DNNL_ARG_WEIGHTS", i64::from(sys::ARG_WEIGHTS)),
        ("DNNL_ARG_BIAS", i64::from(sys::ARG_BIAS)),
        ("DNNL_ARG_MEAN", i64::from(sys::ARG_MEAN)),
        ("DNNL_ARG_VARIANCE", i64::from(sys::ARG_VARIANCE)),
        ("DNNL_ARG_SCALE", i64::from(sys::ARG_SCALE)),
        ("DNNL_ARG_SHIFT", i64::from(sys::ARG_SHIFT)),
        ("DNNL_ARG_SCRATCHPAD", i64::from(sys::ARG_SCRATCHPAD)),
        ("dnnl_eltwise_relu", i64::from(sys::CONSTS_V2.eltwise_relu)),
        ("dnnl_use_scale", i64::from(sys::CONSTS_V2.use_scale)),
        ("dnnl_use_shift", i64::from(sys::CONSTS_V2.use_shift)),
    ];
    for (k, v) in want {
        assert_eq!(vals[k], v, "{k}");
    }
    for k in ["conv", "inner_product", "batch_normalization", "eltwise", "binary"]
        .map(|n| format!("sizeof(dnnl_{n}_desc_t)").replace("conv_", "convolution_"))
    {
        assert!(vals[k.as_str()] <= sys::V2_OP_DESC_BYTES as i64, "{k} does not fit the op-descriptor buffer");
    }
}
