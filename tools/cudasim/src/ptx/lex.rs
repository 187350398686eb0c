//! PTX tokens: identifiers (opcodes keep their dotted modifiers, `ld.global.nc.f32`), directives
//! (`.reg`), integer and floating-point literals (`0f3F800000`, `0d...`, decimal), strings and
//! punctuation, each with its line. Comments and debug-only directives (`.loc`, `.file`,
//! `.section` blocks) are dropped here.

use super::PtxError;

/// One token.
#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    /// A name: an opcode with its modifiers, a register (`%r1`, `%tid.x`), a label or a symbol.
    Ident(String),
    /// A directive or a type / modifier word, without its dot (`reg`, `f32`, `global`).
    Dir(String),
    /// An integer literal (the sign is a separate `-` token).
    Int(u64),
    /// `0fXXXXXXXX`: the bits of an f32.
    F32(u32),
    /// `0dXXXXXXXXXXXXXXXX` or a decimal literal with a point or exponent: an f64.
    F64(f64),
    /// A string literal (pragmas, file names).
    Str(String),
    /// Punctuation.
    P(char),
}

/// A token and the line it starts on (1-based).
#[derive(Clone, Debug)]
pub struct Token {
    /// The token.
    pub tok: Tok,
    /// Its line.
    pub line: u32,
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b'$' || c == b'%'
}

/// `::` inside a modifier (`.shared::cta`, `.L2::128B`).
fn is_scope(b: &[u8], i: usize) -> bool {
    b[i] == b':' && b.get(i + 1) == Some(&b':')
}

fn is_ident_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c == b'.'
}

/// Splits PTX text into tokens.
pub fn tokenize(src: &str) -> Result<Vec<Token>, PtxError> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line = 1u32;
    let err = |line: u32, msg: String| PtxError::syntax(line, msg);
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            line += 1;
            i += 1;
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            loop {
                if i + 1 >= b.len() {
                    return Err(err(line, "unterminated comment".into()));
                }
                if b[i] == b'\n' {
                    line += 1;
                }
                if b[i] == b'*' && b[i + 1] == b'/' {
                    i += 2;
                    break;
                }
                i += 1;
            }
            continue;
        }
        let start_line = line;
        if c == b'.' && b.get(i + 1).is_some_and(|&d| d.is_ascii_alphabetic() || d == b'_') {
            let s = i + 1;
            i += 1;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || is_scope(b, i)) {
                i += if b[i] == b':' { 2 } else { 1 };
            }
            let word = &src[s..i];
            match word {
                // Debug line information: the rest of the line.
                "loc" | "file" => {
                    while i < b.len() && b[i] != b'\n' {
                        i += 1;
                    }
                }
                // Debug sections: `.section .debug_xxx { ... }`.
                "section" => {
                    while i < b.len() && b[i] != b'{' {
                        if b[i] == b'\n' {
                            line += 1;
                        }
                        i += 1;
                    }
                    let mut depth = 0;
                    while i < b.len() {
                        match b[i] {
                            b'{' => depth += 1,
                            b'}' => {
                                depth -= 1;
                                if depth == 0 {
                                    i += 1;
                                    break;
                                }
                            }
                            b'\n' => line += 1,
                            _ => {}
                        }
                        i += 1;
                    }
                }
                _ => out.push(Token { tok: Tok::Dir(word.to_string()), line: start_line }),
            }
            continue;
        }
        if is_ident_start(c) {
            let s = i;
            i += 1;
            while i < b.len() && (is_ident_char(b[i]) || is_scope(b, i)) {
                i += if b[i] == b':' { 2 } else { 1 };
            }
            out.push(Token { tok: Tok::Ident(src[s..i].to_string()), line });
            continue;
        }
        if c.is_ascii_digit() {
            let (tok, n) = number(&b[i..]).ok_or_else(|| err(line, format!("bad number near `{}`", near(src, i))))?;
            out.push(Token { tok, line });
            i += n;
            continue;
        }
        if c == b'"' {
            let s = i + 1;
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\n' {
                    return Err(err(line, "unterminated string".into()));
                }
                i += 1;
            }
            if i >= b.len() {
                return Err(err(line, "unterminated string".into()));
            }
            out.push(Token { tok: Tok::Str(src[s..i].to_string()), line });
            i += 1;
            continue;
        }
        if b"{}()[],;:+-!@<>=|".contains(&c) {
            out.push(Token { tok: Tok::P(c as char), line });
            i += 1;
            continue;
        }
        return Err(err(line, format!("unexpected character `{}`", near(src, i))));
    }
    Ok(out)
}

fn near(src: &str, i: usize) -> String {
    src[i..].chars().take(16).collect()
}

/// A numeric literal at the start of `b`: the token and its length.
fn number(b: &[u8]) -> Option<(Tok, usize)> {
    let word_len = b.iter().position(|c| !(c.is_ascii_alphanumeric() || *c == b'.' || *c == b'_')).unwrap_or(b.len());
    let mut w = &b[..word_len];
    let text = std::str::from_utf8(w).ok()?;
    if text.len() > 2 && (text.starts_with("0f") || text.starts_with("0F")) {
        return Some((Tok::F32(u32::from_str_radix(&text[2..], 16).ok()?), word_len));
    }
    if text.len() > 2 && (text.starts_with("0d") || text.starts_with("0D")) {
        return Some((Tok::F64(f64::from_bits(u64::from_str_radix(&text[2..], 16).ok()?)), word_len));
    }
    if text.starts_with("0x") || text.starts_with("0X") {
        let t = text[2..].trim_end_matches(['U', 'u']);
        return Some((Tok::Int(u64::from_str_radix(t, 16).ok()?), word_len));
    }
    if text.starts_with("0b") || text.starts_with("0B") {
        let t = text[2..].trim_end_matches(['U', 'u']);
        return Some((Tok::Int(u64::from_str_radix(t, 2).ok()?), word_len));
    }
    // Decimal float: digits with a point and/or an exponent (the exponent may carry a sign,
    // which is outside `word_len`).
    let is_float = text.contains('.') || (text.contains(['e', 'E']) && !text.ends_with(['U', 'u']));
    if is_float {
        let mut len = word_len;
        if text.ends_with(['e', 'E']) && matches!(b.get(len), Some(b'+') | Some(b'-')) {
            len += 1;
            while len < b.len() && b[len].is_ascii_digit() {
                len += 1;
            }
        }
        let t = std::str::from_utf8(&b[..len]).ok()?;
        return Some((Tok::F64(t.parse().ok()?), len));
    }
    if text.ends_with(['U', 'u']) {
        w = &w[..w.len() - 1];
    }
    let t = std::str::from_utf8(w).ok()?;
    let v = if t.len() > 1 && t.starts_with('0') { u64::from_str_radix(&t[1..], 8).ok()? } else { t.parse().ok()? };
    Some((Tok::Int(v), word_len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        tokenize(s).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn literals_and_names() {
        assert_eq!(
            toks("ld.global.nc.f32 %f1, [%rd12+-256]; // x\n"),
            vec![
                Tok::Ident("ld.global.nc.f32".into()),
                Tok::Ident("%f1".into()),
                Tok::P(','),
                Tok::P('['),
                Tok::Ident("%rd12".into()),
                Tok::P('+'),
                Tok::P('-'),
                Tok::Int(256),
                Tok::P(']'),
                Tok::P(';'),
            ]
        );
        assert_eq!(toks("0f3F800000 0d3FF0000000000000 0x10 010 7U 1.5 2e3"), {
            vec![
                Tok::F32(0x3F80_0000),
                Tok::F64(1.0),
                Tok::Int(16),
                Tok::Int(8),
                Tok::Int(7),
                Tok::F64(1.5),
                Tok::F64(2000.0),
            ]
        });
        assert_eq!(toks(".reg .b32 %r<5>;").len(), 7);
        assert_eq!(toks("/* a\n b */ .loc 1 2 3\n.file 1 \"x.cu\"\nret;"), vec![Tok::Ident("ret".into()), Tok::P(';')]);
        assert_eq!(toks(".section .debug_info { .b8 1 { } }\nexit;"), vec![Tok::Ident("exit".into()), Tok::P(';')]);
        let t = tokenize("a\n\nb").unwrap();
        assert_eq!((t[0].line, t[1].line), (1, 3));
        assert!(tokenize("a # b").is_err());
        assert!(tokenize("/* open").is_err());
    }
}
