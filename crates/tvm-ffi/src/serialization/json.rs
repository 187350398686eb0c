//! tvm-ffi's JSON (`ffi.json.Parse` / `ffi.json.Stringify`): Python's `json` dialect (NaN,
//! Infinity and -Infinity are numbers; integers that fit stay integers), Python's error messages
//! ("Expecting value: line 1 column 1 (char 0)"), and the writer's exact text forms (floats with
//! `%.17g`, integral floats with `.0`, `/` escaped).

use crate::any::Any;
use crate::structural::cont;
use crate::{ti, types, FfiError, FfiResult};

/// A JSON value (objects keep their keys in order; a repeated key keeps the first place and the
/// last value, as `ffi.Map` does).
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer that fits in 64 bits.
    Int(i64),
    /// Any other number.
    Float(f64),
    /// A string.
    Str(String),
    /// An array.
    Array(Vec<Json>),
    /// An object.
    Object(Vec<(String, Json)>),
}

impl Json {
    /// The member `key` of an object.
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
    /// An integer (booleans count, as tvm-ffi's casts allow).
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Json::Int(i) => Some(i),
            Json::Bool(b) => Some(b as i64),
            _ => None,
        }
    }
    /// A float (integers and booleans count).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Json::Float(f) => Some(f),
            Json::Int(i) => Some(i as f64),
            Json::Bool(b) => Some(b as i64 as f64),
            _ => None,
        }
    }
    /// A boolean (integers count).
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Json::Bool(b) => Some(b),
            Json::Int(i) => Some(i != 0),
            _ => None,
        }
    }
    /// The kind, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Json::Null => "None",
            Json::Bool(_) => "bool",
            Json::Int(_) => "int",
            Json::Float(_) => "float",
            Json::Str(_) => "ffi.String",
            Json::Array(_) => "ffi.Array",
            Json::Object(_) => "ffi.Map",
        }
    }
}

/// Puts `(k, v)` into an ordered object: a repeated key keeps its place and takes the new value.
pub(crate) fn object_set(m: &mut Vec<(String, Json)>, k: String, v: Json) {
    match m.iter_mut().find(|(x, _)| *x == k) {
        Some(slot) => slot.1 = v,
        None => m.push((k, v)),
    }
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
    line: usize,
    line_begin: usize,
    err: Option<String>,
}

/// Nesting deeper than this is an error, not a stack overflow.
pub const MAX_DEPTH: usize = 1000;

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }
    fn skip_spaces(&mut self) {
        while let Some(c) = self.peek() {
            if !matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
                break;
            }
            if c == b'\n' {
                self.line += 1;
                self.line_begin = self.pos + 1;
            }
            self.pos += 1;
        }
    }
    fn set_err(&mut self, prefix: &str) {
        let column = self.pos.saturating_sub(self.line_begin) + 1;
        self.err = Some(format!("{prefix}: line {} column {column} (char {})", self.line, self.pos));
    }
    fn fail<T>(&mut self, prefix: &str) -> Option<T> {
        self.set_err(prefix);
        None
    }
    fn fail_at<T>(&mut self, pos: usize, prefix: &str) -> Option<T> {
        self.pos = pos;
        self.fail(prefix)
    }
    fn match_literal(&mut self, lit: &[u8]) -> bool {
        for &c in lit {
            if self.peek() != Some(c) {
                return false;
            }
            self.pos += 1;
        }
        true
    }

    fn value(&mut self, depth: usize) -> Option<Json> {
        self.skip_spaces();
        let start = self.pos;
        if depth > MAX_DEPTH {
            return self.fail("Nesting too deep");
        }
        match self.peek() {
            None => self.fail("Expecting value"),
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => self.string().map(Json::Str),
            Some(c @ (b't' | b'f' | b'n')) => {
                let (rest, v): (&[u8], Json) = match c {
                    b't' => (b"true", Json::Bool(true)),
                    b'f' => (b"false", Json::Bool(false)),
                    _ => (b"null", Json::Null),
                };
                if self.match_literal(rest) {
                    Some(v)
                } else {
                    self.fail_at(start, "Expecting value")
                }
            }
            Some(_) => self.number(),
        }
    }

    fn number(&mut self) -> Option<Json> {
        let start = self.pos;
        let mut buf = String::new();
        if self.peek() == Some(b'-') {
            buf.push('-');
            self.pos += 1;
            if self.peek() == Some(b'I') {
                return if self.match_literal(b"Infinity") {
                    Some(Json::Float(f64::NEG_INFINITY))
                } else {
                    self.fail_at(start, "Expecting value")
                };
            }
        } else if self.peek() == Some(b'I') {
            return if self.match_literal(b"Infinity") {
                Some(Json::Float(f64::INFINITY))
            } else {
                self.fail_at(start, "Expecting value")
            };
        } else if self.peek() == Some(b'N') {
            return if self.match_literal(b"NaN") {
                Some(Json::Float(f64::NAN))
            } else {
                self.fail_at(start, "Expecting value")
            };
        }
        let mut maybe_int = true;
        while let Some(c) = self.peek() {
            if c.is_ascii_digit() || matches!(c, b'e' | b'E' | b'+' | b'-' | b'.') {
                buf.push(c as char);
                if matches!(c, b'.' | b'e' | b'E') {
                    maybe_int = false;
                }
                self.pos += 1;
            } else {
                break;
            }
        }
        if buf.is_empty() {
            return self.fail("Expecting value");
        }
        if maybe_int {
            if let Ok(i) = buf.parse::<i64>() {
                return Some(Json::Int(i));
            }
        }
        // strtod's rules: out of range (overflow, or underflow of a non-zero value) is an error.
        match buf.parse::<f64>() {
            Ok(f)
                if f.is_finite()
                    && !(f == 0.0
                        && buf.bytes().take_while(|c| !matches!(c, b'e' | b'E')).any(|c| matches!(c, b'1'..=b'9'))) =>
            {
                Some(Json::Float(f))
            }
            _ => self.fail_at(start, "Expecting value"),
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let mut r = 0u32;
        for _ in 0..4 {
            let c = self.peek()?;
            let d = (c as char).to_digit(16)?;
            r = r * 16 + d;
            self.pos += 1;
        }
        Some(r)
    }

    fn string(&mut self) -> Option<String> {
        let start = self.pos;
        self.pos += 1;
        let mut out: Vec<u8> = Vec::new();
        loop {
            let Some(c) = self.peek() else {
                return self.fail_at(start, "Unterminated string starting at");
            };
            if c < b' ' {
                return self.fail("Invalid control character at");
            }
            self.pos += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    let esc = self.peek();
                    let simple = match esc {
                        Some(b'"') => Some(b'"'),
                        Some(b'\\') => Some(b'\\'),
                        Some(b'/') => Some(b'/'),
                        Some(b'b') => Some(8),
                        Some(b'f') => Some(12),
                        Some(b'n') => Some(b'\n'),
                        Some(b'r') => Some(b'\r'),
                        Some(b't') => Some(b'\t'),
                        _ => None,
                    };
                    if let Some(b) = simple {
                        self.pos += 1;
                        out.push(b);
                        continue;
                    }
                    if esc != Some(b'u') {
                        return self.fail("Invalid \\escape");
                    }
                    let esc_pos = self.pos;
                    self.pos += 1;
                    let Some(first) = self.hex4() else {
                        return self.fail_at(esc_pos, "Invalid \\uXXXX escape");
                    };
                    let cp = if (0xD800..=0xDFFF).contains(&first) {
                        if first >= 0xDC00 || !self.match_literal(b"\\u") {
                            return self.fail_at(esc_pos, "Invalid surrogate pair of \\uXXXX escapes");
                        }
                        let second_pos = self.pos;
                        let Some(second) = self.hex4() else {
                            return self.fail_at(second_pos, "Invalid \\uXXXX escape");
                        };
                        if !(0xDC00..=0xDFFF).contains(&second) {
                            return self.fail_at(second_pos, "Invalid surrogate pair of \\uXXXX escapes");
                        }
                        ((first - 0xD800) << 10) + (second - 0xDC00) + 0x10000
                    } else {
                        first
                    };
                    let ch = char::from_u32(cp).unwrap_or('\u{FFFD}');
                    let mut tmp = [0u8; 4];
                    out.extend_from_slice(ch.encode_utf8(&mut tmp).as_bytes());
                }
                _ => out.push(c),
            }
        }
        // The input is UTF-8 and escapes add whole characters: the bytes are UTF-8.
        Some(String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
    }

    fn object(&mut self, depth: usize) -> Option<Json> {
        self.pos += 1;
        self.skip_spaces();
        let mut m: Vec<(String, Json)> = Vec::new();
        match self.peek() {
            None => return self.fail("Expecting property name enclosed in double quotes"),
            Some(b'}') => {
                self.pos += 1;
                return Some(Json::Object(m));
            }
            _ => {}
        }
        while let Some(c) = self.peek() {
            if c != b'"' {
                return self.fail("Expecting property name enclosed in double quotes");
            }
            let k = self.string()?;
            self.skip_spaces();
            if self.peek() != Some(b':') {
                return self.fail("Expecting ':' delimiter");
            }
            self.pos += 1;
            let v = self.value(depth)?;
            object_set(&mut m, k, v);
            self.skip_spaces();
            match self.peek() {
                Some(b'}') => {
                    self.pos += 1;
                    return Some(Json::Object(m));
                }
                Some(b',') => {
                    self.pos += 1;
                    self.skip_spaces();
                }
                _ => return self.fail("Expecting ',' delimiter"),
            }
        }
        self.fail("Expecting property name enclosed in double quotes")
    }

    fn array(&mut self, depth: usize) -> Option<Json> {
        self.pos += 1;
        self.skip_spaces();
        let mut v = Vec::new();
        match self.peek() {
            None => return self.fail("Expecting value"),
            Some(b']') => {
                self.pos += 1;
                return Some(Json::Array(v));
            }
            _ => {}
        }
        while self.peek().is_some() {
            v.push(self.value(depth)?);
            self.skip_spaces();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.skip_spaces();
                }
                Some(b']') => {
                    self.pos += 1;
                    return Some(Json::Array(v));
                }
                _ => return self.fail("Expecting ',' delimiter"),
            }
        }
        self.fail("Expecting value")
    }
}

/// Parses JSON text; a `ValueError` with Python's message on bad input.
pub fn parse(text: &str) -> FfiResult<Json> {
    let mut p = Parser { s: text.as_bytes(), pos: 0, line: 1, line_begin: 0, err: None };
    if let Some(v) = p.value(0) {
        p.skip_spaces();
        if p.peek().is_none() {
            return Ok(v);
        }
        p.set_err("Extra data");
    }
    if p.err.is_none() {
        p.set_err("Syntax error near");
    }
    Err(FfiError::value(p.err.unwrap_or_default()))
}

/// `%.17g` of C's printf.
fn format_g17(v: f64) -> String {
    let e = format!("{v:.16e}");
    let (mant, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let x: i32 = exp.parse().unwrap_or(0);
    let strip = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if (-4..17).contains(&x) {
        strip(&format!("{:.*}", (16 - x) as usize, v))
    } else {
        let sign = if x < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", strip(mant), x.abs())
    }
}

/// tvm-ffi's float text: NaN, Infinity, -Infinity, `%.1f` for integral values below 2^53,
/// `%.17g` otherwise.
pub(crate) fn format_float(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v < 0.0 { "-Infinity" } else { "Infinity" }.into()
    } else if v.abs() < 9_007_199_254_740_992.0 && v.fract() == 0.0 {
        format!("{v:.1}")
    } else {
        format_g17(v)
    }
}

/// tvm-ffi's `EscapeStringJSON`: quoted, `"`, `\`, `/` and control characters escaped.
pub(crate) fn escape_string(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            8 => out.extend_from_slice(b"\\b"),
            12 => out.extend_from_slice(b"\\f"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            c if c < 0x20 || c == 0x7f => out.extend_from_slice(format!("\\u{c:04x}").as_bytes()),
            c => out.push(c),
        }
    }
    out.push(b'"');
}

struct Writer {
    indent: usize,
    total: usize,
    out: Vec<u8>,
}

impl Writer {
    fn newline(&mut self) {
        if self.indent != 0 {
            self.out.push(b'\n');
            self.out.resize(self.out.len() + self.total, b' ');
        }
    }
    fn value(&mut self, v: &Json) {
        match v {
            Json::Null => self.out.extend_from_slice(b"null"),
            Json::Bool(b) => self.out.extend_from_slice(if *b { b"true" } else { b"false" }),
            Json::Int(i) => self.out.extend_from_slice(i.to_string().as_bytes()),
            Json::Float(f) => self.out.extend_from_slice(format_float(*f).as_bytes()),
            Json::Str(s) => escape_string(s.as_bytes(), &mut self.out),
            Json::Array(items) => {
                self.out.push(b'[');
                self.total += self.indent;
                for (i, it) in items.iter().enumerate() {
                    if i != 0 {
                        self.out.push(b',');
                    }
                    self.newline();
                    self.value(it);
                }
                self.total -= self.indent;
                self.newline();
                self.out.push(b']');
            }
            Json::Object(m) => {
                self.out.push(b'{');
                self.total += self.indent;
                for (i, (k, it)) in m.iter().enumerate() {
                    if i != 0 {
                        self.out.push(b',');
                    }
                    self.newline();
                    escape_string(k.as_bytes(), &mut self.out);
                    self.out.push(b':');
                    if self.indent != 0 {
                        self.out.push(b' ');
                    }
                    self.value(it);
                }
                self.total -= self.indent;
                self.newline();
                self.out.push(b'}');
            }
        }
    }
}

/// JSON text of a value (`indent` 0: compact).
pub fn stringify(v: &Json, indent: usize) -> String {
    let mut w = Writer { indent, total: 0, out: Vec::new() };
    w.value(v);
    String::from_utf8(w.out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// A JSON value as an ffi value (objects become `ffi.Map`, arrays `ffi.Array`).
pub(crate) fn to_any(v: &Json) -> FfiResult<Any> {
    Ok(match v {
        Json::Null => Any::none(),
        Json::Bool(b) => Any::bool(*b),
        Json::Int(i) => Any::int(*i),
        Json::Float(f) => Any::float(*f),
        Json::Str(s) => Any::string(s),
        Json::Array(items) => cont::make_array(items.iter().map(to_any).collect::<FfiResult<_>>()?),
        Json::Object(m) => {
            let items = m.iter().map(|(k, v)| Ok((Any::string(k), to_any(v)?))).collect::<FfiResult<_>>()?;
            cont::make_map(items)?
        }
    })
}

fn str_of(a: &Any) -> Option<String> {
    cont::str_bytes(a, false).map(|b| String::from_utf8_lossy(b).into_owned())
}

/// An ffi value as JSON: None, bool, int, float, str, Array, List (not containing itself) and
/// Map/Dict with string keys; anything else is a `ValueError`.
pub fn from_any(v: &Any) -> FfiResult<Json> {
    let mut active: Vec<*mut crate::object::TVMFFIObject> = Vec::new();
    from_any_inner(v, &mut active, 0)
}

fn from_any_inner(v: &Any, active: &mut Vec<*mut crate::object::TVMFFIObject>, depth: usize) -> FfiResult<Json> {
    if depth > MAX_DEPTH {
        return Err(FfiError::value("JSON value nests too deeply"));
    }
    let t = v.type_index();
    Ok(match t {
        ti::NONE => Json::Null,
        ti::BOOL => Json::Bool(v.as_bool().unwrap_or(false)),
        ti::INT => Json::Int(v.as_i64().unwrap_or(0)),
        ti::FLOAT => Json::Float(v.as_f64().unwrap_or(0.0)),
        ti::SMALL_STR | ti::STR => Json::Str(str_of(v).unwrap_or_default()),
        ti::ARRAY | ti::LIST => {
            let o = v.as_object().ok_or_else(|| FfiError::value("bad sequence"))?;
            if t == ti::LIST {
                if active.contains(&o.as_ptr()) {
                    return Err(FfiError::value("Cycle detected: List contains itself"));
                }
                active.push(o.as_ptr());
            }
            let items = cont::seq(&o).iter().map(|x| from_any_inner(x, active, depth + 1)).collect::<FfiResult<_>>();
            if t == ti::LIST {
                active.pop();
            }
            Json::Array(items?)
        }
        ti::MAP | ti::DICT => {
            let o = v.as_object().ok_or_else(|| FfiError::value("bad map"))?;
            if active.contains(&o.as_ptr()) {
                return Err(FfiError::value("Cycle detected: Dict contains itself"));
            }
            active.push(o.as_ptr());
            let mut m = Vec::new();
            let r = (|| {
                for (k, x) in cont::map_items(&o)? {
                    let ks = str_of(&k).ok_or_else(|| {
                        FfiError::value(format!("Expect key to be string, got `{}`", types::type_key(k.type_index())))
                    })?;
                    m.push((ks, from_any_inner(&x, active, depth + 1)?));
                }
                Ok::<(), FfiError>(())
            })();
            active.pop();
            r?;
            Json::Object(m)
        }
        _ => return Err(FfiError::value(format!("Unsupported type: `{}`", types::type_key(t)))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(s: &str) -> String {
        parse(s).unwrap_err().message()
    }

    #[test]
    fn parses_python_json() {
        assert_eq!(
            parse(" [1, -2.5, \"a\\u00e9\\ud83d\\ude00\", null, true, NaN] ").map(|v| stringify(&v, 0)).unwrap(),
            "[1,-2.5,\"a\u{e9}\u{1f600}\",null,true,NaN]"
        );
        assert_eq!(
            parse("{\"a\": 1, \"a\": 2, \"b\": {}}").unwrap(),
            Json::Object(vec![("a".into(), Json::Int(2)), ("b".into(), Json::Object(vec![]))])
        );
        assert_eq!(parse("-Infinity").unwrap(), Json::Float(f64::NEG_INFINITY));
        assert_eq!(parse("99999999999999999999").unwrap(), Json::Float(1e20));
        assert_eq!(parse("1e5").unwrap(), Json::Float(100000.0));
    }

    #[test]
    fn rejects_with_python_messages() {
        assert_eq!(err(""), "Expecting value: line 1 column 1 (char 0)");
        assert_eq!(err("[1,]"), "Expecting value: line 1 column 4 (char 3)");
        assert_eq!(err("{\"a\" 1}"), "Expecting ':' delimiter: line 1 column 6 (char 5)");
        assert_eq!(err("[1 2]"), "Expecting ',' delimiter: line 1 column 4 (char 3)");
        assert_eq!(err("1 2"), "Extra data: line 1 column 3 (char 2)");
        assert_eq!(err("\n\"abc"), "Unterminated string starting at: line 2 column 1 (char 1)");
        assert_eq!(err("{1:2}"), "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)");
        assert!(err("\"\\x\"").starts_with("Invalid \\escape"));
        assert!(err("\"\\ud800\"").starts_with("Invalid surrogate pair"));
        assert!(err("1e999").starts_with("Expecting value"));
        assert!(err("tru").starts_with("Expecting value"));
        assert!(err(&"[".repeat(2000)).starts_with("Nesting too deep"));
        assert!(parse(&format!("{}{}", "[".repeat(900), "]".repeat(900))).is_ok());
    }

    #[test]
    fn writes_tvm_ffi_text() {
        assert_eq!(format_float(1.0), "1.0");
        assert_eq!(format_float(0.1), "0.10000000000000001");
        assert_eq!(format_float(1e300), "1.0000000000000001e+300");
        assert_eq!(format_float(1.5e-7), "1.4999999999999999e-07");
        assert_eq!(format_float(-0.5), "-0.5");
        let v = parse("{\"k\": [1, \"a/b\"], \"e\": []}").unwrap();
        assert_eq!(stringify(&v, 0), "{\"k\":[1,\"a\\/b\"],\"e\":[]}");
        assert_eq!(stringify(&v, 2), "{\n  \"k\": [\n    1,\n    \"a\\/b\"\n  ],\n  \"e\": [\n  ]\n}");
    }
}
