"""Makes an MLC-style model directory from ../shared/fixtures-llm/llama_tiny (or a model of
tests/python/relax/llm_model.py: the same config.json, lib.so and params/) for the engine's tests
and benches (run with the `tokenizers` package from PyPI):

    python make_model_dir.py FIXTURE_DIR OUT_DIR [CONTEXT_WINDOW PREFILL_CHUNK]

OUT/params (the tensor cache, copied), OUT/lib.so (the model library, copied: MLC ships it
beside the directory, given with --model-lib), OUT/tokenizer.json (a byte-level BPE tokenizer of
256 tokens, one per byte, made with `tokenizers`: token i is byte i; a larger vocabulary gets
tokens `<extra_k>` after them), OUT/mlc-chat-config.json (the model's sizes, a context window of
256 and prefill chunks of 64 unless given, EOS token 0 (which the
fixture's greedy sequences never produce), a small conversation template) and OUT/expected.json.
"""

import json
import shutil
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers


def bytes_to_unicode():
    """GPT-2's reversible map from bytes to printable characters (what ByteLevel uses)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def main(fixture, out, context=256, chunk=64):
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(f"{fixture}/params", f"{out}/params")
    shutil.copy(f"{fixture}/lib.so", f"{out}/lib.so")
    try:
        shutil.copy(f"{fixture}/expected.json", f"{out}/expected.json")
    except FileNotFoundError:
        pass
    cfg = json.load(open(f"{fixture}/config.json"))
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    vocab.update({f"<extra_{k}>": k for k in range(256, cfg["vocab"])})
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.save(f"{out}/tokenizer.json")
    assert tok.encode("Hi!").ids == [72, 105, 33], tok.encode("Hi!").ids
    chat = {
        "model_type": cfg.get("name", "llama_tiny"),
        "quantization": "q0f32",
        "model_config": {"hidden_size": cfg["hidden"], "num_hidden_layers": cfg["layers"]},
        "vocab_size": cfg["vocab"],
        "context_window_size": int(context),
        "sliding_window_size": -1,
        "prefill_chunk_size": int(chunk),
        "attention_sink_size": -1,
        "tensor_parallel_shards": 1,
        "temperature": 0.7,
        "top_p": 0.95,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "repetition_penalty": 1.0,
        "tokenizer_files": ["tokenizer.json"],
        "bos_token_id": 1,
        "eos_token_id": 0,
        "pad_token_id": 0,
        "conv_template": {
            "name": "tiny",
            "system_template": "{system_message}",
            "system_message": "",
            "system_prefix_token_ids": [1],
            "roles": {"user": "<user>", "assistant": "<assistant>"},
            "seps": ["\n"],
            "role_content_sep": ": ",
            "role_empty_sep": ":",
            "stop_str": [],
            "stop_token_ids": [0],
        },
    }
    json.dump(chat, open(f"{out}/mlc-chat-config.json", "w"), indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
