//! The engine's worker thread: the scheduling loop over the model and its KV cache.

use super::{Event, Finish, FinishReason, ModelInfo, Msg, Pending};
use crate::metrics::Metrics;
use crate::sampling::Sampler;
use crate::text::Detokenizer;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tvm_rt::llm::{KvCache, LlmModel};
use tvm_rt::NDArray;

struct Running {
    p: Box<Pending>,
    seq: i64,
    prefilled: usize,
    generated: usize,
    last: u32,
    pages: i64,
    sampler: Sampler,
    detok: Detokenizer,
    first_token: Option<Instant>,
    prefill_time: Duration,
    done: Option<FinishReason>,
    /// Tokens (and log-probabilities) not yet sent: their text is held back.
    pend_tokens: Vec<u32>,
    pend_logprobs: Vec<crate::sampling::TokenLogprob>,
}

pub(super) struct Worker {
    info: Arc<ModelInfo>,
    metrics: Arc<Metrics>,
    model: LlmModel,
    kv: KvCache,
    total_pages: i64,
    reserved_pages: i64,
    max_batch: usize,
    waiting: VecDeque<Box<Pending>>,
    running: Vec<Running>,
    next_seq: i64,
    shutting_down: bool,
}

impl Worker {
    pub(super) fn new(
        info: Arc<ModelInfo>,
        metrics: Arc<Metrics>,
        model: LlmModel,
        kv: KvCache,
        total_pages: i64,
        max_batch: usize,
    ) -> Worker {
        Worker {
            info,
            metrics,
            model,
            kv,
            total_pages,
            reserved_pages: 0,
            max_batch,
            waiting: VecDeque::new(),
            running: Vec::new(),
            next_seq: 0,
            shutting_down: false,
        }
    }

    pub(super) fn run(mut self, rx: mpsc::Receiver<Msg>) {
        loop {
            // New requests (waiting for one when idle).
            if self.running.is_empty() && self.waiting.is_empty() {
                if self.shutting_down {
                    return;
                }
                match rx.recv() {
                    Ok(m) => self.take(m),
                    Err(_) => return,
                }
            }
            while let Ok(m) = rx.try_recv() {
                self.take(m);
            }
            self.drop_cancelled();
            self.admit();
            self.prefill_step();
            self.decode_step();
            self.retire();
            self.publish();
        }
    }

    fn take(&mut self, m: Msg) {
        match m {
            Msg::New(p) => self.waiting.push_back(p),
            Msg::Shutdown => self.shutting_down = true,
        }
    }

    fn gone(p: &Pending) -> bool {
        p.cancel.load(Ordering::Acquire) || p.events.is_closed()
    }

    fn drop_cancelled(&mut self) {
        self.waiting.retain(|p| {
            if Self::gone(p) {
                let _ = p.events.send(Event::Done(Finish {
                    reason: FinishReason::Cancelled,
                    prompt_tokens: p.tokens.len(),
                    completion_tokens: 0,
                    time_to_first_token: Duration::ZERO,
                    prefill_time: Duration::ZERO,
                    decode_time: Duration::ZERO,
                }));
                false
            } else {
                true
            }
        });
        for r in self.running.iter_mut() {
            if r.done.is_none() && Self::gone(&r.p) {
                r.done = Some(FinishReason::Cancelled);
            }
        }
        self.retire();
    }

    /// Pages a request may come to use (prompt and every token it may generate; with a sliding
    /// window, the window and its sink).
    fn pages_for(&self, p: &Pending) -> i64 {
        let ps = 16i64;
        let c = &self.info.model.config;
        let mut tokens = (p.tokens.len() + p.max_new) as i64;
        if c.sliding_window_size > 0 {
            tokens = tokens.min(c.sliding_window_size + c.attention_sink_size.max(0) + ps);
        }
        (tokens + ps - 1) / ps + 1
    }

    fn admit(&mut self) {
        while self.running.len() < self.max_batch {
            let Some(p) = self.waiting.front() else { break };
            let need = self.pages_for(p);
            if self.reserved_pages + need > self.total_pages && !self.running.is_empty() {
                break; // wait for pages
            }
            let p = self.waiting.pop_front().expect("peeked");
            let seq = self.next_seq;
            self.next_seq += 1;
            let c = &self.info.model.config;
            let added = self.kv.add_sequence(seq).and_then(|()| {
                if c.sliding_window_size > 0 {
                    self.kv.enable_sliding_window(seq, c.sliding_window_size, c.attention_sink_size.max(0))
                } else {
                    Ok(())
                }
            });
            if let Err(e) = added {
                let _ = p.events.send(Event::Error(format!("adding the sequence to the KV cache: {e}")));
                let _ = self.kv.remove_sequence(seq);
                continue;
            }
            self.reserved_pages += need;
            let mut stops = p.req.stop.clone();
            stops.extend(c.conv_template.stop_str.iter().cloned());
            self.running.push(Running {
                seq,
                prefilled: 0,
                generated: 0,
                last: 0,
                pages: need,
                sampler: Sampler::new(p.req.sampling.seed),
                detok: match &self.info.model.byte_table {
                    Some(t) => Detokenizer::with_bytes(&stops, Arc::clone(t)),
                    None => Detokenizer::new(&stops),
                },
                first_token: None,
                prefill_time: Duration::ZERO,
                done: None,
                pend_tokens: Vec::new(),
                pend_logprobs: Vec::new(),
                p,
            });
        }
    }

    /// One forward over the prompt tokens of requests still prefilling (at most a chunk).
    fn prefill_step(&mut self) {
        let mut budget = self.info.model.config.prefill_chunk_size as usize;
        let mut batch: Vec<(usize, usize)> = Vec::new(); // (running index, tokens taken)
        for (i, r) in self.running.iter().enumerate() {
            if r.done.is_some() || r.prefilled == r.p.tokens.len() || budget == 0 {
                continue;
            }
            let n = (r.p.tokens.len() - r.prefilled).min(budget);
            budget -= n;
            batch.push((i, n));
        }
        if batch.is_empty() {
            return;
        }
        let t0 = Instant::now();
        let ids: Vec<i64> = batch.iter().map(|&(i, _)| self.running[i].seq).collect();
        let lens: Vec<i64> = batch.iter().map(|&(_, n)| n as i64).collect();
        let mut tokens = Vec::new();
        for &(i, n) in &batch {
            let r = &self.running[i];
            tokens.extend(r.p.tokens[r.prefilled..r.prefilled + n].iter().map(|&t| t as i32));
        }
        let mut call = Duration::ZERO;
        let out = (|| -> tvm_rt::Result<NDArray> {
            self.kv.begin_forward(&ids, &lens)?;
            let e = self.model.embed(&tokens)?;
            let t = Instant::now();
            let logits = if batch.len() == 1 {
                self.model.prefill(&e, &self.kv)?
            } else {
                let mut pos = Vec::with_capacity(batch.len());
                let mut at = 0i32;
                for &(_, n) in &batch {
                    at += n as i32;
                    pos.push(at - 1);
                }
                self.model.batch_prefill(&e, &pos, &self.kv)?
            };
            call = t.elapsed();
            self.kv.end_forward()?;
            Ok(logits)
        })();
        self.metrics.prefill_call_ns.fetch_add(call.as_nanos() as u64, Ordering::Relaxed);
        let dt = t0.elapsed();
        let logits = match out.and_then(|l| l.to_vec::<f32>()) {
            Ok(l) => l,
            Err(e) => {
                for &(i, _) in &batch {
                    self.fail(i, format!("prefill: {e}"));
                }
                return;
            }
        };
        let vocab = logits.len() / batch.len();
        for (k, &(i, n)) in batch.iter().enumerate() {
            let r = &mut self.running[i];
            r.prefilled += n;
            r.prefill_time += dt;
            self.metrics.prompt_tokens.fetch_add(n as u64, Ordering::Relaxed);
            if r.prefilled == r.p.tokens.len() {
                let mut row = logits[k * vocab..(k + 1) * vocab].to_vec();
                self.accept(i, &mut row);
            }
        }
    }

    /// One `batch_decode` over every request generating.
    fn decode_step(&mut self) {
        let idx: Vec<usize> = (0..self.running.len())
            .filter(|&i| {
                let r = &self.running[i];
                r.done.is_none() && r.first_token.is_some()
            })
            .collect();
        if idx.is_empty() {
            return;
        }
        let t0 = Instant::now();
        let ids: Vec<i64> = idx.iter().map(|&i| self.running[i].seq).collect();
        let last: Vec<i32> = idx.iter().map(|&i| self.running[i].last as i32).collect();
        let mut call = Duration::ZERO;
        let out = (|| -> tvm_rt::Result<Vec<f32>> {
            self.kv.begin_forward(&ids, &vec![1; ids.len()])?;
            let e = self.model.embed(&last)?;
            let t = Instant::now();
            let logits = self.model.batch_decode(&e, &self.kv)?;
            call = t.elapsed();
            self.kv.end_forward()?;
            logits.to_vec::<f32>()
        })();
        let logits = match out {
            Ok(l) => l,
            Err(e) => {
                for &i in &idx {
                    self.fail(i, format!("decode: {e}"));
                }
                return;
            }
        };
        let mut logits = logits;
        let vocab = logits.len() / idx.len();
        for (k, &i) in idx.iter().enumerate() {
            self.accept(i, &mut logits[k * vocab..(k + 1) * vocab]);
        }
        let m = &self.metrics;
        m.decode_steps.fetch_add(1, Ordering::Relaxed);
        m.decode_step_ns.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
        m.decode_call_ns.fetch_add(call.as_nanos() as u64, Ordering::Relaxed);
    }

    /// Samples a request's next token from its logits and streams what it makes.
    fn accept(&mut self, i: usize, row: &mut [f32]) {
        let tok = &self.info.model.tokenizer;
        let stop_ids = &self.info.model.stop_token_ids;
        let ctx = self.info.context_window;
        let r = &mut self.running[i];
        let (token, lp) = match r.sampler.sample(row, &r.p.req.sampling) {
            Ok(x) => x,
            Err(e) => {
                let msg = format!("sampling: {e}");
                self.fail(i, msg);
                return;
            }
        };
        if r.first_token.is_none() {
            r.first_token = Some(Instant::now());
            self.metrics.observe_ttft(r.p.submitted.elapsed());
        }
        r.last = token;
        r.sampler.record(token);
        r.generated += 1;
        self.metrics.generated_tokens.fetch_add(1, Ordering::Relaxed);
        let is_stop = !r.p.req.ignore_eos && stop_ids.contains(&token) || r.p.req.stop_token_ids.contains(&token);
        if is_stop {
            r.done = Some(FinishReason::Stop);
            return;
        }
        let piece = r.detok.push(tok, token);
        r.pend_tokens.push(token);
        r.pend_logprobs.extend(lp);
        if !piece.text.is_empty() || piece.stopped {
            let tokens = std::mem::take(&mut r.pend_tokens);
            let logprobs = std::mem::take(&mut r.pend_logprobs);
            let _ = r.p.events.send(Event::Delta { text: piece.text, tokens, logprobs });
        }
        if piece.stopped {
            r.done = Some(FinishReason::Stop);
        } else if r.generated >= r.p.max_new || r.p.tokens.len() + r.generated >= ctx {
            r.done = Some(FinishReason::Length);
        }
    }

    fn fail(&mut self, i: usize, msg: String) {
        let r = &mut self.running[i];
        let _ = r.p.events.send(Event::Error(msg));
        r.done = Some(FinishReason::Cancelled);
        self.metrics.failed.fetch_add(1, Ordering::Relaxed);
    }

    /// Removes finished requests: their sequences (and pages) go, their end is sent.
    fn retire(&mut self) {
        let tok = &self.info.model.tokenizer;
        let mut k = 0;
        while k < self.running.len() {
            if self.running[k].done.is_none() {
                k += 1;
                continue;
            }
            let mut r = self.running.swap_remove(k);
            let _ = self.kv.remove_sequence(r.seq);
            self.reserved_pages -= r.pages;
            // The gauges before the end is sent: a client seeing the end sees the pages back.
            self.publish();
            let reason = r.done.expect("checked");
            if reason != FinishReason::Cancelled {
                let tail = r.detok.finish(tok);
                if !tail.text.is_empty() || !r.pend_tokens.is_empty() {
                    let (tokens, logprobs) = (std::mem::take(&mut r.pend_tokens), std::mem::take(&mut r.pend_logprobs));
                    let _ = r.p.events.send(Event::Delta { text: tail.text, tokens, logprobs });
                }
            }
            let first = r.first_token.unwrap_or_else(Instant::now);
            let _ = r.p.events.send(Event::Done(Finish {
                reason,
                prompt_tokens: r.p.tokens.len(),
                completion_tokens: r.generated,
                time_to_first_token: first.saturating_duration_since(r.p.submitted),
                prefill_time: r.prefill_time,
                decode_time: first.elapsed(),
            }));
            self.metrics.finished.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn publish(&self) {
        let m = &self.metrics;
        m.queue_length.store(self.waiting.len() as u64, Ordering::Relaxed);
        m.running.store(self.running.len() as u64, Ordering::Relaxed);
        let free = self.kv.num_available_pages().unwrap_or(self.total_pages);
        m.pages_in_use.store((self.total_pages - free).max(0) as u64, Ordering::Relaxed);
    }
}
