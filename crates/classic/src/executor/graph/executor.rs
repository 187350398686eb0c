//! The graph executor: storage planned as TVM plans it, one
//! closure per operator with private `DLTensor` argument copies, and the executor's functions.
//!
//! Parameters handed over by a factory are shared, not copied, when their storage slot holds
//! nothing else: the executor's data entry *is* the factory's array. Any path that could write
//! such an entry (`set_input`, `get_input`'s or `get_output`'s view, `load_params`, the other side
//! of `share_params`) first gives the executor a private copy, so executors never see each
//! other's writes, and a factory's weight used in place in a library's read-only mapping is
//! never written.

use super::json::{Graph, NodeEntry};
use crate::abi::{DLDataType, DLDevice, DLTensor, TVMValue};
use crate::device::{self, shape_bytes};
use crate::error::{Error, Result};
use crate::function::PackedFunc;
use crate::mapped::Region;
use crate::module::Module;
use crate::ndarray::serialize::Record;
use crate::ndarray::{copy_tensor, NDArray};
use crate::object::{ArrayObj, StringObj};
use crate::value::dtype;
use crate::value::{code, Args, Value};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::c_int;

// What TVM v0.9..v0.19 added (get_input_info, outputs by name, the debug executor's v0.9+ forms).
mod later;
#[cfg(feature = "profiling")]
use later::debug_timer_config;
// The debug executor's node-by-node runs and timings.
#[cfg(feature = "profiling")]
mod debug;

enum OpKind {
    Nop,
    Copy,
    Call(PackedFunc),
}

/// One operator node: its function and private argument tensors (inputs then outputs).
struct OpExec {
    kind: OpKind,
    args: Box<[DLTensor]>,
    /// The data entry each argument was made from.
    eids: Box<[usize]>,
    /// Shape storage of flattened arguments.
    _flat_shapes: Box<[[i64; 1]]>,
    values: Box<[TVMValue]>,
    codes: Box<[c_int]>,
}

// SAFETY: the raw pointers in `args`/`values` point into the executor's own storage (or the
// closure's own shape storage), which lives as long as the executor; access is serialised by the
// executor's mutex.
unsafe impl Send for OpExec {}

impl OpExec {
    fn run(&self, node: &str) -> Result<()> {
        match &self.kind {
            OpKind::Nop => Ok(()),
            OpKind::Copy => {
                if self.args.len() < 2 {
                    return Err(Error::value(format!("__copy node {node} needs two arguments")));
                }
                copy_tensor(&self.args[0], &self.args[1], std::ptr::null_mut())
                    .map_err(|e| e.context(format!("node {node} (__copy)")))
            }
            OpKind::Call(f) => {
                // SAFETY: values hold pointers to the live argument copies, with code 7.
                let args = unsafe { Args::new(&self.values, &self.codes) };
                let mut ret = Value::Null;
                f.call_args(&args, &mut ret).map_err(|e| e.context(format!("node {node}")))
            }
        }
    }
}

/// Mutable state of an executor.
struct State {
    storage: Vec<NDArray>,
    data_entry: Vec<NDArray>,
    data_alignment: Vec<usize>,
    /// Entries whose array is shared with a factory (copy before writing).
    shared: Vec<bool>,
    ops: Vec<Option<OpExec>>,
    #[cfg(feature = "profiling")]
    last_executed_node: i64,
}

/// A graph executor (type key `GraphExecutor`).
pub struct GraphExecutor {
    graph: Graph,
    module: Module,
    devices: Vec<DLDevice>,
    input_map: HashMap<String, usize>,
    output_map: HashMap<String, usize>,
    debug: bool,
    state: Mutex<State>,
    /// Names seen by `load_params` (v0.9+'s `get_input_info` leaves them out).
    param_names: Mutex<std::collections::HashSet<String>>,
}

/// The default linked-parameter lookup.
fn lookup_linked_param(
    module: &Module,
    sid: usize,
    shape: &[i64],
    t: DLDataType,
    dev: DLDevice,
) -> Result<Option<NDArray>> {
    let Some(f) = module.get_function("_lookup_linked_param", true)? else { return Ok(None) };
    match f.call(&[Value::Int(sid as i64)])? {
        Value::Handle(p) if !p.is_null() => Ok(Some(NDArray::from_external(p, shape, t, dev)?)),
        _ => Ok(None),
    }
}

impl GraphExecutor {
    /// Creates an executor. `params` (from a factory) are set as TVM's factory sets them, sharing
    /// arrays where the planner gave a parameter a slot of its own.
    pub fn create(
        graph_json: &str,
        module: Module,
        devices: Vec<DLDevice>,
        custom_lookup: Option<PackedFunc>,
        params: &[(String, NDArray)],
        debug: bool,
    ) -> Result<GraphExecutor> {
        let graph = Graph::parse(graph_json)?;
        if devices.is_empty() {
            return Err(Error::value("graph executor needs at least one device"));
        }
        let mut input_map = HashMap::new();
        for (i, &nid) in graph.arg_nodes.iter().enumerate() {
            input_map.insert(graph.nodes[nid as usize].name.clone(), i);
        }
        let mut output_map = HashMap::new();
        for (i, e) in graph.heads.iter().enumerate() {
            output_map.insert(graph.nodes[e.node_id as usize].name.clone(), i);
        }
        let exec = GraphExecutor {
            graph,
            module,
            devices,
            input_map,
            output_map,
            debug,
            state: Mutex::new(State {
                storage: Vec::new(),
                data_entry: Vec::new(),
                data_alignment: Vec::new(),
                shared: Vec::new(),
                ops: Vec::new(),
                #[cfg(feature = "profiling")]
                last_executed_node: -1,
            }),
            param_names: Mutex::new(std::collections::HashSet::new()),
        };
        exec.setup(custom_lookup, params)?;
        Ok(exec)
    }

    fn entry_device_type(&self, eid: usize) -> i32 {
        match &self.graph.device_index {
            Some(d) => d[eid],
            None => self.devices[0].device_type,
        }
    }

    fn setup(&self, custom_lookup: Option<PackedFunc>, params: &[(String, NDArray)]) -> Result<()> {
        let g = &self.graph;
        let ne = g.num_entries();
        // 3.1 Storage sizing.
        struct Slot {
            size: usize,
            device_type: i32,
            linked: Option<NDArray>,
            users: usize,
        }
        let mut slots: Vec<Slot> = Vec::new();
        for eid in 0..ne {
            let sid = g.storage_id[eid];
            let t = g.dltype[eid];
            let bits = t.bits as usize * t.lanes as usize;
            if !(bits % 8 == 0 || bits == 1 || bits == 4) {
                return Err(Error::value(format!(
                    "entry {eid}: data type {} is not byte-addressable",
                    dtype::format(t)?
                )));
            }
            let bytes =
                shape_bytes(&g.shape[eid], t).map_err(|e| e.context(format!("graph JSON attrs.shape[{eid}]")))?;
            let dev_type = self.entry_device_type(eid);
            // The planner numbers storage densely, so an id is below the number of entries; a
            // larger one would size the slot table from the input alone (TVM resizes to it).
            if sid >= ne {
                return Err(Error::value(format!(
                    "graph JSON attrs.storage_id[{eid}] is {sid}, not below the number of entries ({ne})"
                )));
            }
            if sid >= slots.len() {
                slots.resize_with(sid + 1, || Slot { size: 0, device_type: -1, linked: None, users: 0 });
            }
            let slot = &mut slots[sid];
            if slot.device_type != -1 && slot.device_type != dev_type {
                return Err(Error::value("The same pool entry cannot be assigned to multiple devices"));
            }
            if slot.linked.is_none() {
                slot.linked = match &custom_lookup {
                    Some(f) => {
                        let shape = g.shape[eid].clone();
                        let mut tmpl = DLTensor {
                            data: std::ptr::null_mut(),
                            device: self.devices[0],
                            ndim: shape.len() as i32,
                            dtype: t,
                            shape: shape.as_ptr().cast_mut(),
                            strides: std::ptr::null_mut(),
                            byte_offset: 0,
                        };
                        let args = [
                            Value::Module(self.module.clone()),
                            Value::Int(sid as i64),
                            Value::DLTensor(&mut tmpl),
                            Value::Device(self.devices[0]),
                        ];
                        match f.call(&args)? {
                            Value::NDArray(a) => Some(a),
                            _ => None,
                        }
                    }
                    None => lookup_linked_param(&self.module, sid, &g.shape[eid], t, self.devices[0])?,
                };
            }
            slot.size = slot.size.max(bytes);
            slot.device_type = dev_type;
            slot.users += 1;
        }

        // A graph whose CPU storage cannot fit in this machine's memory fails here, naming its
        // largest entry, before anything is allocated.
        let cpu_total = slots
            .iter()
            .filter(|s| s.linked.is_none() && self.slot_device(s.device_type).device_type == 1)
            .fold(0usize, |acc, s| acc.saturating_add(s.size));
        if let Some(limit) = device::cpu::memory_limit().filter(|&l| cpu_total > l) {
            let eid = (0..ne).max_by_key(|&e| shape_bytes(&g.shape[e], g.dltype[e]).unwrap_or(0)).unwrap_or(0);
            return Err(Error::value(format!(
                "graph JSON attrs.shape: the graph's storage needs {cpu_total} bytes, more than this machine's \
                 memory ({limit} bytes); the largest entry is attrs.shape[{eid}] = {:?} of node {}",
                g.shape[eid],
                self.entry_node_name(eid)
            )));
        }

        // Factory parameters that can be shared: an input whose slot holds only it.
        let mut shared_param: HashMap<usize, NDArray> = HashMap::new();
        for (name, arr) in params {
            let Some(&idx) = self.input_map.get(name) else { continue };
            let eid = self.input_entry(idx);
            let sid = g.storage_id[eid];
            let slot = &slots[sid];
            let dev = self.slot_device(slot.device_type);
            let fits = slot.users == 1
                && slot.linked.is_none()
                && arr.shape() == g.shape[eid].as_slice()
                && arr.dtype() == g.dltype[eid]
                && arr.device() == dev
                && arr.tensor().byte_offset == 0
                && device::is_contiguous(arr.tensor())
                && arr.tensor().data as usize % device::data_alignment(g.dltype[eid]) == 0;
            if fits {
                shared_param.insert(sid, arr.clone());
            }
        }

        // 3.2 Allocation.
        let mut storage = Vec::with_capacity(slots.len());
        for (sid, slot) in slots.iter().enumerate() {
            let dev = self.slot_device(slot.device_type);
            let arr = if let Some(l) = &slot.linked {
                l.clone()
            } else if let Some(p) = shared_param.get(&sid) {
                p.clone()
            } else {
                NDArray::empty(&[slot.size.div_ceil(4) as i64], dtype::FLOAT32, dev)?
            };
            storage.push(arr);
        }
        // 3.3 Data entries.
        let mut data_entry = Vec::with_capacity(ne);
        let mut data_alignment = Vec::with_capacity(ne);
        let mut shared = Vec::with_capacity(ne);
        for eid in 0..ne {
            let sid = g.storage_id[eid];
            let t = g.dltype[eid];
            let view = if shared_param.contains_key(&sid) {
                storage[sid].clone()
            } else {
                storage[sid].create_view(&g.shape[eid], t).map_err(|_| {
                    Error::value(format!("entry {eid}: Tries to create a view that has bigger memory than current one"))
                })?
            };
            data_entry.push(view);
            data_alignment.push(device::data_alignment(t));
            shared.push(shared_param.contains_key(&sid));
        }
        let mut st = self.state.lock();
        st.storage = storage;
        st.data_entry = data_entry;
        st.data_alignment = data_alignment;
        st.shared = shared;
        st.ops = self.build_ops(&st.data_entry)?;
        drop(st);

        // 7.3 The remaining parameters are copied in, largest first; equal sizes in stored order
        // (the position as the tie-break makes the smaller unstable sort a stable one).
        let mut rest: Vec<(usize, &(String, NDArray))> = params.iter().enumerate().collect();
        rest.sort_unstable_by_key(|&(i, (_, a))| (std::cmp::Reverse(a.byte_size().unwrap_or(0)), i));
        for (_, (name, arr)) in rest {
            if let Some(&idx) = self.input_map.get(name) {
                let eid = self.input_entry(idx);
                if !shared_param.contains_key(&g.storage_id[eid]) {
                    self.set_input(idx, arr.tensor()).map_err(|e| e.context(format!("param {name}")))?;
                }
            }
        }
        Ok(())
    }

    /// The name of the node that produces entry `eid`.
    fn entry_node_name(&self, eid: usize) -> &str {
        let g = &self.graph;
        let nid = g.node_row_ptr.partition_point(|&p| p as usize <= eid).saturating_sub(1);
        g.nodes.get(nid).map_or("?", |n| n.name.as_str())
    }

    fn slot_device(&self, device_type: i32) -> DLDevice {
        self.devices.iter().copied().find(|d| d.device_type == device_type).unwrap_or(self.devices[0])
    }

    /// 4.1–4.3: one closure per `tvm_op` node.
    fn build_ops(&self, data_entry: &[NDArray]) -> Result<Vec<Option<OpExec>>> {
        let g = &self.graph;
        let mut ops = Vec::with_capacity(g.nodes.len());
        for (nid, node) in g.nodes.iter().enumerate() {
            if node.op == "null" {
                ops.push(None);
                continue;
            }
            if node.op != "tvm_op" {
                return Err(Error::value(format!("node {}: Can only take tvm_op as op, got {}", node.name, node.op)));
            }
            let mut eids: Vec<usize> = node.inputs.iter().map(|&e| g.entry_id(e)).collect();
            for k in 0..node.attrs.num_outputs {
                eids.push(g.entry_id(NodeEntry { node_id: nid as u32, index: k }));
            }
            let mut args: Vec<DLTensor> = eids.iter().map(|&eid| *data_entry[eid].tensor()).collect();
            let mut flat: Vec<[i64; 1]> = Vec::new();
            if node.attrs.flatten_data {
                flat =
                    args.iter().map(|t| [device::tensor_shape(t).map(|s| s.iter().product()).unwrap_or(0)]).collect();
            }
            let flat = flat.into_boxed_slice();
            if node.attrs.flatten_data {
                for (t, s) in args.iter_mut().zip(flat.iter()) {
                    t.ndim = 1;
                    t.shape = s.as_ptr().cast_mut();
                }
            }
            let args = args.into_boxed_slice();
            let values: Box<[TVMValue]> =
                args.iter().map(|t| TVMValue { v_handle: (t as *const DLTensor).cast_mut().cast() }).collect();
            let codes: Box<[c_int]> = vec![code::DLTENSOR; args.len()].into_boxed_slice();
            let kind =
                match node.attrs.func_name.as_str() {
                    "__nop" => OpKind::Nop,
                    "__copy" => OpKind::Copy,
                    name => OpKind::Call(self.module.get_function(name, true)?.ok_or_else(|| {
                        Error::value(format!("no such function in module: {name} (node {})", node.name))
                    })?),
                };
            ops.push(Some(OpExec { kind, args, eids: eids.into_boxed_slice(), _flat_shapes: flat, values, codes }));
        }
        Ok(ops)
    }

    /// The graph.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The code module.
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// Number of inputs (parameters included).
    pub fn num_inputs(&self) -> usize {
        self.graph.arg_nodes.len()
    }

    /// Number of outputs.
    pub fn num_outputs(&self) -> usize {
        self.graph.heads.len()
    }

    /// Index of an input name.
    pub fn input_index(&self, name: &str) -> Option<usize> {
        self.input_map.get(name).copied()
    }

    /// Index of an output name.
    pub fn output_index(&self, name: &str) -> Option<usize> {
        self.output_map.get(name).copied()
    }

    fn input_entry(&self, idx: usize) -> usize {
        self.graph.entry_id(NodeEntry { node_id: self.graph.arg_nodes[idx], index: 0 })
    }

    fn output_entry(&self, idx: usize) -> usize {
        self.graph.entry_id(self.graph.heads[idx])
    }

    fn check_input(&self, idx: usize) -> Result<()> {
        check_index(idx, self.num_inputs(), "input")
    }

    fn check_output(&self, idx: usize) -> Result<()> {
        check_index(idx, self.num_outputs(), "output")
    }

    /// Gives entry `eid` private storage if it is shared with a factory (whose array may be
    /// read-only memory, see [`crate::mapped`]), filled with `with`, or else with the shared data.
    /// Returns whether `with` was copied in (false: the entry was private already, untouched).
    fn make_private(&self, st: &mut State, eid: usize, with: Option<&DLTensor>) -> Result<bool> {
        if !st.shared[eid] {
            return Ok(false);
        }
        let old = st.data_entry[eid].clone();
        let fresh = NDArray::empty(old.shape(), old.dtype(), old.device())?;
        copy_tensor(with.unwrap_or(old.tensor()), fresh.tensor(), std::ptr::null_mut())?;
        let (old_ptr, new_ptr) = (old.tensor().data, fresh.tensor().data);
        let sid = self.graph.storage_id[eid];
        st.storage[sid] = fresh.clone();
        st.data_entry[eid] = fresh;
        st.shared[eid] = false;
        for op in st.ops.iter_mut().flatten() {
            for (k, &e) in op.eids.iter().enumerate() {
                if e == eid && op.args[k].data == old_ptr {
                    op.args[k].data = new_ptr;
                }
            }
        }
        Ok(with.is_some())
    }

    /// `set_input`: copies a tensor into input `idx`.
    pub fn set_input(&self, idx: usize, from: &DLTensor) -> Result<()> {
        self.check_input(idx)?;
        let eid = self.input_entry(idx);
        let mut st = self.state.lock();
        let name = &self.graph.nodes[self.graph.arg_nodes[idx] as usize].name;
        let want = st.data_entry[eid].dtype();
        if from.dtype != want {
            return Err(Error::value(format!(
                "input {name}: dtype {} does not match the graph's {}",
                dtype::format(from.dtype).unwrap_or_default(),
                dtype::format(want).unwrap_or_default()
            )));
        }
        // A shared entry gets its own array filled from `from` at once (one copy, not two).
        let copied = self.make_private(&mut st, eid, Some(from)).map_err(|e| e.context(format!("input {name}")))?;
        if copied {
            return Ok(());
        }
        copy_tensor(from, st.data_entry[eid].tensor(), std::ptr::null_mut())
            .map_err(|e| e.context(format!("input {name}")))
    }

    /// Checks an external tensor for zero-copy use in place of entry `eid`.
    fn check_external(&self, st: &State, eid: usize, t: &DLTensor, what: &str) -> Result<()> {
        let internal = st.data_entry[eid].tensor();
        let bad = |m: String| Error::value(format!("{what}: {m}"));
        if st.data_alignment[eid] != device::data_alignment(t.dtype) {
            return Err(bad("the data type's alignment does not match".into()));
        }
        if t.data as usize % device::ALLOC_ALIGNMENT != 0 {
            return Err(bad(format!("data pointer {:p} is not 128-byte aligned", t.data)));
        }
        if t.ndim != internal.ndim {
            return Err(bad(format!("ndim {} does not match {}", t.ndim, internal.ndim)));
        }
        if t.device != internal.device {
            return Err(bad("the device does not match".into()));
        }
        if device::tensor_shape(t)? != device::tensor_shape(internal)? {
            return Err(bad(format!(
                "shape {:?} does not match {:?}",
                device::tensor_shape(t)?,
                device::tensor_shape(internal)?
            )));
        }
        Ok(())
    }

    fn repoint(st: &mut State, eid: usize, data: *mut std::ffi::c_void, byte_offset: u64) {
        for op in st.ops.iter_mut().flatten() {
            for (k, &e) in op.eids.iter().enumerate() {
                if e == eid {
                    op.args[k].data = data;
                    op.args[k].byte_offset = byte_offset;
                }
            }
        }
    }

    /// `set_input_zero_copy`.
    pub fn set_input_zero_copy(&self, idx: usize, t: &DLTensor) -> Result<()> {
        self.check_input(idx)?;
        let eid = self.input_entry(idx);
        let mut st = self.state.lock();
        self.check_external(&st, eid, t, "set_input_zero_copy")?;
        Self::repoint(&mut st, eid, t.data, t.byte_offset);
        Ok(())
    }

    /// `set_output_zero_copy`.
    pub fn set_output_zero_copy(&self, idx: usize, t: &DLTensor) -> Result<()> {
        self.check_output(idx)?;
        let eid = self.output_entry(idx);
        let mut st = self.state.lock();
        self.check_external(&st, eid, t, "set_output_zero_copy")?;
        Self::repoint(&mut st, eid, t.data, t.byte_offset);
        Ok(())
    }

    /// `get_input`: a view of input `idx` (made private first if shared, since callers write
    /// through it).
    pub fn get_input(&self, idx: usize) -> Result<NDArray> {
        self.check_input(idx)?;
        let eid = self.input_entry(idx);
        let mut st = self.state.lock();
        self.make_private(&mut st, eid, None)?;
        Ok(st.data_entry[eid].clone())
    }

    /// `get_output`: a view of output `idx` (made private first if it is a shared parameter,
    /// since callers may write through it).
    pub fn get_output(&self, idx: usize) -> Result<NDArray> {
        self.check_output(idx)?;
        let eid = self.output_entry(idx);
        let mut st = self.state.lock();
        self.make_private(&mut st, eid, None)?;
        Ok(st.data_entry[eid].clone())
    }

    /// `get_output(idx, out)`: shape check, then a copy.
    pub(crate) fn copy_output_to(&self, idx: usize, out: &DLTensor) -> Result<()> {
        self.check_output(idx)?;
        let a = self.state.lock().data_entry[self.output_entry(idx)].clone();
        if device::tensor_shape(out)? != a.shape() {
            return Err(Error::value(format!(
                "get_output: the output tensor has shape {:?}, expected {:?}",
                device::tensor_shape(out)?,
                a.shape()
            )));
        }
        copy_tensor(a.tensor(), out, std::ptr::null_mut())
    }

    /// Runs nodes `from..=to`.
    fn run_range(st: &State, nodes: &[super::json::Node], from: usize, to: usize) -> Result<()> {
        let to = to.min(st.ops.len().saturating_sub(1));
        for (op, node) in st.ops.iter().zip(nodes).take(to + 1).skip(from) {
            if let Some(op) = op {
                op.run(&node.name)?;
            }
        }
        Ok(())
    }

    /// `run`.
    pub fn run(&self) -> Result<()> {
        let _run = crate::threading::run_scope();
        let st = self.state.lock();
        if st.ops.is_empty() {
            return Ok(());
        }
        Self::run_range(&st, &self.graph.nodes, 0, st.ops.len() - 1)
    }

    /// `load_params`: copies every named array that is an input. The whole blob is checked
    /// first, and each array is copied straight from the caller's bytes into the executor (no
    /// parsed copy in between); when those bytes are a read-only file mapping, its pages are
    /// given back as they are copied (see [`crate::mapped`]).
    pub fn load_params(&self, blob: &[u8]) -> Result<()> {
        let records = crate::ndarray::serialize::param_records(blob)?;
        let region = Region::new(blob, None);
        self.param_names.lock().extend(records.iter().map(|(n, _)| n.clone()));
        let mut matched = 0;
        for (name, rec) in &records {
            if let Some(idx) = self.input_index(name) {
                self.set_input_record(idx, rec, &region).map_err(|e| e.context(format!("param {name}")))?;
                matched += 1;
            }
            region.release_to(rec.data.as_ptr() as usize + rec.data.len());
        }
        if matched == 0 && !records.is_empty() {
            return Err(Error::value(format!(
                "load_params: none of the {} params ({}, ...) is an input of this graph",
                records.len(),
                records[0].0
            )));
        }
        Ok(())
    }

    /// `set_input` from a params record, without an intermediate array where the stored bytes
    /// are the array's bytes (every type but vector types).
    fn set_input_record(&self, idx: usize, rec: &Record<'_>, region: &Region) -> Result<()> {
        let view = DLTensor {
            data: rec.data.as_ptr().cast_mut().cast(),
            device: DLDevice { device_type: device::CPU, device_id: 0 },
            ndim: i32::try_from(rec.shape.len()).map_err(|_| Error::value("too many dimensions"))?,
            dtype: rec.dtype,
            shape: rec.shape.as_ptr().cast_mut(),
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        };
        if device::tensor_bytes(&view)? == rec.data.len() {
            // `view` only borrows `rec`, which outlives the call; copies only read it.
            self.set_input(idx, &view)
        } else {
            self.set_input(idx, crate::ndarray::serialize::to_array(rec, Some(region))?.tensor())
        }
    }

    /// `share_params`: makes the named inputs the same arrays as `other`'s.
    pub fn share_params(&self, other: &GraphExecutor, blob: &[u8]) -> Result<()> {
        let names = crate::ndarray::serialize::load_param_names(blob)?;
        let other_entries: Vec<(usize, NDArray)> = {
            let mut ost = other.state.lock();
            let mut v = Vec::new();
            for n in &names {
                let (Some(idx), Some(oidx)) = (self.input_index(n), other.input_index(n)) else { continue };
                // The other executor's array becomes its own first if a factory shares it: the
                // two executors then share it as in TVM (writes through either reach both),
                // and the factory and its other executors are unaffected.
                let oeid = other.input_entry(oidx);
                other.make_private(&mut ost, oeid, None)?;
                v.push((idx, ost.data_entry[oeid].clone()));
            }
            v
        };
        let mut st = self.state.lock();
        for (idx, arr) in other_entries {
            let eid = self.input_entry(idx);
            let mine = st.data_entry[eid].tensor();
            if arr.shape() != device::tensor_shape(mine)? || arr.dtype() != mine.dtype {
                return Err(Error::value(format!(
                    "share_params: input {} has another shape or dtype in the other executor",
                    self.graph.nodes[self.graph.arg_nodes[idx] as usize].name
                )));
            }
            st.data_alignment[eid] = device::data_alignment(arr.dtype());
            st.data_entry[eid] = arr;
            // Shared on purpose, as in TVM: writes through either executor reach both.
            st.shared[eid] = false;
        }
        st.ops = self.build_ops(&st.data_entry)?;
        Ok(())
    }

    /// Whether this is the debug executor.
    pub fn is_debug(&self) -> bool {
        self.debug
    }
}

/// Resolves an `idx|name` argument against a name map: `Ok(None)` for an unknown name.
fn index_or_name(args: &Args<'_>, i: usize, map: impl Fn(&str) -> Option<usize>) -> Result<Option<usize>> {
    match args.code(i)? {
        code::STR => Ok(map(&args.string(i)?)),
        code::OBJECT => match args.object(i)?.and_then(|o| o.downcast::<StringObj>().map(StringObj::to_string_lossy)) {
            Some(s) => Ok(map(&s)),
            None => Err(Error::type_error(format!("argument {i}: expected an index or a name"))),
        },
        _ => {
            let v = args.i64(i)?;
            usize::try_from(v).map(Some).map_err(|_| Error::index(format!("negative index {v}")))
        }
    }
}

/// An unknown name is an error naming it (TVM v0.8 silently ignores it).
fn known(a: &Args<'_>, what: &str, idx: Option<usize>) -> Result<usize> {
    idx.ok_or_else(|| Error::key(format!("the graph has no {what} named {}", a.string(0).unwrap_or_default())))
}

fn tensor_arg<'a>(args: &Args<'a>, i: usize) -> Result<&'a DLTensor> {
    let p = args.dltensor(i)?;
    // SAFETY: codes 7/13 carry a live DLTensor for the duration of the call (Args contract).
    unsafe { p.as_ref() }.ok_or_else(|| Error::value(format!("argument {i}: tensor must not be NULL")))
}

/// The executor's functions, by name.
pub fn get_function(exec: &GraphExecutor, name: &str, this: &Module) -> Option<PackedFunc> {
    let with = |f: fn(&GraphExecutor, &Args<'_>) -> Result<Value>| this.method(move |e, _, a| f(e, a));
    let debug_only = [
        "run_individual",
        "run_individual_node",
        "execute_node",
        "get_node_output",
        "debug_get_output",
        "profile",
        "profile_rpc",
    ];
    if debug_only.contains(&name) && !exec.is_debug() {
        return None;
    }
    Some(match name {
        "set_input" => with(|e, a| {
            let idx = known(a, "input", index_or_name(a, 0, |n| e.input_index(n))?)?;
            e.set_input(idx, tensor_arg(a, 1)?).map(|()| Value::Null)
        }),
        "set_input_zero_copy" => with(|e, a| {
            let idx = known(a, "input", index_or_name(a, 0, |n| e.input_index(n))?)?;
            e.set_input_zero_copy(idx, tensor_arg(a, 1)?).map(|()| Value::Null)
        }),
        "set_output_zero_copy" => with(|e, a| {
            let idx = known(a, "output", index_or_name(a, 0, |n| e.output_index_any(n))?)?;
            e.set_output_zero_copy(idx, tensor_arg(a, 1)?).map(|()| Value::Null)
        }),
        "get_output" => with(|e, a| {
            // v0.9+ also takes an output node's name.
            let idx = match a.code(0)? {
                code::STR | code::OBJECT => {
                    let n = a.string(0)?;
                    e.output_by_node_name(&n).ok_or_else(|| Error::key(format!("Invalid output node:{n}")))?
                }
                _ => usize::try_from(a.i64(0)?).map_err(|_| Error::index("negative output index"))?,
            };
            if a.len() >= 2 {
                e.copy_output_to(idx, tensor_arg(a, 1)?)?;
                Ok(Value::Null)
            } else {
                Ok(Value::NDArray(e.get_output(idx)?))
            }
        }),
        "get_input" => with(|e, a| match index_or_name(a, 0, |n| e.input_index(n))? {
            Some(idx) => {
                if a.len() >= 2 {
                    let v = e.get_input(idx)?;
                    copy_tensor(v.tensor(), tensor_arg(a, 1)?, std::ptr::null_mut())?;
                    Ok(Value::Null)
                } else {
                    Ok(Value::NDArray(e.get_input(idx)?))
                }
            }
            None => Ok(Value::Null),
        }),
        "get_num_outputs" => with(|e, _| Ok(Value::Int(e.num_outputs() as i64))),
        "get_num_inputs" => with(|e, _| Ok(Value::Int(e.num_inputs() as i64))),
        "get_input_index" => with(|e, a| {
            let name = match a.code(0)? {
                code::STR | code::OBJECT => a.string(0)?,
                _ => return Err(Error::type_error("Input key is not a string")),
            };
            Ok(Value::Int(e.input_index(&name).map_or(-1, |i| i as i64)))
        }),
        "run" => with(|e, _| e.run().map(|()| Value::Null)),
        "run_from_inputs" => with(|e, a| {
            if a.len() < 2 || a.len() % 2 != 0 {
                return Err(Error::value(
                    "Number of arguments to run_from_inputs must be an even number of key-value pairs",
                ));
            }
            let dev = DLDevice { device_type: a.i32(0)?, device_id: a.i32(1)? };
            for k in (2..a.len()).step_by(2) {
                let idx = match a.code(k)? {
                    code::STR | code::OBJECT => {
                        let n = a.string(k)?;
                        e.input_index(&n).ok_or_else(|| Error::value(format!("{n} is not a valid input name")))?
                    }
                    _ => usize::try_from(a.i64(k)?).map_err(|_| Error::index("negative input index"))?,
                };
                e.set_input(idx, tensor_arg(a, k + 1)?)?;
            }
            e.run()?;
            let mut outs = Vec::with_capacity(e.num_outputs());
            for i in 0..e.num_outputs() {
                let o = e.get_output(i)?;
                let copy = NDArray::empty(o.shape(), o.dtype(), dev)?;
                copy_tensor(o.tensor(), copy.tensor(), std::ptr::null_mut())?;
                outs.push(Some(copy.into_object()));
            }
            Ok(Value::Object(ArrayObj::new_object(outs)))
        }),
        "load_params" => with(|e, a| e.load_params(&a.bytes_view(0)?).map(|()| Value::Null)),
        "share_params" => with(|e, a| {
            let other = a.module(0)?.ok_or_else(|| Error::value("share_params: expected a module"))?;
            let o = other.downcast::<GraphExecutor>().ok_or_else(|| {
                Error::type_error(format!("share_params: expected a GraphExecutor, got {}", other.type_key()))
            })?;
            e.share_params(o, &a.bytes_view(1)?).map(|()| Value::Null)
        }),
        // v0.8: (number, repeat, min_repeat_ms) -> text; v0.9+: 5 or 6 settings -> bytes.
        #[cfg(feature = "profiling")]
        "run_individual" => with(|e, a| match a.len() {
            3 => Ok(Value::str(e.run_individual(a.i64(0)?, a.i64(1)?, a.i64(2)?)?)),
            _ => Ok(Value::bytes(e.run_individual_bytes(&debug_timer_config(a, 0)?)?)),
        }),
        #[cfg(feature = "profiling")]
        "run_individual_node" => with(|e, a| {
            let nid = usize::try_from(a.i64(0)?)
                .ok()
                .filter(|&n| n < e.graph.nodes.len())
                .ok_or_else(|| Error::index(format!("run_individual_node: no node {}", a.i64(0).unwrap_or(-1))))?;
            Ok(Value::bytes(e.run_individual_node(nid, &debug_timer_config(a, 1)?)?))
        }),
        "get_input_info" => with(|e, _| Ok(e.input_info())),
        // Not in TVM (the counterpart of get_input_index): index of an output node name or
        // `name:index` key, -1 when unknown.
        "get_output_index" => with(|e, a| Ok(Value::Int(e.output_index_any(&a.string(0)?).map_or(-1, |i| i as i64)))),
        "get_output_info" => with(|e, _| Ok(e.output_info())),
        #[cfg(feature = "profiling")]
        "execute_node" => with(|e, a| e.execute_node(a.i64(0)?).map(|()| Value::Null)),
        #[cfg(feature = "profiling")]
        "get_node_output" => with(|e, a| Ok(Value::NDArray(e.get_node_output(a.i64(0)?, a.i64(1)?)?))),
        #[cfg(feature = "profiling")]
        "debug_get_output" => with(|e, a| {
            let node = match a.code(0)? {
                code::STR | code::OBJECT => {
                    let n = a.string(0)?;
                    e.graph()
                        .nodes
                        .iter()
                        .position(|x| x.name == n)
                        .ok_or_else(|| Error::value(format!("cannot find {n} among nodex")))?
                }
                _ => usize::try_from(a.i64(0)?).map_err(|_| Error::index("negative node index"))?,
            };
            if a.len() == 1 {
                // v0.9+: without an output array, a copy of the node's output is returned.
                return e.debug_node_output(node).map(Value::NDArray);
            }
            e.debug_get_output(node, tensor_arg(a, 1)?).map(|()| Value::Null)
        }),
        #[cfg(feature = "profiling")]
        "profile" => with(|e, _| Ok(Value::Object(crate::executor::report::Report::new_object(e.profile_json()?)))),
        #[cfg(feature = "profiling")]
        "profile_rpc" => with(|e, _| Ok(Value::str(e.profile_json()?))),
        _ => return None,
    })
}

/// `idx < n`, or the error naming the kind of index (`input`/`output`).
fn check_index(idx: usize, n: usize, what: &str) -> Result<()> {
    if idx >= n {
        return Err(Error::index(format!("{what} index {idx} out of range: the graph has {n} {what}s")));
    }
    Ok(())
}
