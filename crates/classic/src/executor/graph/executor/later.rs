//! What TVM v0.9..v0.19 added to the graph executor: `get_input_info`, `get_output_info`,
//! outputs by node name and by v0.9+'s `name:index` key, and the debug executor's binary
//! timings (`run_individual` with 5 or 6 settings, `run_individual_node`,
//! `debug_get_output(node)`).

use super::*;
#[cfg(feature = "profiling")]
use crate::executor::time_eval::{sync_device, TimerConfig};
#[cfg(feature = "profiling")]
use crate::timer::{measure, Steps};

#[cfg(feature = "profiling")]
/// The timer settings of the debug executor's v0.9+ `run_individual[_node]` (from argument
/// `from` on): (number, repeat, min_repeat_ms, [limit_zero_time_iterations (v0.10+),]
/// cooldown_interval_ms, repeats_to_cooldown).
pub(super) fn debug_timer_config(a: &Args<'_>, from: usize) -> Result<TimerConfig> {
    let n = a.len() - from;
    if n != 5 && n != 6 {
        return Err(Error::value(format!(
            "expected 3 (TVM v0.8), 5 (v0.9) or 6 (v0.10+) timer settings, got {n} arguments"
        )));
    }
    let cfg = TimerConfig {
        number: a.i64(from)?,
        repeat: a.i64(from + 1)?,
        min_repeat_ms: a.i64(from + 2)?,
        limit_zero_time_iterations: if n == 6 { a.i64(from + 3)? } else { i64::MAX },
        cooldown_interval_ms: a.i64(a.len() - 2)?,
        repeats_to_cooldown: a.i64(a.len() - 1)?,
        cache_flush_bytes: 0,
    };
    if cfg.number <= 0 || cfg.repeat <= 0 || cfg.min_repeat_ms < 0 || cfg.repeats_to_cooldown <= 0 {
        return Err(Error::value(
            "number, repeat and repeats_to_cooldown must be positive, min_repeat_ms non-negative",
        ));
    }
    if cfg.limit_zero_time_iterations < 0 || cfg.cooldown_interval_ms < 0 {
        return Err(Error::value("limit_zero_time_iterations and cooldown_interval_ms must not be negative"));
    }
    Ok(cfg)
}

// Additions of TVM v0.9..v0.19 (get_input_info, get_output_info, outputs by name, the debug
// executor's binary timings).
impl GraphExecutor {
    /// Output index of `name`: v0.8's node name, or v0.9+'s `name:index` key.
    pub(crate) fn output_index_any(&self, name: &str) -> Option<usize> {
        self.output_index(name).or_else(|| {
            let (node, idx) = name.rsplit_once(':')?;
            let idx: usize = idx.parse().ok()?;
            let head = self.graph.heads.get(idx)?;
            (self.graph.nodes[head.node_id as usize].name == node).then_some(idx)
        })
    }

    /// The last output whose node is named `name` (v0.9+'s `get_output(name)`).
    pub(crate) fn output_by_node_name(&self, name: &str) -> Option<usize> {
        self.graph.heads.iter().rposition(|h| self.graph.nodes[h.node_id as usize].name == name)
    }

    /// `{"shape": {name: ShapeTuple}, "dtype": {name: String}}` of `(node, entry)` pairs.
    fn info_map(&self, entries: impl Iterator<Item = (u32, usize)>) -> Value {
        let (mut shapes, mut dtypes) = (Vec::new(), Vec::new());
        for (nid, eid) in entries {
            let name = self.graph.nodes[nid as usize].name.as_bytes();
            let shape = crate::object::ShapeTupleObj::new_object(self.graph.shape[eid].clone());
            let t = dtype::format(self.graph.dltype[eid]).unwrap_or_default();
            shapes.push((StringObj::new_object(name), Some(shape)));
            dtypes.push((StringObj::new_object(name), Some(StringObj::new_object(t.as_bytes()))));
        }
        let map = crate::object::MapObj::new_object;
        Value::Object(map(vec![
            (StringObj::new_object(b"shape"), Some(map(shapes))),
            (StringObj::new_object(b"dtype"), Some(map(dtypes))),
        ]))
    }

    /// v0.9+ `get_input_info`: shapes and types of the inputs that `load_params` did not set.
    pub(crate) fn input_info(&self) -> Value {
        let params = self.param_names.lock().clone();
        let inputs = self
            .graph
            .arg_nodes
            .iter()
            .enumerate()
            .filter(|&(_, &nid)| !params.contains(&self.graph.nodes[nid as usize].name))
            .map(|(i, &nid)| (nid, self.input_entry(i)));
        self.info_map(inputs)
    }

    /// v0.9+ `get_output_info`: shapes and types of the outputs, by node name.
    pub(crate) fn output_info(&self) -> Value {
        self.info_map((0..self.num_outputs()).map(|i| (self.graph.heads[i].node_id, self.output_entry(i))))
    }

    #[cfg(feature = "profiling")]
    /// Times node `nid` alone under `st` (0s for nodes without an operator).
    fn node_timings(&self, st: &State, nid: usize, cfg: &TimerConfig) -> Result<Vec<u8>> {
        let Some(op) = &st.ops[nid] else { return Ok(vec![0u8; 8 * cfg.repeat.max(0) as usize]) };
        let name = &self.graph.nodes[nid].name;
        let dev = st.data_entry[self.graph.node_row_ptr[nid] as usize].device();
        op.run(name)?;
        let number = std::sync::atomic::AtomicI64::new(cfg.number);
        let steps = Steps {
            sync: &|| sync_device(dev),
            before_repeat: &mut || Ok(()),
            before_attempt: &mut || Ok(()),
            call: &mut || op.run(name),
        };
        let mut t = measure(cfg, &number, steps)?;
        // NaN becomes 0, as TVM writes it.
        for c in t.chunks_exact_mut(8) {
            if f64::from_ne_bytes(c.try_into().unwrap_or_default()).is_nan() {
                c.copy_from_slice(&0f64.to_ne_bytes());
            }
        }
        Ok(t)
    }

    #[cfg(feature = "profiling")]
    /// Debug (v0.9+): `run_individual_node(node, ...)`: `repeat` f64 seconds per run.
    pub fn run_individual_node(&self, nid: usize, cfg: &TimerConfig) -> Result<Vec<u8>> {
        let st = self.state.lock();
        self.node_timings(&st, nid, cfg)
    }

    #[cfg(feature = "profiling")]
    /// Debug (v0.9+): `run_individual(...)`: an i64 node count, then `repeat` f64 seconds per
    /// run for each node (0 for nodes without an operator).
    pub(crate) fn run_individual_bytes(&self, cfg: &TimerConfig) -> Result<Vec<u8>> {
        self.run()?;
        let st = self.state.lock();
        let mut out = (self.graph.nodes.len() as i64).to_ne_bytes().to_vec();
        for nid in 0..self.graph.nodes.len() {
            out.extend(self.node_timings(&st, nid, cfg)?);
        }
        Ok(out)
    }

    #[cfg(feature = "profiling")]
    /// Debug (v0.9+): `debug_get_output(node)`: runs up to `node` and returns a copy of its
    /// data entry (indexed by node id, as TVM does).
    pub(crate) fn debug_node_output(&self, node: usize) -> Result<NDArray> {
        let a = {
            let st = self.state.lock();
            st.data_entry.get(node).cloned().ok_or_else(|| Error::index(format!("no data entry {node}")))?
        };
        let out = NDArray::empty(a.shape(), a.dtype(), a.device())?;
        self.debug_get_output(node, out.tensor())?;
        Ok(out)
    }
}
