//! Running a kernel over its grid. Threads run in warps of 32 in lock step: the lanes at the
//! lowest program counter execute together, so divergent lanes reconverge where their paths
//! meet, and warp instructions (`shfl`, `vote`) see the warp as hardware does. A block's warps
//! take turns until each reaches `bar.sync`, which releases when every live thread of the block
//! has arrived. Blocks run one after another; a block that does not finish within a round
//! (spinning on a grid-wide barrier, or just long) gets company: more blocks are made resident,
//! up to what the device could hold at once, and they take turns, so blocks that wait for each
//! other (TVM's global barrier) make progress. Everything is deterministic.

mod warp;

use crate::memory::GlobalView;
use crate::ptx::ir::{Kernel, Special};
use crate::ptx::lower::Windows;
use crate::ptx::mask;

/// Bytes of the generic-address window of shared memory (and of local memory).
pub const WINDOW: u64 = 1 << 24;

/// Why a launch failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// An access outside every allocation (`CUDA_ERROR_ILLEGAL_ADDRESS`).
    IllegalAddress,
    /// A misaligned access (`CUDA_ERROR_MISALIGNED_ADDRESS`).
    Misaligned,
    /// `trap` (`CUDA_ERROR_LAUNCH_FAILED`).
    Trap,
    /// The step limit was reached (`CUDA_ERROR_LAUNCH_TIMEOUT`).
    Timeout,
    /// Warp-synchronous instructions of a diverged warp, mismatched barriers
    /// (`CUDA_ERROR_ILLEGAL_INSTRUCTION`).
    Illegal,
}

/// A failed launch: the kind and a description naming the kernel, thread and instruction.
#[derive(Clone, Debug)]
pub struct Fault {
    /// The kind.
    pub kind: FaultKind,
    /// The description.
    pub msg: String,
}

/// A launch's geometry and parameters.
pub struct LaunchCfg<'a> {
    /// Blocks in x, y, z.
    pub grid: [u32; 3],
    /// Threads per block in x, y, z.
    pub block: [u32; 3],
    /// Bytes of dynamic shared memory.
    pub dyn_smem: u32,
    /// The parameter buffer (laid out as the kernel's `params` say).
    pub params: &'a [u8],
}

/// What a launch runs against.
pub struct Env<'a, 'm> {
    /// Global memory.
    pub global: &'a mut GlobalView<'m>,
    /// Generic-address windows.
    pub windows: Windows,
    /// Multiprocessors (for `%smid`, `%nsmid` and how many blocks can be resident).
    pub sm_count: u32,
    /// Warp-instructions allowed before the launch is stopped.
    pub max_steps: u64,
}

/// Warp-instructions a warp runs before its block's next warp gets a turn.
const WARP_SLICE: u64 = 1 << 12;
/// Warp-instructions a block runs before the grid scheduler considers company for it.
const BLOCK_ROUND: u64 = 1 << 16;
/// Bytes of block state (registers, shared and local memory) the resident blocks may hold.
const RESIDENT_BYTES: u64 = 256 << 20;

/// One warp's state.
pub(crate) struct Warp {
    pub(crate) regs: Vec<u64>,
    pub(crate) pc: [u32; 32],
    /// Lanes that exist and have not exited.
    pub(crate) alive: u32,
    /// Lanes waiting at a barrier.
    pub(crate) waiting: u32,
    pub(crate) local: Vec<u8>,
    pub(crate) index: u32,
}

/// One block's state.
pub(crate) struct Block {
    pub(crate) ctaid: [u32; 3],
    pub(crate) shared: Vec<u8>,
    pub(crate) warps: Vec<Warp>,
}

/// Runs `k` over the grid of `cfg`.
pub fn launch(k: &Kernel, cfg: &LaunchCfg<'_>, env: &mut Env<'_, '_>) -> Result<(), Fault> {
    let sm_count = env.sm_count.max(1);
    let mut x =
        Exec { k, cfg, global: &mut *env.global, win: env.windows, steps: 0, max_steps: env.max_steps, sm_count };
    x.grid()
}

pub(crate) struct Exec<'a, 'g, 'm> {
    pub(crate) k: &'a Kernel,
    pub(crate) cfg: &'a LaunchCfg<'a>,
    pub(crate) global: &'g mut GlobalView<'m>,
    pub(crate) win: Windows,
    pub(crate) steps: u64,
    pub(crate) max_steps: u64,
    pub(crate) sm_count: u32,
}

impl Exec<'_, '_, '_> {
    fn threads(&self) -> u32 {
        self.cfg.block.iter().product()
    }

    fn shared_bytes(&self) -> usize {
        (self.k.static_shared as usize).max(self.k.dyn_offset as usize + self.cfg.dyn_smem as usize)
    }

    /// How many blocks may be resident at once.
    fn capacity(&self, nwarps: u64) -> u64 {
        let threads = u64::from(self.threads());
        let shared = self.shared_bytes() as u64;
        let per_sm_threads = 2048 / (nwarps * 32).max(1);
        let per_sm_shared = (96 * 1024u64).checked_div(shared).unwrap_or(u64::MAX);
        let per_sm = per_sm_threads.min(per_sm_shared).clamp(1, 32);
        let bytes = nwarps * (u64::from(self.k.nregs) * 32 * 8 + u64::from(self.k.local_size) * 32) + shared + threads;
        (per_sm * u64::from(self.sm_count)).min((RESIDENT_BYTES / bytes.max(1)).max(1))
    }

    fn grid(&mut self) -> Result<(), Fault> {
        let [gx, gy, gz] = self.cfg.grid.map(u64::from);
        let total = gx * gy * gz;
        let nwarps = u64::from(self.threads().div_ceil(32));
        let capacity = self.capacity(nwarps);
        let mut resident: Vec<Block> = Vec::new();
        let mut pool: Vec<Block> = Vec::new();
        let mut next = 0u64;
        loop {
            if resident.is_empty() {
                if next == total {
                    return Ok(());
                }
                let b = self.make_block(next, pool.pop());
                resident.push(b);
                next += 1;
            }
            let mut unfinished = false;
            let mut i = 0;
            while i < resident.len() {
                if self.run_block(&mut resident[i])? {
                    pool.push(resident.remove(i));
                } else {
                    unfinished = true;
                    i += 1;
                }
            }
            if unfinished && next < total && (resident.len() as u64) < capacity {
                let add = (resident.len() as u64).min(capacity - resident.len() as u64).min(total - next).max(1);
                for _ in 0..add {
                    let b = self.make_block(next, pool.pop());
                    resident.push(b);
                    next += 1;
                }
            }
        }
    }

    /// Block `linear` of the grid, reusing `old`'s buffers.
    fn make_block(&self, linear: u64, old: Option<Block>) -> Block {
        let [gx, gy, _] = self.cfg.grid.map(u64::from);
        let ctaid = [(linear % gx) as u32, ((linear / gx) % gy) as u32, (linear / (gx * gy)) as u32];
        let threads = self.threads();
        let nwarps = threads.div_ceil(32) as usize;
        let mut b = old.unwrap_or(Block { ctaid, shared: Vec::new(), warps: Vec::new() });
        b.ctaid = ctaid;
        b.shared.clear();
        b.shared.resize(self.shared_bytes(), crate::memory::POISON);
        b.warps.truncate(nwarps);
        let nregs = self.k.nregs as usize * 32;
        let local = self.k.local_size as usize * 32;
        while b.warps.len() < nwarps {
            b.warps.push(Warp {
                regs: vec![0; nregs],
                pc: [0; 32],
                alive: 0,
                waiting: 0,
                local: vec![0; local],
                index: 0,
            });
        }
        for (wi, w) in b.warps.iter_mut().enumerate() {
            w.regs.resize(nregs, 0);
            w.local.resize(local, 0);
            w.index = wi as u32;
            w.pc = [0; 32];
            w.waiting = 0;
            let first = wi as u32 * 32;
            w.alive = if threads - first >= 32 { u32::MAX } else { (1u32 << (threads - first)) - 1 };
            for &(r, v) in &self.k.consts {
                w.regs[(r as usize) << 5..((r as usize) << 5) + 32].fill(v);
            }
            for &(r, s) in &self.k.specials {
                for lane in 0..32u32 {
                    w.regs[((r as usize) << 5) | lane as usize] = self.special(s, ctaid, wi as u32, lane, linear);
                }
            }
        }
        b
    }

    fn special(&self, s: Special, ctaid: [u32; 3], warp: u32, lane: u32, linear: u64) -> u64 {
        let [bx, by, _] = self.cfg.block;
        let t = warp * 32 + lane;
        let tid = [t % bx, (t / bx) % by, t / (bx * by)];
        let lt = (1u64 << lane) - 1;
        u64::from(match s {
            Special::Tid(d) => tid[d as usize],
            Special::Ntid(d) => self.cfg.block[d as usize],
            Special::Ctaid(d) => ctaid[d as usize],
            Special::Nctaid(d) => self.cfg.grid[d as usize],
            Special::LaneId => lane,
            Special::WarpId => warp,
            Special::NWarpId => 64,
            Special::SmId => (linear % u64::from(self.sm_count)) as u32,
            Special::NSmId => self.sm_count,
            Special::GridId => 1,
            Special::LanemaskEq => 1 << lane,
            Special::LanemaskLt => lt as u32,
            Special::LanemaskLe => ((lt << 1) | 1) as u32,
            Special::LanemaskGe => !(lt as u32),
            Special::LanemaskGt => !(((lt << 1) | 1) as u32),
            Special::DynSmem => self.cfg.dyn_smem,
            Special::TotalSmem => self.shared_bytes() as u32,
        }) & mask(32)
    }

    /// Runs a block for one round; true when it has finished.
    fn run_block(&mut self, b: &mut Block) -> Result<bool, Fault> {
        let start = self.steps;
        loop {
            let mut all_blocked = true;
            for w in b.warps.iter_mut() {
                if w.alive & !w.waiting == 0 {
                    continue;
                }
                if !self.run_warp(w, &mut b.shared, b.ctaid, WARP_SLICE)? {
                    all_blocked = false;
                }
            }
            if b.warps.iter().all(|w| w.alive == 0) {
                return Ok(true);
            }
            if all_blocked {
                self.release(b)?;
            }
            if self.steps > self.max_steps {
                return Err(Fault {
                    kind: FaultKind::Timeout,
                    msg: format!(
                        "kernel `{}` ran {} warp-instructions without finishing (CUDASIM_MAX_STEPS)",
                        self.k.name, self.max_steps
                    ),
                });
            }
            if self.steps - start >= BLOCK_ROUND {
                return Ok(false);
            }
        }
    }

    /// Every live thread of the block waits at a barrier: release them all (they must all wait
    /// at the same barrier).
    fn release(&self, b: &mut Block) -> Result<(), Fault> {
        let mut id = None;
        for w in &b.warps {
            for lane in 0..32 {
                if w.waiting & (1 << lane) != 0 {
                    let at = w.pc[lane] as usize - 1;
                    let this = match self.k.insts[at].op {
                        crate::ptx::ir::Op::Bar { id } => id,
                        _ => u32::MAX,
                    };
                    if id.is_some_and(|i| i != this) {
                        return Err(Fault {
                            kind: FaultKind::Illegal,
                            msg: format!(
                                "kernel `{}` block {:?}: threads wait at different barriers (deadlock on a GPU)",
                                self.k.name, b.ctaid
                            ),
                        });
                    }
                    id = Some(this);
                }
            }
        }
        for w in &mut b.warps {
            w.waiting = 0;
        }
        Ok(())
    }
}
