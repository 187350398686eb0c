//! Host-side sampling of the next token, with the same arithmetic as the Relax VM's builtins
//! (`vm.builtin.apply_presence_and_frequency_penalty`, `apply_repetition_penalty`,
//! `sample_top_p_from_logits`: their Rust code is called here): penalties over the tokens
//! generated so far, top-k, then softmax at the temperature and a top-p draw with a uniform
//! number from the request's generator (greedy below a temperature of 1e-6).

use crate::Error;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use tvm_runtime::relax::sampling as vm;

/// How a request samples (OpenAI's parameters, and top-k / repetition penalty as in vLLM).
#[derive(Clone, Debug)]
pub struct SamplingParams {
    /// Softmax temperature; 0 is greedy.
    pub temperature: f64,
    /// Nucleus sampling: the most likely tokens whose probability reaches `top_p`.
    pub top_p: f64,
    /// Only the `top_k` most likely tokens (0: all).
    pub top_k: usize,
    /// Generated tokens' logits divided (positive) or multiplied (negative) by it.
    pub repetition_penalty: f64,
    /// Subtracted once from the logits of tokens generated at least once.
    pub presence_penalty: f64,
    /// Subtracted per occurrence from the logits of generated tokens.
    pub frequency_penalty: f64,
    /// The generator's seed (random when None).
    pub seed: Option<u64>,
    /// Log-probabilities of the `n` most likely tokens at each step (with the chosen one's).
    pub logprobs: Option<usize>,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 1.0,
            top_p: 1.0,
            top_k: 0,
            repetition_penalty: 1.0,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            seed: None,
            logprobs: None,
        }
    }
}

impl SamplingParams {
    /// Checks the ranges (an error names the parameter).
    pub fn check(&self) -> Result<(), Error> {
        let bad = |p: &str, why: &str| Err(Error::invalid(p, why));
        if !(self.temperature.is_finite() && (0.0..=2.0).contains(&self.temperature)) {
            return bad("temperature", "must be between 0 and 2");
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad("top_p", "must be in (0, 1]");
        }
        if !(self.repetition_penalty.is_finite() && self.repetition_penalty > 0.0) {
            return bad("repetition_penalty", "must be positive");
        }
        if !(-2.0..=2.0).contains(&self.presence_penalty) {
            return bad("presence_penalty", "must be between -2 and 2");
        }
        if !(-2.0..=2.0).contains(&self.frequency_penalty) {
            return bad("frequency_penalty", "must be between -2 and 2");
        }
        if self.logprobs.is_some_and(|n| n > 20) {
            return bad("logprobs", "at most 20");
        }
        Ok(())
    }
}

/// The log-probability of a token, and of the most likely ones at that step.
#[derive(Clone, Debug)]
pub struct TokenLogprob {
    /// The token chosen.
    pub token: u32,
    /// Its log-probability.
    pub logprob: f32,
    /// The most likely tokens and theirs.
    pub top: Vec<(u32, f32)>,
}

/// A request's sampler: its generator and the counts of the tokens it generated.
pub struct Sampler {
    rng: SmallRng,
    order: Vec<u32>,
    counts: HashMap<u32, i32>,
}

impl Sampler {
    /// A sampler seeded by `seed` (or by the operating system).
    pub fn new(seed: Option<u64>) -> Sampler {
        let rng = match seed {
            Some(s) => SmallRng::seed_from_u64(s),
            None => SmallRng::from_os_rng(),
        };
        Sampler { rng, order: Vec::new(), counts: HashMap::new() }
    }

    /// Counts a generated token (for the penalties).
    pub fn record(&mut self, token: u32) {
        let c = self.counts.entry(token).or_insert(0);
        if *c == 0 {
            self.order.push(token);
        }
        *c += 1;
    }

    /// The next token from one row of logits (changed in place by the penalties and top-k).
    pub fn sample(&mut self, logits: &mut [f32], p: &SamplingParams) -> Result<(u32, Option<TokenLogprob>), Error> {
        let seen: Vec<usize> = self.order.iter().map(|&t| t as usize).filter(|&t| t < logits.len()).collect();
        if !seen.is_empty() {
            if p.presence_penalty != 0.0 || p.frequency_penalty != 0.0 {
                let counts: Vec<i32> = seen.iter().map(|t| self.counts[&(*t as u32)]).collect();
                vm::presence_and_frequency_penalty(logits, &seen, &counts, p.presence_penalty, p.frequency_penalty);
            }
            if p.repetition_penalty != 1.0 {
                vm::repetition_penalty(logits, &seen, p.repetition_penalty);
            }
        }
        if p.top_k > 0 && p.top_k < logits.len() {
            let mut sorted: Vec<f32> = logits.to_vec();
            sorted.sort_unstable_by(|a, b| b.total_cmp(a));
            let kth = sorted[p.top_k - 1];
            let mut kept = 0;
            for x in logits.iter_mut() {
                if *x > kth || (*x == kth && kept < p.top_k) {
                    kept += 1;
                } else {
                    *x = f32::NEG_INFINITY;
                }
            }
        }
        let u: f64 = if p.temperature < 1e-6 { 0.0 } else { self.rng.random() };
        let token =
            vm::top_p_from_logits(logits, p.temperature, p.top_p, u).map_err(|e| Error::new(e.message()))? as u32;
        let lp = p.logprobs.map(|n| logprobs(logits, if p.temperature < 1e-6 { 1.0 } else { p.temperature }, token, n));
        Ok((token, lp))
    }
}

fn logprobs(logits: &[f32], temperature: f64, token: u32, n: usize) -> TokenLogprob {
    let inv = 1.0 / temperature;
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let lse = max * inv + logits.iter().map(|&x| ((x as f64 - max) * inv).exp()).sum::<f64>().ln();
    let lp = |x: f32| (x as f64 * inv - lse) as f32;
    let mut idx: Vec<usize> = (0..logits.len()).collect();
    idx.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
    TokenLogprob {
        token,
        logprob: lp(logits[token as usize]),
        top: idx.iter().take(n).map(|&i| (i as u32, lp(logits[i]))).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_and_top_k() {
        let mut s = Sampler::new(Some(1));
        let greedy = SamplingParams { temperature: 0.0, ..Default::default() };
        assert_eq!(s.sample(&mut [0.1, 3.0, 2.0], &greedy).unwrap().0, 1);
        let top1 = SamplingParams { temperature: 1.5, top_k: 1, ..Default::default() };
        for _ in 0..20 {
            assert_eq!(s.sample(&mut [0.1, 3.0, 2.9], &top1).unwrap().0, 1);
        }
        let (t, lp) = s.sample(&mut [0.0, 0.0, 1.0], &SamplingParams { logprobs: Some(2), ..greedy }).unwrap();
        let lp = lp.unwrap();
        assert_eq!((t, lp.top[0].0, lp.top[1].0), (2, 2, 0));
        assert!((lp.logprob - (1.0f64.exp() / (2.0 + 1.0f64.exp())).ln() as f32).abs() < 1e-6);
    }

    #[test]
    fn penalties_move_the_choice() {
        let mut s = Sampler::new(Some(1));
        let p = SamplingParams { temperature: 0.0, presence_penalty: 1.0, ..Default::default() };
        s.record(1);
        assert_eq!(s.sample(&mut [0.0, 1.5, 1.0], &p).unwrap().0, 2);
        let rep = SamplingParams { temperature: 0.0, repetition_penalty: 2.0, ..Default::default() };
        assert_eq!(s.sample(&mut [0.0, 1.5, 1.0], &rep).unwrap().0, 2);
    }

    #[test]
    fn seeded_draws_repeat_and_ranges_are_checked() {
        let p = SamplingParams { temperature: 1.0, seed: Some(7), ..Default::default() };
        let draw = || {
            let mut s = Sampler::new(p.seed);
            (0..16).map(|_| s.sample(&mut [0.0, 0.5, 1.0, 0.2], &p).unwrap().0).collect::<Vec<_>>()
        };
        assert_eq!(draw(), draw());
        assert!(SamplingParams { temperature: -1.0, ..Default::default() }.check().is_err());
        assert!(SamplingParams { top_p: 0.0, ..Default::default() }.check().is_err());
    }
}
