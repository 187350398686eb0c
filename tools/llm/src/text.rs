//! Text around the model: encoding prompts with the model's `tokenizer.json`, and turning
//! generated tokens back into text as they come, never splitting a UTF-8 character and holding
//! back what may be the start of a stop string.

use crate::Error;
use tokenizers::Tokenizer;

/// Token ids of `text` (no special tokens added: the conversation template adds its own).
pub fn encode(tok: &Tokenizer, text: &str) -> Result<Vec<u32>, Error> {
    Ok(tok.encode(text, false).map_err(|e| Error::new(format!("tokenizing the prompt: {e}")))?.get_ids().to_vec())
}

/// The bytes of every token of a byte-level tokenizer (GPT-2's and Llama 3's: its decoder is
/// `ByteLevel`, its tokens spell bytes through GPT-2's byte-to-character map), so that decoding
/// is concatenation; special tokens give nothing (as `decode(.., skip_special_tokens)`).
pub struct ByteTable(Vec<Vec<u8>>);

fn unicode_to_byte() -> std::collections::HashMap<char, u8> {
    let mut bs: Vec<u32> = (b'!' as u32..=b'~' as u32).chain(0xA1..=0xAC).chain(0xAE..=0xFF).collect();
    let mut cs = bs.clone();
    let mut n = 0;
    for b in 0..256u32 {
        if !bs.contains(&b) {
            bs.push(b);
            cs.push(256 + n);
            n += 1;
        }
    }
    bs.into_iter().zip(cs).filter_map(|(b, c)| char::from_u32(c).map(|c| (c, b as u8))).collect()
}

impl ByteTable {
    /// The table of `tok`, if its decoder is byte-level and every token spells bytes.
    pub fn of(tok: &Tokenizer) -> Option<ByteTable> {
        if !matches!(tok.get_decoder(), Some(tokenizers::DecoderWrapper::ByteLevel(_))) {
            return None;
        }
        let map = unicode_to_byte();
        let added = tok.get_added_tokens_decoder();
        let n = tok.get_vocab_size(true);
        let mut table = Vec::with_capacity(n);
        for id in 0..n as u32 {
            if let Some(a) = added.get(&id) {
                table.push(if a.special { Vec::new() } else { a.content.clone().into_bytes() });
                continue;
            }
            let t = tok.id_to_token(id).unwrap_or_default();
            table.push(t.chars().map(|c| map.get(&c).copied()).collect::<Option<Vec<u8>>>()?);
        }
        Some(ByteTable(table))
    }
}

/// Incremental detokenization: the text of the tokens so far is decoded over a window (the
/// last few tokens before the unread ones give the decoder its context), and only text ending
/// in a whole character is released. With a [`ByteTable`], tokens are bytes and whole
/// characters are released as they complete (invalid bytes become U+FFFD, as a lossy decode
/// of the whole gives).
pub struct Detokenizer {
    bytes: Option<(std::sync::Arc<ByteTable>, Vec<u8>)>,
    ids: Vec<u32>,
    prefix: usize,
    read: usize,
    /// The text of `ids[prefix..read]` (decoded once per release).
    prefix_text: String,
    /// Released text not yet handed out (held back by stop strings).
    pending: String,
    stops: Vec<String>,
}

/// What [`Detokenizer::push`] gives: text to hand out, and whether a stop string was met (the
/// text ends before it).
pub struct Piece {
    /// New text.
    pub text: String,
    /// A stop string was found.
    pub stopped: bool,
}

impl Detokenizer {
    /// A detokenizer stopping at any of `stops` (empty strings are ignored).
    pub fn new(stops: &[String]) -> Detokenizer {
        Detokenizer {
            bytes: None,
            ids: Vec::new(),
            prefix: 0,
            read: 0,
            prefix_text: String::new(),
            pending: String::new(),
            stops: stops.iter().filter(|s| !s.is_empty()).cloned().collect(),
        }
    }

    /// A detokenizer over a byte table.
    pub fn with_bytes(stops: &[String], table: std::sync::Arc<ByteTable>) -> Detokenizer {
        let mut d = Detokenizer::new(stops);
        d.bytes = Some((table, Vec::new()));
        d
    }

    /// Moves the whole characters of the byte buffer (and U+FFFD for invalid bytes; at the end
    /// also for an incomplete tail) to `pending`.
    fn drain_bytes(&mut self, end: bool) {
        let Some((_, buf)) = &mut self.bytes else { return };
        let mut at = 0;
        loop {
            match std::str::from_utf8(&buf[at..]) {
                Ok(s) => {
                    self.pending.push_str(s);
                    at = buf.len();
                    break;
                }
                Err(e) => {
                    let ok = e.valid_up_to();
                    self.pending.push_str(std::str::from_utf8(&buf[at..at + ok]).unwrap_or_default());
                    at += ok;
                    match e.error_len() {
                        Some(n) => {
                            self.pending.push('\u{FFFD}');
                            at += n;
                        }
                        None if end => {
                            self.pending.push('\u{FFFD}');
                            at = buf.len();
                            break;
                        }
                        None => break,
                    }
                }
            }
        }
        buf.drain(..at);
    }

    fn decode(tok: &Tokenizer, ids: &[u32]) -> String {
        tok.decode(ids, true).unwrap_or_default()
    }

    /// Adds a token; the text that can be handed out now.
    pub fn push(&mut self, tok: &Tokenizer, id: u32) -> Piece {
        if let Some((table, buf)) = &mut self.bytes {
            buf.extend_from_slice(table.0.get(id as usize).map(Vec::as_slice).unwrap_or_default());
            self.drain_bytes(false);
            return self.release(false);
        }
        self.ids.push(id);
        let before = self.prefix_text.len();
        let now = Self::decode(tok, &self.ids[self.prefix..]);
        if now.len() > before && !now.ends_with('\u{FFFD}') && now.is_char_boundary(before) {
            self.pending.push_str(&now[before..]);
            self.prefix = self.read;
            self.read = self.ids.len();
            self.prefix_text = Self::decode(tok, &self.ids[self.prefix..self.read]);
        }
        self.release(false)
    }

    /// At the end: whatever is left (an incomplete character as U+FFFD).
    pub fn finish(&mut self, tok: &Tokenizer) -> Piece {
        if self.bytes.is_some() {
            self.drain_bytes(true);
            return self.release(true);
        }
        let before = self.prefix_text.len();
        let now = Self::decode(tok, &self.ids[self.prefix..]);
        if now.len() > before && now.is_char_boundary(before) {
            self.pending.push_str(&now[before..]);
        }
        self.prefix_text.clear();
        self.prefix = self.ids.len();
        self.read = self.ids.len();
        self.release(true)
    }

    fn release(&mut self, all: bool) -> Piece {
        for s in &self.stops {
            if let Some(at) = self.pending.find(s.as_str()) {
                let text = self.pending[..at].to_string();
                self.pending.clear();
                return Piece { text, stopped: true };
            }
        }
        // Keep back the longest tail that could still grow into a stop string.
        let mut keep = 0;
        if !all {
            for s in &self.stops {
                for k in (1..s.len()).rev() {
                    if k > keep && s.is_char_boundary(k) && self.pending.ends_with(&s[..k]) {
                        keep = k;
                        break;
                    }
                }
            }
        }
        let cut = self.pending.len() - keep;
        let text = self.pending[..cut].to_string();
        self.pending.drain(..cut);
        Piece { text, stopped: false }
    }
}
