//! `tvmrt` on TVM v0.27 exports (`../shared/fixtures-v0.27`): inspect lists the Relax functions,
//! kernels and constants; run gives TVM's outputs (`--expect`, tuples flattened depth first);
//! bench times calls; bad inputs are one-line errors with exit codes.

use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The v0.27 fixtures and their manifest; `None` (said) when absent, a failure under `CI=true`.
fn fixtures() -> Option<(PathBuf, Json)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures-v0.27");
    match std::fs::read_to_string(dir.join("manifest.json")) {
        Ok(text) => Some((dir, serde_json::from_str(&text).expect("manifest.json parses"))),
        Err(e) => {
            assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "{} missing: {e}", dir.display());
            println!("SKIP: {} not found ({e})", dir.display());
            None
        }
    }
}

fn tvmrt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tvmrt")).args(args).output().expect("run tvmrt")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(args: &[&str]) -> String {
    let o = tvmrt(args);
    assert!(o.status.success(), "tvmrt {args:?} failed ({}): {}", o.status, text(&o.stderr));
    text(&o.stdout)
}

fn ok_json(args: &[&str]) -> Json {
    let out = ok(args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("tvmrt {args:?}: not JSON ({e}): {out}"))
}

/// Runs a command that must fail with `code` and one `tvmrt: error:` line containing `needle`.
fn fails(args: &[&str], code: i32, needle: &str) {
    let o = tvmrt(args);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(code), "tvmrt {args:?}: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("tvmrt: error:")).collect();
    assert_eq!(lines.len(), 1, "tvmrt {args:?}: expected one error line: {err}");
    assert!(lines[0].contains(needle), "tvmrt {args:?}: {:?} lacks {needle:?}", lines[0]);
    for bad in ["panicked", "backtrace", "RUST_BACKTRACE", "internal error"] {
        assert!(!err.contains(bad), "tvmrt {args:?}: {err}");
    }
}

/// An .npy file's dtype text, shape and elements as f64 (float32, int32, bool).
fn npy(path: &Path) -> (String, Vec<u64>, Vec<f64>) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let f = npyz::NpyFile::new(&bytes[..]).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let shape = f.shape().to_vec();
    let dtype = f.dtype().descr().trim_matches('\'').to_owned();
    let v: Vec<f64> = match dtype.as_str() {
        "<f4" => f.into_vec::<f32>().unwrap().into_iter().map(f64::from).collect(),
        "<i4" => f.into_vec::<i32>().unwrap().into_iter().map(f64::from).collect(),
        "<i8" => f.into_vec::<i64>().unwrap().into_iter().map(|x| x as f64).collect(),
        "|b1" => f.into_vec::<bool>().unwrap().into_iter().map(|b| f64::from(u8::from(b))).collect(),
        d => panic!("{}: unexpected dtype {d}", path.display()),
    };
    (dtype, shape, v)
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tvmrt-relax-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

fn argv(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn names(v: &Json) -> Vec<String> {
    v.as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_owned()).collect()
}

#[test]
fn inspect_lists_relax_functions_kernels_and_constants() {
    let Some((dir, m)) = fixtures() else { return };
    for (name, f) in m["models"].as_object().unwrap() {
        let model = dir.join(f["file"].as_str().unwrap());
        let func = f["function"].as_str().unwrap();
        let r = ok_json(&["inspect", "--json", "--bytecode", s(&model)]);
        assert!(r["format"].as_str().unwrap().contains("Relax VM executable"), "{name}: {}", r["format"]);
        assert!(r["file_kind"].as_str().unwrap().contains("shared library"), "{name}");
        assert_eq!(r["modules"]["type_key"], "relax.VMExecutable", "{name}");
        let lib = &r["modules"]["imports"][0];
        assert_eq!(lib["type_key"], "library", "{name}");
        assert_eq!(r["devices"], serde_json::json!(["cpu"]), "{name}");
        let relax = &r["relax"];
        let entry = relax["functions"].as_array().unwrap().iter().find(|x| x["name"] == func).expect("entry function");
        let params = names(&entry["params"]);
        assert_eq!(params.len(), f["inputs"].as_array().unwrap().len(), "{name}");
        assert_eq!(entry["arity"].as_u64().unwrap() as usize, params.len(), "{name}");
        let kernels = names(&relax["kernels"]);
        let in_lib = names(&lib["functions"]);
        assert!(!kernels.is_empty() && kernels.iter().all(|k| in_lib.contains(k)), "{name}: {kernels:?} {in_lib:?}");
        assert!(names(&relax["globals"]).iter().all(|g| g.starts_with("vm.builtin.")), "{name}");
        assert!(relax["missing"].as_array().unwrap().is_empty(), "{name}");
        assert!(relax["constants"]["count"].as_u64().unwrap() > 0, "{name}");
        assert!(relax["stats"].as_str().unwrap().contains("Constant pool"), "{name}");
        assert!(relax["text"].as_str().unwrap().contains(&format!("@{func}")), "{name}");
        let out = ok(&["inspect", s(&model)]);
        assert!(out.contains(&format!("function {func}({})", params.join(", "))), "{name}: {out}");
        assert!(out.contains(&format!("kernels ({})", kernels.len())), "{name}: {out}");
        assert!(out.contains("constants: "), "{name}: {out}");
    }
    // Weights bound into the executable are tensor constants.
    let r = ok_json(&["inspect", "--json", s(&dir.join("mlp_bound.so"))]);
    assert_eq!(r["relax"]["constants"]["kinds"]["tensor"], 4, "{}", r["relax"]["constants"]);
    assert_eq!(r["relax"]["constants"]["largest_tensor"]["shape"], serde_json::json!([32, 16]));
}

/// The `run` arguments of a fixture: inputs by position (or by parameter name), its function,
/// `-o DIR`.
fn run_args(dir: &Path, name: &str, f: &Json, out_dir: &Path, params: Option<&[String]>) -> Vec<String> {
    let model = dir.join(f["file"].as_str().unwrap());
    let mut args: Vec<String> = vec![
        "run".into(),
        s(&model).into(),
        "--function".into(),
        f["function"].as_str().unwrap().into(),
        "-o".into(),
        s(out_dir).into(),
    ];
    for k in 0..f["inputs"].as_array().unwrap().len() {
        let key = params.map_or_else(|| k.to_string(), |p| p[k].clone());
        args.extend(["--input".into(), format!("{key}={}", s(&dir.join(format!("{name}.in.{k}.npy"))))]);
    }
    args
}

#[test]
fn run_gives_tvms_outputs() {
    let Some((dir, m)) = fixtures() else { return };
    for (name, f) in m["models"].as_object().unwrap() {
        let n_out = f["outputs"].as_array().unwrap().len();
        let expects: Vec<PathBuf> = (0..n_out).map(|k| dir.join(format!("{name}.out.{k}.npy"))).collect();
        let (rtol, atol) = (f["rtol"].as_f64().unwrap(), f["atol"].as_f64().unwrap());
        let model = dir.join(f["file"].as_str().unwrap());
        let info = ok_json(&["inspect", "--json", s(&model)]);
        let entry = info["relax"]["functions"].as_array().unwrap().iter().find(|x| x["name"] == f["function"]).unwrap();
        let params = names(&entry["params"]);
        // By position, then by parameter name.
        for by_name in [false, true] {
            let out_dir = tmp(&format!("{name}-{by_name}"));
            let mut args = run_args(&dir, name, f, &out_dir, by_name.then_some(&params[..]));
            for e in &expects {
                args.extend(["--expect".into(), s(e).into()]);
            }
            args.extend(["--rtol".into(), rtol.to_string(), "--atol".into(), atol.to_string(), "--json".into()]);
            let argv: Vec<&str> = args.iter().map(String::as_str).collect();
            let j = ok_json(&argv);
            assert_eq!(j["outputs"].as_array().unwrap().len(), n_out, "{name}: {j}");
            assert!(j["expect"].as_array().unwrap().iter().all(|c| c["ok"] == true), "{name}: {j}");
            // The files written: TVM's dtype and shape exactly, values within tolerance.
            for (k, e) in expects.iter().enumerate() {
                let (gd, gs, g) = npy(&out_dir.join(format!("output.{k}.npy")));
                let (wd, ws, w) = npy(e);
                assert_eq!((gd, gs), (wd, ws), "{name} output {k}");
                for (i, (x, y)) in g.iter().zip(&w).enumerate() {
                    assert!((x - y).abs() <= atol + rtol * y.abs(), "{name} output {k}[{i}]: {x} vs {y}");
                }
            }
            let _ = std::fs::remove_dir_all(&out_dir);
        }
    }
    // Nested tuples flatten depth first: ((a, b), s).
    let f = &m["models"]["if_tuple"];
    let out_dir = tmp("labels");
    let args = run_args(&dir, "if_tuple", f, &out_dir, None);
    let argv: Vec<&str> = args.iter().map(String::as_str).chain(["--json"]).collect();
    let j = ok_json(&argv);
    let labels: Vec<&str> = j["outputs"].as_array().unwrap().iter().map(|o| o["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["output 0 (main.0.0)", "output 1 (main.0.1)", "output 2 (main.1)"]);
    // A wrong --expect (another output's values of the same shape) exits 3.
    let mut bad = args.clone();
    bad.extend(["--expect".into(), s(&dir.join("if_tuple.out.1.npy")).into()]);
    let argv: Vec<&str> = bad.iter().map(String::as_str).collect();
    fails(&argv, 3, "output 0 differs from");
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn bench_times_calls() {
    let Some((dir, m)) = fixtures() else { return };
    let f = &m["models"]["loop"];
    let out_dir = tmp("bench");
    let mut args = run_args(&dir, "loop", f, &out_dir, None);
    args[0] = "bench".into();
    args.drain(4..6); // no -o for bench
    args.extend(["--warmup", "2", "--repeat", "7", "--json"].map(String::from));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let b = ok_json(&argv);
    assert_eq!(b["samples_ms"].as_array().unwrap().len(), 7, "{b}");
    assert!(b["latency_ms"]["p50"].as_f64().unwrap() > 0.0, "{b}");
    assert!(b["create_ms"].as_f64().is_some() && b["first_run_ms"].as_f64().is_some(), "{b}");
    let argv: Vec<&str> = args[..args.len() - 5].iter().map(String::as_str).chain(["--repeat", "3"]).collect();
    let out = ok(&argv);
    assert!(out.contains("p50") && out.contains("throughput"), "{out}");
    let argv: Vec<&str> = args[..args.len() - 5].iter().map(String::as_str).chain(["--profile"]).collect();
    fails(&argv, 1, "no per-operator profiler");
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn bad_runs_are_one_line_errors() {
    let Some((dir, m)) = fixtures() else { return };
    let f = &m["models"]["mlp"];
    let mlp = dir.join("mlp.so");
    let out_dir = tmp("errors");
    let args = run_args(&dir, "mlp", f, &out_dir, None);
    let with =
        |extra: &[&str]| -> Vec<String> { args.iter().cloned().chain(extra.iter().map(|x| x.to_string())).collect() };
    // The default function is main; this executable's is forward.
    fails(&["run", s(&mlp), "--input", "0=random:float32[2,16]"], 1, "has no function main (its functions: forward)");
    let mut nope = args.clone();
    nope[3] = "nope".into();
    fails(&argv(&nope), 1, "no function nope");
    // The VM's own input checks, kind and message.
    let mut shape = args.clone();
    shape[7] = "0=random:float32[3,16]".into();
    fails(&argv(&shape), 1, "RuntimeError: ErrorContext(fn=forward, loc=param[0], param=x");
    fails(&argv(&shape), 1, "shape[0] mismatch to specified constant: 3 vs 2");
    let mut dtype = args.clone();
    dtype[7] = "0=random:int32[2,16]".into();
    fails(&argv(&dtype), 1, "expect Tensor with dtype float32 but get int32");
    // Inputs the executable does not describe must be given; unknown names are refused.
    fails(&["run", s(&mlp), "--function", "forward", "--input", "0=random:float32[2,16]"], 1, "l1.weight");
    fails(&argv(&with(&["--input", "bias=random:float32[4]"])), 1, "no input named bias");
    fails(&argv(&with(&["positional.npy"])), 1, "positional arguments");
    // A truncated export: an error naming the file, no crash.
    let bytes = std::fs::read(&mlp).unwrap();
    for (k, n) in [bytes.len() / 2, bytes.len() - 100, 100].into_iter().enumerate() {
        let cut = out_dir.join(format!("cut{k}.so"));
        std::fs::write(&cut, &bytes[..n]).unwrap();
        fails(&["inspect", s(&cut)], 1, s(&cut));
        fails(&["run", s(&cut), "--function", "forward"], 1, s(&cut));
    }
    let _ = std::fs::remove_dir_all(&out_dir);
}
