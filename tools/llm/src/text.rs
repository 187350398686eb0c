//! Text around the model: encoding prompts with the model's `tokenizer.json`, and turning
//! generated tokens back into text as they come, never splitting a UTF-8 character and holding
//! back what may be the start of a stop string.

use crate::Error;
use tokenizers::Tokenizer;

/// Token ids of `text` (no special tokens added: the conversation template adds its own).
pub fn encode(tok: &Tokenizer, text: &str) -> Result<Vec<u32>, Error> {
    Ok(tok.encode(text, false).map_err(|e| Error::new(format!("tokenizing the prompt: {e}")))?.get_ids().to_vec())
}

/// Incremental detokenization: the text of the tokens so far is decoded over a window (the
/// last few tokens before the unread ones give the decoder its context), and only text ending
/// in a whole character is released.
pub struct Detokenizer {
    ids: Vec<u32>,
    prefix: usize,
    read: usize,
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
            ids: Vec::new(),
            prefix: 0,
            read: 0,
            pending: String::new(),
            stops: stops.iter().filter(|s| !s.is_empty()).cloned().collect(),
        }
    }

    fn decode(tok: &Tokenizer, ids: &[u32]) -> String {
        tok.decode(ids, true).unwrap_or_default()
    }

    /// Adds a token; the text that can be handed out now.
    pub fn push(&mut self, tok: &Tokenizer, id: u32) -> Piece {
        self.ids.push(id);
        let before = Self::decode(tok, &self.ids[self.prefix..self.read]);
        let now = Self::decode(tok, &self.ids[self.prefix..]);
        if now.len() > before.len() && !now.ends_with('\u{FFFD}') && now.is_char_boundary(before.len()) {
            self.pending.push_str(&now[before.len()..]);
            self.prefix = self.read;
            self.read = self.ids.len();
        }
        self.release(false)
    }

    /// At the end: whatever is left (an incomplete character as U+FFFD).
    pub fn finish(&mut self, tok: &Tokenizer) -> Piece {
        let before = Self::decode(tok, &self.ids[self.prefix..self.read]);
        let now = Self::decode(tok, &self.ids[self.prefix..]);
        if now.len() > before.len() && now.is_char_boundary(before.len()) {
            self.pending.push_str(&now[before.len()..]);
        }
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
