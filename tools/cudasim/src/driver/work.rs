//! Asynchronous work. Launches, asynchronous copies, memsets and event records are queued on
//! their device and run, in submission order, when something waits for them (a synchronous
//! copy, a stream, event or context synchronisation, a free) or when the queue grows long.
//! Running all streams' work in submission order is one of the orders a GPU may choose, so
//! correct programs see correct results, while a program that reads results it never waited
//! for sees stale memory, as it might on a GPU. A failed launch leaves the context's sticky
//! error, which every later call on the context returns.

use super::errors::*;
use super::{lock, DevState, Sim};
use crate::exec::{self, Env, FaultKind, LaunchCfg};
use crate::memory::GlobalView;
use crate::ptx::ir::Kernel;
use std::sync::Arc;
use std::time::Instant;

/// Queued work longer than this is run at the next submission.
const MAX_QUEUE: usize = 1024;

/// Host bytes of an asynchronous copy to the device.
pub enum HostSrc {
    /// Pageable memory, copied when the call was made.
    Staged(Vec<u8>),
    /// Pinned memory, read when the copy runs.
    Pinned(u64),
}

/// One item of work.
pub enum Work {
    /// A kernel launch with its parameter bytes.
    Launch {
        /// The kernel.
        kernel: Arc<Kernel>,
        /// Grid.
        grid: [u32; 3],
        /// Block.
        block: [u32; 3],
        /// Dynamic shared memory.
        dyn_smem: u32,
        /// Parameter buffer.
        params: Vec<u8>,
    },
    /// Host (staged or pinned) to a device or pinned address.
    ToDevice {
        /// Destination.
        dst: u64,
        /// Source.
        src: HostSrc,
        /// Bytes.
        n: usize,
    },
    /// Between two addresses the device sees (device or pinned memory).
    Copy {
        /// Destination.
        dst: u64,
        /// Source.
        src: u64,
        /// Bytes.
        n: usize,
    },
    /// `count` elements of `elem` bytes set to `value`.
    Memset {
        /// Destination.
        dst: u64,
        /// The value (low `elem` bytes).
        value: u32,
        /// Element size.
        elem: usize,
        /// Elements.
        count: usize,
    },
    /// An event record.
    Record {
        /// The event.
        event: usize,
    },
}

/// Queues `w` on device `d`; returns its submission number.
pub fn submit(s: &Sim, d: usize, w: Work) -> Result<u64, CUresult> {
    let mut st = lock(&s.devices[d].state);
    if st.sticky != CUDA_SUCCESS {
        return Err(st.sticky);
    }
    st.queue.push_back(w);
    st.submitted += 1;
    let seq = st.submitted;
    if st.queue.len() >= MAX_QUEUE {
        run_queue(s, &mut st, u64::MAX)?;
    }
    Ok(seq)
}

/// Queues a record of `event` on device `d`, remembering its submission number.
pub fn record(s: &Sim, d: usize, event: usize) -> Result<(), CUresult> {
    let mut st = lock(&s.devices[d].state);
    if st.sticky != CUDA_SUCCESS {
        return Err(st.sticky);
    }
    st.queue.push_back(Work::Record { event });
    st.submitted += 1;
    let seq = st.submitted;
    if let Some(ev) = st.events.get_mut(&event) {
        *ev = (Some(seq), None);
    }
    Ok(())
}

/// Runs device `d`'s queued work up to submission `upto` (`u64::MAX`: all of it).
pub fn flush(s: &Sim, d: usize, upto: u64) -> Result<(), CUresult> {
    let mut st = lock(&s.devices[d].state);
    run_queue(s, &mut st, upto)
}

/// Runs every device's queued work (errors of other contexts are theirs).
pub fn flush_all(s: &Sim) {
    for d in 0..s.devices.len() {
        let _ = flush(s, d, u64::MAX);
    }
}

/// Runs queued work of a locked device.
pub fn run_queue(s: &Sim, st: &mut DevState, upto: u64) -> Result<(), CUresult> {
    if st.sticky != CUDA_SUCCESS {
        return Err(st.sticky);
    }
    while st.completed < upto {
        let Some(w) = st.queue.pop_front() else { break };
        st.completed += 1;
        if let Err(e) = execute(s, st, w) {
            st.sticky = e;
            st.queue.clear();
            st.completed = st.submitted;
            return Err(e);
        }
    }
    Ok(())
}

fn fault_code(k: FaultKind) -> CUresult {
    match k {
        FaultKind::IllegalAddress => CUDA_ERROR_ILLEGAL_ADDRESS,
        FaultKind::Misaligned => CUDA_ERROR_MISALIGNED_ADDRESS,
        FaultKind::Trap => CUDA_ERROR_LAUNCH_FAILED,
        FaultKind::Timeout => CUDA_ERROR_LAUNCH_TIMEOUT,
        FaultKind::Illegal => CUDA_ERROR_ILLEGAL_INSTRUCTION,
    }
}

/// Bytes at a device-visible address (device or pinned memory), copied out.
fn read(view: &mut GlobalView<'_>, addr: u64, n: usize) -> Result<Vec<u8>, CUresult> {
    view.slice(addr, n).map(|b| b.to_vec()).ok_or(CUDA_ERROR_ILLEGAL_ADDRESS)
}

fn write(view: &mut GlobalView<'_>, addr: u64, bytes: &[u8]) -> Result<(), CUresult> {
    view.slice(addr, bytes.len()).ok_or(CUDA_ERROR_ILLEGAL_ADDRESS)?.copy_from_slice(bytes);
    Ok(())
}

fn execute(s: &Sim, st: &mut DevState, w: Work) -> Result<(), CUresult> {
    let mut pinned = lock(&s.pinned);
    let mut view = GlobalView { dev: &mut st.mem, pinned: &mut pinned };
    match w {
        Work::Launch { kernel, grid, block, dyn_smem, params } => {
            let cfg = LaunchCfg { grid, block, dyn_smem, params: &params };
            let mut env =
                Env { global: &mut view, windows: s.windows, sm_count: s.cfg.sm_count, max_steps: s.cfg.max_steps };
            exec::launch(&kernel, &cfg, &mut env).map_err(|f| {
                let code = fault_code(f.kind);
                let name = describe(code).map(|(n, _)| n.to_string_lossy().into_owned()).unwrap_or_default();
                s.say(&format!("{name}: {}", f.msg));
                code
            })
        }
        Work::ToDevice { dst, src, n } => {
            let bytes = match src {
                HostSrc::Staged(v) => v,
                HostSrc::Pinned(p) => read(&mut view, p, n)?,
            };
            write(&mut view, dst, &bytes)
        }
        Work::Copy { dst, src, n } => {
            let bytes = read(&mut view, src, n)?;
            write(&mut view, dst, &bytes)
        }
        Work::Memset { dst, value, elem, count } => {
            let b = view.slice(dst, elem * count).ok_or(CUDA_ERROR_ILLEGAL_ADDRESS)?;
            let v = value.to_le_bytes();
            for chunk in b.chunks_mut(elem) {
                chunk.copy_from_slice(&v[..elem]);
            }
            Ok(())
        }
        Work::Record { event } => {
            if let Some(e) = st.events.get_mut(&event) {
                e.1 = Some(Instant::now());
            }
            Ok(())
        }
    }
}
