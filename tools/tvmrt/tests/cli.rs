//! `tvmrt` as a user runs it: every subcommand on TVM's fixtures (exit codes, output files
//! compared with the outputs TVM's own runtime computed, JSON parsed), and the error cases.

use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The fixtures directory and its manifest; `None` (after saying why) when absent, a failure
/// under `CI=true`.
fn fixtures() -> Option<(PathBuf, Json)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures");
    match std::fs::read_to_string(dir.join("manifest.json")) {
        Ok(text) => Some((dir, serde_json::from_str(&text).expect("manifest.json parses"))),
        Err(e) => {
            assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "fixtures missing at {}: {e}", dir.display());
            println!("SKIP: TVM fixtures not found at {} ({e})", dir.display());
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

/// An .npy file as (shape, f64 values).
fn npy(path: &Path) -> (Vec<u64>, Vec<f64>) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let f = npyz::NpyFile::new(&bytes[..]).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let shape = f.shape().to_vec();
    let v: Vec<f32> = f.into_vec().unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (shape, v.into_iter().map(f64::from).collect())
}

/// numpy's allclose.
fn assert_close(got: &Path, want: &Path, rtol: f64, atol: f64) {
    let (gs, g) = npy(got);
    let (ws, w) = npy(want);
    assert_eq!(gs, ws, "{} vs {}", got.display(), want.display());
    for (i, (x, y)) in g.iter().zip(&w).enumerate() {
        assert!((x - y).abs() <= atol + rtol * y.abs(), "{}[{i}]: {x} vs {y}", got.display());
    }
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tvmrt-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

fn opencl_present() -> bool {
    let icd = std::fs::read_dir("/etc/OpenCL/vendors").map(|d| d.count() > 0).unwrap_or(false);
    if !icd {
        assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "no OpenCL ICD (the test script installs PoCL)");
        println!("SKIP: no OpenCL ICD in /etc/OpenCL/vendors");
    }
    icd
}

#[test]
fn inspect_reports_every_fixture() {
    let Some((dir, m)) = fixtures() else { return };
    for (name, f) in m["fixtures"].as_object().expect("fixtures") {
        let file = dir.join(f["file"].as_str().expect("file"));
        if file.extension().is_none_or(|e| e != "so") {
            continue;
        }
        let args = ["inspect", "--json", s(&file)];
        let r = ok_json(&args);
        assert!(r["size_bytes"].as_u64().unwrap_or(0) > 0, "{name}");
        assert!(r["file_kind"].as_str().unwrap_or("").contains("shared library"), "{name}: {r}");
        match f["kind"].as_str() {
            Some("graph") => {
                let g = &r["graph"];
                let inputs: Vec<&str> =
                    g["inputs"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
                let want: Vec<&str> = f["inputs"].as_object().unwrap().keys().map(String::as_str).collect();
                assert_eq!(inputs, want, "{name}");
                for t in g["inputs"].as_array().unwrap() {
                    let (shape, _) = npy(&dir.join(f["inputs"][t["name"].as_str().unwrap()].as_str().unwrap()));
                    let got: Vec<u64> = t["shape"].as_array().unwrap().iter().filter_map(Json::as_u64).collect();
                    assert_eq!(got, shape, "{name}: input shape");
                }
                let outs = g["outputs"].as_array().unwrap();
                assert_eq!(outs.len(), f["outputs"].as_array().unwrap().len(), "{name}");
                for (t, file) in outs.iter().zip(f["outputs"].as_array().unwrap()) {
                    let (shape, _) = npy(&dir.join(file.as_str().unwrap()));
                    let got: Vec<u64> = t["shape"].as_array().unwrap().iter().filter_map(Json::as_u64).collect();
                    assert_eq!(got, shape, "{name}: output shape");
                }
                assert!(g["params"]["count"].as_u64().unwrap() > 0, "{name}");
                assert!(
                    g["params"]["total_bytes"].as_u64().unwrap() >= g["params"]["largest"]["bytes"].as_u64().unwrap()
                );
                let ops = g["operators"].as_u64().unwrap();
                let kinds: u64 = g["op_kinds"].as_object().unwrap().values().filter_map(Json::as_u64).sum();
                assert!(ops > 0 && kinds == ops, "{name}: {ops} operators, {kinds} by kind");
                assert_eq!(r["modules"]["type_key"], "GraphExecutorFactory", "{name}");
                let dev = f["device"].as_str().unwrap_or("cpu");
                assert!(r["devices"].as_array().unwrap().iter().any(|d| d == dev), "{name}: {}", r["devices"]);
                // The kernels sit in a `library` module: the factory's import, or for a BYOC export
                // the metadata module's, beside one external module per offloaded region.
                let mut lib = &r["modules"]["imports"][0];
                if f.get("byoc").is_some() {
                    assert_eq!(lib["type_key"], "metadata", "{name}");
                    let kinds: Vec<&str> =
                        lib["imports"].as_array().unwrap().iter().filter_map(|m| m["type_key"].as_str()).collect();
                    assert!(kinds.iter().filter(|&&k| k != "library").count() > 0, "{name}: {kinds:?}");
                    lib = lib["imports"].as_array().unwrap().iter().find(|m| m["type_key"] == "library").unwrap();
                }
                assert_eq!(lib["type_key"], "library", "{name}");
                assert!(r["format"].as_str().unwrap().contains("GraphExecutorFactory"), "{name}");
            }
            Some("operator") => {
                assert_eq!(r["modules"]["type_key"], "library", "{name}");
                let funcs = r["modules"]["functions"].as_array().unwrap();
                assert!(funcs.iter().any(|x| x == &f["function"]), "{name}: {funcs:?}");
                assert!(r["graph"].is_null());
            }
            _ => {}
        }
        let out = ok(&["inspect", s(&file)]);
        assert!(out.contains("module tree:") && out.contains("devices:"), "{name}: {out}");
    }
}

#[test]
fn run_graphs_match_tvm_outputs() {
    let Some((dir, m)) = fixtures() else { return };
    for (name, f) in m["fixtures"].as_object().expect("fixtures") {
        if f["kind"] != "graph" || f.get("byoc").is_some() {
            continue;
        }
        let device = f["device"].as_str().unwrap_or("cpu");
        if device == "cuda" || (device == "opencl" && !opencl_present()) {
            continue;
        }
        let out_dir = tmp(name);
        let model = dir.join(f["file"].as_str().unwrap());
        let mut args: Vec<String> = vec!["run".into(), s(&model).into(), "--device".into(), device.into()];
        for (input, file) in f["inputs"].as_object().unwrap() {
            args.push("--input".into());
            args.push(format!("{input}={}", s(&dir.join(file.as_str().unwrap()))));
        }
        args.extend(["--output-dir".into(), s(&out_dir).into()]);
        let rtol = f["rtol"].as_f64().unwrap_or(1e-5);
        let atol = f["atol"].as_f64().unwrap_or(1e-5);
        let expects: Vec<String> =
            f["outputs"].as_array().unwrap().iter().map(|o| s(&dir.join(o.as_str().unwrap())).to_owned()).collect();
        for e in &expects {
            args.extend(["--expect".into(), e.clone()]);
        }
        args.extend(["--rtol".into(), rtol.to_string(), "--atol".into(), atol.to_string()]);
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let stdout = ok(&argv);
        assert!(stdout.contains("output 0"), "{name}: {stdout}");
        for (i, e) in expects.iter().enumerate() {
            assert_close(&out_dir.join(format!("output.{i}.npy")), Path::new(e), rtol, atol);
        }
        // The inputs used are saved too, byte for byte.
        for (input, file) in f["inputs"].as_object().unwrap() {
            assert_eq!(npy(&out_dir.join(format!("input.{input}.npy"))), npy(&dir.join(file.as_str().unwrap())));
        }
        let _ = std::fs::remove_dir_all(&out_dir);
    }
}

#[test]
fn run_json_and_the_split_form() {
    let Some((dir, m)) = fixtures() else { return };
    let split = &m["fixtures"]["mlp"]["split"];
    let j = |k: &str| dir.join(split[k].as_str().unwrap());
    let out_dir = tmp("split");
    let r = ok_json(&[
        "run",
        s(&j("lib")),
        "--graph",
        s(&j("graph_json")),
        "--params",
        s(&j("params")),
        "--input",
        &format!("data={}", s(&dir.join("mlp.input.data.npy"))),
        "-o",
        s(&out_dir),
        "--json",
    ]);
    assert_eq!(r["outputs"][0]["shape"], serde_json::json!([1, 10]));
    assert!(r["timings"]["run_ms"].as_f64().unwrap() >= 0.0);
    assert_close(&out_dir.join("output.0.npy"), &dir.join("mlp.output.0.npy"), 1e-5, 1e-5);
    // Softmax outputs: their mean is 1/10, reported from the same data.
    assert!((r["outputs"][0]["mean"].as_f64().unwrap() - 0.1).abs() < 1e-6);
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn run_single_functions_of_operator_libraries() {
    let Some((dir, m)) = fixtures() else { return };
    for (name, f) in m["fixtures"].as_object().unwrap() {
        if f["kind"] != "operator" {
            continue;
        }
        let out_dir = tmp(name);
        let mut args: Vec<String> = vec![
            "run".into(),
            s(&dir.join(f["file"].as_str().unwrap())).into(),
            "--function".into(),
            f["function"].as_str().unwrap().into(),
            "-o".into(),
            s(&out_dir).into(),
        ];
        let mut expected = Vec::new();
        for a in f["args"].as_array().unwrap() {
            if let Some(i) = a["input"].as_str() {
                args.push(s(&dir.join(i)).into());
            } else {
                let dims: Vec<String> =
                    a["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap().to_string()).collect();
                args.push(format!("zeros:{}[{}]", a["dtype"].as_str().unwrap(), dims.join(",")));
                expected.push(dir.join(a["output"].as_str().unwrap()));
            }
        }
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        ok(&argv);
        let atol = f["atol"].as_f64().unwrap_or(1e-5);
        for (k, e) in expected.iter().enumerate() {
            assert_close(&out_dir.join(format!("output.{k}.npy")), e, f["rtol"].as_f64().unwrap_or(1e-5), atol);
        }
        let _ = std::fs::remove_dir_all(&out_dir);
    }
}

#[test]
fn bench_times_and_profiles() {
    let Some((dir, _)) = fixtures() else { return };
    let model = dir.join("mlp.so");
    let r = ok_json(&["bench", s(&model), "--warmup", "1", "--repeat", "7", "--profile", "--threads", "1", "--json"]);
    let l = &r["latency_ms"];
    let v = |k: &str| l[k].as_f64().unwrap_or_else(|| panic!("{k}: {r}"));
    assert!(v("min") <= v("p50") && v("p50") <= v("p90") && v("p90") <= v("p99") && v("p99") <= v("max"), "{r}");
    assert_eq!(r["samples_ms"].as_array().unwrap().len(), 7);
    for k in ["load_ms", "create_ms", "first_run_ms", "throughput_per_s"] {
        assert!(r[k].as_f64().unwrap() > 0.0, "{k}: {r}");
    }
    let info = ok_json(&["inspect", "--json", s(&model)]);
    let prof = r["profile"].as_array().unwrap();
    assert_eq!(prof.len() as u64, info["graph"]["operators"].as_u64().unwrap());
    let pct: f64 = prof.iter().map(|p| p["percent"].as_f64().unwrap()).sum();
    assert!((pct - 100.0).abs() < 1e-6, "{pct}");
    let times: Vec<f64> = prof.iter().map(|p| p["time_us"].as_f64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "not sorted: {times:?}");
    assert!(prof.iter().all(|p| !p["shapes"].as_array().unwrap().is_empty()));
    let out = ok(&["bench", s(&model), "--warmup", "0", "--repeat", "3", "--profile"]);
    for want in ["load:", "executor:", "first run:", "p50", "p99", "throughput:", "per-operator", "total"] {
        assert!(out.contains(want), "{want}: {out}");
    }
}

#[test]
fn errors_are_one_line_with_exit_codes() {
    let Some((dir, _)) = fixtures() else { return };
    let mlp = dir.join("mlp.so");
    let mlp_s = s(&mlp);
    let input = format!("data={}", s(&dir.join("mlp.input.data.npy")));
    fails(&["run", "/no/such/model.so"], 1, "/no/such/model.so");
    fails(&["inspect", s(&dir.join("manifest.json"))], 1, "manifest.json");
    fails(&["run", s(&dir.join("mlp.input.data.npy"))], 1, "mlp.input.data.npy");
    // A truncated library is an error, not a crash inside the dynamic loader.
    let cut = tmp("truncated").join("cut.so");
    let whole = std::fs::read(dir.join("mlp.so")).expect("mlp.so");
    std::fs::write(&cut, &whole[..whole.len() / 2]).expect("write");
    fails(&["inspect", s(&cut)], 1, "truncated");
    fails(
        &["run", mlp_s, "--input", &format!("image={}", s(&dir.join("mlp.input.data.npy")))],
        1,
        "no input named image",
    );
    fails(&["run", mlp_s, "--input", &format!("data={}", s(&dir.join("cnn.input.data.npy")))], 1, "shape mismatch");
    fails(&["run", mlp_s, "--input", "data=/no/such.npy"], 1, "/no/such.npy");
    fails(&["run", mlp_s, "--device", "vulkan"], 1, "not present");
    fails(&["run", mlp_s, "--device", "tpu"], 1, "unknown device tpu");
    fails(&["run", mlp_s, "--input", &input, "--expect", s(&dir.join("mlp2.output.0.npy"))], 3, "differs");
    fails(
        &["run", mlp_s, "--input", &input, "--expect", &format!("5={}", s(&dir.join("mlp.output.0.npy")))],
        1,
        "no output 5",
    );
    fails(&["run", s(&dir.join("add_one.so")), "--function", "nope"], 1, "no function nope");
    fails(&["run", s(&dir.join("add_one.so"))], 1, "--function");
    fails(&["run", s(&dir.join("mlp2_opencl.so"))], 1, "--device opencl");
    // Without a CUDA driver (the usual case here) CUDA is "not present"; with one, the model runs.
    let o = tvmrt(&["run", s(&dir.join("mlp2_nvptx.so")), "--device", "cuda"]);
    if !o.status.success() {
        fails(&["run", s(&dir.join("mlp2_nvptx.so")), "--device", "cuda"], 1, "cuda");
    }
    // Bad usage is clap's exit code 2.
    assert_eq!(tvmrt(&["frobnicate"]).status.code(), Some(2));
    assert_eq!(tvmrt(&["bench", mlp_s, "--repeat", "0"]).status.code(), Some(2));
    assert!(ok(&["--help"]).contains("inspect"));
}

#[test]
fn run_a_tvm_0_18_export() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures-v0.18");
    if !dir.join("mlp.so").is_file() {
        assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "fixtures-v0.18 missing at {}", dir.display());
        println!("SKIP: {} not found", dir.display());
        return;
    }
    let out_dir = tmp("v018");
    ok(&[
        "run",
        s(&dir.join("mlp.so")),
        "--input",
        &format!("data={}", s(&dir.join("mlp.input.data.npy"))),
        "-o",
        s(&out_dir),
    ]);
    assert_close(&out_dir.join("output.0.npy"), &dir.join("mlp.output.0.npy"), 1e-5, 1e-5);
    let _ = std::fs::remove_dir_all(&out_dir);
}

/// A library in the style of TVM's C backend, which calls the runtime's C functions directly.
const C_BACKEND_LIB: &str = r#"
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/c_backend_api.h>
TVM_DLL int fill_halves(TVMValue* args, int* codes, int n, TVMValue* rv, int* rc, void* res) {
  if (n != 1 || (codes[0] != kTVMNDArrayHandle && codes[0] != kTVMDLTensorHandle)) {
    TVMAPISetLastError("ValueError: fill_halves expects one tensor");
    return -1;
  }
  DLTensor* t = (DLTensor*)args[0].v_handle;
  int64_t len = t->shape[0];
  float* ws = (float*)TVMBackendAllocWorkspace(1, 0, (uint64_t)(len * 4), 2, 32);
  if (!ws) return -1;
  for (int64_t i = 0; i < len; i++) ws[i] = (float)i * 0.5f;
  for (int64_t i = 0; i < len; i++) ((float*)t->data)[i] = ws[i];
  return TVMBackendFreeWorkspace(1, 0, ws);
}
"#;

#[test]
fn libraries_that_call_the_c_api_directly_resolve_it_from_tvmrt() {
    let dir = tmp("cbackend");
    std::fs::write(dir.join("lib.c"), C_BACKEND_LIB).expect("write");
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../include");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let st = Command::new(cc)
        .args(["-shared", "-fPIC", "-I", s(&include), "-o", s(&dir.join("lib.so")), s(&dir.join("lib.c"))])
        .status()
        .expect("run cc");
    assert!(st.success());
    ok(&["run", s(&dir.join("lib.so")), "--function", "fill_halves", "zeros:float32[6]", "-o", s(&dir)]);
    let (shape, v) = npy(&dir.join("output.0.npy"));
    assert_eq!((shape, v), (vec![6], vec![0.0, 0.5, 1.0, 1.5, 2.0, 2.5]));
    // Its own error, set through TVMAPISetLastError, reaches the user as one line.
    fails(&["run", s(&dir.join("lib.so")), "--function", "fill_halves", "int:3"], 1, "fill_halves expects one tensor");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    // `tvmrt inspect m.so | head -1`: the reader goes away early; tvmrt must end
    // without an error message (as Unix tools do, by SIGPIPE), not report an internal error.
    let Some((dir, _)) = fixtures() else { return };
    let mut child = Command::new(env!("CARGO_BIN_EXE_tvmrt"))
        .args(["inspect", s(&dir.join("resnet18.so"))])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run tvmrt");
    // Close the reading end before tvmrt prints (loading takes tens of milliseconds).
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.stderr.is_empty(), "stderr: {}", text(&out.stderr));
    use std::os::unix::process::ExitStatusExt;
    assert!(out.status.success() || out.status.signal() == Some(13), "{:?}", out.status);
}

/// Another fixtures directory (`fixtures-v0.18`, `fixtures-vm`) and its manifest; `None` (said)
/// when absent, a failure under `CI=true`.
fn other_fixtures(name: &str) -> Option<(PathBuf, Json)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared").join(name);
    match std::fs::read_to_string(dir.join("manifest.json")) {
        Ok(text) => Some((dir, serde_json::from_str(&text).expect("manifest.json parses"))),
        Err(e) => {
            assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "{} missing: {e}", dir.display());
            println!("SKIP: {} not found ({e})", dir.display());
            None
        }
    }
}

/// An .npy file's shape (any dtype).
fn npy_shape(path: &Path) -> Vec<u64> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    npyz::NpyFile::new(&bytes[..]).unwrap_or_else(|e| panic!("{}: {e}", path.display())).shape().to_vec()
}

/// An .npy file's raw data bytes and dtype text (for exact comparisons of any dtype).
fn npy_raw(path: &Path) -> (String, Vec<u64>, Vec<u8>) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let f = npyz::NpyFile::new(&bytes[..]).unwrap();
    let shape = f.shape().to_vec();
    let dtype = format!("{:?}", f.dtype());
    drop(f);
    // The data are the file's last n bytes (C order): header lengths differ between writers.
    let n = shape.iter().product::<u64>() as usize * dtype_size(&bytes);
    (dtype, shape, bytes[bytes.len() - n..].to_vec())
}

fn dtype_size(npy: &[u8]) -> usize {
    let h = String::from_utf8_lossy(&npy[..npy.len().min(256)]).into_owned();
    let descr = h.split("'descr': '").nth(1).unwrap().split('\'').next().unwrap().to_owned();
    descr[2..].parse().unwrap()
}

fn ints(v: &Json) -> Vec<u64> {
    v.as_array().unwrap().iter().filter_map(Json::as_u64).collect()
}

#[test]
fn aot_exports_inspect_and_run_like_tvm() {
    let Some((dir, m)) = other_fixtures("fixtures-v0.18") else { return };
    let mut seen = 0;
    for (name, f) in m["fixtures"].as_object().unwrap() {
        if f["kind"] != "aot" {
            continue;
        }
        seen += 1;
        let model = dir.join(f["file"].as_str().unwrap());
        let r = ok_json(&["inspect", "--json", s(&model)]);
        assert_eq!(r["modules"]["type_key"], "AotExecutorFactory", "{name}");
        assert!(r["format"].as_str().unwrap().contains("AOT executor"), "{name}");
        let aot = &r["aot"];
        assert_eq!(aot["module_name"], f["module_name"], "{name}");
        let names: Vec<&str> = aot["inputs"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
        let want: Vec<&str> = f["inputs"].as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(names, want, "{name}");
        for t in aot["inputs"].as_array().unwrap() {
            let file = dir.join(f["inputs"][t["name"].as_str().unwrap()].as_str().unwrap());
            assert_eq!(ints(&t["shape"]), npy_shape(&file), "{name}: input shape");
        }
        let outs = aot["outputs"].as_array().unwrap();
        assert_eq!(outs.len(), f["outputs"].as_array().unwrap().len(), "{name}");
        for (t, file) in outs.iter().zip(f["outputs"].as_array().unwrap()) {
            assert_eq!(ints(&t["shape"]), npy_shape(&dir.join(file.as_str().unwrap())), "{name}: output shape");
        }
        let text = ok(&["inspect", s(&model)]);
        assert!(text.contains("AOT model") && text.contains("inputs:"), "{name}: {text}");

        // run with the manifest's inputs and --expect its outputs.
        let out_dir = tmp(name);
        let mut args: Vec<String> = vec!["run".into(), s(&model).into(), "-o".into(), s(&out_dir).into()];
        for (input, file) in f["inputs"].as_object().unwrap() {
            args.extend(["--input".into(), format!("{input}={}", s(&dir.join(file.as_str().unwrap())))]);
        }
        let expects: Vec<PathBuf> =
            f["outputs"].as_array().unwrap().iter().map(|o| dir.join(o.as_str().unwrap())).collect();
        let (rtol, atol) = (f["rtol"].as_f64().unwrap_or(1e-5), f["atol"].as_f64().unwrap_or(1e-5));
        let mut good = args.clone();
        for e in &expects {
            good.extend(["--expect".into(), s(e).into()]);
        }
        good.extend(["--rtol".into(), rtol.to_string(), "--atol".into(), atol.to_string(), "--json".into()]);
        let argv: Vec<&str> = good.iter().map(String::as_str).collect();
        let j = ok_json(&argv);
        assert!(j["expect"].as_array().unwrap().iter().all(|c| c["ok"] == true), "{name}: {j}");
        for (i, e) in expects.iter().enumerate() {
            assert_close(&out_dir.join(format!("output.{i}.npy")), e, rtol, atol);
        }
        // A wrong --expect (the input file, of another shape) exits 3.
        let mut bad = args.clone();
        bad.extend([
            "--expect".into(),
            format!("0={}", s(&dir.join(f["inputs"].as_object().unwrap().values().next().unwrap().as_str().unwrap()))),
        ]);
        let argv: Vec<&str> = bad.iter().map(String::as_str).collect();
        fails(&argv, 3, "differs");
        // Random inputs of the recorded shapes; bench; --profile is a clear error.
        ok(&["run", s(&model)]);
        let b = ok_json(&["bench", s(&model), "--warmup", "1", "--repeat", "5", "--json"]);
        assert_eq!(b["samples_ms"].as_array().unwrap().len(), 5, "{name}");
        fails(&["bench", s(&model), "--profile"], 1, "no per-operator profiler");
        fails(&["run", s(&model), "--input", "nope=random:float32[1]"], 1, "no input named nope");
        let _ = std::fs::remove_dir_all(&out_dir);
    }
    assert!(seen > 0, "no AOT fixture in the v0.18 manifest");
}

#[test]
fn vm_executables_inspect_and_run_like_tvm() {
    let Some((dir, m)) = other_fixtures("fixtures-vm") else { return };
    for (name, f) in m["fixtures"].as_object().unwrap() {
        let model = dir.join(f["file"].as_str().unwrap());
        let func = f["function"].as_str().unwrap();
        let r = ok_json(&["inspect", "--json", "--bytecode", s(&model)]);
        assert_eq!(r["modules"]["type_key"], "VMExecutable", "{name}");
        let vm = &r["vm"];
        let entry = vm["functions"].as_array().unwrap().iter().find(|x| x["name"] == func).expect("entry function");
        let params: Vec<String> =
            entry["params"].as_array().unwrap().iter().map(|p| p.as_str().unwrap().to_owned()).collect();
        let runs = f["runs"].as_array().unwrap();
        assert_eq!(params.len(), runs[0]["inputs"].as_array().unwrap().len(), "{name}");
        assert!(vm["stats"].as_str().unwrap().contains("Primitive ops"), "{name}");
        assert!(vm["bytecode"].as_str().unwrap().contains(func), "{name}");
        let lib = &r["modules"]["imports"][0];
        for p in vm["primitives"].as_array().unwrap() {
            assert!(lib["functions"].as_array().unwrap().contains(p), "{name}: {p} not in the library");
        }
        let text = ok(&["inspect", s(&model)]);
        assert!(text.contains(&format!("function {func}({})", params.join(", "))), "{name}: {text}");

        let (rtol, atol) = (f["rtol"].as_f64().unwrap_or(1e-5), f["atol"].as_f64().unwrap_or(1e-5));
        for (k, run) in runs.iter().enumerate() {
            let out_dir = tmp(&format!("{name}-{k}"));
            // Inputs by parameter name (from inspect), function named explicitly.
            let mut args: Vec<String> =
                vec!["run".into(), s(&model).into(), "--function".into(), func.into(), "-o".into(), s(&out_dir).into()];
            for (p, file) in params.iter().zip(run["inputs"].as_array().unwrap()) {
                args.extend(["--input".into(), format!("{p}={}", s(&dir.join(file.as_str().unwrap())))]);
            }
            let expects: Vec<PathBuf> =
                run["outputs"].as_array().unwrap().iter().map(|o| dir.join(o.as_str().unwrap())).collect();
            let mut good = args.clone();
            for e in &expects {
                good.extend(["--expect".into(), s(e).into()]);
            }
            good.extend(["--rtol".into(), rtol.to_string(), "--atol".into(), atol.to_string(), "--json".into()]);
            let argv: Vec<&str> = good.iter().map(String::as_str).collect();
            let j = ok_json(&argv);
            assert_eq!(j["outputs"].as_array().unwrap().len(), expects.len(), "{name} run {k}");
            for (i, e) in expects.iter().enumerate() {
                // Exact dtype, shape and (within tolerance) values, whatever the dtype.
                let (gd, gs, _) = npy_raw(&out_dir.join(format!("output.{i}.npy")));
                let (wd, ws, _) = npy_raw(e);
                assert_eq!((gd, gs), (wd, ws), "{name} run {k} output {i}");
            }
            // A wrong --expect exits 3: output 0 against another run's (or the input's) values.
            let other = runs
                .iter()
                .enumerate()
                .find(|(j, r)| {
                    *j != k && npy_shape(&dir.join(r["outputs"][0].as_str().unwrap())) == npy_shape(&expects[0])
                })
                .map(|(_, r)| dir.join(r["outputs"][0].as_str().unwrap()));
            if let Some(o) = other {
                let (_, _, a) = npy_raw(&o);
                let (_, _, b) = npy_raw(&expects[0]);
                if a != b {
                    let mut bad = args.clone();
                    bad.extend(["--expect".into(), s(&o).into()]);
                    let argv: Vec<&str> = bad.iter().map(String::as_str).collect();
                    fails(&argv, 3, "differs");
                }
            }
            let _ = std::fs::remove_dir_all(&out_dir);
        }
    }
    // Positions instead of names, default function main; a wrong --expect exits 3.
    let t = |f: &str| s(&dir.join(f)).to_owned();
    ok(&[
        "run",
        &t("vm_tuple.so"),
        "--input",
        &format!("0={}", t("vm_tuple.run0.input0.npy")),
        "--input",
        &format!("1={}", t("vm_tuple.run0.input1.npy")),
        "--expect",
        &t("vm_tuple.run0.output0.npy"),
        "--expect",
        &t("vm_tuple.run0.output1.npy"),
        "--expect",
        &t("vm_tuple.run0.output2.npy"),
    ]);
    fails(
        &[
            "run",
            &t("vm_mlp.so"),
            "--input",
            &format!("0={}", t("vm_mlp.run0.input0.npy")),
            "--expect",
            &t("vm_mlp.run0.input0.npy"),
        ],
        3,
        "differs",
    );
    // Inputs whose shapes the executable does not record: one clear line; random:DTYPE[SHAPE].
    fails(&["run", &t("vm_dyn_batch.so")], 1, "does not record the shape of input");
    fails(&["run", &t("vm_mlp.so"), "--function", "main", &t("vm_mlp.run0.input0.npy")], 1, "positional arguments");
    let j = ok_json(&["run", &t("vm_dyn_batch.so"), "--input", "0=random:float32[7,784]", "--json"]);
    assert_eq!(j["outputs"][0]["shape"][0], 7);
    fails(&["run", &t("vm_mlp.so"), "--function", "nope", "--input", "0=random:float32[1,784]"], 1, "no function nope");
    fails(&["run", &t("vm_mlp.so"), "--input", "0=random:float32[1,5]"], 1, "unsatisfied constraint");
    // bench and the profiling VM's table.
    let input = format!("0={}", t("vm_mlp.run0.input0.npy"));
    let b = ok_json(&[
        "bench",
        &t("vm_mlp.so"),
        "--input",
        &input,
        "--warmup",
        "1",
        "--repeat",
        "4",
        "--profile",
        "--json",
    ]);
    assert_eq!(b["samples_ms"].as_array().unwrap().len(), 4);
    let prof = b["profile"].as_array().unwrap();
    let info = ok_json(&["inspect", "--json", &t("vm_mlp.so")]);
    for p in info["vm"]["primitives"].as_array().unwrap() {
        assert!(prof.iter().any(|r| &r["op"] == p), "{p} not profiled: {b}");
    }
    let pct: f64 = prof.iter().map(|p| p["percent"].as_f64().unwrap()).sum();
    assert!((pct - 100.0).abs() < 1e-6, "{pct}");
    let out = ok(&["bench", &t("vm_mlp.so"), "--input", &input, "--repeat", "3", "--profile"]);
    assert!(out.contains("profiling VM") && out.contains("p50"), "{out}");
}

/// A process that loads a DNNL model and exits at once exits cleanly: oneDNN's exit-time
/// destructors used to run under a background build (1 run in 20 died of SIGSEGV or SIGFPE).
#[test]
fn byoc_models_load_and_exit_cleanly_again_and_again() {
    let Some((dir, m)) = fixtures() else { return };
    for f in m["fixtures"].as_object().unwrap().values().filter(|f| f.get("byoc").is_some()) {
        let file = dir.join(f["file"].as_str().unwrap());
        for _ in 0..30 {
            ok(&["inspect", s(&file)]);
        }
    }
}

#[test]
fn byoc_modules_list_their_regions_and_constants() {
    let Some((dir, m)) = fixtures() else { return };
    for (name, f) in m["fixtures"].as_object().unwrap() {
        if f.get("byoc").is_none() {
            continue;
        }
        let r = ok_json(&["inspect", "--json", s(&dir.join(f["file"].as_str().unwrap()))]);
        let md = &r["modules"]["imports"][0];
        assert_eq!(md["type_key"], "metadata", "{name}");
        let consts: Vec<&str> = md["constants"].as_array().unwrap().iter().filter_map(|c| c["name"].as_str()).collect();
        let funcs = md["functions"].as_array().unwrap();
        let mut regions = 0;
        for ext in md["imports"].as_array().unwrap() {
            let Some(sym) = ext["symbol"].as_str() else { continue };
            regions += 1;
            // The region is reachable through the metadata module, and each of its constants is
            // one the metadata module holds.
            assert!(funcs.iter().any(|x| x == sym), "{name}: {sym} not among {funcs:?}");
            assert!(ext["functions"].as_array().unwrap().iter().any(|x| x == sym), "{name}");
            for c in ext["const_vars"].as_array().unwrap() {
                assert!(consts.contains(&c.as_str().unwrap()), "{name}: {c} not held by the metadata module");
            }
        }
        assert!(regions > 0, "{name}: no offloaded region listed");
        let text = ok(&["inspect", s(&dir.join(f["file"].as_str().unwrap()))]);
        assert!(text.contains("offloaded region") && !text.contains("does not list them"), "{name}: {text}");
    }
}
