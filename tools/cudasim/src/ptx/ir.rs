//! The form a kernel runs in: a flat list of instructions over numbered registers. Every
//! operand is a register: immediates and symbol addresses become constant registers, special
//! registers (`%tid.x`, ...) are registers filled in when a warp starts. Each instruction's
//! meaning (type, rounding, saturation, ...) is decided at load: ALU instructions carry the
//! function they apply to each lane.

/// A register index.
pub type Reg = u32;

/// A one-operand lane function (bits in, bits out).
pub type F1 = Box<dyn Fn(u64) -> u64 + Send + Sync>;
/// A two-operand lane function.
pub type F2 = Box<dyn Fn(u64, u64) -> u64 + Send + Sync>;
/// A three-operand lane function.
pub type F3 = Box<dyn Fn(u64, u64, u64) -> u64 + Send + Sync>;
/// A four-operand lane function.
pub type F4 = Box<dyn Fn(u64, u64, u64, u64) -> u64 + Send + Sync>;
/// A comparison.
pub type Cmp = Box<dyn Fn(u64, u64) -> bool + Send + Sync>;

/// Where a memory instruction goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Space {
    /// Device memory (also `.const` variables, which live there).
    Global,
    /// The block's shared memory (addresses are offsets).
    Shared,
    /// The thread's local memory (addresses are offsets).
    Local,
    /// The kernel's parameter buffer (addresses are offsets).
    Param,
    /// A generic address: shared or local window, else global.
    Generic,
}

/// Combination of a `setp` result with a third predicate (`setp.lt.and.s32`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BoolOp {
    /// `.and`.
    And,
    /// `.or`.
    Or,
    /// `.xor`.
    Xor,
}

/// `atom` / `red` operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomOp {
    /// `.and`.
    And,
    /// `.or`.
    Or,
    /// `.xor`.
    Xor,
    /// `.exch`.
    Exch,
    /// `.cas` (compare `b`, swap in `c`).
    Cas,
    /// `.add` on integers.
    Add,
    /// `.add.f32`.
    AddF32,
    /// `.add.f64`.
    AddF64,
    /// `.inc` (wrapping at `b`).
    Inc,
    /// `.dec` (wrapping at `b`).
    Dec,
    /// `.min` (signed).
    MinS,
    /// `.min` (unsigned).
    MinU,
    /// `.max` (signed).
    MaxS,
    /// `.max` (unsigned).
    MaxU,
}

/// `shfl` modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShflMode {
    /// `.up`.
    Up,
    /// `.down`.
    Down,
    /// `.bfly`.
    Bfly,
    /// `.idx`.
    Idx,
}

/// `vote` modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VoteMode {
    /// `.all`.
    All,
    /// `.any`.
    Any,
    /// `.uni`.
    Uni,
    /// `.ballot.b32`.
    Ballot,
}

/// A special register's value, filled in when a warp starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Special {
    /// `%tid.{x,y,z}` (dimension 0..3).
    Tid(u8),
    /// `%ntid`.
    Ntid(u8),
    /// `%ctaid`.
    Ctaid(u8),
    /// `%nctaid`.
    Nctaid(u8),
    /// `%laneid`.
    LaneId,
    /// `%warpid`.
    WarpId,
    /// `%nwarpid`.
    NWarpId,
    /// `%smid`.
    SmId,
    /// `%nsmid`.
    NSmId,
    /// `%gridid`.
    GridId,
    /// `%lanemask_eq`.
    LanemaskEq,
    /// `%lanemask_le`.
    LanemaskLe,
    /// `%lanemask_lt`.
    LanemaskLt,
    /// `%lanemask_ge`.
    LanemaskGe,
    /// `%lanemask_gt`.
    LanemaskGt,
    /// `%dynamic_smem_size`.
    DynSmem,
    /// `%total_smem_size`.
    TotalSmem,
}

/// A natively implemented external function (libdevice's `__nv_*`).
pub struct Native {
    /// Its name.
    pub name: &'static str,
    /// Bytes of each parameter.
    pub params: &'static [u8],
    /// Bytes of the result (0: none).
    pub ret: u8,
    /// The implementation, on parameter bits.
    pub f: fn(&[u64]) -> u64,
}

/// One operation.
pub enum Op {
    /// A copy.
    Mov {
        /// Destination.
        d: Reg,
        /// Source.
        a: Reg,
    },
    /// `d = f(a)`.
    A1 {
        /// Destination.
        d: Reg,
        /// Operand.
        a: Reg,
        /// The lane function.
        f: F1,
    },
    /// `d = f(a, b)`.
    A2 {
        /// Destination.
        d: Reg,
        /// Operands.
        a: Reg,
        /// Operands.
        b: Reg,
        /// The lane function.
        f: F2,
    },
    /// `d = f(a, b, c)`.
    A3 {
        /// Destination.
        d: Reg,
        /// Operands.
        a: Reg,
        /// Operands.
        b: Reg,
        /// Operands.
        c: Reg,
        /// The lane function.
        f: F3,
    },
    /// `d = f(a, b, c, e)`.
    A4 {
        /// Destination.
        d: Reg,
        /// Operands.
        a: Reg,
        /// Operands.
        b: Reg,
        /// Operands.
        c: Reg,
        /// Operands.
        e: Reg,
        /// The lane function.
        f: F4,
    },
    /// `setp`: `p = cmp(a, b) [op c]`, `q = !cmp(a, b) [op c]`.
    Setp {
        /// First result.
        p: Reg,
        /// Second result (`%p|%q`).
        q: Option<Reg>,
        /// Operands.
        a: Reg,
        /// Operands.
        b: Reg,
        /// The comparison.
        f: Cmp,
        /// Combination with a third predicate (negated when the flag is set).
        comb: Option<(BoolOp, Reg, bool)>,
    },
    /// `selp`: `d = c ? a : b`.
    Selp {
        /// Destination.
        d: Reg,
        /// Operands.
        a: Reg,
        /// Operands.
        b: Reg,
        /// The predicate.
        c: Reg,
    },
    /// A load of `n` elements of `size` bytes into `d[..n]`.
    Ld {
        /// The space.
        space: Space,
        /// Destinations.
        d: [Reg; 4],
        /// Elements.
        n: u8,
        /// Bytes per element.
        size: u8,
        /// Sign-extend the element.
        signed: bool,
        /// Destination width mask.
        dmask: u64,
        /// Address register.
        addr: Reg,
        /// Byte offset.
        off: i64,
    },
    /// A store of `n` elements of `size` bytes from `s[..n]`.
    St {
        /// The space.
        space: Space,
        /// Sources.
        s: [Reg; 4],
        /// Elements.
        n: u8,
        /// Bytes per element.
        size: u8,
        /// Address register.
        addr: Reg,
        /// Byte offset.
        off: i64,
    },
    /// `atom` (with a result) or `red` (without).
    Atom {
        /// The space.
        space: Space,
        /// The operation.
        op: AtomOp,
        /// Bytes (4 or 8).
        size: u8,
        /// The old value's destination.
        d: Option<Reg>,
        /// Address register.
        addr: Reg,
        /// Byte offset.
        off: i64,
        /// Operand.
        b: Reg,
        /// Second operand (`cas`).
        c: Option<Reg>,
    },
    /// `cvta` (to generic) / `cvta.to` (from generic) for the shared and local windows.
    Cvta {
        /// Destination.
        d: Reg,
        /// Source.
        a: Reg,
        /// The window's base.
        base: u64,
        /// `cvta.to`.
        to: bool,
        /// Destination mask (32-bit forms).
        dmask: u64,
    },
    /// `isspacep.<space> p, a`.
    Isspacep {
        /// Result.
        p: Reg,
        /// Generic address.
        a: Reg,
        /// The space asked about.
        space: Space,
    },
    /// A branch.
    Bra {
        /// Target instruction.
        target: u32,
    },
    /// `exit` / `ret` of the kernel.
    Exit,
    /// `bar.sync id`.
    Bar {
        /// The barrier.
        id: u32,
    },
    /// A call of a native function.
    Call {
        /// The function.
        f: &'static Native,
        /// Result register.
        ret: Option<Reg>,
        /// Argument registers.
        args: Vec<Reg>,
    },
    /// `shfl[.sync]`.
    Shfl {
        /// Mode.
        mode: ShflMode,
        /// Destination.
        d: Reg,
        /// Validity predicate.
        p: Option<Reg>,
        /// Value.
        a: Reg,
        /// Lane / delta.
        b: Reg,
        /// Clamp and segment mask.
        c: Reg,
        /// `membermask` (`.sync` forms).
        member: Option<Reg>,
    },
    /// `vote[.sync]`.
    Vote {
        /// Mode.
        mode: VoteMode,
        /// Destination (pred, or b32 for ballot).
        d: Reg,
        /// Source predicate.
        a: Reg,
        /// `!a`.
        neg: bool,
        /// `membermask` (`.sync` forms).
        member: Option<Reg>,
    },
    /// `activemask.b32`.
    Activemask {
        /// Destination.
        d: Reg,
    },
    /// A read of `%clock` / `%clock64` / `%globaltimer`.
    Clock {
        /// Destination.
        d: Reg,
        /// Destination mask.
        dmask: u64,
    },
    /// `trap`.
    Trap,
    /// Fences, hints, `bar.warp.sync`, `nanosleep`: nothing to do in a sequential simulator.
    Nop,
}

/// An instruction: guard, operation, PTX line.
pub struct Inst {
    /// `@%p` / `@!%p`: register and negation.
    pub guard: Option<(Reg, bool)>,
    /// The operation.
    pub op: Op,
    /// The PTX line (for diagnostics).
    pub line: u32,
    /// The opcode as written (for diagnostics).
    pub text: Box<str>,
}

/// A kernel ready to run.
pub struct Kernel {
    /// The name.
    pub name: String,
    /// Offset and size of each parameter in the parameter buffer.
    pub params: Vec<(u32, u32)>,
    /// Bytes of the parameter buffer.
    pub param_size: u32,
    /// Instructions.
    pub insts: Vec<Inst>,
    /// Registers (constants and specials included).
    pub nregs: u32,
    /// Constant registers and their values.
    pub consts: Vec<(Reg, u64)>,
    /// Special registers.
    pub specials: Vec<(Reg, Special)>,
    /// Bytes of static shared memory.
    pub static_shared: u32,
    /// Offset of dynamic shared memory (`.extern .shared` arrays).
    pub dyn_offset: u32,
    /// Bytes of local memory per thread.
    pub local_size: u32,
    /// `.maxntid`.
    pub maxntid: Option<[u32; 3]>,
    /// `.reqntid`.
    pub reqntid: Option<[u32; 3]>,
}

/// The module-scope variables of a loaded module: device address and size by name.
pub type Globals = std::collections::HashMap<String, (u64, u64)>;
