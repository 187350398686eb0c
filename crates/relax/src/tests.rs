//! The parsers against TVM v0.27's own exports (`../shared/fixtures-v0.27`) and against damaged
//! input.

use super::executable::*;
use super::format::*;
use std::path::PathBuf;
use tvm_runtime_classic::abi::DLDataType;

const MODELS: [&str; 6] = ["mlp", "mlp_bound", "mlp_dyn", "if_tuple", "loop", "topk"];
const F32: DLDataType = DLDataType { code: 2, bits: 32, lanes: 1 };

/// The fixture folder; `None` (with a message) when it is absent, a failure under `CI=true`.
fn fixtures() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures-v0.27");
    if dir.join("manifest.json").is_file() {
        return Some(dir);
    }
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{} is missing (CI=true)", dir.display());
    eprintln!("skipped: {} is absent", dir.display());
    None
}

struct Fixture {
    file: Vec<u8>,
    manifest: serde_json::Value,
}

impl Fixture {
    fn load(dir: &std::path::Path, name: &str) -> Fixture {
        let file = std::fs::read(dir.join(format!("{name}.so"))).unwrap();
        let m: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
        Fixture { file, manifest: m["models"][name].clone() }
    }

    fn symbol(&self) -> &[u8] {
        elf_symbol(&self.file, LIBRARY_BIN_SYMBOL).expect("the export has __tvm_ffi__library_bin")
    }

    fn executable(&self) -> (LibraryBin<'_>, Executable) {
        let bin = LibraryBin::parse(self.symbol()).unwrap();
        let exec = Executable::load(bin.root().payload.unwrap()).unwrap();
        (bin, exec)
    }
}

/// The raw data of a little-endian `.npy` file.
fn npy_data(path: PathBuf) -> Vec<u8> {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..6], b"\x93NUMPY");
    let start = if b[6] == 1 {
        10 + u16::from_le_bytes([b[8], b[9]]) as usize
    } else {
        12 + u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize
    };
    b[start..].to_vec()
}

fn packed_names(e: &Executable) -> Vec<&str> {
    e.functions.iter().filter(|f| f.kind == FuncKind::Packed).map(|f| f.name.as_str()).collect()
}

#[test]
fn every_fixture_parses_and_round_trips() {
    let Some(dir) = fixtures() else { return };
    for name in MODELS {
        let fx = Fixture::load(&dir, name);
        let sym = fx.symbol();
        let (bin, e) = fx.executable();
        // The tree of every Relax export: the executable at the root, importing the library.
        assert_eq!(bin.modules.len(), 2, "{name}");
        assert_eq!(bin.root().kind, VM_EXECUTABLE_KIND, "{name}");
        assert_eq!(bin.root().imports, vec![1], "{name}");
        assert_eq!(bin.lib_index(), Some(1), "{name}");
        assert!(bin.modules[1].imports.is_empty());
        assert_eq!(bin.to_bytes(), sym, "{name}: the tree writes back byte for byte");
        assert_eq!(e.save(), bin.root().payload.unwrap(), "{name}: the executable writes back byte for byte");
        assert_eq!(e.magic, MAGIC_V2);
        assert!(e.memory_scopes.is_empty());

        // The manifest's function: a VM function taking the inputs, named parameters.
        let fname = fx.manifest["function"].as_str().unwrap();
        let inputs = fx.manifest["inputs"].as_array().unwrap().len() as i64;
        let f = &e.functions[e.function_index(fname).unwrap_or_else(|| panic!("{name}: no {fname}"))];
        assert_eq!(f.kind, FuncKind::Vm, "{name}");
        assert_eq!(f.num_args, inputs, "{name}");
        assert_eq!(f.param_names.len() as i64, inputs, "{name}");
        assert!(f.register_file_size > f.num_args, "{name}");
        assert!(e.code(f).len() > 5, "{name}: {} instructions", e.code(f).len());
        assert!(matches!(e.code(f).last(), Some(Instruction::Ret { .. })), "{name}");

        // Every kernel (a packed function that is not a runtime builtin) is in the library.
        for k in packed_names(&e).into_iter().filter(|n| !n.starts_with("vm.builtin.")) {
            assert!(elf_symbol(&fx.file, &format!("__tvm_ffi_{k}")).is_some(), "{name}: kernel {k} missing");
        }
        assert!(packed_names(&e).contains(&"vm.builtin.check_tensor_info"), "{name}");
    }
}

#[test]
fn mlp_takes_weights_as_arguments() {
    let Some(dir) = fixtures() else { return };
    let (_, e) = Fixture::load(&dir, "mlp").executable();
    let f = &e.functions[e.function_index("forward").unwrap()];
    assert_eq!(f.param_names, ["x", "l1.weight", "l1.bias", "l2.weight", "l2.bias"]);
    assert!(!e.constants.iter().any(|c| matches!(c, Constant::Tensor(_))));
    for k in ["matmul", "relu", "softmax"] {
        assert!(packed_names(&e).contains(&k), "{k}");
    }
}

#[test]
fn mlp_bound_holds_the_weights_as_tensor_constants() {
    let Some(dir) = fixtures() else { return };
    let (_, e) = Fixture::load(&dir, "mlp_bound").executable();
    let tensors: Vec<&TensorConst> =
        e.constants.iter().filter_map(|c| if let Constant::Tensor(t) = c { Some(t) } else { None }).collect();
    let shapes: Vec<&[i64]> = tensors.iter().map(|t| t.shape.as_slice()).collect();
    assert_eq!(shapes, [&[32, 16][..], &[32], &[4, 32], &[4]]);
    // The same weights that mlp takes as arguments 1-4.
    for (k, t) in tensors.iter().enumerate() {
        assert_eq!(t.dtype, F32);
        assert_eq!(t.data, npy_data(dir.join(format!("mlp.in.{}.npy", k + 1))), "weight {k}");
    }
    // They reach the kernels as constant arguments.
    let idx: Vec<usize> =
        e.constants.iter().enumerate().filter(|(_, c)| matches!(c, Constant::Tensor(_))).map(|(i, _)| i).collect();
    let used = e.instructions.iter().any(|ins| match ins {
        Instruction::Call { args, .. } => args.iter().any(|a| matches!(a, Arg::ConstIdx(c) if idx.contains(c))),
        _ => false,
    });
    assert!(used);
    assert_eq!(e.functions[0].param_names, ["x"]);
}

#[test]
fn mlp_dyn_uses_the_shape_heap() {
    let Some(dir) = fixtures() else { return };
    let (_, e) = Fixture::load(&dir, "mlp_dyn").executable();
    let names = packed_names(&e);
    for b in ["vm.builtin.alloc_shape_heap", "vm.builtin.match_shape", "vm.builtin.make_shape"] {
        assert!(names.contains(&b), "{b} in {names:?}");
    }
}

#[test]
fn if_tuple_branches_and_builds_tuples() {
    let Some(dir) = fixtures() else { return };
    let (_, e) = Fixture::load(&dir, "if_tuple").executable();
    let f = &e.functions[e.function_index("main").unwrap()];
    let code = e.code(f);
    assert!(code.iter().any(|i| matches!(i, Instruction::If { .. })));
    assert!(code.iter().any(|i| matches!(i, Instruction::Goto { .. })));
    for b in ["vm.builtin.read_if_cond", "vm.builtin.make_tuple"] {
        assert!(packed_names(&e).contains(&b), "{b}");
    }
    // The VM register is passed to builtins that need the VM.
    assert!(code.iter().any(|i| matches!(i, Instruction::Call { args, .. } if args.contains(&Arg::Register(Reg::Vm)))));
    assert!(e.constants.iter().any(|c| matches!(c, Constant::DataType(t) if *t == F32)));
    assert!(e.constants.iter().any(|c| matches!(c, Constant::Shape(s) if s == &[2, 3])));
    assert!(e.constants.iter().any(|c| matches!(c, Constant::Str(s) if s == b"global")));
}

#[test]
fn loop_recurses_through_a_vm_function() {
    let Some(dir) = fixtures() else { return };
    let (_, e) = Fixture::load(&dir, "loop").executable();
    let acc = e.function_index("acc").unwrap();
    let main = e.function_index("main").unwrap();
    assert_eq!(e.functions[acc].kind, FuncKind::Vm);
    assert_eq!(e.functions[acc].param_names, ["i", "n", "x", "s"]);
    let calls_acc =
        |f: usize| e.code(&e.functions[f]).iter().any(|i| matches!(i, Instruction::Call { func, .. } if *func == acc));
    assert!(calls_acc(acc), "acc calls itself");
    assert!(calls_acc(main), "main calls acc");
    assert!(e.code(&e.functions[acc]).iter().any(|i| matches!(i, Instruction::If { .. })));
    // A 0-d int32 tensor constant (the start index).
    assert!(e.constants.iter().any(|c| matches!(c, Constant::Tensor(t) if t.shape.is_empty() && t.data.len() == 4)));
}

#[test]
fn topk_calls_sort_kernels() {
    let Some(dir) = fixtures() else { return };
    let (_, e) = Fixture::load(&dir, "topk").executable();
    for k in ["topk", "sort", "argsort"] {
        assert!(packed_names(&e).contains(&k), "{k}");
    }
}

// ---- damaged input ----

/// A small valid executable and library bin, from the fixtures or (without them) made here.
fn small() -> (Vec<u8>, Vec<u8>) {
    if let Some(dir) = fixtures() {
        let fx = Fixture::load(&dir, "topk");
        let sym = fx.symbol().to_vec();
        let exec = LibraryBin::parse(&sym).unwrap().root().payload.unwrap().to_vec();
        return (sym, exec);
    }
    let exec = handmade().save();
    let bin = LibraryBin {
        modules: vec![
            ModuleEntry { kind: VM_EXECUTABLE_KIND, payload: Some(&exec), imports: vec![1] },
            ModuleEntry { kind: LIB_KIND, payload: None, imports: vec![] },
        ],
    };
    (bin.to_bytes(), exec)
}

/// A small executable exercising every instruction and constant kind.
fn handmade() -> Executable {
    let f = |kind, name: &str, s, e, n, r, p: &[&str]| FuncInfo {
        kind,
        name: name.into(),
        start_instr: s,
        end_instr: e,
        num_args: n,
        register_file_size: r,
        param_names: p.iter().map(|s| s.to_string()).collect(),
    };
    let functions = vec![
        f(FuncKind::Vm, "main", 0, 5, 1, 3, &["x"]),
        f(FuncKind::Packed, "vm.builtin.read_if_cond", 0, 0, -2, 0, &[]),
        f(FuncKind::VmTir, "fused", 0, 0, 2, 3, &[]),
    ];
    let func_map = functions.iter().enumerate().map(|(i, f)| (f.name.clone(), i)).collect();
    let instructions = vec![
        Instruction::Call {
            dst: Reg::R(1),
            func: 1,
            args: vec![Arg::Register(Reg::R(0)), Arg::Immediate(-7), Arg::ConstIdx(1), Arg::FuncIdx(2)],
        },
        Instruction::If { cond: Reg::R(1), false_offset: 3 },
        Instruction::Call { dst: Reg::R(2), func: 2, args: vec![Arg::Register(Reg::Vm), Arg::ConstIdx(0)] },
        Instruction::Goto { offset: 2 },
        Instruction::Ret { result: Reg::R(0) },
    ];
    // The last instruction is a return: put `ret %2` after the goto target.
    let mut instructions = instructions;
    instructions.push(Instruction::Ret { result: Reg::R(2) });
    let mut functions = functions;
    functions[0].end_instr = 6;
    Executable {
        magic: MAGIC_V2,
        dialect: Dialect::Ffi,
        functions,
        func_map,
        memory_scopes: vec![(0, "global.texture".into())],
        constants: vec![
            Constant::Tensor(TensorConst { shape: vec![2], dtype: F32, data: vec![0, 0, 128, 63, 0, 0, 0, 64] }),
            Constant::Shape(vec![2, 3]),
            Constant::Str(b"global".to_vec()),
            Constant::Int(-5),
            Constant::Float(0.5),
            Constant::DataType(F32),
        ],
        instructions,
    }
}

#[test]
fn handmade_executable_round_trips() {
    let e = handmade();
    let bytes = e.save();
    let back = Executable::load(&bytes).unwrap();
    assert_eq!(back, e);
    // The V1 layout (v0.21, v0.22) has no memory-scope section.
    let mut v1 = e.clone();
    v1.magic = MAGIC_V1;
    v1.memory_scopes.clear();
    assert_eq!(Executable::load(&v1.save()).unwrap(), v1);
    // A NaN constant reads back equal (found by the fuzzer: equality compares bits).
    let mut nan = e.clone();
    nan.constants.push(Constant::Float(f64::from_bits(0xFFFF_FFFF_FFFF_FFFE)));
    assert_eq!(Executable::load(&nan.save()).unwrap(), nan);
}

#[test]
fn every_truncation_is_an_error() {
    let (sym, exec) = small();
    for n in 0..exec.len() {
        assert!(Executable::load(&exec[..n]).is_err(), "executable cut at {n}");
    }
    for n in 0..sym.len() {
        assert!(LibraryBin::parse(&sym[..n]).is_err(), "library bin cut at {n}");
        if n + 8 < sym.len() {
            assert!(LibraryBin::parse_tree(&sym[8..8 + n]).is_err(), "tree cut at {n}");
        }
    }
    let hm = handmade().save();
    for n in 0..hm.len() {
        assert!(Executable::load(&hm[..n]).is_err(), "handmade cut at {n}");
    }
}

#[test]
fn flipped_bytes_never_panic_and_what_loads_writes_back() {
    let (sym, exec) = small();
    for blob in [exec.clone(), handmade().save()] {
        for i in 0..blob.len() {
            for x in [0xFF, 0x01, 0x80] {
                let mut b = blob.clone();
                b[i] ^= x;
                if let Ok(e) = Executable::load(&b) {
                    // Anything accepted writes back to something that reads the same (TVM
                    // ignores a tensor record's reserved word and device id, so do we).
                    assert_eq!(Executable::load(&e.save()).unwrap(), e, "byte {i} ^ {x:#x}");
                }
            }
        }
        // The header, version and counts are structure: any change there is an error.
        for i in 0..20 {
            let mut b = blob.clone();
            b[i] ^= 0x40;
            assert!(Executable::load(&b).is_err(), "header byte {i}");
        }
    }
    for i in 0..sym.len() {
        for x in [0xFF, 0x01, 0x80] {
            let mut b = sym.clone();
            b[i] ^= x;
            if let Ok(bin) = LibraryBin::parse(&b) {
                assert_eq!(bin.to_bytes(), b, "byte {i} ^ {x:#x}");
            }
        }
    }
}

fn load_err(e: &Executable) -> String {
    Executable::load(&e.save()).expect_err("must be refused").to_string()
}

fn assert_mentions(msg: &str, parts: &[&str]) {
    for p in parts {
        assert!(msg.contains(p), "{msg:?} should mention {p:?}");
    }
}

#[test]
fn bad_headers_are_refused() {
    let mut b = handmade().save();
    b[0] ^= 1;
    b[1] ^= 1;
    assert_mentions(&Executable::load(&b).unwrap_err().to_string(), &["header", "magic"]);
    let mut b = handmade().save();
    b[16..20].copy_from_slice(b"0.15");
    assert_mentions(&Executable::load(&b).unwrap_err().to_string(), &["version", "0.15", "0.14"]);
    let mut b = handmade().save();
    b.push(0);
    assert_mentions(&Executable::load(&b).unwrap_err().to_string(), &["code section", "left over"]);
}

#[test]
fn bad_instructions_are_refused_with_where() {
    let base = handmade();
    let with = |pc: usize, ins: Instruction| {
        let mut e = base.clone();
        e.instructions[pc] = ins;
        load_err(&e)
    };
    let call = |dst, func, args| Instruction::Call { dst, func, args };
    let fmain = ["VM function \"main\" (index 0)", "instruction 0 (call)"];
    let m = with(0, call(Reg::R(3), 1, vec![]));
    assert_mentions(&m, &fmain);
    assert_mentions(&m, &["destination register %3", "3 registers"]);
    let m = with(0, call(Reg::R(1), 1, vec![Arg::Register(Reg::R(9))]));
    assert_mentions(&m, &fmain);
    assert_mentions(&m, &["argument 0", "%9"]);
    assert_mentions(
        &with(0, call(Reg::R(1), 1, vec![Arg::ConstIdx(6)])),
        &["argument 0", "constant index 6", "6 constants"],
    );
    assert_mentions(&with(0, call(Reg::R(1), 1, vec![Arg::FuncIdx(3)])), &["function index 3", "3 functions"]);
    assert_mentions(&with(0, call(Reg::R(1), 7, vec![])), &["function index 7 is out of range"]);
    assert_mentions(&with(0, call(Reg::Vm, 1, vec![])), &["VM register"]);
    // A VM-TIR (or VM) callee takes exactly its parameters.
    assert_mentions(
        &with(2, call(Reg::R(2), 2, vec![])),
        &["instruction 2", "0 arguments", "\"fused\"", "2 parameters"],
    );
    assert_mentions(&with(2, call(Reg::R(2), 0, vec![])), &["0 arguments", "\"main\", which has 1"]);
    // Jumps.
    assert_mentions(&with(3, Instruction::Goto { offset: 3 }), &["instruction 3 (goto)", "offset 3", "0..6"]);
    assert_mentions(&with(3, Instruction::Goto { offset: -4 }), &["offset -4"]);
    assert_mentions(&with(3, Instruction::Goto { offset: 0 }), &["offset 0"]);
    assert_mentions(
        &with(1, Instruction::If { cond: Reg::R(1), false_offset: 1 }),
        &["instruction 1 (if)", "less than 2"],
    );
    assert_mentions(&with(1, Instruction::If { cond: Reg::R(1), false_offset: 5 }), &["false offset 5"]);
    assert_mentions(&with(1, Instruction::If { cond: Reg::R(4), false_offset: 3 }), &["condition register %4"]);
    assert_mentions(&with(5, Instruction::Ret { result: Reg::R(3) }), &["instruction 5 (ret)", "result register %3"]);
    // Falling through the end.
    assert_mentions(&with(5, call(Reg::Void, 1, vec![])), &["instruction 5", "last instruction"]);
}

#[test]
fn bad_tables_are_refused() {
    let base = handmade();
    let mut e = base.clone();
    e.functions[1].name = "main".into();
    assert_mentions(&load_err(&e), &["global section", "\"main\" is both function 0 and function 1"]);
    let mut e = base.clone();
    e.functions[0].end_instr = 7;
    assert_mentions(&load_err(&e), &["\"main\"", "0..7", "6 instructions"]);
    let mut e = base.clone();
    e.functions[0].start_instr = 3;
    e.functions[0].end_instr = 3;
    assert_mentions(&load_err(&e), &["3..3"]);
    let mut e = base.clone();
    e.functions[0].register_file_size = MAX_REGISTERS + 1;
    assert_mentions(&load_err(&e), &["registers"]);
    let mut e = base.clone();
    e.functions[0].num_args = 4;
    assert_mentions(&load_err(&e), &["4 parameters in 3 registers"]);
    let mut e = base.clone();
    e.functions[0].param_names.push("y".into());
    assert_mentions(&load_err(&e), &["2 parameter names for 1 parameters"]);
    let mut e = base.clone();
    e.functions[2].register_file_size = 2;
    assert_mentions(&load_err(&e), &["VM-TIR function \"fused\""]);
    let mut e = base.clone();
    e.memory_scopes = vec![(6, "global".into())];
    assert_mentions(&load_err(&e), &["memory scope section", "constant 6"]);
    let mut e = base.clone();
    e.memory_scopes = vec![(1, "a".into()), (1, "b".into())];
    assert_mentions(&load_err(&e), &["constant 1 has two scopes"]);
}

#[test]
fn bad_words_are_refused() {
    let e = handmade();
    let bytes = e.save();
    // Find instr_data: it is the last vec<i64>; its first word is the first opcode (1 = call).
    let n_words: usize = {
        let mut v = Vec::new();
        for ins in &e.instructions {
            match ins {
                Instruction::Call { args, .. } => v.push(4 + args.len()),
                Instruction::Ret { .. } | Instruction::Goto { .. } => v.push(2),
                Instruction::If { .. } => v.push(3),
            }
        }
        v.iter().sum()
    };
    let data_at = bytes.len() - 8 * n_words;
    let set = |word: usize, v: i64| {
        let mut b = bytes.clone();
        b[data_at + 8 * word..data_at + 8 * word + 8].copy_from_slice(&v.to_le_bytes());
        Executable::load(&b).unwrap_err().to_string()
    };
    assert_mentions(&set(0, 9), &["code section", "instruction 0", "unknown opcode 9"]);
    assert_mentions(&set(4, 7i64 << 56), &["instruction 0", "argument 0", "unknown kind 7"]);
    assert_mentions(&set(6, (2i64 << 56) | ((1i64 << 56) - 1)), &["constant index -1 is negative"]);
    assert_mentions(&set(1, -3), &["-3 is not a register"]);
    // The argument count changes where the next instruction starts.
    assert_mentions(&set(3, 5), &["instruction 1 starts at word"]);
    assert_mentions(&set(3, 1000), &["1000 arguments run past the end"]);
    // The offsets vector, just before instr_data: make instruction 1 start elsewhere.
    let offsets_at = data_at - 8 - 8 * e.instructions.len();
    let mut b = bytes.clone();
    b[offsets_at + 8..offsets_at + 16].copy_from_slice(&9i64.to_le_bytes());
    assert_mentions(
        &Executable::load(&b).unwrap_err().to_string(),
        &["instruction 1 starts at word 9 of instr_data, expected 8"],
    );
    // An unknown constant type and function kind.
    let mut b = bytes.clone();
    let tag_at = b.windows(8).position(|w| w == NDARRAY_MAGIC_BYTES).unwrap() - 4;
    b[tag_at..tag_at + 4].copy_from_slice(&71i32.to_le_bytes());
    assert_mentions(
        &Executable::load(&b).unwrap_err().to_string(),
        &["constant section", "constant 0", "type index 71"],
    );
    let mut b = bytes.clone();
    b[28..32].copy_from_slice(&3i32.to_le_bytes());
    assert_mentions(&Executable::load(&b).unwrap_err().to_string(), &["global section", "entry 0", "function kind 3"]);
    // A huge count is refused before anything is allocated.
    let mut b = bytes.clone();
    b[20..28].copy_from_slice(&u64::MAX.to_le_bytes());
    assert_mentions(&Executable::load(&b).unwrap_err().to_string(), &["global section", "runs past the end"]);
}

const NDARRAY_MAGIC_BYTES: &[u8] = &tvm_runtime_classic::ndarray::serialize::NDARRAY_MAGIC.to_le_bytes();

#[test]
fn bad_trees_are_refused() {
    let exec = handmade().save();
    let entry = |kind, payload, imports| ModuleEntry { kind, payload, imports };
    let tree = |mods: Vec<ModuleEntry<'_>>| LibraryBin { modules: mods }.to_bytes();
    let err = |b: &[u8]| LibraryBin::parse(b).unwrap_err().to_string();
    let good = tree(vec![entry(VM_EXECUTABLE_KIND, Some(&exec), vec![1]), entry(LIB_KIND, None, vec![])]);
    assert_eq!(LibraryBin::parse(&good).unwrap().lib_index(), Some(1));
    // Extra bytes after the symbol are not part of it.
    let mut longer = good.clone();
    longer.extend_from_slice(&[1, 2, 3]);
    assert!(LibraryBin::parse(&longer).is_ok());

    let cyc = tree(vec![entry(VM_EXECUTABLE_KIND, Some(&exec), vec![1]), entry("cuda", Some(b"x"), vec![0])]);
    assert_mentions(&err(&cyc), &["cycle", "module 1 (cuda) imports module 0 (relax.VMExecutable)"]);
    let own = tree(vec![entry(LIB_KIND, None, vec![0])]);
    assert_mentions(&err(&own), &["cycle", "module 0 (_lib) imports module 0"]);
    let ring = tree(vec![
        entry(VM_EXECUTABLE_KIND, Some(&exec), vec![1]),
        entry(LIB_KIND, None, vec![2]),
        entry("cuda", Some(b"x"), vec![1]),
    ]);
    assert_mentions(&err(&ring), &["cycle", "module 2 (cuda) imports module 1 (_lib)"]);
    let orphan = tree(vec![entry(VM_EXECUTABLE_KIND, Some(&exec), vec![]), entry(LIB_KIND, None, vec![])]);
    assert_mentions(&err(&orphan), &["module 1 (_lib) is imported by no module"]);
    let rooted = tree(vec![entry(LIB_KIND, None, vec![1]), entry("cuda", Some(b"x"), vec![])]);
    assert!(LibraryBin::parse(&rooted).is_ok());
    // What TVM's writer produces beside the plain chain: it numbers modules as a stack-driven
    // depth-first walk pops them, so a root importing [lib, cuda] where lib imports cuda too
    // reads [2, 1] and lib (2) imports cuda (1); a module imported twice is listed twice.
    let dag = tree(vec![
        entry(VM_EXECUTABLE_KIND, Some(&exec), vec![2, 1]),
        entry("cuda", Some(b"x"), vec![]),
        entry(LIB_KIND, None, vec![1, 1]),
    ]);
    let parsed = LibraryBin::parse(&dag).unwrap();
    assert_eq!(parsed.modules[0].imports, vec![2, 1]);
    assert_eq!(parsed.modules[2].imports, vec![1, 1]);
    assert_eq!(LibraryBin::parse(&parsed.to_bytes()).unwrap(), parsed);
    let two_libs = tree(vec![entry(LIB_KIND, None, vec![1]), entry(LIB_KIND, None, vec![])]);
    assert_mentions(&err(&two_libs), &["modules 0 and 1 are both _lib"]);
    let empty_kind = tree(vec![entry("", Some(b""), vec![])]);
    assert_mentions(&err(&empty_kind), &["kind is empty"]);
    let none = tree(vec![]);
    assert_mentions(&err(&none), &["1 row pointers"]);

    // Hand-written CSR errors.
    let raw = |indptr: &[u64], children: &[u64], rest: &[u8]| {
        let mut w = tvm_runtime_classic::io::Writer::default();
        w.vec_u64(indptr);
        w.vec_u64(children);
        w.bytes(rest);
        let mut out = (w.buf.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(&w.buf);
        out
    };
    let lib = {
        let mut w = tvm_runtime_classic::io::Writer::default();
        w.str_bytes(b"_lib");
        w.str_bytes(b"_lib");
        w.buf
    };
    assert!(LibraryBin::parse(&raw(&[0, 1, 1], &[1], &lib)).unwrap_err().to_string().contains("both _lib"));
    assert_mentions(&err(&raw(&[1, 1, 1], &[1], &lib)), &["first row pointer is 1"]);
    assert_mentions(&err(&raw(&[0, 1, 2], &[1], &lib)), &["last row pointer is 2", "1 child indices"]);
    let kinds = |n: usize| {
        let mut w = tvm_runtime_classic::io::Writer::default();
        w.str_bytes(b"_lib");
        for _ in 1..n {
            w.str_bytes(b"cuda");
            w.str_bytes(b"x");
        }
        w.buf
    };
    assert_mentions(&err(&raw(&[0, 2, 1, 2], &[1, 2], &kinds(3))), &["row pointers decrease at module 1"]);
    assert_mentions(&err(&raw(&[0, 1, 1], &[5], &kinds(2))), &["imports module 5", "only 2 modules"]);
    let short = {
        let mut w = tvm_runtime_classic::io::Writer::default();
        w.str_bytes(b"_lib");
        w.str_bytes(b"x");
        w.str_bytes(b"");
        w.buf
    };
    assert_mentions(&err(&raw(&[0, 0, 0, 0], &[], &short)), &["module 2's kind"]);
    let mut trailing = raw(&[0, 0], &[], b"\x04\0\0\0\0\0\0\0_lib");
    assert!(LibraryBin::parse(&trailing).is_ok());
    trailing = raw(&[0, 0], &[], b"\x04\0\0\0\0\0\0\0_libX");
    assert_mentions(&err(&trailing), &["1 bytes left over"]);
    let mut big = good.clone();
    big[..8].copy_from_slice(&(good.len() as u64).to_le_bytes());
    assert_mentions(&err(&big), &["size header says"]);
    let many = raw(&vec![0u64; 1000], &[], &[]);
    assert_mentions(&err(&many), &["999 modules cannot fit"]);
}

#[test]
fn fixtures_define_only_known_context_slots() {
    let Some(dir) = fixtures() else { return };
    let mut seen = std::collections::BTreeSet::new();
    for name in MODELS {
        let file = std::fs::read(dir.join(format!("{name}.so"))).unwrap();
        let names = elf_symbol_names(&file);
        assert!(names.contains(&LIBRARY_BIN_SYMBOL), "{name}");
        for n in names.into_iter().filter(|n| n.starts_with("__TVM")) {
            assert!(CONTEXT_SYMBOLS.contains(&n), "{name}: unknown context slot {n}");
            seen.insert(n.to_string());
        }
        assert!(elf_symbol_names(&file).iter().any(|n| n.starts_with(FUNCTION_PREFIX) && *n != LIBRARY_BIN_SYMBOL));
    }
    // mlp_dyn's kernels take workspaces; topk's call tvm.contrib.sort.* found through imports.
    let all: Vec<&str> = seen.iter().map(String::as_str).collect();
    assert_eq!(
        all,
        [
            "__TVMBackendAllocWorkspace",
            "__TVMBackendFreeWorkspace",
            "__TVMFFIEnvModLookupFromImports",
            "__TVMFFIFunctionCall",
            "__TVMFFIHandleInitOnce"
        ]
    );
    let topk = std::fs::read(dir.join("topk.so")).unwrap();
    assert!(elf_symbol_names(&topk).contains(&LIBRARY_CTX_SYMBOL));
}

#[test]
fn elf_symbol_reads_only_sound_files() {
    assert!(elf_symbol(b"", LIBRARY_BIN_SYMBOL).is_none());
    assert!(elf_symbol(b"\x7fELF\x02\x01\0\0", LIBRARY_BIN_SYMBOL).is_none());
    let Some(dir) = fixtures() else { return };
    let file = std::fs::read(dir.join("loop.so")).unwrap();
    assert!(elf_symbol(&file, "no_such_symbol").is_none());
    // Every truncation of a real library is handled (the symbol goes away or stays whole).
    let full = elf_symbol(&file, LIBRARY_BIN_SYMBOL).unwrap();
    for n in (0..file.len()).step_by(97) {
        if let Some(s) = elf_symbol(&file[..n], LIBRARY_BIN_SYMBOL) {
            assert_eq!(s, full);
        }
    }
}

// ---- v0.14-v0.20 (classic runtime) executables ----

/// The `relax.Executable` of a classic export's `__tvm_dev_mblob`.
fn classic_executable(so: &[u8]) -> Vec<u8> {
    let blob = elf_symbol(so, "__tvm_dev_mblob").expect("a classic export has __tvm_dev_mblob");
    let mut r = tvm_runtime_classic::io::Reader::new(&blob[8..], "blob");
    for _ in 0..r.u64().unwrap() {
        match r.string().unwrap().as_str() {
            "_import_tree" => {
                r.vec_u64().unwrap();
                r.vec_u64().unwrap();
            }
            "_lib" => {}
            "relax.Executable" => return r.str_bytes().unwrap().to_vec(),
            k => panic!("unexpected blob entry {k}"),
        }
    }
    panic!("no relax.Executable in the blob")
}

#[test]
fn v018_relax_exports_parse_with_classic_tags() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures-v0.18-relax");
    if !dir.join("manifest.json").is_file() {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{} is missing (CI=true)", dir.display());
        eprintln!("skipped: {} is absent", dir.display());
        return;
    }
    for name in ["mlp", "mlp_bound", "mlp_dyn", "if_tuple", "loop"] {
        let fx = Fixture::load(&dir, name);
        let bytes = classic_executable(&fx.file);
        let e = Executable::load_classic(&bytes).unwrap_or_else(|err| panic!("{name}: {err}"));
        assert_eq!((e.magic, e.dialect), (MAGIC_V1, Dialect::Classic));
        assert_eq!(e.save(), bytes, "{name}: writes back byte for byte");
        let fname = fx.manifest["function"].as_str().unwrap();
        let f = &e.functions[e.function_index(fname).unwrap()];
        assert_eq!((f.kind, f.num_args), (FuncKind::Vm, fx.manifest["inputs"].as_array().unwrap().len() as i64));
        assert!(e.code(f).len() > 5);
        // The tags differ from v0.22+: the ffi reading refuses these bytes.
        assert!(Executable::load(&bytes).is_err(), "{name}");
        if name == "mlp_bound" {
            let shapes: Vec<&[i64]> = e
                .constants
                .iter()
                .filter_map(|c| if let Constant::Tensor(t) = c { Some(t.shape.as_slice()) } else { None })
                .collect();
            assert_eq!(shapes, [&[32, 16][..], &[32], &[4, 32], &[4]]);
        }
    }
}

#[test]
fn classic_dialect_round_trips_and_wants_the_v1_magic() {
    let mut e = handmade();
    e.dialect = Dialect::Classic;
    e.magic = MAGIC_V1;
    e.memory_scopes.clear();
    let b = e.save();
    assert_eq!(Executable::load_classic(&b).unwrap(), e);
    assert_mentions(&Executable::load(&b).unwrap_err().to_string(), &["constant 0", "type index 0"]);
    let mut v2 = b.clone();
    v2[..8].copy_from_slice(&MAGIC_V2.to_le_bytes());
    assert_mentions(&Executable::load_classic(&v2).unwrap_err().to_string(), &["magic", "v0.14-v0.20"]);
}

// ---- text ----

#[test]
fn as_text_and_stats_read_as_tvm_prints_them() {
    let e = handmade();
    let t = e.as_text();
    assert!(
        t.starts_with("@main:\n  call  vm.builtin.read_if_cond in: %0, i-7, c[1], f[fused] dst: %1\n  If    %1, 3\n"),
        "{t}"
    );
    assert!(
        t.contains("  call  fused            in: %vm, c[0]    dst: %2\n  goto  2\n  ret   %0\n  ret   %2\n\n"),
        "{t}"
    );
    assert!(t.contains("@vm.builtin.read_if_cond packed_func;\n\n@fused num_inputs=2 vm_tir_func;\n\n"), "{t}");
    assert_eq!(
        e.stats(),
        "Relax VM executable statistics:\n  Constant pool (# 6): [[2], shapetuple[2, 3], \"global\", -5, 0.5, float32]\n  \
         Globals (#3): [main, vm.builtin.read_if_cond, fused]\n"
    );
    let Some(dir) = fixtures() else { return };
    let (_, e) = Fixture::load(&dir, "loop").executable();
    let t = e.as_text();
    assert!(t.contains("  call  acc              in: %14, %1, %2, %12 dst: %15\n"), "{t}");
    assert!(t.contains("  If    %6, 24\n") && t.contains("@main:\n"), "{t}");
    let s = e.stats();
    assert!(
        s.contains("scalar") && s.contains("shapetuple[16]") && s.contains("\"global\"") && s.contains("bool"),
        "{s}"
    );
    assert!(s.ends_with("Globals (#15): [acc, vm.builtin.check_tensor_info, vm.builtin.match_shape, vm.builtin.alloc_storage, vm.builtin.alloc_tensor, vm.builtin.null_value, less, vm.builtin.read_if_cond, cast, multiply, add, add1, vm.builtin.copy, main, zeros]\n"), "{s}");
}

/// Held by the tests that look into pools: `memory_manager.clear` empties every live pool.
static POOLS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A machine over an empty executable with a pooled allocator for the CPU.
fn pooled_machine() -> super::vm::Runtime {
    let exe = Executable {
        magic: MAGIC_V2,
        dialect: Dialect::Ffi,
        functions: vec![],
        func_map: Default::default(),
        memory_scopes: vec![],
        constants: vec![],
        instructions: vec![],
    };
    let cpu = tvm_runtime_classic::abi::DLDevice { device_type: tvm_runtime_classic::device::CPU, device_id: 0 };
    super::vm::init(std::sync::Arc::new(exe), &[], &[], vec![(cpu, 2)]).unwrap()
}

#[test]
fn dropping_a_machine_returns_its_pooled_blocks() {
    let _pools = POOLS.lock().unwrap_or_else(|e| e.into_inner());
    let rt = pooled_machine();
    let a = rt.allocators[0].clone();
    let (p, size) = a.alloc(100, 64, F32).unwrap();
    a.free(p, size, 64);
    assert_eq!(a.held_bytes(), 4096, "the freed block stays in the pool while the machine lives");
    drop(rt);
    assert_eq!(a.held_bytes(), 0, "the pool was released with the machine");
}

#[test]
fn memory_manager_clear_empties_every_live_pool() {
    let _pools = POOLS.lock().unwrap_or_else(|e| e.into_inner());
    let (r1, r2) = (pooled_machine(), pooled_machine());
    let (a1, a2) = (r1.allocators[0].clone(), r2.allocators[0].clone());
    let (p, size) = a1.alloc(100, 64, F32).unwrap();
    let (kept, kept_size) = a1.alloc(5000, 64, F32).unwrap();
    a1.free(p, size, 64);
    let (q, size) = a2.alloc(9000, 64, F32).unwrap();
    a2.free(q, size, 64);
    assert_eq!((a1.pooled_bytes(), a2.pooled_bytes()), (4096, 12288));
    let clear = tvm_runtime_tvm_ffi::registry::get("vm.builtin.memory_manager.clear").expect("registered");
    tvm_runtime_tvm_ffi::function::call(&clear, &[]).unwrap();
    assert_eq!((a1.pooled_bytes(), a2.pooled_bytes()), (0, 0), "pooled blocks went back to the device");
    assert_eq!(a1.held_bytes(), 8192, "the block in use stays");
    a1.free(kept, kept_size, 64);
}

#[test]
fn backward_jumps_are_refused() {
    let mut e = handmade();
    let at = e.instructions.iter().position(|i| matches!(i, Instruction::Goto { .. })).unwrap();
    e.instructions[at] = Instruction::Goto { offset: -1 };
    let err = Executable::load(&e.save()).unwrap_err().to_string();
    assert_mentions(&err, &["backwards", &format!("instruction {at}")]);
}
