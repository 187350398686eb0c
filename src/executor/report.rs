//! A minimal `runtime.profiling.Report` object: the profiler's JSON text, with the
//! `runtime.profiling.AsJSON`/`AsTable`/`AsCSV`/`FromJSON` globals over it.

use crate::error::{Error, Result};
use crate::object::{type_key2index, ObjectRef, StringObj};
use crate::registry::Registrar;
use crate::value::{Args, Value};

/// The body of a Report object.
pub struct Report {
    /// `{"calls": [...], "device_metrics": {...}}`.
    pub json: String,
}

impl Report {
    /// A new Report object.
    pub fn new_object(json: String) -> ObjectRef {
        let idx = type_key2index("runtime.profiling.Report").unwrap_or(crate::object::index::DYNAMIC);
        ObjectRef::alloc(idx, Report { json })
    }
}

/// The body of a `runtime.profiling.DeviceWrapper` object: a device handed to metric
/// collectors (this runtime has none, so it is only made and passed around).
pub struct DeviceWrapper {
    /// The device.
    pub device: crate::abi::DLDevice,
}

fn report_arg(a: &Args<'_>) -> Result<String> {
    let o = a.object(0)?.ok_or_else(|| Error::value("expected a runtime.profiling.Report"))?;
    let idx = type_key2index("runtime.profiling.Report")?;
    // SAFETY: every object of the Report type index is made by `Report::new_object`.
    let r = unsafe { o.downcast_index::<Report>(idx) };
    r.map(|r| r.json.clone()).ok_or_else(|| Error::type_error("expected a runtime.profiling.Report"))
}

fn metric_text(v: &serde_json::Value) -> String {
    let Some(obj) = v.as_object() else { return v.to_string() };
    if let Some(s) = obj.get("string").and_then(|s| s.as_str()) {
        return s.to_owned();
    }
    if let Some(c) = obj.get("count") {
        return c.to_string();
    }
    if let Some(us) = obj.get("microseconds").and_then(|x| x.as_f64()) {
        return format!("{us:.2}");
    }
    if let Some(p) = obj.get("percent").and_then(|x| x.as_f64()) {
        return format!("{p:.2}");
    }
    v.to_string()
}

fn rows(json: &str) -> Result<(Vec<String>, Vec<Vec<String>>)> {
    let v: serde_json::Value = serde_json::from_str(json).map_err(|e| Error::value(format!("bad report: {e}")))?;
    let calls = v.get("calls").and_then(|c| c.as_array()).cloned().unwrap_or_default();
    let mut cols: Vec<String> = Vec::new();
    for c in &calls {
        for k in c.as_object().into_iter().flatten().map(|(k, _)| k) {
            if !cols.contains(k) {
                cols.push(k.clone());
            }
        }
    }
    let rows =
        calls.iter().map(|c| cols.iter().map(|k| c.get(k).map(metric_text).unwrap_or_default()).collect()).collect();
    Ok((cols, rows))
}

/// A CSV field (RFC 4180): quoted when it holds a comma, a quote or a line break.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

/// Registers the report globals.
pub fn register(r: &mut Registrar<'_>) {
    r.func("runtime.profiling.DeviceWrapper", |a| {
        a.expect_len("runtime.profiling.DeviceWrapper", 1)?;
        let device = a.device(0)?;
        let idx = type_key2index("runtime.profiling.DeviceWrapper")?;
        Ok(Value::Object(ObjectRef::alloc(idx, DeviceWrapper { device })))
    });
    r.func("runtime.profiling.AsJSON", |a| Ok(Value::Object(StringObj::new_object(report_arg(a)?.as_bytes()))));
    r.func("runtime.profiling.FromJSON", |a| {
        let text = a.string(0)?;
        serde_json::from_str::<serde_json::Value>(&text).map_err(|e| Error::value(format!("bad report JSON: {e}")))?;
        Ok(Value::Object(Report::new_object(text)))
    });
    r.func("runtime.profiling.AsCSV", |a| {
        let (cols, rows) = rows(&report_arg(a)?)?;
        let line = |cells: &[String]| cells.iter().map(|c| csv_field(c)).collect::<Vec<_>>().join(",");
        let mut out = line(&cols);
        out.push('\n');
        for r in rows {
            out.push_str(&line(&r));
            out.push('\n');
        }
        Ok(Value::Object(StringObj::new_object(out.as_bytes())))
    });
    r.func("runtime.profiling.AsTable", |a| {
        let (cols, rows) = rows(&report_arg(a)?)?;
        let widths: Vec<usize> = cols
            .iter()
            .enumerate()
            .map(|(i, c)| rows.iter().map(|r| r[i].len()).chain([c.len()]).max().unwrap_or(0))
            .collect();
        let line = |cells: &[String]| {
            cells
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_owned()
        };
        let mut out = line(&cols);
        out.push('\n');
        for r in &rows {
            out.push_str(&line(r));
            out.push('\n');
        }
        Ok(Value::Object(StringObj::new_object(out.as_bytes())))
    });
}

#[cfg(test)]
mod tests {
    use super::csv_field;

    #[test]
    fn device_wrapper_objects() {
        let f = crate::registry::get("runtime.profiling.DeviceWrapper").unwrap();
        let dev = crate::abi::DLDevice { device_type: 1, device_id: 0 };
        let crate::value::Value::Object(o) = f.call(&[crate::value::Value::Device(dev)]).unwrap() else {
            panic!("an object")
        };
        assert_eq!(o.type_index(), crate::object::type_key2index("runtime.profiling.DeviceWrapper").unwrap());
    }

    #[test]
    fn csv_fields_are_quoted_when_needed() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("float32[1, 784], float32[128, 784]"), "\"float32[1, 784], float32[128, 784]\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("a\nb"), "\"a\nb\"");
    }
}
