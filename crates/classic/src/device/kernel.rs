//! What CUDA and OpenCL modules share: the kernel metadata (`FunctionInfo`), its
//! `.tvm_meta.json` side file, and the checked decoding of a kernel call's
//! arguments and launch extents.
//!
//! Everything here is pure data handling, so it is tested on every machine, driver or not.

use crate::abi::{DLDataType, TVMValue};
use crate::error::{Error, Result};
use crate::io::{Reader, Writer};
use crate::value::{code, dtype, Args};
use indexmap::IndexMap;

/// The launch tag that adds a dynamic-shared-memory size after the extents.
pub(crate) const DYN_SHMEM_TAG: &str = "tir.use_dyn_shared_memory";

/// Metadata of one device kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FunctionInfo {
    /// Left empty by TVM's compiler; the map key is the kernel's name.
    pub name: String,
    /// One type per kernel parameter (buffers are `handle`).
    pub arg_types: Vec<DLDataType>,
    /// Thread-axis tags, in launch-argument order, optionally ending with [`DYN_SHMEM_TAG`].
    pub launch_param_tags: Vec<String>,
}

/// Kernel name -> metadata, in the order read.
pub type FunctionMap = IndexMap<String, FunctionInfo>;

impl FunctionInfo {
    /// Reads the binary form.
    pub fn read(r: &mut Reader<'_>) -> Result<FunctionInfo> {
        let name = r.string()?;
        let n = r.count(4)?;
        let arg_types = (0..n).map(|_| r.dtype()).collect::<Result<Vec<_>>>()?;
        let launch_param_tags = r.vec_string()?;
        Ok(FunctionInfo { name, arg_types, launch_param_tags })
    }

    /// Writes the binary form.
    pub fn write(&self, w: &mut Writer) {
        w.str_bytes(self.name.as_bytes());
        w.u64(self.arg_types.len() as u64);
        for &t in &self.arg_types {
            w.dtype(t);
        }
        w.vec_str(&self.launch_param_tags);
    }
}

/// Reads a function map (`u64` count, then name + FunctionInfo pairs).
pub(crate) fn read_fmap(r: &mut Reader<'_>) -> Result<FunctionMap> {
    read_fmap_with(r, false)
}

/// Reads a function map whose entries end with `arg_extra_tags` (a `u64` count of `int32`
/// tags, one per argument: TVM v0.12+ writes them; the modules of a v0.20+ library binary
/// always have them). Only plain arguments (tag 0) are supported: a tensor-map argument
/// (tag 1, CUDA TMA) is refused.
pub(crate) fn read_fmap_tagged(r: &mut Reader<'_>) -> Result<FunctionMap> {
    read_fmap_with(r, true)
}

fn read_fmap_with(r: &mut Reader<'_>, tagged: bool) -> Result<FunctionMap> {
    let n = r.count(8 + 8 + 8 + 8)?;
    let mut m = FunctionMap::with_capacity(n);
    for _ in 0..n {
        let name = r.string()?;
        let info = FunctionInfo::read(r)?;
        if tagged {
            let k = r.count(4)?;
            for i in 0..k {
                let tag = r.i32()?;
                if tag != 0 {
                    return Err(Error::value(format!(
                        "kernel {name}: argument {i} has extra tag {tag} (a tensor map), which this runtime does not support"
                    )));
                }
            }
        }
        m.insert(name, info);
    }
    Ok(m)
}

/// `read_payload` of a module with `arg_extra_tags` (see [`read_fmap_tagged`]).
pub fn read_payload_tagged(r: &mut Reader<'_>) -> Result<(String, FunctionMap, Vec<u8>)> {
    let fmt = r.string()?;
    let fmap = read_fmap_tagged(r)?;
    let data = r.str_bytes()?.to_vec();
    Ok((fmt, fmap, data))
}

/// Writes a function map.
pub(crate) fn write_fmap(w: &mut Writer, m: &FunctionMap) {
    w.u64(m.len() as u64);
    for (name, info) in m {
        w.str_bytes(name.as_bytes());
        info.write(w);
    }
}

/// The side file of a device code file: the path with everything from its last `.` replaced by
/// `.tvm_meta.json` (appended when there is no `.`; the `.` may be in a directory name, as in
/// v0.8).
pub fn meta_path(path: &str) -> String {
    match path.rfind('.') {
        Some(p) => format!("{}.tvm_meta.json", &path[..p]),
        None => format!("{path}.tvm_meta.json"),
    }
}

/// Parses the JSON of a `.tvm_meta.json` side file.
pub fn parse_meta_json(text: &str) -> Result<FunctionMap> {
    let bad = |what: &str| Error::value(format!("invalid .tvm_meta.json: {what}"));
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| bad(&e.to_string()))?;
    let obj = v.as_object().ok_or_else(|| bad("not a JSON object"))?;
    if !obj.contains_key("tvm_version") {
        return Err(bad("missing field tvm_version"));
    }
    let infos = obj.get("func_info").and_then(|f| f.as_object()).ok_or_else(|| bad("missing object func_info"))?;
    let strings = |v: &serde_json::Value, what: &str| -> Result<Vec<String>> {
        v.as_array()
            .ok_or_else(|| bad(&format!("{what} is not an array")))?
            .iter()
            .map(|s| s.as_str().map(str::to_owned).ok_or_else(|| bad(&format!("{what} holds a non-string"))))
            .collect()
    };
    let mut m = FunctionMap::with_capacity(infos.len());
    for (key, info) in infos {
        let o = info.as_object().ok_or_else(|| bad(&format!("func_info[{key}] is not an object")))?;
        let name = o.get("name").and_then(|n| n.as_str()).unwrap_or_default().to_owned();
        let arg_types = match o.get("arg_types") {
            Some(a) => strings(a, "arg_types")?.iter().map(|s| dtype::parse(s)).collect::<Result<Vec<_>>>()?,
            None => return Err(bad(&format!("func_info[{key}] has no arg_types"))),
        };
        let tags = match o.get("launch_param_tags").or_else(|| o.get("thread_axis_tags")) {
            Some(t) => strings(t, "launch_param_tags")?,
            None => Vec::new(),
        };
        m.insert(key.clone(), FunctionInfo { name, arg_types, launch_param_tags: tags });
    }
    Ok(m)
}

/// Formats a function map as a `.tvm_meta.json` side file.
pub fn meta_json(m: &FunctionMap) -> Result<String> {
    let mut infos = serde_json::Map::new();
    for (k, f) in m {
        let types = f.arg_types.iter().map(|&t| dtype::format(t)).collect::<Result<Vec<_>>>()?;
        infos.insert(
            k.clone(),
            serde_json::json!({ "name": f.name, "arg_types": types, "launch_param_tags": f.launch_param_tags }),
        );
    }
    let doc = serde_json::json!({ "tvm_version": "0.8.0", "func_info": infos });
    serde_json::to_string_pretty(&doc).map_err(|e| Error::internal(e.to_string()))
}

/// What the file loaders of device code read: the format, the image and the function map.
pub struct DeviceFile {
    /// `format` if given, else the file's extension.
    pub fmt: String,
    /// The whole file.
    pub data: Vec<u8>,
    /// From the side file.
    pub fmap: FunctionMap,
}

/// Reads a device code file and its `.tvm_meta.json` side file (`loadfile_ptx`, `loadfile_cl`).
pub fn read_device_file(path: &str, format: &str) -> Result<DeviceFile> {
    let fmt = if format.is_empty() {
        path.rfind('.').map(|p| path[p + 1..].to_owned()).unwrap_or_default()
    } else {
        format.to_owned()
    };
    let data = std::fs::read(path).map_err(|e| Error::tvm(format!("Cannot open {path}: {e}")))?;
    let meta = meta_path(path);
    let text = std::fs::read_to_string(&meta).map_err(|e| Error::tvm(format!("Cannot open file {meta}: {e}")))?;
    let fmap = parse_meta_json(&text).map_err(|e| e.context(meta.clone()))?;
    Ok(DeviceFile { fmt, data, fmap })
}

/// The payload of a device module (`fmt`, function map, image), as CUDA and OpenCL modules
/// serialize themselves.
pub fn write_payload(fmt: &str, fmap: &FunctionMap, data: &[u8]) -> Vec<u8> {
    let mut w = Writer::default();
    w.str_bytes(fmt.as_bytes());
    write_fmap(&mut w, fmap);
    w.str_bytes(data);
    w.buf
}

/// Reads a device module payload: `fmt`, function map, image.
pub fn read_payload(r: &mut Reader<'_>) -> Result<(String, FunctionMap, Vec<u8>)> {
    let fmt = r.string()?;
    let fmap = read_fmap(r)?;
    let data = r.str_bytes()?.to_vec();
    Ok((fmt, fmap, data))
}

/// `SaveToFile` of a device module: the image raw, plus the `.tvm_meta.json` side file. The
/// format (`format`, else the path's extension) must be the module's own.
pub fn save_device_file(path: &str, format: &str, fmt: &str, data: &[u8], fmap: &FunctionMap) -> Result<()> {
    let want = if format.is_empty() { path.rsplit('.').next().unwrap_or("") } else { format };
    if want != fmt {
        return Err(Error::value(format!("Can only save to format={fmt}")));
    }
    std::fs::write(path, data).map_err(|e| Error::tvm(format!("Cannot write {path}: {e}")))?;
    let meta = meta_path(path);
    std::fs::write(&meta, meta_json(fmap)?).map_err(|e| Error::tvm(format!("Cannot write {meta}: {e}")))
}

/// How a kernel parameter is passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    /// int64: 8 bytes.
    I64,
    /// int32: `v_int64` truncated, 4 bytes.
    I32,
    /// uint32: `v_int64` truncated, 4 bytes.
    U32,
    /// float64: 8 bytes.
    F64,
    /// float32: `v_float64` narrowed, 4 bytes.
    F32,
    /// A device buffer: the handle, 8 bytes.
    Handle,
}

impl ArgKind {
    /// The kind of a parameter type, or `Cannot handle <dtype> as device function argument`.
    pub fn of(t: DLDataType) -> Result<ArgKind> {
        if t.lanes != 1 {
            return Err(Error::value("Cannot pass vector type argument to devic function for now"));
        }
        Ok(match (t.code, t.bits) {
            (dtype::CODE_INT, 64) => ArgKind::I64,
            (dtype::CODE_INT, 32) => ArgKind::I32,
            (dtype::CODE_UINT, 32) => ArgKind::U32,
            (dtype::CODE_FLOAT, 64) => ArgKind::F64,
            (dtype::CODE_FLOAT, 32) => ArgKind::F32,
            (dtype::CODE_HANDLE, _) => ArgKind::Handle,
            _ => {
                let name = dtype::format(t).unwrap_or_else(|_| format!("{t:?}"));
                return Err(Error::value(format!("Cannot handle {name} as device function argument")));
            }
        })
    }

    /// Bytes the kernel receives.
    pub fn size(self) -> usize {
        match self {
            ArgKind::I32 | ArgKind::U32 | ArgKind::F32 => 4,
            _ => 8,
        }
    }
}

/// The launch configuration a kernel's tags describe (`LaunchParamConfig`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchSpec {
    /// Per tag, the slot it fills: 0..3 grid x/y/z, 3..6 block x/y/z.
    slots: Vec<u8>,
    /// Whether a dynamic-shared-memory size follows the extents.
    dyn_shmem: bool,
}

/// Grid and block extents (and dynamic shared memory bytes) of one launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchDims {
    /// Grid x, y, z.
    pub grid: [u32; 3],
    /// Block x, y, z.
    pub block: [u32; 3],
    /// Dynamic shared memory bytes.
    pub dyn_shmem: u32,
}

impl LaunchSpec {
    /// Parses the tags (`Unknown threadscope <tag>`, dyn-shmem tag not last).
    pub fn parse(tags: &[String]) -> Result<LaunchSpec> {
        let mut slots = Vec::with_capacity(tags.len());
        let mut dyn_shmem = false;
        for (i, tag) in tags.iter().enumerate() {
            if tag == DYN_SHMEM_TAG {
                if i + 1 != tags.len() {
                    return Err(Error::value(
                        "kUseDynamicSharedMemoryTag should be the last tag in launch_param_tags.",
                    ));
                }
                dyn_shmem = true;
                continue;
            }
            let slot = match tag.as_str() {
                "blockIdx.x" => 0,
                "blockIdx.y" => 1,
                "blockIdx.z" => 2,
                "threadIdx.x" => 3,
                "threadIdx.y" => 4,
                "threadIdx.z" => 5,
                t if t.starts_with("vthread") || t == "cthread" => 2,
                t => return Err(Error::value(format!("Unknown threadscope {t}"))),
            };
            slots.push(slot);
        }
        Ok(LaunchSpec { slots, dyn_shmem })
    }

    /// Number of extent arguments (tags, plus one for dynamic shared memory).
    pub(crate) fn num_values(&self) -> usize {
        self.slots.len() + usize::from(self.dyn_shmem)
    }

    /// OpenCL `work_dim`: 1 + the highest dimension any tag fills (1 without tags).
    pub fn work_dim(&self) -> u32 {
        self.slots.iter().map(|&s| u32::from(s % 3) + 1).max().unwrap_or(1)
    }

    /// Reads the extents from `values` (one int per tag, then the shared memory size). 0 keeps
    /// the slot at 1; negative values and values of 2^32 or more are errors.
    fn dims(&self, kernel: &str, values: &[TVMValue], codes: &[i32]) -> Result<LaunchDims> {
        let mut work = [1u32; 6];
        let get = |i: usize| -> Result<u32> {
            if codes[i] != code::INT {
                return Err(Error::type_error(format!(
                    "kernel {kernel}: launch extent {i} must be an int, got {}",
                    crate::value::code_name(codes[i])
                )));
            }
            // SAFETY: code INT means the `v_int64` member is the one set.
            let v = unsafe { values[i].v_int64 };
            u32::try_from(v)
                .map_err(|_| Error::value(format!("kernel {kernel}: launch extent {v} is out of range [0, 2^32)")))
        };
        for (i, &slot) in self.slots.iter().enumerate() {
            let v = get(i)?;
            if v != 0 {
                work[slot as usize] = v;
            }
        }
        let dyn_shmem = if self.dyn_shmem { get(self.slots.len())? } else { 0 };
        Ok(LaunchDims { grid: [work[0], work[1], work[2]], block: [work[3], work[4], work[5]], dyn_shmem })
    }
}

/// A kernel's signature, checked when the function is made (`GetFunction` time).
#[derive(Clone, Debug)]
pub struct KernelSig {
    /// The kernel's name.
    pub name: String,
    /// How each parameter is passed.
    pub kinds: Vec<ArgKind>,
    /// The launch configuration.
    pub launch: LaunchSpec,
}

#[derive(Debug)]
/// One call's kernel arguments, converted: one 8-byte word per parameter. 4-byte kinds hold
/// their value in the word's first 4 bytes, so `&words[i]` is what the driver reads.
pub struct KernelArgs {
    /// The converted values.
    pub words: Vec<u64>,
    /// The launch extents.
    pub dims: LaunchDims,
}

impl KernelSig {
    /// Checks a kernel's metadata.
    pub fn new(name: &str, info: &FunctionInfo) -> Result<KernelSig> {
        let kinds = info.arg_types.iter().map(|&t| ArgKind::of(t)).collect::<Result<Vec<_>>>()?;
        let launch = LaunchSpec::parse(&info.launch_param_tags)?;
        Ok(KernelSig { name: name.to_owned(), kinds, launch })
    }

    /// Arguments a call must pass: the parameters, then the launch values.
    pub fn num_args(&self) -> usize {
        self.kinds.len() + self.launch.num_values()
    }

    /// Checks and converts a call's arguments (extra trailing arguments are ignored, as in v0.8).
    pub fn decode(&self, args: &Args<'_>) -> Result<KernelArgs> {
        let (values, codes) = (args.values(), args.codes());
        let want = self.num_args();
        if values.len() < want {
            return Err(Error::value(format!(
                "kernel {} expects {want} arguments ({} parameters and {} launch values), got {}",
                self.name,
                self.kinds.len(),
                self.launch.num_values(),
                values.len()
            )));
        }
        let mut words = Vec::with_capacity(self.kinds.len());
        for (i, &kind) in self.kinds.iter().enumerate() {
            let c = codes[i];
            let v = values[i];
            let bad = |want: &str| {
                Error::type_error(format!(
                    "kernel {}: argument {i} must be {want}, got {}",
                    self.name,
                    crate::value::code_name(c)
                ))
            };
            let w = match kind {
                ArgKind::Handle => match c {
                    // SAFETY: code HANDLE means `v_handle` is the member set.
                    code::HANDLE => (unsafe { v.v_handle }) as u64,
                    code::NULL => 0,
                    _ => return Err(bad("a device pointer (opaque handle)")),
                },
                ArgKind::I64 | ArgKind::I32 | ArgKind::U32 => {
                    if c != code::INT {
                        return Err(bad("an int"));
                    }
                    // SAFETY: code INT means `v_int64` is the member set.
                    let x = unsafe { v.v_int64 };
                    if kind == ArgKind::I64 {
                        x as u64
                    } else {
                        u64::from(x as u32)
                    }
                }
                ArgKind::F64 | ArgKind::F32 => {
                    if c != code::FLOAT {
                        return Err(bad("a float"));
                    }
                    // SAFETY: code FLOAT means `v_float64` is the member set.
                    let x = unsafe { v.v_float64 };
                    if kind == ArgKind::F64 {
                        x.to_bits()
                    } else {
                        u64::from((x as f32).to_bits())
                    }
                }
            };
            words.push(w);
        }
        let p = self.kinds.len();
        let dims = self.launch.dims(&self.name, &values[p..], &codes[p..])?;
        Ok(KernelArgs { words, dims })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{ArgsBuf, Value};

    fn info(types: &[&str], tags: &[&str]) -> FunctionInfo {
        FunctionInfo {
            name: String::new(),
            arg_types: types.iter().map(|s| dtype::parse(s).unwrap()).collect(),
            launch_param_tags: tags.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn fmap_round_trip_and_truncation() {
        let mut m = FunctionMap::new();
        m.insert("k0".into(), info(&["handle", "int32", "float32"], &["blockIdx.x", "threadIdx.x"]));
        m.insert("k1".into(), info(&["handle"], &[]));
        let mut w = Writer::default();
        write_fmap(&mut w, &m);
        let back = read_fmap(&mut Reader::new(&w.buf, "fmap")).unwrap();
        assert_eq!(back, m);
        for cut in 0..w.buf.len() {
            assert!(read_fmap(&mut Reader::new(&w.buf[..cut], "fmap")).is_err(), "cut {cut}");
        }
        // A huge count is rejected before anything is allocated.
        let mut bad = w.buf.clone();
        bad[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(read_fmap(&mut Reader::new(&bad, "fmap")).is_err());
    }

    #[test]
    fn meta_json_forms() {
        let m = parse_meta_json(
            r#"{"tvm_version":"0.1.0","func_info":{"k":{"name":"","arg_types":["handle","int64"],
               "thread_axis_tags":["blockIdx.x"]},"j":{"arg_types":[]}}}"#,
        )
        .unwrap();
        assert_eq!(m["k"], info(&["handle", "int64"], &["blockIdx.x"]));
        assert_eq!(m["j"], info(&[], &[]));
        let again = parse_meta_json(&meta_json(&m).unwrap()).unwrap();
        assert_eq!(again, m);
        for bad in [
            "[]",
            "{\"func_info\":{}}",
            "{\"tvm_version\":\"x\"}",
            "{\"tvm_version\":\"x\",\"func_info\":{\"k\":{\"arg_types\":[\"what\"]}}}",
            "{\"tvm_version\":\"x\",\"func_info\":{\"k\":{}}}",
            "not json",
        ] {
            assert!(parse_meta_json(bad).is_err(), "{bad}");
        }
        assert_eq!(meta_path("/a/b.ptx"), "/a/b.tvm_meta.json");
        assert_eq!(meta_path("/a.d/b"), "/a.tvm_meta.json");
        assert_eq!(meta_path("b"), "b.tvm_meta.json");
    }

    #[test]
    fn arg_kinds() {
        let k = |s: &str| ArgKind::of(dtype::parse(s).unwrap());
        assert_eq!(k("int64").unwrap(), ArgKind::I64);
        assert_eq!(k("uint32").unwrap().size(), 4);
        assert_eq!(k("handle").unwrap().size(), 8);
        for bad in ["int8", "int16", "uint64", "float16", "bool", "bfloat16"] {
            let e = k(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("Cannot handle {bad} as device function argument")), "{e}");
        }
        assert!(k("float32x4").unwrap_err().to_string().contains("vector type"));
    }

    #[test]
    fn launch_specs() {
        let s = |tags: &[&str]| LaunchSpec::parse(&tags.iter().map(|t| t.to_string()).collect::<Vec<_>>());
        assert_eq!(s(&[]).unwrap().work_dim(), 1);
        assert_eq!(s(&["blockIdx.x", "threadIdx.x"]).unwrap().work_dim(), 1);
        assert_eq!(s(&["blockIdx.y", "blockIdx.x", "threadIdx.x"]).unwrap().work_dim(), 2);
        assert_eq!(s(&["threadIdx.z"]).unwrap().work_dim(), 3);
        assert!(s(&["blockIdx.w"]).unwrap_err().to_string().contains("Unknown threadscope blockIdx.w"));
        assert!(s(&["threadIdx.q"]).is_err());
        assert!(s(&[DYN_SHMEM_TAG, "blockIdx.x"]).unwrap_err().to_string().contains("should be the last tag"));
        assert_eq!(s(&["blockIdx.x", DYN_SHMEM_TAG]).unwrap().num_values(), 2);
    }

    fn decode(sig: &KernelSig, vals: &[Value]) -> Result<KernelArgs> {
        let buf = ArgsBuf::new(vals);
        sig.decode(&buf.args())
    }

    #[test]
    fn decode_args_and_extents() {
        let sig = KernelSig::new(
            "k",
            &info(&["handle", "int32", "float32", "float64"], &["blockIdx.y", "blockIdx.x", "threadIdx.x"]),
        )
        .unwrap();
        let p = 0x1000usize as *mut std::ffi::c_void;
        let ok = [
            Value::Handle(p),
            Value::Int(-2),
            Value::Float(1.5),
            Value::Float(2.25),
            Value::Int(3),
            Value::Int(5),
            Value::Int(32),
        ];
        let a = decode(&sig, &ok).unwrap();
        assert_eq!(a.words, vec![0x1000, u64::from((-2i32) as u32), u64::from(1.5f32.to_bits()), 2.25f64.to_bits()]);
        assert_eq!(a.dims.grid, [5, 3, 1]);
        assert_eq!(a.dims.block, [32, 1, 1]);
        // Extent 0 leaves the slot at 1; NULL is accepted for a buffer.
        let mut v = ok.clone();
        v[0] = Value::Null;
        v[4] = Value::Int(0);
        let a = decode(&sig, &v).unwrap();
        assert_eq!((a.words[0], a.dims.grid), (0, [5, 1, 1]));
        // Too few arguments, wrong codes, bad extents.
        let e = decode(&sig, &ok[..6]).unwrap_err().to_string();
        assert!(e.contains("kernel k expects 7 arguments") && e.contains("got 6"), "{e}");
        for (i, bad) in [(0, Value::Int(5)), (1, Value::Float(1.0)), (2, Value::Int(1)), (5, Value::Int(-1))] {
            let mut v = ok.clone();
            v[i] = bad;
            assert!(decode(&sig, &v).is_err(), "arg {i}");
        }
        let mut v = ok.clone();
        v[6] = Value::Int(1 << 32);
        assert!(decode(&sig, &v).unwrap_err().to_string().contains("out of range"));
        // Dynamic shared memory comes after the extents.
        let sig = KernelSig::new("d", &info(&[], &["threadIdx.x", DYN_SHMEM_TAG])).unwrap();
        let a = decode(&sig, &[Value::Int(64), Value::Int(4096)]).unwrap();
        assert_eq!((a.dims.block[0], a.dims.dyn_shmem), (64, 4096));
    }
}
