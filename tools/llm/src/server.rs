//! The OpenAI HTTP API over an [`Engine`] (axum on tokio): `POST /v1/completions`,
//! `POST /v1/chat/completions` (whole or streamed as server-sent events), `GET /v1/models`,
//! `GET /health` and Prometheus `GET /metrics`.
//!
//! A bad request (malformed or oversized JSON, a wrong type or range, an unknown model, a prompt
//! over the context window) gets 4xx with OpenAI's error body (`{"error": {"message", "type",
//! "param", "code"}}`); fields this server does not know are ignored, as vLLM and MLC's server
//! do; `return_token_ids: true` (an extension) adds each choice's (or chunk's) generated token ids
//! as `token_ids`. A client that goes away mid-stream cancels its request (its pages are freed); Ctrl-C
//! stops accepting, lets the running requests finish, then stops.

use crate::conversation::Message;
use crate::engine::{Engine, Event, Finish, Prompt, Request};
use crate::sampling::TokenLogprob;
use crate::Error;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::sse::{Event as Sse, KeepAlive};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Map, Value};
use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};
use tokio_stream::wrappers::ReceiverStream;

/// The largest request body (bytes).
pub const BODY_LIMIT: usize = 4 << 20;

/// Where to listen.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// Host (default 127.0.0.1).
    pub host: String,
    /// Port (default 8000).
    pub port: u16,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions { host: "127.0.0.1".into(), port: 8000 }
    }
}

struct AppState {
    engine: Engine,
}

type Shared = Arc<AppState>;

/// An error response in OpenAI's shape.
struct ApiError {
    status: StatusCode,
    message: String,
    kind: &'static str,
    param: Option<String>,
    code: Option<&'static str>,
}

impl ApiError {
    fn bad(message: impl Into<String>, param: Option<&str>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            kind: "invalid_request_error",
            param: param.map(String::from),
            code: None,
        }
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> ApiError {
        ApiError::bad(e.message, e.param.as_deref())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body =
            json!({"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}});
        (self.status, Json(body)).into_response()
    }
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// The app's routes over `engine` (for tests and embedding; [`serve`] listens with it).
pub fn router(engine: Engine) -> Router {
    let state = Arc::new(AppState { engine });
    Router::new()
        .route("/health", get(|| async { Json(json!({"status": "ok"})) }))
        .route("/v1/models", get(models))
        .route("/metrics", get(metrics))
        .route("/v1/completions", post(completions))
        .route("/v1/chat/completions", post(chat))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(state)
}

/// Serves `engine` on `opts` until Ctrl-C (or SIGTERM), then drains and returns.
pub fn serve(engine: Engine, opts: &ServeOptions) -> Result<(), Error> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Error::new(format!("starting the server: {e}")))?;
    rt.block_on(async {
        let addr = format!("{}:{}", opts.host, opts.port);
        let listener =
            tokio::net::TcpListener::bind(&addr).await.map_err(|e| Error::new(format!("listening on {addr}: {e}")))?;
        eprintln!("tvmrt serve: listening on http://{addr} (model {})", engine.info().model.name);
        let app = router(engine);
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let term = async {
                    #[cfg(unix)]
                    if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                        s.recv().await;
                        return;
                    }
                    std::future::pending::<()>().await
                };
                tokio::select! { _ = tokio::signal::ctrl_c() => {}, _ = term => {} }
                eprintln!("tvmrt serve: stopping (finishing the running requests)");
            })
            .await
            .map_err(|e| Error::new(format!("serving: {e}")))
    })
}

async fn models(State(s): State<Shared>) -> Json<Value> {
    let name = &s.engine.info().model.name;
    Json(json!({"object": "list", "data": [{"id": name, "object": "model", "created": now(), "owned_by": "tvmrt"}]}))
}

async fn metrics(State(s): State<Shared>) -> impl IntoResponse {
    ([("content-type", "text/plain; version=0.0.4")], s.engine.metrics().render(&s.engine.info().model.name))
}

fn parse_body(body: Result<Bytes, BytesRejection>) -> Result<Map<String, Value>, ApiError> {
    let body = body.map_err(|e| ApiError {
        status: e.status(),
        message: format!("the request body could not be read: {}", e.body_text()),
        kind: "invalid_request_error",
        param: None,
        code: None,
    })?;
    let v: Value = serde_json::from_slice(&body).map_err(|e| ApiError::bad(format!("malformed JSON: {e}"), None))?;
    match v {
        Value::Object(m) => Ok(m),
        _ => Err(ApiError::bad("the request body must be a JSON object", None)),
    }
}

/// Typed fields of a request body.
struct Fields<'a>(&'a Map<String, Value>);

impl Fields<'_> {
    fn get(&self, k: &str) -> Option<&Value> {
        self.0.get(k).filter(|v| !v.is_null())
    }
    fn f64(&self, k: &str) -> Result<Option<f64>, ApiError> {
        self.get(k)
            .map(|v| v.as_f64().ok_or_else(|| ApiError::bad(format!("{k} must be a number"), Some(k))))
            .transpose()
    }
    fn int(&self, k: &str) -> Result<Option<i64>, ApiError> {
        self.get(k)
            .map(|v| v.as_i64().ok_or_else(|| ApiError::bad(format!("{k} must be an integer"), Some(k))))
            .transpose()
    }
    fn bool(&self, k: &str) -> Result<Option<bool>, ApiError> {
        self.get(k)
            .map(|v| v.as_bool().ok_or_else(|| ApiError::bad(format!("{k} must be a boolean"), Some(k))))
            .transpose()
    }
    fn ids(&self, v: &Value, k: &str) -> Result<Vec<u32>, ApiError> {
        v.as_array()
            .ok_or_else(|| ApiError::bad(format!("{k} must be a list of token ids"), Some(k)))?
            .iter()
            .map(|t| {
                t.as_u64()
                    .filter(|&t| t <= u32::MAX as u64)
                    .map(|t| t as u32)
                    .ok_or_else(|| ApiError::bad(format!("{k} must hold non-negative token ids"), Some(k)))
            })
            .collect()
    }
}

/// The request's model, sampling and stopping fields, over the model's defaults.
fn common(
    s: &AppState,
    f: &Fields,
    prompt: Prompt,
    max_tokens_keys: &[&str],
) -> Result<(Request, bool, bool), ApiError> {
    let info = s.engine.info();
    let cfg = &info.model.config;
    if let Some(m) = f.get("model") {
        let m = m.as_str().ok_or_else(|| ApiError::bad("model must be a string", Some("model")))?;
        if m != info.model.name {
            return Err(ApiError {
                status: StatusCode::NOT_FOUND,
                message: format!("The model `{m}` does not exist (this server serves `{}`)", info.model.name),
                kind: "invalid_request_error",
                param: Some("model".into()),
                code: Some("model_not_found"),
            });
        }
    }
    if let Some(n) = f.int("n")? {
        if n != 1 {
            return Err(ApiError::bad("n: only 1 is supported", Some("n")));
        }
    }
    let mut r = Request::new(prompt);
    let sp = &mut r.sampling;
    sp.temperature = f.f64("temperature")?.or(cfg.temperature).unwrap_or(1.0);
    sp.top_p = f.f64("top_p")?.or(cfg.top_p).unwrap_or(1.0);
    sp.presence_penalty = f.f64("presence_penalty")?.or(cfg.presence_penalty).unwrap_or(0.0);
    sp.frequency_penalty = f.f64("frequency_penalty")?.or(cfg.frequency_penalty).unwrap_or(0.0);
    sp.repetition_penalty = f.f64("repetition_penalty")?.or(cfg.repetition_penalty).unwrap_or(1.0);
    sp.top_k = match f.int("top_k")? {
        None | Some(-1) | Some(0) => 0,
        Some(k) if k > 0 => k as usize,
        Some(_) => return Err(ApiError::bad("top_k must be positive, or -1 for all tokens", Some("top_k"))),
    };
    sp.seed = f.int("seed")?.map(|x| x as u64);
    for k in max_tokens_keys {
        if let Some(n) = f.int(k)? {
            if n < 1 {
                return Err(ApiError::bad(format!("{k} must be at least 1, got {n}"), Some(k)));
            }
            r.max_tokens = Some(n as usize);
        }
    }
    r.stop = match f.get("stop") {
        None => vec![],
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| {
                x.as_str()
                    .map(String::from)
                    .ok_or_else(|| ApiError::bad("stop must be a string or a list of strings", Some("stop")))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(ApiError::bad("stop must be a string or a list of strings", Some("stop"))),
    };
    if r.stop.len() > 16 {
        return Err(ApiError::bad("stop: at most 16 strings", Some("stop")));
    }
    if let Some(v) = f.get("stop_token_ids") {
        r.stop_token_ids = f.ids(v, "stop_token_ids")?;
    }
    r.ignore_eos = f.bool("ignore_eos")?.unwrap_or(false);
    let stream = f.bool("stream")?.unwrap_or(false);
    let usage_in_stream = match f.get("stream_options") {
        Some(Value::Object(o)) => o.get("include_usage").and_then(Value::as_bool).unwrap_or(false),
        Some(_) => return Err(ApiError::bad("stream_options must be an object", Some("stream_options"))),
        None => false,
    };
    r.sampling.check()?;
    Ok((r, stream, usage_in_stream))
}

fn usage(f: &Finish) -> Value {
    json!({"prompt_tokens": f.prompt_tokens, "completion_tokens": f.completion_tokens,
           "total_tokens": f.prompt_tokens + f.completion_tokens})
}

fn token_text(s: &AppState, t: u32) -> String {
    s.engine.info().model.tokenizer.decode(&[t], false).unwrap_or_default()
}

fn chat_logprobs(s: &AppState, lps: &[TokenLogprob]) -> Value {
    let entry = |t: u32, lp: f32| {
        let text = token_text(s, t);
        json!({"token": text, "logprob": lp, "bytes": text.as_bytes()})
    };
    json!({"content": lps.iter().map(|l| {
        let mut e = entry(l.token, l.logprob);
        e["top_logprobs"] = Value::Array(l.top.iter().map(|&(t, lp)| entry(t, lp)).collect());
        e
    }).collect::<Vec<_>>()})
}

fn completion_logprobs(s: &AppState, lps: &[TokenLogprob], offset: usize) -> Value {
    let mut at = offset;
    let mut offsets = vec![];
    let tokens: Vec<String> = lps
        .iter()
        .map(|l| {
            let t = token_text(s, l.token);
            offsets.push(at);
            at += t.len();
            t
        })
        .collect();
    json!({
        "tokens": tokens,
        "token_logprobs": lps.iter().map(|l| l.logprob).collect::<Vec<_>>(),
        "top_logprobs": lps.iter().map(|l| l.top.iter().map(|&(t, lp)| (token_text(s, t), json!(lp))).collect::<Map<_, _>>()).collect::<Vec<_>>(),
        "text_offset": offsets,
    })
}

#[derive(Clone, Copy, PartialEq)]
enum Api {
    Completions,
    Chat,
}

async fn completions(State(s): State<Shared>, body: Result<Bytes, BytesRejection>) -> Response {
    handle(s, body, Api::Completions).await.unwrap_or_else(|e| e.into_response())
}

async fn chat(State(s): State<Shared>, body: Result<Bytes, BytesRejection>) -> Response {
    handle(s, body, Api::Chat).await.unwrap_or_else(|e| e.into_response())
}

fn parse_prompt(f: &Fields, api: Api) -> Result<Prompt, ApiError> {
    match api {
        Api::Completions => match f.get("prompt") {
            Some(Value::String(t)) => Ok(Prompt::Text(t.clone())),
            Some(Value::Array(a)) if a.len() == 1 && a[0].is_string() => {
                Ok(Prompt::Text(a[0].as_str().unwrap_or("").into()))
            }
            Some(Value::Array(a)) if a.len() == 1 && a[0].is_array() => Ok(Prompt::Tokens(f.ids(&a[0], "prompt")?)),
            Some(v @ Value::Array(a)) if a.iter().all(Value::is_number) && !a.is_empty() => {
                Ok(Prompt::Tokens(f.ids(v, "prompt")?))
            }
            Some(Value::Array(_)) => {
                Err(ApiError::bad("prompt: one prompt per request (a string or a list of token ids)", Some("prompt")))
            }
            Some(_) => Err(ApiError::bad("prompt must be a string or a list of token ids", Some("prompt"))),
            None => Err(ApiError::bad("prompt is required", Some("prompt"))),
        },
        Api::Chat => {
            let msgs = f
                .get("messages")
                .and_then(Value::as_array)
                .filter(|a| !a.is_empty())
                .ok_or_else(|| ApiError::bad("messages must be a non-empty list", Some("messages")))?;
            let mut out = Vec::with_capacity(msgs.len());
            for (i, m) in msgs.iter().enumerate() {
                let bad = |why: &str| ApiError::bad(format!("messages[{i}]: {why}"), Some("messages"));
                let role = m.get("role").and_then(Value::as_str).ok_or_else(|| bad("role must be a string"))?;
                let content = match m.get("content") {
                    Some(Value::String(t)) => t.clone(),
                    Some(Value::Array(parts)) => {
                        let mut t = String::new();
                        for p in parts {
                            match (p.get("type").and_then(Value::as_str), p.get("text").and_then(Value::as_str)) {
                                (Some("text"), Some(x)) => t.push_str(x),
                                _ => return Err(bad("only text content parts are supported")),
                            }
                        }
                        t
                    }
                    None | Some(Value::Null) => String::new(),
                    Some(_) => return Err(bad("content must be a string or a list of text parts")),
                };
                out.push(Message { role: role.to_string(), content });
            }
            Ok(Prompt::Chat(out))
        }
    }
}

async fn handle(s: Shared, body: Result<Bytes, BytesRejection>, api: Api) -> Result<Response, ApiError> {
    let res = (|| {
        let map = parse_body(body)?;
        let f = Fields(&map);
        let prompt = parse_prompt(&f, api)?;
        let keys: &[&str] = if api == Api::Chat { &["max_tokens", "max_completion_tokens"] } else { &["max_tokens"] };
        let (mut req, stream, usage_in_stream) = common(&s, &f, prompt, keys)?;
        req.sampling.logprobs = match api {
            Api::Completions => match f.int("logprobs")? {
                Some(n) if (0..=20).contains(&n) => Some(n as usize),
                Some(_) => return Err(ApiError::bad("logprobs must be between 0 and 20", Some("logprobs"))),
                None => None,
            },
            Api::Chat => {
                if f.bool("logprobs")?.unwrap_or(false) {
                    match f.int("top_logprobs")? {
                        Some(n) if (0..=20).contains(&n) => Some(n as usize),
                        Some(_) => {
                            return Err(ApiError::bad("top_logprobs must be between 0 and 20", Some("top_logprobs")))
                        }
                        None => Some(0),
                    }
                } else {
                    None
                }
            }
        };
        if api == Api::Completions && f.bool("echo")?.unwrap_or(false) {
            return Err(ApiError::bad("echo is not supported", Some("echo")));
        }
        let want_ids = f.bool("return_token_ids")?.unwrap_or(false);
        let h = s.engine.submit(req)?;
        Ok((h, stream, usage_in_stream, want_ids))
    })();
    let (mut h, stream, usage_in_stream, want_ids) = match res {
        Ok(x) => x,
        Err(e) => {
            s.engine.metrics().rejected.fetch_add(1, Ordering::Relaxed);
            return Err(e);
        }
    };
    let id = format!("{}-{}", if api == Api::Chat { "chatcmpl" } else { "cmpl" }, h.id);
    let model = s.engine.info().model.name.clone();
    let created = now();
    if !stream {
        let (mut text, mut lps, mut ids) = (String::new(), Vec::new(), Vec::new());
        loop {
            match h.recv().await {
                Some(Event::Delta { text: t, logprobs, tokens }) => {
                    text.push_str(&t);
                    lps.extend(logprobs);
                    ids.extend(tokens);
                }
                Some(Event::Done(f)) => {
                    let want_lp = !lps.is_empty();
                    let choice = if api == Api::Chat {
                        json!({"index": 0, "message": {"role": "assistant", "content": text},
                               "logprobs": if want_lp { chat_logprobs(&s, &lps) } else { Value::Null },
                               "finish_reason": f.reason.as_str()})
                    } else {
                        json!({"index": 0, "text": text,
                               "logprobs": if want_lp { completion_logprobs(&s, &lps, 0) } else { Value::Null },
                               "finish_reason": f.reason.as_str()})
                    };
                    let mut choice = choice;
                    if want_ids {
                        choice["token_ids"] = json!(ids);
                    }
                    let object = if api == Api::Chat { "chat.completion" } else { "text_completion" };
                    let body = json!({"id": id, "object": object, "created": created, "model": model,
                                      "choices": [choice], "usage": usage(&f)});
                    return Ok(Json(body).into_response());
                }
                Some(Event::Error(e)) => {
                    return Err(ApiError {
                        status: StatusCode::INTERNAL_SERVER_ERROR,
                        message: e,
                        kind: "server_error",
                        param: None,
                        code: None,
                    })
                }
                None => return Err(ApiError::bad("the request ended without a result", None)),
            }
        }
    }
    // Streamed: a task forwards the engine's events as server-sent events; when the client goes,
    // the stream and the task end and the handle's drop cancels the request.
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Sse, Infallible>>(64);
    let s2 = Arc::clone(&s);
    tokio::spawn(async move {
        let object = if api == Api::Chat { "chat.completion.chunk" } else { "text_completion" };
        let chunk = |choice: Value, usage: Option<Value>| {
            let mut c = json!({"id": id, "object": object, "created": created, "model": model, "choices": [choice]});
            if let Some(u) = usage {
                c["usage"] = u;
            }
            Sse::default().data(c.to_string())
        };
        if api == Api::Chat {
            let first = json!({"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": Value::Null, "finish_reason": Value::Null});
            if tx.send(Ok(chunk(first, None))).await.is_err() {
                return;
            }
        }
        let mut offset = 0;
        loop {
            let ev = match h.recv().await {
                Some(ev) => ev,
                None => break,
            };
            let msg = match ev {
                Event::Delta { text, logprobs, tokens } => {
                    let lp = if logprobs.is_empty() {
                        Value::Null
                    } else if api == Api::Chat {
                        chat_logprobs(&s2, &logprobs)
                    } else {
                        completion_logprobs(&s2, &logprobs, offset)
                    };
                    offset += text.len();
                    let mut choice = if api == Api::Chat {
                        json!({"index": 0, "delta": {"content": text}, "logprobs": lp, "finish_reason": Value::Null})
                    } else {
                        json!({"index": 0, "text": text, "logprobs": lp, "finish_reason": Value::Null})
                    };
                    if want_ids {
                        choice["token_ids"] = json!(tokens);
                    }
                    chunk(choice, None)
                }
                Event::Done(f) => {
                    let choice = if api == Api::Chat {
                        json!({"index": 0, "delta": {}, "logprobs": Value::Null, "finish_reason": f.reason.as_str()})
                    } else {
                        json!({"index": 0, "text": "", "logprobs": Value::Null, "finish_reason": f.reason.as_str()})
                    };
                    if tx.send(Ok(chunk(choice, None))).await.is_err() {
                        return;
                    }
                    if usage_in_stream {
                        let c = json!({"id": id, "object": object, "created": created, "model": model, "choices": [], "usage": usage(&f)});
                        if tx.send(Ok(Sse::default().data(c.to_string()))).await.is_err() {
                            return;
                        }
                    }
                    break;
                }
                Event::Error(e) => {
                    let body = json!({"error": {"message": e, "type": "server_error", "param": Value::Null, "code": Value::Null}});
                    let _ = tx.send(Ok(Sse::default().data(body.to_string()))).await;
                    break;
                }
            };
            if tx.send(Ok(msg)).await.is_err() {
                return; // the client went away: dropping `h` cancels the request
            }
        }
        let _ = tx.send(Ok(Sse::default().data("[DONE]"))).await;
    });
    Ok(axum::response::Sse::new(ReceiverStream::new(rx)).keep_alive(KeepAlive::default()).into_response())
}
