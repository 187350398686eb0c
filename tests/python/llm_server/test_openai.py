"""`tvmrt serve` driven by the real `openai` Python client (PyPI), on the model directory of
make_model_dir.py (LLM_MODEL_DIR; TVMRT names the binary): greedy tokens equal to expected.json's
(TVM's own runtime) whole and streamed, chat, eight clients at once, a cancelled stream giving
its pages back, bad requests (malformed JSON, invalid UTF-8, oversized bodies, out-of-range and
wrong-typed values, an unknown model, a prompt over the context window) answered with 4xx and
OpenAI's error body while the server goes on serving, unknown fields ignored, /metrics, and
Ctrl-C draining a running stream before the server exits.
"""

import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import openai
import pytest

DIR = os.environ.get("LLM_MODEL_DIR")
TVMRT = os.environ.get("TVMRT", "target/release/tvmrt")
if not DIR or not (pathlib.Path(DIR) / "mlc-chat-config.json").is_file():
    if os.environ.get("CI") == "true":
        raise RuntimeError("LLM_MODEL_DIR is not set (CI=true)")
    pytest.skip("LLM_MODEL_DIR is not set (scripts/test-llm-engine.sh makes it)", allow_module_level=True)
EXP = json.loads((pathlib.Path(DIR) / "expected.json").read_text())
MODEL = "llama_tiny"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(port):
    p = subprocess.Popen([TVMRT, "serve", "--model", DIR, "--model-lib", f"{DIR}/lib.so", "--port", str(port)],
                         stderr=subprocess.PIPE, text=True)
    for _ in range(200):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).read()
            return p
        except OSError:
            if p.poll() is not None:
                raise RuntimeError(p.stderr.read())
            time.sleep(0.05)
    p.kill()
    raise RuntimeError("the server did not come up")


@pytest.fixture(scope="module")
def server():
    port = free_port()
    p = start(port)
    yield port
    p.send_signal(signal.SIGINT)
    assert p.wait(timeout=30) == 0


@pytest.fixture
def client(server):
    return openai.OpenAI(base_url=f"http://127.0.0.1:{server}/v1", api_key="none", max_retries=0)


def raw(port, path, body, content_type="application/json"):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def metrics(port):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name.split("{")[0]] = float(value)
    return out


def greedy_args(i):
    return dict(model=MODEL, prompt=EXP["prompts"][i], max_tokens=len(EXP["greedy"][i]), temperature=0,
                extra_body={"ignore_eos": True, "return_token_ids": True})


def test_models_and_health(client, server):
    assert [m.id for m in client.models.list().data] == [MODEL]
    assert json.loads(urllib.request.urlopen(f"http://127.0.0.1:{server}/health").read())["status"] == "ok"


def test_greedy_completion_gives_tvms_tokens(client):
    for i in range(2):
        r = client.completions.create(**greedy_args(i))
        assert r.choices[0].model_extra["token_ids"] == EXP["greedy"][i]
        assert r.choices[0].finish_reason == "length"
        assert r.usage.completion_tokens == len(EXP["greedy"][i])
        assert r.usage.prompt_tokens == len(EXP["prompts"][i])


def test_streamed_completion_gives_tvms_tokens(client):
    ids, text = [], ""
    for chunk in client.completions.create(stream=True, **greedy_args(1)):
        text += chunk.choices[0].text
        ids += chunk.choices[0].model_extra.get("token_ids", [])
    assert ids == EXP["greedy"][1]
    whole = client.completions.create(**greedy_args(1)).choices[0].text
    assert text == whole


def test_chat_whole_and_streamed(client):
    kw = dict(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=6, temperature=0,
              extra_body={"ignore_eos": True})
    r = client.chat.completions.create(**kw)
    assert r.choices[0].message.role == "assistant"
    assert r.usage.completion_tokens == 6
    parts = [c.choices[0].delta.content or "" for c in client.chat.completions.create(stream=True, **kw) if c.choices]
    assert "".join(parts) == r.choices[0].message.content
    lp = client.chat.completions.create(logprobs=True, top_logprobs=3, **kw)
    assert len(lp.choices[0].logprobs.content) >= 1 and len(lp.choices[0].logprobs.content[0].top_logprobs) == 3


def test_eight_clients_at_once(client):
    results, errors = [None] * 8, []

    def work(k):
        try:
            ids = []
            for chunk in client.completions.create(stream=True, **greedy_args(k % 2)):
                ids += chunk.choices[0].model_extra.get("token_ids", [])
            results[k] = ids
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    assert all(results[k] == EXP["greedy"][k % 2] for k in range(8))


def test_cancelled_stream_frees_its_pages(client, server):
    stream = client.completions.create(model=MODEL, prompt=[5, 6, 7], max_tokens=240, temperature=0, stream=True,
                                       extra_body={"ignore_eos": True})
    next(iter(stream))
    assert metrics(server)["tvmrt_kv_cache_pages_in_use"] > 0
    stream.close()
    for _ in range(100):
        m = metrics(server)
        if m["tvmrt_kv_cache_pages_in_use"] == 0 and m["tvmrt_requests_running"] == 0:
            break
        time.sleep(0.05)
    assert m["tvmrt_kv_cache_pages_in_use"] == 0, m
    assert client.completions.create(**greedy_args(0)).choices[0].model_extra["token_ids"] == EXP["greedy"][0]


@pytest.mark.parametrize("kw, param", [
    (dict(temperature=5), "temperature"),
    (dict(max_tokens=0), "max_tokens"),
    (dict(max_tokens=-3), "max_tokens"),
    (dict(top_p=0), "top_p"),
    (dict(n=2), "n"),
    (dict(presence_penalty=7), "presence_penalty"),
    (dict(extra_body={"top_k": -5}), "top_k"),
    (dict(temperature="hot"), "temperature"),
])
def test_out_of_range_values_are_400(client, kw, param):
    args = dict(model=MODEL, prompt=[5, 6], max_tokens=2)
    args.update(kw)
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(**args)
    assert e.value.body["param"] == param
    assert e.value.body["type"] == "invalid_request_error"


def test_prompt_over_the_context_window(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=MODEL, prompt=[5] * 300, max_tokens=1)
    assert "256" in e.value.body["message"]


def test_unknown_model_and_unknown_fields(client):
    with pytest.raises(openai.NotFoundError) as e:
        client.completions.create(model="gpt-9", prompt=[5], max_tokens=1)
    assert e.value.body["code"] == "model_not_found"
    r = client.completions.create(model=MODEL, prompt=[5], max_tokens=1, extra_body={"some_vendor_flag": {"x": 1}})
    assert r.usage.completion_tokens == 1


def test_malformed_invalid_and_oversized_bodies(server):
    for body in [b"{not json", b'{"prompt": "\xff\xfe", "max_tokens": 1}', b"[1, 2]", b'{"max_tokens": 1}']:
        code, err = raw(server, "/v1/completions", body)
        assert code == 400 and "message" in err["error"], (body, code, err)
    code, err = raw(server, "/v1/chat/completions", json.dumps({"messages": [{"role": "robot", "content": "x"}]}).encode())
    assert code == 400 and "robot" in err["error"]["message"]
    code, err = raw(server, "/v1/completions", b'{"prompt": "' + b"a" * (5 << 20) + b'"}')
    assert code == 413 and "message" in err["error"]
    # Still serving.
    code, ok = raw(server, "/v1/completions", json.dumps({"prompt": [5], "max_tokens": 2}).encode())
    assert code == 200 and ok["usage"]["completion_tokens"] >= 1


def test_metrics_count(server, client):
    before = metrics(server)
    client.completions.create(model=MODEL, prompt=[5, 6], max_tokens=3, temperature=0, extra_body={"ignore_eos": True})
    after = metrics(server)
    assert after["tvmrt_requests_total"] == before["tvmrt_requests_total"] + 1
    assert after["tvmrt_generation_tokens_total"] == before["tvmrt_generation_tokens_total"] + 3
    assert after["tvmrt_time_to_first_token_seconds_count"] >= 1
    assert after["tvmrt_requests_rejected_total"] >= 1


def test_ctrl_c_drains_a_running_stream():
    port = free_port()
    p = start(port)
    c = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
    stream = c.completions.create(model=MODEL, prompt=[5, 6, 7], max_tokens=200, temperature=0, stream=True,
                                  extra_body={"ignore_eos": True})
    it = iter(stream)
    next(it)
    p.send_signal(signal.SIGINT)
    rest = list(it)
    assert rest[-1].choices[0].finish_reason == "length"
    assert p.wait(timeout=30) == 0
    assert "stopping" in p.stderr.read()
