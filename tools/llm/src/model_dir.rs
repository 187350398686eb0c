//! A model directory as MLC-LLM ships one: `mlc-chat-config.json` (sizes, sampling defaults,
//! special tokens, the conversation template), the weights as a tensor cache
//! (`tensor-cache.json`, or `ndarray-cache.json` of older releases, and its shards) and
//! `tokenizer.json`; the model library comes separately (`--model-lib`). Every piece is checked
//! at load: a missing or inconsistent one is an error naming the file and the field or tensor.

use crate::conversation::Conversation;
use crate::Error;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// `mlc-chat-config.json`: the fields the engine uses (the others are ignored).
#[derive(Clone, Debug, Deserialize)]
pub struct ChatConfig {
    /// The model's name (`model_type` in MLC's file; the directory name when absent).
    #[serde(default)]
    pub model_type: Option<String>,
    /// Rows of the model's logits.
    pub vocab_size: usize,
    /// The longest sequence (prompt and generated tokens); -1 with a sliding window.
    pub context_window_size: i64,
    /// Tokens one forward pass may take.
    pub prefill_chunk_size: i64,
    /// The sliding window (-1: none).
    #[serde(default = "minus_one")]
    pub sliding_window_size: i64,
    /// The attention sink kept with a sliding window (-1: none).
    #[serde(default = "minus_one")]
    pub attention_sink_size: i64,
    /// Sampling defaults (MLC's system defaults when absent).
    #[serde(default)]
    pub temperature: Option<f64>,
    #[serde(default)]
    #[allow(missing_docs, reason = "OpenAI's sampling parameters, documented there")]
    pub top_p: Option<f64>,
    #[serde(default)]
    #[allow(missing_docs, reason = "as above")]
    pub presence_penalty: Option<f64>,
    #[serde(default)]
    #[allow(missing_docs, reason = "as above")]
    pub frequency_penalty: Option<f64>,
    #[serde(default)]
    #[allow(missing_docs, reason = "as above")]
    pub repetition_penalty: Option<f64>,
    /// The beginning-of-sequence token.
    #[serde(default)]
    pub bos_token_id: Option<u32>,
    /// The end-of-sequence token(s).
    #[serde(default)]
    pub eos_token_id: Option<OneOrMany>,
    /// The conversation template of MLC's format.
    pub conv_template: Conversation,
}

fn minus_one() -> i64 {
    -1
}

/// An int or a list of ints (`eos_token_id`).
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    /// One id.
    One(u32),
    /// Several.
    Many(Vec<u32>),
}

impl OneOrMany {
    fn to_vec(&self) -> Vec<u32> {
        match self {
            OneOrMany::One(x) => vec![*x],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

/// A loaded, checked model directory.
pub struct ModelDir {
    /// The directory.
    pub dir: PathBuf,
    /// The model library.
    pub model_lib: PathBuf,
    /// The name it is served under (`model_type`, else the directory's name).
    pub name: String,
    /// `mlc-chat-config.json`.
    pub config: ChatConfig,
    /// `tokenizer.json`.
    pub tokenizer: tokenizers::Tokenizer,
    /// The tensor cache's folder (the directory, or its `params/`).
    pub params_dir: PathBuf,
    /// The weights' names in the tensor cache's order.
    pub param_names: Vec<String>,
    /// Tokens that end generation (EOS and the template's stop tokens).
    pub stop_token_ids: Vec<u32>,
    /// The bytes of each token, for byte-level tokenizers (fast incremental detokenization).
    pub byte_table: Option<std::sync::Arc<crate::text::ByteTable>>,
}

fn read_json(path: &Path) -> Result<serde_json::Value, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::new(format!("{}: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| Error::new(format!("{}: {e}", path.display())))
}

impl ModelDir {
    /// Loads and checks `dir` with the model library `model_lib`.
    pub fn load(dir: impl AsRef<Path>, model_lib: impl AsRef<Path>) -> Result<ModelDir, Error> {
        let dir = dir.as_ref().to_path_buf();
        let model_lib = model_lib.as_ref().to_path_buf();
        if !dir.is_dir() {
            return Err(Error::new(format!("{}: not a model directory", dir.display())));
        }
        if !model_lib.is_file() {
            return Err(Error::new(format!("{}: the model library does not exist", model_lib.display())));
        }
        let cfg_path = dir.join("mlc-chat-config.json");
        let config: ChatConfig = serde_json::from_value(read_json(&cfg_path)?)
            .map_err(|e| Error::new(format!("{}: {e}", cfg_path.display())))?;
        let bad = |field: &str, why: String| Error::new(format!("{}: {field}: {why}", cfg_path.display()));
        if config.vocab_size == 0 {
            return Err(bad("vocab_size", "must be positive".into()));
        }
        if config.prefill_chunk_size <= 0 {
            return Err(bad("prefill_chunk_size", format!("{} is not positive", config.prefill_chunk_size)));
        }
        if config.context_window_size <= 0 && config.sliding_window_size <= 0 {
            return Err(bad("context_window_size", "must be positive without a sliding window".into()));
        }
        config.conv_template.check().map_err(|e| bad("conv_template", e))?;
        let tok_path = dir.join("tokenizer.json");
        if !tok_path.is_file() {
            return Err(Error::new(format!("{}: missing", tok_path.display())));
        }
        let tokenizer = tokenizers::Tokenizer::from_file(&tok_path)
            .map_err(|e| Error::new(format!("{}: does not parse: {e}", tok_path.display())))?;
        let n = tokenizer.get_vocab_size(true);
        if n > config.vocab_size {
            return Err(Error::new(format!(
                "{}: {n} tokens, more than mlc-chat-config.json's vocab_size {}",
                tok_path.display(),
                config.vocab_size
            )));
        }
        let params_dir = ["tensor-cache.json", "ndarray-cache.json"]
            .iter()
            .flat_map(|f| [dir.clone(), dir.join("params")].into_iter().map(move |d| (d.clone(), d.join(f))))
            .find(|(_, p)| p.is_file())
            .map(|(d, _)| d)
            .ok_or_else(|| Error::new(format!("{}: no tensor-cache.json (the weights)", dir.display())))?;
        let param_names = check_tensor_cache(&params_dir)?;
        let mut stop_token_ids = config.eos_token_id.as_ref().map(OneOrMany::to_vec).unwrap_or_default();
        for t in &config.conv_template.stop_token_ids {
            if !stop_token_ids.contains(t) {
                stop_token_ids.push(*t);
            }
        }
        if let Some(t) = stop_token_ids.iter().find(|&&t| t as usize >= config.vocab_size) {
            return Err(bad("eos_token_id / stop_token_ids", format!("token {t} is outside the vocabulary")));
        }
        let name = config
            .model_type
            .clone()
            .filter(|s| !s.is_empty())
            .or_else(|| dir.file_name().map(|s| s.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "model".into());
        let byte_table = crate::text::ByteTable::of(&tokenizer).map(std::sync::Arc::new);
        Ok(ModelDir { dir, model_lib, name, config, tokenizer, params_dir, param_names, stop_token_ids, byte_table })
    }
}

/// Checks a tensor cache folder: its JSON, every shard present with the size it records, every
/// tensor inside its shard. The tensors' names, in order.
pub fn check_tensor_cache(dir: &Path) -> Result<Vec<String>, Error> {
    let path = ["tensor-cache.json", "ndarray-cache.json"]
        .iter()
        .map(|f| dir.join(f))
        .find(|p| p.is_file())
        .ok_or_else(|| Error::new(format!("{}: no tensor-cache.json", dir.display())))?;
    let j = read_json(&path)?;
    let bad = |what: String| Error::new(format!("{}: {what}", path.display()));
    let shards = j.get("records").and_then(|r| r.as_array()).ok_or_else(|| bad("no \"records\" list".into()))?;
    let mut names = Vec::new();
    for (k, shard) in shards.iter().enumerate() {
        let file =
            shard.get("dataPath").and_then(|v| v.as_str()).ok_or_else(|| bad(format!("records[{k}]: no dataPath")))?;
        let nbytes =
            shard.get("nbytes").and_then(|v| v.as_u64()).ok_or_else(|| bad(format!("records[{k}]: no nbytes")))?;
        let shard_path = dir.join(file);
        let len = std::fs::metadata(&shard_path)
            .map_err(|e| Error::new(format!("{}: {e} (a shard of {})", shard_path.display(), path.display())))?
            .len();
        if len != nbytes {
            return Err(Error::new(format!("{}: {len} bytes, {} says {nbytes}", shard_path.display(), path.display())));
        }
        let tensors = shard
            .get("records")
            .and_then(|v| v.as_array())
            .ok_or_else(|| bad(format!("records[{k}]: no tensor records")))?;
        for t in tensors {
            let name = t
                .get("name")
                .and_then(|v| v.as_str())
                .ok_or_else(|| bad(format!("{file}: a tensor without a name")))?;
            let off = t.get("byteOffset").and_then(|v| v.as_u64()).unwrap_or(0);
            let n = t.get("nbytes").and_then(|v| v.as_u64()).ok_or_else(|| bad(format!("tensor {name}: no nbytes")))?;
            if off.checked_add(n).is_none_or(|end| end > nbytes) {
                return Err(bad(format!(
                    "tensor {name}: bytes {off}..{} are outside {file} ({nbytes} bytes)",
                    off + n
                )));
            }
            names.push(name.to_string());
        }
    }
    if names.is_empty() {
        return Err(bad("no tensors".into()));
    }
    Ok(names)
}
