//! PTX: tokens ([`lex`]), syntax ([`parse`]), and the lowering of each kernel into the compact
//! form the interpreter runs ([`lower`] into [`ir`]), with the semantics of each instruction
//! built once at load ([`ops`] for integers and predicates, [`fops`] for floating point and
//! conversions).

pub mod fops;
mod instr;
mod instr_ctl;
pub mod ir;
pub mod lex;
pub mod lower;
pub mod ops;
pub mod parse;

use std::fmt;

/// Why a module was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PtxErrorKind {
    /// Not PTX, or malformed.
    Syntax,
    /// Valid PTX the simulator does not implement (named in the message).
    Unsupported,
    /// PTX that the driver's JIT compiler would refuse (undeclared names, type mismatches).
    Invalid,
    /// A `.version` newer than the simulated driver's.
    Version,
    /// A `.target` newer than the device.
    Target,
}

/// A refusal with its PTX line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxError {
    /// The kind.
    pub kind: PtxErrorKind,
    /// The line (0: none).
    pub line: u32,
    /// What.
    pub msg: String,
}

impl PtxError {
    /// Malformed text.
    pub fn syntax(line: u32, msg: String) -> PtxError {
        PtxError { kind: PtxErrorKind::Syntax, line, msg }
    }
    /// Outside the supported subset.
    pub fn unsupported(line: u32, what: String) -> PtxError {
        PtxError { kind: PtxErrorKind::Unsupported, line, msg: format!("{what} is not supported by cudasim") }
    }
    /// Invalid PTX.
    pub fn invalid(line: u32, msg: String) -> PtxError {
        PtxError { kind: PtxErrorKind::Invalid, line, msg }
    }
}

impl fmt::Display for PtxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "ptx line {}: {}", self.line, self.msg)
        } else {
            f.write_str(&self.msg)
        }
    }
}

/// A PTX fundamental type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ty {
    /// `.b8` .. `.b64`.
    B8,
    /// `.b16`.
    B16,
    /// `.b32`.
    B32,
    /// `.b64`.
    B64,
    /// `.u8`.
    U8,
    /// `.u16`.
    U16,
    /// `.u32`.
    U32,
    /// `.u64`.
    U64,
    /// `.s8`.
    S8,
    /// `.s16`.
    S16,
    /// `.s32`.
    S32,
    /// `.s64`.
    S64,
    /// `.f16`.
    F16,
    /// `.f16x2`.
    F16x2,
    /// `.bf16`.
    Bf16,
    /// `.f32`.
    F32,
    /// `.f64`.
    F64,
    /// `.pred`.
    Pred,
}

impl Ty {
    /// The type named by a modifier word (without its dot).
    pub fn parse(s: &str) -> Option<Ty> {
        Some(match s {
            "b8" => Ty::B8,
            "b16" => Ty::B16,
            "b32" => Ty::B32,
            "b64" => Ty::B64,
            "u8" => Ty::U8,
            "u16" => Ty::U16,
            "u32" => Ty::U32,
            "u64" => Ty::U64,
            "s8" => Ty::S8,
            "s16" => Ty::S16,
            "s32" => Ty::S32,
            "s64" => Ty::S64,
            "f16" => Ty::F16,
            "f16x2" => Ty::F16x2,
            "bf16" => Ty::Bf16,
            "f32" => Ty::F32,
            "f64" => Ty::F64,
            "pred" => Ty::Pred,
            _ => return None,
        })
    }

    /// Width in bits (1 for predicates).
    pub fn bits(self) -> u32 {
        match self {
            Ty::Pred => 1,
            Ty::B8 | Ty::U8 | Ty::S8 => 8,
            Ty::B16 | Ty::U16 | Ty::S16 | Ty::F16 | Ty::Bf16 => 16,
            Ty::B32 | Ty::U32 | Ty::S32 | Ty::F32 | Ty::F16x2 => 32,
            Ty::B64 | Ty::U64 | Ty::S64 | Ty::F64 => 64,
        }
    }

    /// Width in bytes (predicates: 1).
    pub fn bytes(self) -> u32 {
        self.bits().div_ceil(8)
    }

    /// A signed integer type.
    pub fn signed(self) -> bool {
        matches!(self, Ty::S8 | Ty::S16 | Ty::S32 | Ty::S64)
    }

    /// A floating-point type (scalar or packed).
    pub fn float(self) -> bool {
        matches!(self, Ty::F16 | Ty::F16x2 | Ty::Bf16 | Ty::F32 | Ty::F64)
    }

    /// An integer or bit type.
    pub fn int(self) -> bool {
        !self.float() && self != Ty::Pred
    }

    /// The modifier word.
    pub fn name(self) -> &'static str {
        match self {
            Ty::B8 => "b8",
            Ty::B16 => "b16",
            Ty::B32 => "b32",
            Ty::B64 => "b64",
            Ty::U8 => "u8",
            Ty::U16 => "u16",
            Ty::U32 => "u32",
            Ty::U64 => "u64",
            Ty::S8 => "s8",
            Ty::S16 => "s16",
            Ty::S32 => "s32",
            Ty::S64 => "s64",
            Ty::F16 => "f16",
            Ty::F16x2 => "f16x2",
            Ty::Bf16 => "bf16",
            Ty::F32 => "f32",
            Ty::F64 => "f64",
            Ty::Pred => "pred",
        }
    }
}

/// The all-ones mask of `bits` bits.
pub fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// `v` (its low `bits` bits) sign-extended.
pub fn sx(v: u64, bits: u32) -> i64 {
    if bits >= 64 {
        v as i64
    } else {
        let s = 64 - bits;
        ((v << s) as i64) >> s
    }
}

/// Versions of the PTX ISA the simulated driver accepts (its CUDA 12.8 driver JIT-compiles up
/// to 8.7).
pub const MAX_PTX_VERSION: (u32, u32) = (8, 7);
