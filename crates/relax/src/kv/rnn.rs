//! `relax.vm.RNNStateImp` (TVM's `rnn_state.cc`): the recurrent state of state-space models
//! (Mamba, RWKV). Each layer has some states; each state a storage of shape
//! `(reserved_num_seqs, max_history, *state_shape)`, one slot per sequence and a ring of
//! `max_history` past states per slot so that `popn` can roll decode steps back. The model's
//! `f_get`/`f_set` kernels read and write the current slots of a forward's sequences.

use super::backend::{call, t};
use super::{arg, int, internal, object_of, rnn_state_index, tensor, Args, Guarded, KvState};
use rustc_hash::FxHashMap as HashMap;
use std::sync::OnceLock;
use tvm_runtime_classic::abi::DLTensor;
use tvm_runtime_tvm_ffi::any::Any;
use tvm_runtime_tvm_ffi::containers::array::seq_items;
use tvm_runtime_tvm_ffi::object::{make_object, ObjectRef};
use tvm_runtime_tvm_ffi::registry::Builder;
use tvm_runtime_tvm_ffi::{tensor as ten, ti, types, FfiError, FfiResult};

/// `relax.vm.RNNStateImp`.
pub(crate) fn rnn_state_imp_index() -> i32 {
    static I: OnceLock<i32> = OnceLock::new();
    *I.get_or_init(|| {
        types::get_or_alloc_index("relax.vm.RNNStateImp", -1, 3, 0, false, rnn_state_index())
            .unwrap_or_else(|e| panic!("registering relax.vm.RNNStateImp: {}", e.message()))
    })
}

#[derive(Clone, Copy)]
struct Seq {
    seq_length: i64,
    available_history: i64,
    history_slot: i64,
    slot: i64,
}

struct State {
    num_layers: usize,
    reserved: i64,
    max_history: i64,
    init: Vec<ObjectRef>,
    storages: Vec<Vec<ObjectRef>>,
    gets: Vec<ObjectRef>,
    sets: Vec<ObjectRef>,
    free_slots: Vec<i64>,
    seqs: HashMap<i64, Seq>,
    cur_ids: Vec<i64>,
    cur_lens: Vec<i64>,
    dirty: bool,
    slot_ids: ObjectRef,
    history_ids: ObjectRef,
    slot_view: Option<ObjectRef>,
    history_view: Option<ObjectRef>,
}

/// The payload of an RNN state object.
pub(crate) struct RnnState(Guarded<State>);

/// The RNN state behind an object, if it is one.
pub(crate) fn as_state(o: &ObjectRef) -> Option<&RnnState> {
    // SAFETY: objects of this type index are made by `create` with this payload.
    (o.type_index() == rnn_state_imp_index()).then(|| unsafe { o.payload::<RnnState>() })
}

fn missing(id: i64) -> FfiError {
    internal(format!("The sequence \"{id}\" cannot be found in the space state storage."))
}

fn dl(o: &ObjectRef) -> &DLTensor {
    // SAFETY: tensors made here or checked at the boundary.
    unsafe { ten::dltensor(o.as_ptr()) }
}

impl State {
    /// A DLTensor over `(slot, history)` of a storage (or the whole slot without `history`).
    fn part(
        &self,
        layer: usize,
        state: usize,
        slot: i64,
        history: Option<i64>,
        shape_buf: &mut Vec<i64>,
    ) -> FfiResult<DLTensor> {
        let st = dl(&self.storages[layer][state]);
        let dims = tvm_runtime_classic::device::tensor_shape(st)?;
        let skip = if history.is_some() { 2 } else { 1 };
        shape_buf.clear();
        shape_buf.extend_from_slice(&dims[skip..]);
        let inner: i64 = shape_buf.iter().product();
        let elems = match history {
            Some(h) => (slot * self.max_history + h) * inner,
            None => slot * inner,
        };
        let mut d = *st;
        d.byte_offset += (elems * st.dtype.bits as i64 * st.dtype.lanes as i64 / 8) as u64;
        d.ndim = shape_buf.len() as i32;
        d.shape = shape_buf.as_mut_ptr();
        d.strides = std::ptr::null_mut();
        Ok(d)
    }

    fn sync(&mut self) -> FfiResult<()> {
        let n = self.cur_ids.len() as i64;
        if n > self.reserved {
            return Err(internal(format!("the forward has {n} sequences, the RNN state holds {}", self.reserved)));
        }
        let mut slots = Vec::with_capacity(n as usize);
        let mut hist = Vec::with_capacity(n as usize);
        for id in &self.cur_ids {
            let s = self.seqs.get(id).ok_or_else(|| missing(*id))?;
            slots.push(s.slot as i32);
            hist.push(s.history_slot as i32);
        }
        let mk = |base: &ObjectRef, data: &[i32]| -> FfiResult<ObjectRef> {
            let d = dl(base);
            let v = ten::in_owner(base.clone(), d.data, d.byte_offset, &[data.len() as i64], d.dtype, d.device);
            tvm_runtime_tvm_ffi::runtime_api::copy_from_bytes(dl(&v), data.as_ptr().cast(), data.len() * 4)?;
            Ok(v)
        };
        self.slot_view = Some(mk(&self.slot_ids, &slots)?);
        self.history_view = Some(mk(&self.history_ids, &hist)?);
        self.dirty = false;
        Ok(())
    }

    fn check_ids(&self, layer: i64, state: i64, what: &str) -> FfiResult<(usize, usize)> {
        if layer < 0 || layer as usize >= self.num_layers || state < 0 || state as usize >= self.init.len() {
            return Err(internal(format!(
                "{what}: layer {layer}, state {state} out of range ({} layers of {} states)",
                self.num_layers,
                self.init.len()
            )));
        }
        Ok((layer as usize, state as usize))
    }

    fn ready(&self, what: &str) -> FfiResult<(&ObjectRef, &ObjectRef)> {
        if self.dirty {
            return Err(internal(format!(
                "{what}: The auxiliary arrays are not synchronized to device. Please call `BeginForward` to synchronize before calling `{}`.",
                if what.ends_with("get") { "Get" } else { "Set" }
            )));
        }
        match (&self.slot_view, &self.history_view) {
            (Some(s), Some(h)) if !self.cur_ids.is_empty() => Ok((s, h)),
            _ => Err(internal(format!("{what}: The curent batch size should be greater than 0."))),
        }
    }

    fn free_slot(&mut self) -> FfiResult<i64> {
        self.free_slots.pop().ok_or_else(|| internal("The Sequence slot is full, cannot accept new sequence."))
    }
}

impl KvState for RnnState {
    fn clear(&self) -> FfiResult<()> {
        self.0.with("vm.builtin.kv_state_clear", |s| {
            s.seqs.clear();
            s.free_slots = (0..s.reserved).rev().collect();
            s.dirty = false;
            Ok(())
        })
    }
    fn add_sequence(&self, id: i64) -> FfiResult<()> {
        self.0.with("vm.builtin.kv_state_add_sequence", |s| {
            if s.seqs.contains_key(&id) {
                return Err(internal(format!("The sequence \"{id}\" is already in the space state storage.")));
            }
            let slot = s.free_slot()?;
            let mut buf = Vec::new();
            for layer in 0..s.num_layers {
                for (k, init) in s.init.iter().enumerate() {
                    let dst = match s.part(layer, k, slot, Some(0), &mut buf) {
                        Ok(d) => d,
                        Err(e) => {
                            s.free_slots.push(slot);
                            return Err(e);
                        }
                    };
                    if let Err(e) = tvm_runtime_classic::ndarray::copy_tensor(dl(init), &dst, std::ptr::null_mut()) {
                        s.free_slots.push(slot);
                        return Err(e.into());
                    }
                }
            }
            s.seqs.insert(id, Seq { seq_length: 0, available_history: 0, history_slot: 0, slot });
            s.dirty = true;
            Ok(())
        })
    }
    fn remove_sequence(&self, id: i64) -> FfiResult<()> {
        self.0.with("vm.builtin.kv_state_remove_sequence", |s| {
            let q = s.seqs.remove(&id).ok_or_else(|| missing(id))?;
            s.free_slots.push(q.slot);
            s.dirty = true;
            Ok(())
        })
    }
    fn fork_sequence(&self, parent: i64, child: i64, _pos: i64) -> FfiResult<()> {
        self.0.with("vm.builtin.kv_state_fork_sequence", |s| {
            let p = *s.seqs.get(&parent).ok_or_else(|| {
                internal(format!("The parent sequence \"{parent}\" cannot be found in space state storage."))
            })?;
            if s.seqs.contains_key(&child) {
                return Err(internal(format!("The child sequence \"{child}\" is already in the space state storage.")));
            }
            let slot = s.free_slot()?;
            let (mut b1, mut b2) = (Vec::new(), Vec::new());
            for layer in 0..s.num_layers {
                for k in 0..s.init.len() {
                    let r = s.part(layer, k, p.slot, None, &mut b1).and_then(|src| {
                        let dst = s.part(layer, k, slot, None, &mut b2)?;
                        Ok(tvm_runtime_classic::ndarray::copy_tensor(&src, &dst, std::ptr::null_mut())?)
                    });
                    if let Err(e) = r {
                        s.free_slots.push(slot);
                        return Err(e);
                    }
                }
            }
            s.seqs.insert(child, Seq { slot, ..p });
            s.dirty = true;
            Ok(())
        })
    }
    fn popn(&self, id: i64, n: i64) -> FfiResult<()> {
        self.0.with("vm.builtin.kv_state_popn", |s| {
            let max = s.max_history;
            let q = s.seqs.get_mut(&id).ok_or_else(|| internal(format!("The sequence \"{id}\" cannot be found in space state.")))?;
            if n < 0 {
                return Err(internal(format!("The length of rolling back {n} cannot be negative.")));
            }
            if n > q.available_history {
                return Err(internal(format!(
                    "The sequence only has {} available history in the space state storage, while the length of rollback is {n} which exceeds the sequence length.",
                    q.available_history
                )));
            }
            q.seq_length -= n;
            q.available_history -= n;
            q.history_slot = (q.history_slot - n).rem_euclid(max);
            s.dirty = true;
            Ok(())
        })
    }
    fn begin_forward(&self, ids: &[i64], lens: &[i64], tree: Option<&[i64]>) -> FfiResult<()> {
        self.0.with("vm.builtin.kv_state_begin_forward", |s| {
            if ids.len() != lens.len() {
                return Err(internal(format!(
                    "The seq_ids size ({}) and append_lengths size ({}) mismatch.",
                    ids.len(),
                    lens.len()
                )));
            }
            if let Some(tree) = tree {
                let mut at = 0usize;
                for &len in lens {
                    for k in 0..len.max(0) {
                        if tree.get(at) != Some(&(k - 1)) {
                            return Err(internal(
                                "Unexpected token tree for RNN state. RNN state only supports chains as token trees.",
                            ));
                        }
                        at += 1;
                    }
                }
            }
            if let Some(id) = ids.iter().find(|id| !s.seqs.contains_key(id)) {
                return Err(missing(*id));
            }
            if let Some(&l) = lens.iter().find(|&&l| l < 0) {
                return Err(internal(format!("append length {l} is negative")));
            }
            s.cur_ids = ids.to_vec();
            s.cur_lens = lens.to_vec();
            if s.dirty {
                s.sync()?;
            }
            Ok(())
        })
    }
    fn end_forward(&self) -> FfiResult<()> {
        self.0.with("vm.builtin.kv_state_end_forward", |s| {
            if let Some(id) = s.cur_ids.iter().find(|id| !s.seqs.contains_key(id)) {
                return Err(missing(*id));
            }
            let max = s.max_history;
            for (id, &len) in s.cur_ids.iter().zip(&s.cur_lens) {
                let q = s.seqs.get_mut(id).expect("checked above");
                q.seq_length += len;
                q.available_history = if len > 1 { 0 } else { (q.available_history + 1).min(max - 1) };
                q.history_slot = (q.history_slot + 1) % max;
            }
            s.dirty = true;
            Ok(())
        })
    }
}

fn functions(a: Args, k: usize, what: &str) -> FfiResult<Vec<ObjectRef>> {
    let arr = object_of(a, k, ti::ARRAY, what)?;
    seq_items(&arr)
        .iter()
        .map(|x| x.as_object().filter(|o| o.type_index() == ti::FUNCTION))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| FfiError::type_error(format!("{what}: argument {k} must be an Array of functions")))
}

fn create(a: Args) -> FfiResult<Any> {
    let what = "vm.builtin.rnn_state_create";
    let (num_layers, reserved, max_history) = (int(a, 0, what)?, int(a, 1, what)?, int(a, 2, what)?);
    let (gets, sets) = (functions(a, 3, what)?, functions(a, 4, what)?);
    let init_arr = object_of(a, 5, ti::ARRAY, what)?;
    let init = seq_items(&init_arr)
        .iter()
        .map(|x| x.as_object().filter(|o| o.type_index() == ti::TENSOR))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| FfiError::type_error(format!("{what}: argument 5 must be an Array of tensors")))?;
    if num_layers <= 0 {
        return Err(internal("The number of layers should be greater than 0."));
    }
    if reserved <= 0 {
        return Err(internal("The number of reserved sequences should be greater than 0."));
    }
    if max_history <= 0 {
        return Err(internal("At least 1 history slot to store the current state"));
    }
    if init.is_empty() {
        return Err(internal("The number of states per layer should be greater than 0."));
    }
    let device = dl(&init[0]).device;
    if init.iter().any(|x| dl(x).device != device) {
        return Err(internal("The device type of all states should be the same."));
    }
    if gets.len() != init.len() || sets.len() != init.len() {
        return Err(internal(format!(
            "The number of state getters and setters should be the same as the number of states per layer, but got {}, {} and {} respectively.",
            gets.len(),
            sets.len(),
            init.len()
        )));
    }
    let mut storages = Vec::with_capacity(num_layers as usize);
    for _ in 0..num_layers {
        let mut layer = Vec::with_capacity(init.len());
        for x in &init {
            let d = dl(x);
            let mut shape = vec![reserved, max_history];
            shape.extend_from_slice(tvm_runtime_classic::device::tensor_shape(d)?);
            layer.push(ten::empty(&shape, d.dtype, device)?);
        }
        storages.push(layer);
    }
    let i32t = super::aux_data::I32;
    let state = State {
        num_layers: num_layers as usize,
        reserved,
        max_history,
        init,
        storages,
        gets,
        sets,
        free_slots: (0..reserved).rev().collect(),
        seqs: HashMap::default(),
        cur_ids: Vec::new(),
        cur_lens: Vec::new(),
        dirty: false,
        slot_ids: ten::empty(&[reserved], i32t, device)?,
        history_ids: ten::empty(&[reserved], i32t, device)?,
        slot_view: None,
        history_view: None,
    };
    Ok(Any::object(make_object(rnn_state_imp_index(), RnnState(Guarded::new(state)))))
}

fn rnn<'a>(a: Args, what: &str, keep: &'a mut Option<ObjectRef>) -> FfiResult<&'a RnnState> {
    let o = keep.insert(object_of(a, 0, rnn_state_index(), what)?);
    as_state(o).ok_or_else(|| FfiError::type_error(format!("{what}: not an RNN state of this runtime")))
}

/// Registers `vm.builtin.rnn_state_*`.
pub(crate) fn register(b: &mut Builder) {
    b.add("vm.builtin.rnn_state_create", create);
    b.add("vm.builtin.rnn_state_get", |a| {
        let what = "vm.builtin.rnn_state_get";
        let (layer, state, out) = (int(a, 1, what)?, int(a, 2, what)?, tensor(a, 3, what)?);
        let mut keep = None;
        rnn(a, what, &mut keep)?.0.with(what, |s| {
            let (l, k) = s.check_ids(layer, state, what)?;
            let (slots, hist) = s.ready(what)?;
            call(&s.gets[k], "f_get", &[t(&s.storages[l][k]), t(slots), t(hist), t(&out)])?;
            Ok(Any::none())
        })
    });
    b.add("vm.builtin.rnn_state_set", |a| {
        let what = "vm.builtin.rnn_state_set";
        let (layer, state, data) = (int(a, 1, what)?, int(a, 2, what)?, tensor(a, 3, what)?);
        let mut keep = None;
        rnn(a, what, &mut keep)?.0.with(what, |s| {
            let (l, k) = s.check_ids(layer, state, what)?;
            let (slots, hist) = s.ready(what)?;
            call(&s.sets[k], "f_set", &[t(&s.storages[l][k]), t(slots), t(hist), t(&data)])?;
            Ok(())
        })?;
        Ok(Any::object(keep.expect("set by rnn")))
    });
    b.add("vm.builtin.rnn_state_debug_get", |a| {
        let what = "vm.builtin.rnn_state_debug_get";
        let (layer, state, id) = (int(a, 1, what)?, int(a, 2, what)?, int(a, 3, what)?);
        arg(a, 3, what)?;
        let mut keep = None;
        rnn(a, what, &mut keep)?.0.with(what, |s| {
            let (l, k) = s.check_ids(layer, state, what)?;
            let q = *s.seqs.get(&id).ok_or_else(|| missing(id))?;
            let mut buf = Vec::new();
            let src = s.part(l, k, q.slot, Some(q.history_slot), &mut buf)?;
            let out = ten::empty(&buf, src.dtype, src.device)?;
            tvm_runtime_classic::ndarray::copy_tensor(&src, dl(&out), std::ptr::null_mut())?;
            Ok(Any::object(out))
        })
    });
}
