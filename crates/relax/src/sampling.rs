//! The sampling helpers TVM's runtime offers language models (`lm_support.cc`):
//! `vm.builtin.sample_top_p_from_logits` / `sample_top_p_from_prob`, `multinomial_from_uniform`
//! and the in-place logit transforms `apply_repetition_penalty`,
//! `apply_presence_and_frequency_penalty` and `apply_softmax_with_temperature`.
//!
//! The arithmetic follows TVM's, single precision where TVM's is, so that a sample drawn with
//! the same uniform number is the same token. Where TVM indexes without a check (a token id
//! past the vocabulary, an empty vocabulary, a tensor of the wrong type), these give an error.

use super::builtins::add_fn;
use tvm_runtime_classic::abi::{DLDataType, DLDevice, DLTensor};
use tvm_runtime_tvm_ffi::any::{view_as_f64, Any, TVMFFIAny};
use tvm_runtime_tvm_ffi::object::ObjectRef;
use tvm_runtime_tvm_ffi::registry::Builder;
use tvm_runtime_tvm_ffi::{tensor, ti, types, FfiError, FfiResult};

type Args<'a> = &'a [TVMFFIAny];

const F32: DLDataType = DLDataType { code: 2, bits: 32, lanes: 1 };
const I32: DLDataType = DLDataType { code: 0, bits: 32, lanes: 1 };
const I64: DLDataType = DLDataType { code: 0, bits: 64, lanes: 1 };
const CPU: DLDevice = DLDevice { device_type: 1, device_id: 0 };

/// A contiguous tensor argument on the host: the caller's, or a host copy of a device one.
struct Host {
    /// Keeps the tensor (or its copy) alive.
    obj: ObjectRef,
    shape: Vec<i64>,
}

impl Host {
    fn t(&self) -> &DLTensor {
        // SAFETY: `obj` is a live tensor.
        unsafe { tensor::dltensor(self.obj.as_ptr()) }
    }

    fn numel(&self) -> usize {
        self.shape.iter().map(|&d| d as usize).product()
    }

    /// The last extent (the vocabulary).
    fn last(&self) -> usize {
        self.shape.last().map_or(0, |&d| d as usize)
    }

    fn data<T>(&self) -> &[T] {
        let t = self.t();
        // SAFETY: a contiguous host tensor whose element type was checked to be `T`'s, holding
        // `numel` elements from `data + byte_offset`.
        unsafe {
            std::slice::from_raw_parts((t.data as *const u8).add(t.byte_offset as usize) as *const T, self.numel())
        }
    }

    fn data_mut<T>(&mut self) -> &mut [T] {
        let t = self.t();
        // SAFETY: as `data`; TVM's in-place transforms write the caller's tensor the same way.
        unsafe {
            std::slice::from_raw_parts_mut((t.data as *mut u8).add(t.byte_offset as usize) as *mut T, self.numel())
        }
    }
}

fn tensor_arg(name: &str, a: Args, i: usize, what: &str, dtype: DLDataType, copy_to_host: bool) -> FfiResult<Host> {
    let v = a.get(i).ok_or_else(|| {
        FfiError::type_error(format!("{name}: expected at least {} arguments, got {}", i + 1, a.len()))
    })?;
    if v.type_index != ti::TENSOR || v.obj_ptr().is_null() {
        return Err(FfiError::type_error(format!(
            "{name}: {what} must be a Tensor, got {}",
            types::type_key(v.type_index)
        )));
    }
    // SAFETY: a view of a live tensor.
    let obj = unsafe { ObjectRef::from_borrowed(v.obj_ptr()) }.expect("non-null");
    // SAFETY: a live tensor.
    let t = unsafe { tensor::dltensor(obj.as_ptr()) };
    if !tensor::is_contiguous(t) {
        return Err(FfiError::value(format!("{name}: {what} must be contiguous")));
    }
    if t.dtype != dtype {
        return Err(FfiError::type_error(format!(
            "{name}: {what} must be {}, got {}",
            tvm_runtime_classic::value::dtype::format(dtype).unwrap_or_default(),
            tvm_runtime_classic::value::dtype::format(t.dtype).unwrap_or_default()
        )));
    }
    let shape = tvm_runtime_classic::device::tensor_shape(t)?.to_vec();
    if shape.iter().any(|&d| d < 0) {
        return Err(FfiError::value(format!("{name}: {what} has a negative extent: {shape:?}")));
    }
    if t.ndim < 1 {
        return Err(FfiError::value(format!("{name}: {what} must have at least one dimension")));
    }
    if t.device.device_type == CPU.device_type {
        return Ok(Host { obj, shape });
    }
    if !copy_to_host {
        return Err(FfiError::value(format!("{name}: {what} device must be CPU!")));
    }
    Ok(Host { obj: super::vm::copy_tensor_to(t, CPU)?, shape })
}

fn float(name: &str, a: Args, i: usize) -> FfiResult<f64> {
    a.get(i).and_then(view_as_f64).ok_or_else(|| FfiError::type_error(format!("{name}: argument {i} must be a number")))
}

/// A probability row with its leading extents all 1 (TVM samples one sequence at a time).
fn one_row(name: &str, h: &Host) -> FfiResult<()> {
    if h.shape[..h.shape.len() - 1].iter().any(|&d| d != 1) {
        return Err(FfiError::value(format!("{name}: The leading dimensions of logits must be 1, got {:?}", h.shape)));
    }
    if h.last() == 0 {
        return Err(FfiError::value(format!("{name}: cannot sample from an empty distribution")));
    }
    Ok(())
}

/// Largest first (`f32::total_cmp`'s order); equal values keep their order. Sorted as
/// `(usize, usize)` pairs, the type the library sorts elsewhere, so no sort code is added.
fn sort_desc(v: &mut Vec<(f32, i64)>) {
    let key = |x: f32| {
        let b = x.to_bits() as i32;
        let ordered = (b ^ (((b >> 31) as u32) >> 1) as i32) as u32 ^ 0x8000_0000;
        (u32::MAX - ordered) as usize
    };
    // Positions break ties: `v` is in token order.
    let mut keyed: Vec<(usize, usize)> = v.iter().enumerate().map(|(pos, &(x, _))| (key(x), pos)).collect();
    keyed.sort_unstable();
    *v = keyed.into_iter().map(|(_, pos)| v[pos]).collect();
}

/// `SampleTopPFromLogits`: softmax at `temperature` (argmax below 1e-6), then the token whose
/// cumulative probability, among the most likely ones that first reach `top_p`, passes `u`.
/// (Public for host-side samplers that must draw as the builtin does, such as an LLM engine's.)
pub fn top_p_from_logits(logits: &[f32], temperature: f64, top_p: f64, u: f64) -> FfiResult<i64> {
    let mut data: Vec<(f32, i64)> = logits.iter().enumerate().map(|(i, &x)| (x, i as i64)).collect();
    sort_desc(&mut data);
    if temperature < f64::from(1e-6f32) {
        return Ok(data[0].1);
    }
    let scale = (1.0 / temperature) as f32;
    let max = data[0].0;
    let mut sum = 0f32;
    for d in data.iter_mut() {
        d.0 = ((d.0 - max) * scale).exp();
        sum += d.0;
    }
    let (mut cum, mut top_sum) = (0f32, 0f32);
    for d in data.iter_mut() {
        let p = d.0 / sum;
        if f64::from(cum) < top_p {
            top_sum += p;
        }
        cum += p;
        d.0 = cum;
    }
    if let Some(d) = data.iter().find(|d| u < f64::from(d.0 / top_sum)) {
        return Ok(d.1);
    }
    if u > f64::from(data[0].0) {
        return Err(FfiError::value(format!(
            "vm.builtin.sample_top_p_from_logits: the uniform sample {u} is outside the distribution"
        )));
    }
    Ok(data[0].1)
}

/// `SampleTopPFromProb`: as above over probabilities, first among those at least
/// `top_p / 1024` (enough whenever they reach `top_p`), else over all of them.
pub(crate) fn top_p_from_prob(prob: &[f32], top_p: f64, u: f64) -> FfiResult<i64> {
    let with_cutoff = |cutoff: f32| -> Option<i64> {
        let mut data: Vec<(f32, i64)> =
            prob.iter().enumerate().filter(|(_, &p)| p >= cutoff).map(|(i, &p)| (p, i as i64)).collect();
        if data.is_empty() {
            return None;
        }
        sort_desc(&mut data);
        if u < f64::from(data[0].0) / top_p {
            return Some(data[0].1);
        }
        let (mut cum, mut top_sum) = (0f32, 0f32);
        for d in data.iter_mut() {
            if f64::from(cum) >= top_p {
                break;
            }
            top_sum += d.0;
            cum += d.0;
            d.0 = cum;
        }
        if f64::from(cum) < top_p && cutoff != 0.0 {
            return None;
        }
        Some(data.iter().find(|d| u < f64::from(d.0 / top_sum)).unwrap_or(&data[data.len() - 1]).1)
    };
    if top_p < 1.0 {
        if let Some(i) = with_cutoff((top_p / 1024.0) as f32) {
            return Ok(i);
        }
    }
    with_cutoff(0.0).ok_or_else(|| {
        let what = if prob.iter().all(|p| p.is_nan()) {
            "The output probabilities are all NaNs, can not sample from it"
        } else {
            "Cannot sample from the given probability distribution due to unknown reason"
        };
        FfiError::value(format!("vm.builtin.sample_top_p_from_prob: {what}"))
    })
}

/// `ApplySoftmaxWithTemperature` on one row, in place (TVM's online softmax, its running
/// maximum starting at `FLT_MIN`).
pub(crate) fn softmax_with_temperature(row: &mut [f32], temperature: f64) {
    let inv = (1.0 / temperature) as f32;
    let mut m = f32::MIN_POSITIVE;
    let mut d = 0f64;
    for &l in row.iter() {
        let x = l * inv;
        let prev = m;
        m = m.max(x);
        d = d * f64::from((prev - m).exp()) + f64::from((x - m).exp());
    }
    for l in row.iter_mut() {
        let x = *l * inv;
        *l = (f64::from((x - m).exp()) / d) as f32;
    }
}

/// `ApplyRepetitionPenalty` on logits: each of `tokens` divided by `penalty` when positive,
/// multiplied when not (TVM's double-precision step).
pub fn repetition_penalty(logits: &mut [f32], tokens: &[usize], penalty: f64) {
    for &s in tokens {
        let x = f64::from(logits[s]);
        logits[s] = if logits[s] <= 0.0 { x * penalty } else { x / penalty } as f32;
    }
}

/// `ApplyPresenceAndFrequencyPenalty` on logits: each of `tokens` (seen `counts[i]` times)
/// lowered by `counts[i] * frequency + presence`.
pub fn presence_and_frequency_penalty(
    logits: &mut [f32],
    tokens: &[usize],
    counts: &[i32],
    presence: f64,
    frequency: f64,
) {
    for (&s, &n) in tokens.iter().zip(counts) {
        logits[s] = (f64::from(logits[s]) - (f64::from(n) * frequency + presence)) as f32;
    }
}

/// The logits' entries the token ids name, checked against the logits' size.
fn token_slots(name: &str, ids: &Host, n_logits: usize) -> FfiResult<Vec<usize>> {
    ids.data::<i32>()[..ids.last()]
        .iter()
        .map(|&t| {
            usize::try_from(t).ok().filter(|&t| t < n_logits).ok_or_else(|| {
                FfiError::value(format!("{name}: token id {t} is outside the logits (of {n_logits} entries)"))
            })
        })
        .collect()
}

/// Registers the sampling globals.
pub fn register(b: &mut Builder) {
    add_fn(b, "vm.builtin.sample_top_p_from_logits", |a| {
        let name = "vm.builtin.sample_top_p_from_logits";
        let h = tensor_arg(name, a, 0, "logits", F32, true)?;
        one_row(name, &h)?;
        let (t, p, u) = (float(name, a, 1)?, float(name, a, 2)?, float(name, a, 3)?);
        Ok(Any::int(top_p_from_logits(h.data::<f32>(), t, p, u)?))
    });
    add_fn(b, "vm.builtin.sample_top_p_from_prob", |a| {
        let name = "vm.builtin.sample_top_p_from_prob";
        let h = tensor_arg(name, a, 0, "prob", F32, true)?;
        one_row(name, &h)?;
        Ok(Any::int(top_p_from_prob(h.data::<f32>(), float(name, a, 1)?, float(name, a, 2)?)?))
    });
    add_fn(b, "vm.builtin.multinomial_from_uniform", |a| {
        let name = "vm.builtin.multinomial_from_uniform";
        let prob = tensor_arg(name, a, 0, "prob", F32, true)?;
        let u = tensor_arg(name, a, 1, "uniform_sample", F32, true)?;
        let (batch, vocab) = (prob.shape[0] as usize, prob.last());
        if prob.numel() != batch * vocab || u.numel() < batch {
            return Err(FfiError::value(format!(
                "{name}: prob must be (batch, vocab) and uniform_sample hold a number per row; got {:?} and {:?}",
                prob.shape, u.shape
            )));
        }
        let out = tensor::empty(&[batch as i64, 1], I64, CPU)?;
        let mut res = Host { obj: out, shape: vec![batch as i64, 1] };
        let (p, s) = (prob.data::<f32>(), u.data::<f32>());
        for (i, o) in res.data_mut::<i64>().iter_mut().enumerate() {
            let mut cum = 0f32;
            let mut pick = 0;
            for (j, &x) in p[i * vocab..(i + 1) * vocab].iter().enumerate() {
                pick = j as i64;
                cum += x;
                if cum > s[i] {
                    break;
                }
            }
            *o = pick;
        }
        Ok(Any::object(res.obj))
    });
    add_fn(b, "vm.builtin.apply_repetition_penalty", |a| {
        let name = "vm.builtin.apply_repetition_penalty";
        let mut logits = tensor_arg(name, a, 0, "logits", F32, false)?;
        let ids = tensor_arg(name, a, 1, "token_ids", I32, false)?;
        let penalty = float(name, a, 2)?;
        let slots = token_slots(name, &ids, logits.numel())?;
        repetition_penalty(logits.data_mut::<f32>(), &slots, penalty);
        Ok(Any::none())
    });
    add_fn(b, "vm.builtin.apply_presence_and_frequency_penalty", |a| {
        let name = "vm.builtin.apply_presence_and_frequency_penalty";
        let mut logits = tensor_arg(name, a, 0, "logits", F32, false)?;
        let ids = tensor_arg(name, a, 1, "token_ids", I32, false)?;
        let freqs = tensor_arg(name, a, 2, "token_freqs", I32, false)?;
        let (presence, frequency) = (float(name, a, 3)?, float(name, a, 4)?);
        let slots = token_slots(name, &ids, logits.numel())?;
        let f = freqs.data::<i32>();
        if f.len() < slots.len() {
            return Err(FfiError::value(format!("{name}: {} token ids but {} frequencies", slots.len(), f.len())));
        }
        presence_and_frequency_penalty(logits.data_mut::<f32>(), &slots, &f[..slots.len()], presence, frequency);
        Ok(Any::none())
    });
    add_fn(b, "vm.builtin.apply_softmax_with_temperature", |a| {
        let name = "vm.builtin.apply_softmax_with_temperature";
        let mut logits = tensor_arg(name, a, 0, "logits", F32, false)?;
        let vocab = logits.last();
        softmax_with_temperature(&mut logits.data_mut::<f32>()[..vocab], float(name, a, 1)?);
        Ok(Any::none())
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_desc_orders_by_value_then_token() {
        let mut v =
            vec![(1.0f32, 0), (-2.0, 1), (3.5, 2), (1.0, 3), (-0.0, 4), (0.0, 5), (f32::NEG_INFINITY, 6), (1.0, 9)];
        sort_desc(&mut v);
        let order: Vec<i64> = v.iter().map(|p| p.1).collect();
        assert_eq!(order, [2, 0, 3, 9, 5, 4, 1, 6]);
        assert_eq!(v[0].0, 3.5);
    }

    #[test]
    fn greedy_below_a_tiny_temperature() {
        assert_eq!(top_p_from_logits(&[0.1, 3.0, -2.0, 2.9], 0.0, 0.9, 0.99).unwrap(), 1);
    }

    #[test]
    fn top_p_from_logits_walks_the_cumulative_distribution() {
        // softmax([ln 4, ln 3, ln 2, ln 1]) = [0.4, 0.3, 0.2, 0.1]; top_p 0.65 keeps 0.4 + 0.3.
        let l = [1f32.ln(), 4f32.ln(), 2f32.ln(), 3f32.ln()];
        assert_eq!(top_p_from_logits(&l, 1.0, 0.65, 0.5).unwrap(), 1); // 0.4 / 0.7 = 0.57 > 0.5
        assert_eq!(top_p_from_logits(&l, 1.0, 0.65, 0.6).unwrap(), 3); // 0.7 / 0.7 > 0.6
        assert_eq!(top_p_from_logits(&l, 1.0, 1.0, 0.95).unwrap(), 0);
    }

    #[test]
    fn top_p_from_prob_matches_the_cumulative_walk() {
        let p = [0.1f32, 0.4, 0.2, 0.3];
        assert_eq!(top_p_from_prob(&p, 0.65, 0.6).unwrap(), 1); // below 0.4 / 0.65: argmax
        assert_eq!(top_p_from_prob(&p, 0.65, 0.62).unwrap(), 3); // 0.4 / 0.7 < 0.62 < 0.7 / 0.7
        assert_eq!(top_p_from_prob(&p, 1.0, 0.95).unwrap(), 0);
        assert!(top_p_from_prob(&[f32::NAN; 3], 0.9, 0.5).unwrap_err().message().contains("NaN"));
    }

    #[test]
    fn softmax_sums_to_one_and_keeps_the_order() {
        let mut row = [1.0f32, 2.0, 3.0, 0.5];
        softmax_with_temperature(&mut row, 0.5);
        let e: Vec<f64> = [1.0f64, 2.0, 3.0, 0.5].iter().map(|x| (x / 0.5).exp()).collect();
        let s: f64 = e.iter().sum();
        for (got, want) in row.iter().zip(&e) {
            assert!((f64::from(*got) - want / s).abs() < 1e-6, "{row:?}");
        }
    }
}
