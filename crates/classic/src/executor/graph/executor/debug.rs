//! The debug graph executor (`tvm.contrib.debugger`, TVM v0.8's forms): each node run alone and
//! timed (`run_individual`), run up to a node (`execute_node`), its outputs read
//! (`get_node_output`, `debug_get_output`), the profile report's JSON. What later releases
//! changed of these is in `later.rs`.

use super::*;
use crate::executor::report::format_g;

impl GraphExecutor {
    /// Debug: runs node `nid`'s closure alone, timed.
    fn time_node(st: &State, nodes: &[super::super::json::Node], nid: usize) -> Result<f64> {
        match &st.ops[nid] {
            Some(op) => {
                let dev = st.data_entry.first().map(|a| a.device());
                let t0 = std::time::Instant::now();
                op.run(&nodes[nid].name)?;
                if let Some(d) = dev {
                    if d.device_type != device::CPU {
                        device::api(d.device_type)?.stream_sync(d, std::ptr::null_mut())?;
                    }
                }
                Ok(t0.elapsed().as_secs_f64())
            }
            None => Ok(0.0),
        }
    }

    /// Debug: `run_individual(number, repeat, min_repeat_ms)`.
    pub fn run_individual(&self, mut number: i64, repeat: i64, min_repeat_ms: i64) -> Result<String> {
        if number <= 0 || repeat <= 0 || min_repeat_ms < 0 {
            return Err(Error::value("run_individual: number and repeat must be positive, min_repeat_ms non-negative"));
        }
        self.run()?;
        let st = self.state.lock();
        let n = self.graph.nodes.len();
        let mut t = vec![0.0f64; n];
        for _ in 0..repeat {
            let mut duration_ms = 0.0f64;
            loop {
                t.iter_mut().for_each(|x| *x = 0.0);
                if duration_ms > 0.0 {
                    number =
                        (min_repeat_ms as f64 / (duration_ms / number as f64) + 1.0).max(number as f64 * 1.618) as i64;
                }
                let start = std::time::Instant::now();
                for _ in 0..number {
                    for (nid, tn) in t.iter_mut().enumerate() {
                        *tn += Self::time_node(&st, &self.graph.nodes, nid)?;
                    }
                }
                duration_ms = start.elapsed().as_secs_f64() * 1e3;
                if duration_ms >= min_repeat_ms as f64 {
                    break;
                }
            }
            for (nid, tn) in t.iter_mut().enumerate() {
                if st.ops[nid].is_some() {
                    *tn /= number as f64;
                }
            }
        }
        Ok(t.iter().map(|x| format!("{},", format_g(*x))).collect())
    }

    /// Debug: `execute_node(node)`.
    pub fn execute_node(&self, node: i64) -> Result<()> {
        let n = self.graph.nodes.len() as i64;
        if node < 0 || node >= n {
            return Err(Error::index(format!("execute_node: node {node} out of range ({n} nodes)")));
        }
        let mut st = self.state.lock();
        let last = st.last_executed_node;
        if node < last {
            Self::run_range(&st, &self.graph.nodes, 0, node as usize)?;
        } else if node > last {
            Self::run_range(&st, &self.graph.nodes, (last + 1) as usize, node as usize)?;
        }
        st.last_executed_node = node;
        Ok(())
    }

    /// Debug: `get_node_output(node, index)`: a CPU copy of that output.
    pub fn get_node_output(&self, node: i64, index: i64) -> Result<NDArray> {
        let st = self.state.lock();
        if node != st.last_executed_node {
            return Err(Error::value(format!(
                "get_node_output: node {node} is not the last executed node ({})",
                st.last_executed_node
            )));
        }
        let nid = node as usize;
        let outs = (self.graph.node_row_ptr[nid + 1] - self.graph.node_row_ptr[nid]) as i64;
        if index < 0 || index >= outs {
            return Err(Error::index(format!("get_node_output: node {node} has no output {index}")));
        }
        let a = &st.data_entry[self.graph.node_row_ptr[nid] as usize + index as usize];
        let out = NDArray::empty(a.shape(), a.dtype(), DLDevice { device_type: device::CPU, device_id: 0 })?;
        copy_tensor(a.tensor(), out.tensor(), std::ptr::null_mut())?;
        Ok(out)
    }

    /// Debug: `debug_get_output(node, out)` (indexes data entries by node id, as TVM does).
    pub fn debug_get_output(&self, node: usize, out: &DLTensor) -> Result<()> {
        if node >= self.graph.nodes.len() {
            return Err(Error::index(format!("debug_get_output: node {node} out of range")));
        }
        let st = self.state.lock();
        Self::run_range(&st, &self.graph.nodes, 0, node)?;
        let a = st.data_entry.get(node).ok_or_else(|| Error::index(format!("no data entry {node}")))?;
        copy_tensor(a.tensor(), out, std::ptr::null_mut())
    }

    /// Debug: `profile_rpc()`: per-node durations as the profiler's JSON report.
    pub(crate) fn profile_json(&self) -> Result<String> {
        for _ in 0..3 {
            self.run()?;
        }
        let st = self.state.lock();
        let dev = self.devices[0];
        let dev_name = format!("{}{}", device::device_name(dev.device_type)?, dev.device_id);
        let total_start = std::time::Instant::now();
        let mut calls = Vec::new();
        for (nid, node) in self.graph.nodes.iter().enumerate() {
            if st.ops[nid].is_none() {
                continue;
            }
            let secs = Self::time_node(&st, &self.graph.nodes, nid)?;
            let shapes: Vec<String> = st.ops[nid]
                .as_ref()
                .map(|op| {
                    op.args
                        .iter()
                        .map(|t| {
                            let s = device::tensor_shape(t).unwrap_or(&[]);
                            let dims: Vec<String> = s.iter().map(i64::to_string).collect();
                            format!("{}[{}]", dtype::format(t.dtype).unwrap_or_default(), dims.join(", "))
                        })
                        .collect()
                })
                .unwrap_or_default();
            calls.push((node.attrs.func_name.clone(), secs * 1e6, shapes.join(", "), node.attrs.extra.clone()));
        }
        let total_us = total_start.elapsed().as_secs_f64() * 1e6;
        let mut out = String::from("{\"calls\":[");
        for (i, (name, us, shapes, extra)) in calls.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&format!(
                "{{\"Name\":{{\"string\":{}}},\"Duration (us)\":{{\"microseconds\":{us:.6}}},\"Count\":{{\"count\":1}},\
                 \"Device\":{{\"string\":{}}},\"Percent\":{{\"percent\":{:.6}}},\"Argument Shapes\":{{\"string\":{}}}",
                serde_json::to_string(name).unwrap_or_default(),
                serde_json::to_string(&dev_name).unwrap_or_default(),
                if total_us > 0.0 { us / total_us * 100.0 } else { 0.0 },
                serde_json::to_string(shapes).unwrap_or_default()
            ));
            for (k, v) in extra {
                if k == "hash" || k.contains("layout") {
                    let key = if k == "hash" { "Hash" } else { k.as_str() };
                    out.push_str(&format!(
                        ",{}:{{\"string\":{}}}",
                        serde_json::to_string(key).unwrap_or_default(),
                        serde_json::to_string(v).unwrap_or_default()
                    ));
                }
            }
            out.push('}');
        }
        out.push_str(&format!(
            "],\"device_metrics\":{{{}:{{\"Name\":{{\"string\":\"Total\"}},\"Duration (us)\":{{\"microseconds\":{total_us:.6}}},\
             \"Count\":{{\"count\":1}},\"Device\":{{\"string\":{}}}}}}}}}",
            serde_json::to_string(&dev_name).unwrap_or_default(),
            serde_json::to_string(&dev_name).unwrap_or_default()
        ));
        Ok(out)
    }
}
