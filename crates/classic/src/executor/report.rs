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

/// One metric of a call.
#[derive(Clone, Debug, PartialEq)]
enum Metric {
    Str(String),
    Count(i64),
    Duration(f64),
    Percent(f64),
}

impl Metric {
    fn from_json(v: &serde_json::Value) -> Metric {
        let o = v.as_object();
        let get = |k: &str| o.and_then(|o| o.get(k));
        if let Some(s) = get("string").and_then(|s| s.as_str()) {
            Metric::Str(s.to_owned())
        } else if let Some(c) = get("count").and_then(|c| c.as_i64()) {
            Metric::Count(c)
        } else if let Some(us) = get("microseconds").and_then(|x| x.as_f64()) {
            Metric::Duration(us)
        } else if let Some(p) = get("percent").and_then(|x| x.as_f64()) {
            Metric::Percent(p)
        } else {
            Metric::Str(v.to_string())
        }
    }

    /// The sum of two metrics of one column (strings keep the first).
    fn add(&self, other: &Metric) -> Metric {
        match (self, other) {
            (Metric::Count(a), Metric::Count(b)) => Metric::Count(a + b),
            (Metric::Duration(a), Metric::Duration(b)) => Metric::Duration(a + b),
            (Metric::Percent(a), Metric::Percent(b)) => Metric::Percent(a + b),
            (a, _) => a.clone(),
        }
    }

    /// As a table cell: counts as integers, durations and percents with two decimals.
    fn table_text(&self) -> String {
        match self {
            Metric::Str(s) => s.clone(),
            Metric::Count(c) => c.to_string(),
            Metric::Duration(x) | Metric::Percent(x) => format!("{x:.2}"),
        }
    }

    /// As a CSV field: strings quoted, numbers as C++ streams print them.
    fn csv_text(&self) -> String {
        match self {
            Metric::Str(s) => format!("\"{}\"", s.replace('"', "\"\"")),
            Metric::Count(c) => c.to_string(),
            Metric::Duration(x) | Metric::Percent(x) => format_g(*x),
        }
    }
}

/// A double as a default C++ ostream prints it (`%g`: six significant digits, no trailing zeros):
/// the reports' and the debug executor's numbers.
pub(crate) fn format_g(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return if x == 0.0 { "0".into() } else { x.to_string() };
    }
    let exp = x.abs().log10().floor() as i32;
    let trim = |s: String| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            s
        }
    };
    if !(-4..6).contains(&exp) {
        let m = format!("{:.5e}", x);
        let (mant, e) = m.split_once('e').unwrap_or((&m, "0"));
        let e: i32 = e.parse().unwrap_or(0);
        format!("{}e{}{:02}", trim(mant.to_owned()), if e < 0 { '-' } else { '+' }, e.abs())
    } else {
        trim(format!("{:.*}", (5 - exp).max(0) as usize, x))
    }
}

type Row = indexmap::IndexMap<String, Metric>;

fn parse_report(json: &str) -> Result<(Vec<Row>, Vec<Row>)> {
    let v: serde_json::Value = serde_json::from_str(json).map_err(|e| Error::value(format!("bad report: {e}")))?;
    let row = |o: &serde_json::Value| -> Row {
        o.as_object().into_iter().flatten().map(|(k, m)| (k.clone(), Metric::from_json(m))).collect()
    };
    let calls = v.get("calls").and_then(|c| c.as_array()).map(|c| c.iter().map(row).collect()).unwrap_or_default();
    let devices =
        v.get("device_metrics").and_then(|d| d.as_object()).map(|d| d.values().map(row).collect()).unwrap_or_default();
    Ok((calls, devices))
}

/// `Report::AsCSV`: one column per metric name (sorted), strings quoted.
fn as_csv(json: &str) -> Result<String> {
    let (calls, _) = parse_report(json)?;
    let headers: std::collections::BTreeSet<&String> = calls.iter().flat_map(|r| r.keys()).collect();
    let mut out = headers.iter().map(|h| h.as_str()).collect::<Vec<_>>().join(",");
    out.push('\n');
    for r in &calls {
        let cells: Vec<String> = headers.iter().map(|h| r.get(*h).map(Metric::csv_text).unwrap_or_default()).collect();
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    Ok(out)
}

/// `Report::AsTable(sort, aggregate, col_sums)`: calls merged by name (or hash), argument shapes
/// and device; sorted by duration, longest first; a `Sum` row; a `Total` row per device.
fn as_table(json: &str, sort: bool, aggregate: bool, col_sums: bool) -> Result<String> {
    let (calls, devices) = parse_report(json)?;
    let text = |r: &Row, k: &str| match r.get(k) {
        Some(Metric::Str(s)) => s.clone(),
        _ => String::new(),
    };
    let mut rows: Vec<Row> = if aggregate {
        let mut groups: indexmap::IndexMap<String, Row> = indexmap::IndexMap::new();
        for c in &calls {
            let name = if c.contains_key("Hash") { text(c, "Hash") } else { text(c, "Name") };
            let key = format!("{name}{}{}", text(c, "Argument Shapes"), text(c, "Device"));
            let g = groups.entry(key).or_default();
            for (k, m) in c {
                let merged = match g.get(k) {
                    Some(prev) => prev.add(m),
                    None => m.clone(),
                };
                g.insert(k.clone(), merged);
            }
        }
        groups.into_values().collect()
    } else {
        calls
    };
    if sort {
        let dur = |r: &Row| match r.get("Duration (us)") {
            Some(Metric::Duration(d)) => *d,
            _ => 0.0,
        };
        rows.sort_by(|a, b| dur(b).total_cmp(&dur(a)));
    }
    if col_sums {
        let mut sums = Row::new();
        for r in &rows {
            for (k, m) in r {
                if matches!(m, Metric::Str(_)) {
                    continue;
                }
                let v = match sums.get(k) {
                    Some(prev) => prev.add(m),
                    None => m.clone(),
                };
                sums.insert(k.clone(), v);
            }
        }
        sums.insert("Name".into(), Metric::Str("Sum".into()));
        rows.push([("Name".to_owned(), Metric::Str("----------".into()))].into_iter().collect());
        rows.push(sums);
    }
    for d in devices {
        let mut d = d;
        d.insert("Name".into(), Metric::Str("Total".into()));
        rows.push(d);
    }
    let mut headers: Vec<String> = ["Name", "Duration (us)", "Percent", "Device", "Count", "Argument Shapes"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let extra: std::collections::BTreeSet<&String> =
        rows.iter().flat_map(|r| r.keys()).filter(|k| !headers.contains(k)).collect();
    headers.extend(extra.into_iter().cloned());
    let cells: Vec<Vec<String>> = std::iter::once(headers.clone())
        .chain(
            rows.iter().map(|r| headers.iter().map(|h| r.get(h).map(Metric::table_text).unwrap_or_default()).collect()),
        )
        .collect();
    let widths: Vec<usize> =
        (0..headers.len()).map(|i| cells.iter().map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for r in &cells {
        for (i, (c, w)) in r.iter().zip(&widths).enumerate() {
            if i == 0 {
                out.push_str(&format!("{c:<w$}  "));
            } else {
                out.push_str(&format!("{c:>w$}  "));
            }
        }
        out.push('\n');
    }
    Ok(out)
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
        Ok(Value::Object(StringObj::new_object(as_csv(&report_arg(a)?)?.as_bytes())))
    });
    r.func("runtime.profiling.AsTable", |a| {
        let flag = |i: usize| -> Result<bool> { Ok(if a.len() > i { a.i64(i)? != 0 } else { true }) };
        let table = as_table(&report_arg(a)?, flag(1)?, flag(2)?, flag(3)?)?;
        Ok(Value::Object(StringObj::new_object(table.as_bytes())))
    });
}

#[cfg(test)]
mod tests {
    use super::{as_csv, as_table, format_g};

    #[test]
    fn device_wrapper_objects() {
        let f = crate::registry::get("runtime.profiling.DeviceWrapper").unwrap();
        let dev = crate::abi::DLDevice { device_type: 1, device_id: 0 };
        let crate::value::Value::Object(o) = f.call(&[crate::value::Value::Device(dev)]).unwrap() else {
            panic!("an object")
        };
        assert_eq!(o.type_index(), crate::object::type_key2index("runtime.profiling.DeviceWrapper").unwrap());
    }

    const REPORT: &str = r#"{"calls": [
        {"Name": {"string": "conv"}, "Duration (us)": {"microseconds": 10.0}, "Count": {"count": 1},
         "Argument Shapes": {"string": "float32[1, 3], float32[3]"}, "Device": {"string": "cpu0"}},
        {"Name": {"string": "dense"}, "Duration (us)": {"microseconds": 30.5}, "Count": {"count": 1},
         "Argument Shapes": {"string": "float32[4]"}, "Device": {"string": "cpu0"}},
        {"Name": {"string": "conv"}, "Duration (us)": {"microseconds": 25.0}, "Count": {"count": 1},
         "Argument Shapes": {"string": "float32[1, 3], float32[3]"}, "Device": {"string": "cpu0"}}],
      "device_metrics": {"cpu0": {"Duration (us)": {"microseconds": 70.0}}}}"#;

    #[test]
    fn csv_quotes_strings() {
        let csv = as_csv(REPORT).unwrap();
        let mut lines = csv.lines();
        assert_eq!(lines.next().unwrap(), "Argument Shapes,Count,Device,Duration (us),Name");
        assert_eq!(lines.next().unwrap(), "\"float32[1, 3], float32[3]\",1,\"cpu0\",10,\"conv\"");
        assert_eq!(lines.next().unwrap(), "\"float32[4]\",1,\"cpu0\",30.5,\"dense\"");
    }

    #[test]
    fn numbers_print_like_cpp_streams() {
        assert_eq!(format_g(0.0), "0");
        assert_eq!(format_g(1.5e-5), "1.5e-05");
        assert_eq!(format_g(0.000123456789), "0.000123457");
        assert_eq!(format_g(12.3456789), "12.3457");
        assert_eq!(format_g(3.2e-5), "3.2e-05");
        assert_eq!(format_g(1234567.0), "1.23457e+06");
        assert_eq!(format_g(0.000012345), "1.2345e-05");
        assert_eq!(format_g(100.0), "100");
        assert_eq!(format_g(f64::INFINITY), "inf");
    }

    #[test]
    fn table_aggregates_sorts_and_sums() {
        let t = as_table(REPORT, true, true, true).unwrap();
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("Name "), "{t}");
        // conv merged (35 us, count 2) sorts before dense (30.5 us).
        assert!(lines[1].starts_with("conv") && lines[1].contains("35.00") && lines[1].contains(" 2 "), "{t}");
        assert!(lines[2].starts_with("dense") && lines[2].contains("30.50"), "{t}");
        assert!(lines[3].starts_with("----------"), "{t}");
        assert!(lines[4].starts_with("Sum") && lines[4].contains("65.50") && lines[4].contains(" 3 "), "{t}");
        assert!(lines[5].starts_with("Total") && lines[5].contains("70.00"), "{t}");
        let plain = as_table(REPORT, false, false, false).unwrap();
        assert_eq!(plain.lines().count(), 1 + 3 + 1);
        assert!(plain.lines().nth(1).unwrap().contains("10.00"));
    }
}
