//! The profiling VM (profiler/vm.cc, `runtime._VirtualMachineDebug`): `profile(func)` runs the
//! function three times to warm up, then once more timing every primitive call and the VM's own
//! memory and copy operations, and returns a `runtime.profiling.Report` with TVM's metrics
//! (`Name`, `Duration (us)`, `Count`, `Device`, `Percent`, `Argument Shapes`, `Hash`, the
//! primitives' `*layout` attributes) and one total per device.

use crate::abi::{DLDataType, DLDevice};
use crate::device;
use crate::value::dtype;
use std::collections::BTreeMap;
use std::time::Instant;

struct Call {
    name: String,
    device: DLDevice,
    us: f64,
    metrics: Vec<(String, String)>,
}

/// The calls recorded during one profiled run.
pub struct Recorder {
    start: Instant,
    calls: Vec<Call>,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder { start: Instant::now(), calls: Vec::new() }
    }
}

fn device_string(d: DLDevice) -> String {
    format!("{}{}", device::device_name(d.device_type).unwrap_or("unknown"), d.device_id)
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

impl Recorder {
    /// `ShapeString` of profiling.cc: `float32[1, 128]`.
    pub(crate) fn shape_string(shape: &[i64], t: DLDataType) -> String {
        let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
        format!("{}[{}]", dtype::format(t).unwrap_or_default(), dims.join(", "))
    }

    /// A VM operation that started at `t0`.
    /// `metric` is an extra (name, text) column, as TVM adds (`Argument Shapes`).
    pub(crate) fn record_op(&mut self, name: &str, dev: DLDevice, t0: Instant, metric: Option<(&str, String)>) {
        let metrics = metric.map(|(k, s)| vec![(k.to_owned(), s)]).unwrap_or_default();
        self.calls.push(Call { name: name.into(), device: dev, us: t0.elapsed().as_secs_f64() * 1e6, metrics });
    }

    /// A primitive call that started at `t0` (the device already synchronised).
    pub(crate) fn record_packed(
        &mut self,
        name: &str,
        dev: DLDevice,
        t0: Instant,
        shapes: String,
        attrs: Option<&BTreeMap<String, String>>,
    ) {
        let mut metrics = vec![("Argument Shapes".to_owned(), shapes)];
        for (k, v) in attrs.into_iter().flatten() {
            if k.contains("layout") {
                metrics.push((k.clone(), v.clone()));
            } else if k == "hash" {
                metrics.push(("Hash".into(), v.clone()));
            }
        }
        self.calls.push(Call { name: name.into(), device: dev, us: t0.elapsed().as_secs_f64() * 1e6, metrics });
    }

    /// The report (the JSON of `runtime.profiling.AsJSON`): the calls, then the whole run's
    /// duration for each of `devices`.
    pub(crate) fn into_json(self, devices: &[DLDevice]) -> String {
        let total_us = self.start.elapsed().as_secs_f64() * 1e6;
        let mut out = String::from("{\"calls\":[");
        for (i, c) in self.calls.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let pct = if total_us > 0.0 { c.us / total_us * 100.0 } else { 0.0 };
            out.push_str(&format!(
                "{{\"Name\":{{\"string\":{}}},\"Duration (us)\":{{\"microseconds\":{:.6}}},\"Count\":{{\"count\":1}},\
                 \"Device\":{{\"string\":{}}},\"Percent\":{{\"percent\":{pct:.6}}}",
                json_str(&c.name),
                c.us,
                json_str(&device_string(c.device))
            ));
            for (k, v) in &c.metrics {
                out.push_str(&format!(",{}:{{\"string\":{}}}", json_str(k), json_str(v)));
            }
            out.push('}');
        }
        out.push_str("],\"device_metrics\":{");
        for (i, d) in devices.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let name = json_str(&device_string(*d));
            out.push_str(&format!(
                "{name}:{{\"Name\":{{\"string\":\"Total\"}},\"Duration (us)\":{{\"microseconds\":{total_us:.6}}},\
                 \"Count\":{{\"count\":1}},\"Device\":{{\"string\":{name}}}}}"
            ));
        }
        out.push_str("}}");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_shape() {
        let mut r = Recorder::default();
        let cpu = DLDevice { device_type: 1, device_id: 0 };
        let attrs: BTreeMap<String, String> =
            [("hash".into(), "ab".into()), ("weight_layout".into(), "NC16n".into()), ("other".into(), "x".into())]
                .into_iter()
                .collect();
        r.record_packed("fused_add", cpu, Instant::now(), "float32[2]".into(), Some(&attrs));
        r.record_op("VM::AllocStorage", cpu, Instant::now(), Some(("VM::Argument Shapes", "float32[64]".into())));
        let j: serde_json::Value = serde_json::from_str(&r.into_json(&[cpu])).unwrap();
        let calls = j["calls"].as_array().unwrap();
        assert_eq!(calls[0]["Name"]["string"], "fused_add");
        assert_eq!(calls[0]["Hash"]["string"], "ab");
        assert_eq!(calls[0]["weight_layout"]["string"], "NC16n");
        assert!(calls[0].get("other").is_none());
        assert_eq!(calls[1]["VM::Argument Shapes"]["string"], "float32[64]");
        assert_eq!(j["device_metrics"]["cpu0"]["Name"]["string"], "Total");
    }
}
