//! `tvmrt bench MODEL`: load, executor creation and first-run times, then latency percentiles
//! and throughput over repeated runs; `--profile` adds the per-operator table of the debug
//! executor.

use crate::common::{self, ModelArgs};
use crate::fail::{Fail, Result};
use crate::model::{self, Runner};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Time a model: load, executor creation, first run, then latency over repeated runs.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub model: ModelArgs,
    /// An input from an .npy file, or `NAME=random:DTYPE[D0,...]` (repeatable); inputs of known
    /// shape not given get seeded random values (a VM's inputs must all be given).
    #[arg(long, short, value_name = "NAME=FILE.npy", value_parser = common::name_file)]
    pub input: Vec<(String, PathBuf)>,
    /// The function of a Relay or Relax VM executable to time.
    #[arg(long, short, value_name = "NAME", default_value = "main")]
    pub function: Option<String>,
    /// Untimed runs before measuring.
    #[arg(long, default_value_t = 3)]
    pub warmup: usize,
    /// Timed runs (and, with --profile, how often each operator is timed).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    pub repeat: u64,
    /// Threads of the runtime's thread pool (default: one per core, or TVM_NUM_THREADS).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub threads: Option<u64>,
    /// Also time each operator: on its own with the debug executor (graph models), or during
    /// one run of the profiling VM (Relay VM); not for AOT models.
    #[arg(long)]
    pub profile: bool,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The value at percentile `p` (nearest rank) of sorted samples.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Runs the command.
pub fn main(a: &Args) -> Result<()> {
    if let Some(t) = a.threads {
        // The pool's slot count is fixed when it starts (from TVM_NUM_THREADS or the cores);
        // let it hold the threads asked for, then select them.
        if std::env::var_os("TVM_NUM_THREADS").is_none() {
            std::env::set_var("TVM_NUM_THREADS", t.to_string());
        }
        tvm_rt::set_num_threads(t as usize)?;
    }
    let dev = common::device(&a.model.device)?;
    let loaded = common::load(&a.model.model)?;
    common::check_model_device(&loaded.model, dev, &a.model.model)?;
    let kind = model::kind(&loaded.model, &a.model)?;
    if a.profile && kind == model::Kind::Aot {
        return Err(Fail::input(
            "--profile: the AOT executor has no per-operator profiler (TVM's has none either); bench it without --profile",
        ));
    }
    if a.profile && kind == model::Kind::Relax {
        return Err(Fail::input(
            "--profile: the Relax VM has no per-operator profiler in this runtime yet; bench it without --profile",
        ));
    }
    let vm_func = a.function.as_deref().unwrap_or("main");
    let (mut exec, create) = Runner::create(&loaded.model, &a.model, dev, vm_func, false)?;
    let inputs = model::resolve_inputs(&a.model.model, &exec.inputs(), &a.input, a.seed)?;
    exec.set_inputs(&inputs)?;
    let timed = |exec: &mut Runner| -> Result<Duration> {
        let t = Instant::now();
        exec.run()?;
        dev.sync()?;
        Ok(t.elapsed())
    };
    let first = timed(&mut exec)?;
    let total_runs = a.warmup as u64 + a.repeat;
    let bar = if first.as_secs_f64() * total_runs as f64 > 1.0 {
        let b = ProgressBar::new(total_runs);
        b.set_style(
            ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} runs, {elapsed} (eta {eta})")
                .map_err(|e| Fail::input(e.to_string()))?
                .progress_chars("=> "),
        );
        b.set_message("benchmarking");
        Some(b)
    } else {
        None
    };
    for _ in 0..a.warmup {
        timed(&mut exec)?;
        if let Some(b) = &bar {
            b.inc(1);
        }
    }
    let mut samples = Vec::with_capacity(a.repeat as usize);
    for _ in 0..a.repeat {
        samples.push(common::ms(timed(&mut exec)?));
        if let Some(b) = &bar {
            b.inc(1);
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let total_ms: f64 = samples.iter().sum();
    let mut sorted = samples.clone();
    sorted.sort_by(f64::total_cmp);
    let mean = total_ms / samples.len() as f64;
    let throughput = if total_ms > 0.0 { samples.len() as f64 / (total_ms / 1e3) } else { f64::INFINITY };

    let profile = if a.profile {
        let (mut dbg, _) = Runner::create(&loaded.model, &a.model, dev, vm_func, true)?;
        dbg.set_inputs(&inputs)?;
        Some(dbg.profile(a.repeat as usize)?)
    } else {
        None
    };

    if a.json {
        let j = json!({
            "model": a.model.model.display().to_string(),
            "device": dev.to_string(),
            "threads": a.threads,
            "load_ms": common::ms(loaded.load_time),
            "create_ms": common::ms(create),
            "first_run_ms": common::ms(first),
            "warmup": a.warmup,
            "repeat": a.repeat,
            "latency_ms": {
                "p50": percentile(&sorted, 50.0), "p90": percentile(&sorted, 90.0), "p99": percentile(&sorted, 99.0),
                "min": sorted[0], "max": sorted[sorted.len() - 1], "mean": mean,
            },
            "samples_ms": samples,
            "throughput_per_s": throughput,
            "profile": profile.as_ref().map(|p| p.iter().map(|o| json!({
                "node": o.node, "op": o.op, "time_us": o.time_us, "percent": o.percent, "shapes": o.shapes,
            })).collect::<Vec<_>>()),
        });
        println!("{}", serde_json::to_string_pretty(&j).map_err(|e| Fail::input(e.to_string()))?);
        return Ok(());
    }
    let threads = match (a.threads, std::env::var("TVM_NUM_THREADS")) {
        (Some(t), _) => t.to_string(),
        (None, Ok(env)) => format!("TVM_NUM_THREADS={env}"),
        (None, Err(_)) => "default".to_owned(),
    };
    println!("model:      {} on {dev} (threads: {threads})", a.model.model.display());
    println!("load:       {:.2} ms", common::ms(loaded.load_time));
    println!("executor:   {:.2} ms", common::ms(create));
    println!("first run:  {:.2} ms", common::ms(first));
    println!(
        "latency:    p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} ms, min {:.3} ms, max {:.3} ms (mean {:.3} ms; {} runs after {} warm-up)",
        percentile(&sorted, 50.0),
        percentile(&sorted, 90.0),
        percentile(&sorted, 99.0),
        sorted[0],
        sorted[sorted.len() - 1],
        mean,
        a.repeat,
        a.warmup
    );
    println!("throughput: {throughput:.2} runs/s");
    if let Some(p) = profile {
        let total: f64 = p.iter().map(|o| o.time_us).sum();
        let w = p.iter().map(|o| o.op.len()).max().unwrap_or(2).max(2);
        if kind == model::Kind::Vm {
            println!("\nper-operation times (profiling VM, one run of {vm_func} after 3 untimed):");
        } else {
            println!("\nper-operator times (debug executor, each operator run {} times):", a.repeat);
        }
        println!("{:<w$}  {:>12}  {:>7}  shapes (inputs, outputs)", "op", "time (us)", "percent");
        for o in &p {
            println!("{:<w$}  {:>12.2}  {:>6.2}%  {}", o.op, o.time_us, o.percent, o.shapes.join(", "));
        }
        println!("{:<w$}  {:>12.2}  {:>6.2}%  ({} operators)", "total", total, 100.0, p.len());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 50.0);
        assert_eq!(percentile(&v, 90.0), 90.0);
        assert_eq!(percentile(&v, 99.0), 99.0);
        assert_eq!(percentile(&[7.0], 99.0), 7.0);
        assert!(percentile(&[], 50.0).is_nan());
    }
}
