//! PTX syntax: the module header (`.version`, `.target`, `.address_size`), module-scope
//! variables, `.entry` and `.func` definitions and prototypes, and the statements of their
//! bodies (scopes, labels, declarations, instructions with guards and operands). Meaning is
//! given later, by [`super::lower`].

use super::lex::{Tok, Token};
use super::{PtxError, Ty};

/// A parsed module.
#[derive(Debug, Default)]
pub struct Ast {
    /// `.version major.minor`.
    pub version: (u32, u32),
    /// `.target sm_NN`: NN.
    pub target: u32,
    /// `.address_size` (64 when absent).
    pub address_size: u32,
    /// Module-scope variables.
    pub vars: Vec<VarDecl>,
    /// Functions and kernels (definitions and prototypes).
    pub funcs: Vec<FuncDecl>,
}

/// The state space of a variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VarSpace {
    /// `.global`.
    Global,
    /// `.shared`.
    Shared,
    /// `.const`.
    Const,
    /// `.local`.
    Local,
    /// `.param` (inside a body: a call argument slot).
    Param,
}

/// A literal.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Lit {
    /// An integer (two's complement bits).
    Int(u64),
    /// The bits of an f32 (`0f...`).
    F32(u32),
    /// An f64 (`0d...` or decimal).
    F64(f64),
}

/// A variable declaration.
#[derive(Clone, Debug)]
pub struct VarDecl {
    /// Its state space.
    pub space: VarSpace,
    /// `.extern` (a dynamic `.shared` array, or a variable defined elsewhere).
    pub external: bool,
    /// `.align N`.
    pub align: Option<u32>,
    /// The element type.
    pub ty: Ty,
    /// `.v2` / `.v4` elements (1 otherwise).
    pub vec: u32,
    /// The name.
    pub name: String,
    /// Array dimensions (`None`: `[]`, unsized).
    pub dims: Vec<Option<u64>>,
    /// The initializer, flattened.
    pub init: Option<Vec<Lit>>,
    /// Where it was declared.
    pub line: u32,
}

impl VarDecl {
    /// Bytes of one element.
    pub fn elem_size(&self) -> u64 {
        u64::from(self.ty.bytes()) * u64::from(self.vec)
    }

    /// The size in bytes (0 for an unsized array).
    pub fn size(&self) -> u64 {
        self.dims.iter().fold(self.elem_size(), |acc, d| acc.saturating_mul(d.unwrap_or(0)))
    }

    /// The alignment: `.align` or the element's natural one.
    pub fn alignment(&self) -> u64 {
        self.align.map_or(self.elem_size().max(1), u64::from)
    }
}

/// A function or kernel.
#[derive(Debug)]
pub struct FuncDecl {
    /// `.entry` (a kernel) rather than `.func`.
    pub entry: bool,
    /// `.extern`: a prototype of a function defined elsewhere.
    pub external: bool,
    /// The name.
    pub name: String,
    /// Return parameters (`.func` only).
    pub rets: Vec<VarDecl>,
    /// Parameters.
    pub params: Vec<VarDecl>,
    /// The body (`None` for a prototype).
    pub body: Option<Vec<Stmt>>,
    /// `.maxntid x, y, z`.
    pub maxntid: Option<[u32; 3]>,
    /// `.reqntid x, y, z`.
    pub reqntid: Option<[u32; 3]>,
    /// Where it starts.
    pub line: u32,
}

/// An operand as written.
#[derive(Clone, Debug, PartialEq)]
pub enum Operand {
    /// A register, special register, symbol, label or `_`.
    Name(String),
    /// `!%p`.
    Not(String),
    /// `%p|%q` (the two results of `setp`).
    Pair(String, String),
    /// A literal.
    Imm(Lit),
    /// `[base+offset]` (base absent for an absolute address).
    Addr {
        /// The register or symbol.
        base: Option<String>,
        /// The byte offset.
        offset: i64,
    },
    /// `{a, b, ...}`.
    Vector(Vec<Operand>),
    /// `(a, b, ...)` (call lists).
    List(Vec<Operand>),
}

/// An instruction.
#[derive(Clone, Debug)]
pub struct Instr {
    /// `@%p` (false) or `@!%p` (true).
    pub guard: Option<(String, bool)>,
    /// The opcode with its modifiers, as written (`ld.global.nc.f32`).
    pub opcode: String,
    /// The operands.
    pub operands: Vec<Operand>,
    /// Its line.
    pub line: u32,
}

/// A statement of a body.
#[derive(Clone, Debug)]
pub enum Stmt {
    /// `{`.
    Open,
    /// `}`.
    Close,
    /// `name:`.
    Label(String, u32),
    /// `.reg .ty names;` (a name with a count declares `name0 .. name<count-1>`).
    Reg {
        /// The type.
        ty: Ty,
        /// Names with their optional `<count>`.
        names: Vec<(String, Option<u32>)>,
        /// Where.
        line: u32,
    },
    /// `.local`, `.shared` or `.param` inside a body.
    Var(VarDecl),
    /// An instruction.
    Instr(Instr),
}

struct Parser<'a> {
    t: &'a [Token],
    i: usize,
}

type R<T> = Result<T, PtxError>;

impl<'a> Parser<'a> {
    fn line(&self) -> u32 {
        self.t.get(self.i).or(self.t.last()).map_or(0, |t| t.line)
    }

    fn err<T>(&self, msg: impl Into<String>) -> R<T> {
        Err(PtxError::syntax(self.line(), msg.into()))
    }

    fn peek(&self) -> Option<&'a Tok> {
        self.t.get(self.i).map(|t| &t.tok)
    }

    fn next(&mut self) -> R<&'a Tok> {
        match self.t.get(self.i) {
            Some(t) => {
                self.i += 1;
                Ok(&t.tok)
            }
            None => self.err("unexpected end of PTX"),
        }
    }

    fn is_p(&self, c: char) -> bool {
        self.peek() == Some(&Tok::P(c))
    }

    fn eat_p(&mut self, c: char) -> bool {
        if self.is_p(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn expect_p(&mut self, c: char) -> R<()> {
        if self.eat_p(c) {
            Ok(())
        } else {
            self.err(format!("expected `{c}`, found {}", self.describe()))
        }
    }

    fn describe(&self) -> String {
        match self.peek() {
            None => "the end".into(),
            Some(Tok::Ident(s)) => format!("`{s}`"),
            Some(Tok::Dir(s)) => format!("`.{s}`"),
            Some(Tok::P(c)) => format!("`{c}`"),
            Some(t) => format!("{t:?}"),
        }
    }

    fn is_dir(&self, d: &str) -> bool {
        matches!(self.peek(), Some(Tok::Dir(s)) if s == d)
    }

    fn eat_dir(&mut self, d: &str) -> bool {
        if self.is_dir(d) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn ident(&mut self) -> R<String> {
        match self.next()? {
            Tok::Ident(s) => Ok(s.clone()),
            _ => {
                self.i -= 1;
                self.err(format!("expected a name, found {}", self.describe()))
            }
        }
    }

    fn int(&mut self) -> R<u64> {
        let neg = self.eat_p('-');
        match self.next()? {
            Tok::Int(v) => Ok(if neg { v.wrapping_neg() } else { *v }),
            _ => {
                self.i -= 1;
                self.err(format!("expected an integer, found {}", self.describe()))
            }
        }
    }

    fn u32(&mut self) -> R<u32> {
        let v = self.int()?;
        u32::try_from(v).or_else(|_| self.err(format!("{v} is out of range")))
    }

    fn lit(&mut self) -> R<Lit> {
        let neg = self.eat_p('-');
        let l = match self.next()? {
            Tok::Int(v) => Lit::Int(if neg { v.wrapping_neg() } else { *v }),
            Tok::F32(b) => Lit::F32(if neg { b ^ 0x8000_0000 } else { *b }),
            Tok::F64(v) => Lit::F64(if neg { -v } else { *v }),
            _ => {
                self.i -= 1;
                return self.err(format!("expected a literal, found {}", self.describe()));
            }
        };
        Ok(l)
    }

    fn skip_to_semicolon(&mut self) -> R<()> {
        while !self.eat_p(';') {
            self.next()?;
        }
        Ok(())
    }

    fn module(&mut self) -> R<Ast> {
        let mut ast = Ast { address_size: 64, ..Ast::default() };
        let mut saw_version = false;
        let mut saw_target = false;
        while let Some(tok) = self.peek() {
            let line = self.line();
            match tok {
                Tok::Dir(d) if d == "version" => {
                    self.i += 1;
                    ast.version = match self.next()? {
                        Tok::F64(v) => {
                            let major = v.trunc();
                            (major as u32, ((v - major) * 10.0).round() as u32)
                        }
                        Tok::Int(v) => (*v as u32, 0),
                        _ => return self.err("bad .version"),
                    };
                    saw_version = true;
                }
                Tok::Dir(d) if d == "target" => {
                    self.i += 1;
                    loop {
                        let t = self.ident()?;
                        if let Some(sm) = t.strip_prefix("sm_") {
                            let digits: String = sm.chars().take_while(char::is_ascii_digit).collect();
                            ast.target = digits.parse().or_else(|_| self.err(format!("bad target {t}")))?;
                        } else if t != "texmode_independent" && t != "texmode_unified" && t != "debug" {
                            return Err(PtxError::unsupported(line, format!(".target {t}")));
                        }
                        if !self.eat_p(',') {
                            break;
                        }
                    }
                    saw_target = true;
                }
                Tok::Dir(d) if d == "address_size" => {
                    self.i += 1;
                    ast.address_size = self.u32()?;
                }
                Tok::Dir(d) if d == "pragma" => {
                    self.i += 1;
                    self.skip_to_semicolon()?;
                }
                Tok::Dir(_) => self.module_decl(&mut ast)?,
                _ => return self.err(format!("unexpected {} at module scope", self.describe())),
            }
        }
        if !saw_version || !saw_target {
            return Err(PtxError::syntax(1, "missing .version or .target".into()));
        }
        Ok(ast)
    }

    fn module_decl(&mut self, ast: &mut Ast) -> R<()> {
        let line = self.line();
        let mut external = false;
        loop {
            if self.eat_dir("visible") || self.eat_dir("weak") || self.eat_dir("common") {
                continue;
            }
            if self.eat_dir("extern") {
                external = true;
                continue;
            }
            break;
        }
        if self.eat_dir("entry") {
            let f = self.function(true, external, line)?;
            ast.funcs.push(f);
            return Ok(());
        }
        if self.eat_dir("func") {
            let f = self.function(false, external, line)?;
            ast.funcs.push(f);
            return Ok(());
        }
        let space = match self.peek() {
            Some(Tok::Dir(d)) if d == "global" => VarSpace::Global,
            Some(Tok::Dir(d)) if d == "shared" || d == "shared::cta" => VarSpace::Shared,
            Some(Tok::Dir(d)) if d == "const" => VarSpace::Const,
            _ => return Err(PtxError::unsupported(line, format!("module-scope directive {}", self.describe()))),
        };
        self.i += 1;
        let mut v = self.var_rest(space, line)?;
        v.external = external;
        self.expect_p(';')?;
        ast.vars.push(v);
        Ok(())
    }

    /// After the state space: `[.align N] [.vN] .type name[dims] [= init]`.
    fn var_rest(&mut self, space: VarSpace, line: u32) -> R<VarDecl> {
        let mut align = None;
        let mut vec = 1;
        let ty = loop {
            match self.next()? {
                Tok::Dir(d) if d == "align" => align = Some(self.u32()?),
                Tok::Dir(d) if d == "v2" => vec = 2,
                Tok::Dir(d) if d == "v4" => vec = 4,
                Tok::Dir(d) if d == "ptr" || d == "global" || d == "shared" || d == "const" || d == "local" => {}
                Tok::Dir(d) => match Ty::parse(d) {
                    Some(t) => break t,
                    None => return Err(PtxError::unsupported(line, format!("variable type .{d}"))),
                },
                _ => {
                    self.i -= 1;
                    return self.err(format!("expected a type, found {}", self.describe()));
                }
            }
        };
        // Parameters may carry `.ptr .space .align N` after the type.
        loop {
            if self.eat_dir("ptr") || self.eat_dir("global") || self.eat_dir("shared") || self.eat_dir("const") {
                continue;
            }
            if self.eat_dir("align") {
                align = Some(self.u32()?);
                continue;
            }
            break;
        }
        let name = self.ident()?;
        let mut dims = Vec::new();
        while self.eat_p('[') {
            if self.eat_p(']') {
                dims.push(None);
            } else {
                dims.push(Some(self.int()?));
                self.expect_p(']')?;
            }
        }
        let init = if self.eat_p('=') { Some(self.init()?) } else { None };
        Ok(VarDecl { space, external: false, align, ty, vec, name, dims, init, line })
    }

    fn init(&mut self) -> R<Vec<Lit>> {
        self.init_nested(0)
    }

    fn init_nested(&mut self, depth: u32) -> R<Vec<Lit>> {
        if depth > 8 {
            return self.err("initializer nested too deeply");
        }
        let mut out = Vec::new();
        if self.eat_p('{') {
            loop {
                if self.is_p('{') {
                    out.extend(self.init_nested(depth + 1)?);
                } else {
                    out.push(self.init_lit()?);
                }
                if self.eat_p('}') {
                    break;
                }
                self.expect_p(',')?;
            }
        } else {
            out.push(self.init_lit()?);
        }
        Ok(out)
    }

    fn init_lit(&mut self) -> R<Lit> {
        if let Some(Tok::Ident(s)) = self.peek() {
            return Err(PtxError::unsupported(self.line(), format!("address initializer `{s}`")));
        }
        self.lit()
    }

    fn function(&mut self, entry: bool, external: bool, line: u32) -> R<FuncDecl> {
        let mut rets = Vec::new();
        if !entry && self.is_p('(') {
            rets = self.params()?;
        }
        let name = self.ident()?;
        let params = if self.is_p('(') { self.params()? } else { Vec::new() };
        let mut f = FuncDecl { entry, external, name, rets, params, body: None, maxntid: None, reqntid: None, line };
        loop {
            match self.peek() {
                Some(Tok::Dir(d)) if d == "maxntid" || d == "reqntid" => {
                    let which = d.clone();
                    self.i += 1;
                    let mut v = [1u32; 3];
                    for (k, slot) in v.iter_mut().enumerate() {
                        if k > 0 && !self.eat_p(',') {
                            break;
                        }
                        *slot = self.u32()?;
                    }
                    if which == "maxntid" {
                        f.maxntid = Some(v);
                    } else {
                        f.reqntid = Some(v);
                    }
                }
                Some(Tok::Dir(d)) if d == "minnctapersm" || d == "maxnreg" || d == "maxnctapersm" => {
                    self.i += 1;
                    self.int()?;
                }
                Some(Tok::Dir(d)) if d == "noreturn" => self.i += 1,
                Some(Tok::Dir(d)) if d == "pragma" => {
                    self.i += 1;
                    self.skip_to_semicolon()?;
                }
                _ => break,
            }
        }
        if self.eat_p(';') {
            return Ok(f);
        }
        if !self.is_p('{') {
            return self.err(format!("expected a body or `;`, found {}", self.describe()));
        }
        f.body = Some(self.body()?);
        Ok(f)
    }

    fn params(&mut self) -> R<Vec<VarDecl>> {
        self.expect_p('(')?;
        let mut out = Vec::new();
        if self.eat_p(')') {
            return Ok(out);
        }
        loop {
            let line = self.line();
            if !self.eat_dir("param") {
                return Err(PtxError::unsupported(line, format!("parameter declared with {}", self.describe())));
            }
            out.push(self.var_rest(VarSpace::Param, line)?);
            if self.eat_p(')') {
                break;
            }
            self.expect_p(',')?;
        }
        Ok(out)
    }

    fn body(&mut self) -> R<Vec<Stmt>> {
        let mut out = Vec::new();
        let mut depth = 0usize;
        loop {
            let line = self.line();
            match self.next()? {
                Tok::P('{') => {
                    depth += 1;
                    out.push(Stmt::Open);
                }
                Tok::P('}') => {
                    out.push(Stmt::Close);
                    depth -= 1;
                    if depth == 0 {
                        return Ok(out);
                    }
                }
                Tok::Dir(d) => match d.as_str() {
                    "reg" => {
                        let ty = match self.next()? {
                            Tok::Dir(t) => Ty::parse(t)
                                .ok_or_else(|| PtxError::unsupported(line, format!("register type .{t}")))?,
                            _ => return self.err("expected a register type"),
                        };
                        let mut names = Vec::new();
                        loop {
                            let n = self.ident()?;
                            let count = if self.eat_p('<') {
                                let c = self.u32()?;
                                self.expect_p('>')?;
                                Some(c)
                            } else {
                                None
                            };
                            names.push((n, count));
                            if !self.eat_p(',') {
                                break;
                            }
                        }
                        self.expect_p(';')?;
                        out.push(Stmt::Reg { ty, names, line });
                    }
                    "local" | "shared" | "param" | "shared::cta" => {
                        let space = match d.as_str() {
                            "local" => VarSpace::Local,
                            "param" => VarSpace::Param,
                            _ => VarSpace::Shared,
                        };
                        let v = self.var_rest(space, line)?;
                        self.expect_p(';')?;
                        out.push(Stmt::Var(v));
                    }
                    "pragma" => self.skip_to_semicolon()?,
                    other => return Err(PtxError::unsupported(line, format!("directive .{other} in a body"))),
                },
                Tok::Ident(name) if self.is_p(':') => {
                    self.i += 1;
                    out.push(Stmt::Label(name.clone(), line));
                }
                Tok::Ident(_) | Tok::P('@') => {
                    self.i -= 1;
                    out.push(Stmt::Instr(self.instr()?));
                }
                _ => {
                    self.i -= 1;
                    return self.err(format!("unexpected {} in a body", self.describe()));
                }
            }
        }
    }

    fn instr(&mut self) -> R<Instr> {
        let line = self.line();
        let guard = if self.eat_p('@') {
            let neg = self.eat_p('!');
            Some((self.ident()?, neg))
        } else {
            None
        };
        let opcode = self.ident()?;
        let mut operands = Vec::new();
        let parsed = (|| -> R<()> {
            if !self.eat_p(';') {
                loop {
                    operands.push(self.operand()?);
                    if self.eat_p(';') {
                        break;
                    }
                    self.expect_p(',')?;
                }
            }
            Ok(())
        })();
        // Operand forms of instructions outside the subset (textures, ...): name the instruction.
        if let Err(e) = parsed {
            let base = opcode.split('.').next().unwrap_or("");
            return Err(if super::instr::is_known(base) {
                e
            } else {
                PtxError::unsupported(line, format!("instruction `{opcode}`"))
            });
        }
        Ok(Instr { guard, opcode, operands, line })
    }

    fn operand(&mut self) -> R<Operand> {
        self.operand_nested(0)
    }

    fn operand_nested(&mut self, depth: u32) -> R<Operand> {
        if depth > 2 {
            return self.err("operand lists nested too deeply");
        }
        if self.eat_p('[') {
            let (base, mut offset) = match self.peek() {
                Some(Tok::Ident(_)) => (Some(self.ident()?), 0i64),
                _ => (None, self.int()? as i64),
            };
            if base.is_some() {
                if self.eat_p('+') {
                    offset = self.int()? as i64;
                } else if self.eat_p('-') {
                    offset = (self.int()? as i64).wrapping_neg();
                }
            }
            self.expect_p(']')?;
            return Ok(Operand::Addr { base, offset });
        }
        for (open, close) in [('{', '}'), ('(', ')')] {
            if self.eat_p(open) {
                let mut items = Vec::new();
                if !self.eat_p(close) {
                    loop {
                        items.push(self.operand_nested(depth + 1)?);
                        if self.eat_p(close) {
                            break;
                        }
                        self.expect_p(',')?;
                    }
                }
                return Ok(if open == '{' { Operand::Vector(items) } else { Operand::List(items) });
            }
        }
        if self.eat_p('!') {
            return Ok(Operand::Not(self.ident()?));
        }
        if let Some(Tok::Ident(_)) = self.peek() {
            let a = self.ident()?;
            if self.eat_p('|') {
                return Ok(Operand::Pair(a, self.ident()?));
            }
            return Ok(Operand::Name(a));
        }
        Ok(Operand::Imm(self.lit()?))
    }
}

/// Parses tokens into a module.
pub fn parse(tokens: &[Token]) -> Result<Ast, PtxError> {
    Parser { t: tokens, i: 0 }.module()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptx::lex::tokenize;

    #[test]
    fn module_with_kernel_and_prototype() {
        let src = r#"
.version 6.0
.target sm_70
.address_size 64
.extern .func  (.param .b32 func_retval0) __nv_fmaf
( .param .b32 __nv_fmaf_param_0, .param .b32 __nv_fmaf_param_1 ) ;
.shared .align 128 .b8 shmem[256];
.global .align 4 .u32 table[3] = {1, -2, 0x10};
.visible .entry k( .param .u64 k_param_0, .param .align 8 .b8 k_param_1[16] ) .maxntid 64, 1, 1
{
    .reg .pred %p<2>;
    .reg .b32 %r<5>, %x;
    { .param .b32 param0; }
    @!%p1 bra LBB0_2;
    setp.lt.s32 %p1|%p2, %r1, -3;
    ld.global.v2.f32 {%r1, _}, [%rd1+-8];
    call.uni (retval0), __nv_fmaf, (param0, param1);
LBB0_2:
    ret;
}
"#;
        let ast = parse(&tokenize(src).unwrap()).unwrap();
        assert_eq!((ast.version, ast.target, ast.address_size), ((6, 0), 70, 64));
        assert_eq!(ast.vars.len(), 2);
        assert_eq!(ast.vars[0].size(), 256);
        assert_eq!(ast.vars[1].init.as_deref(), Some(&[Lit::Int(1), Lit::Int(2u64.wrapping_neg()), Lit::Int(16)][..]));
        assert_eq!(ast.funcs.len(), 2);
        let proto = &ast.funcs[0];
        assert!(proto.external && proto.body.is_none() && proto.rets.len() == 1 && proto.params.len() == 2);
        let k = &ast.funcs[1];
        assert!(k.entry && k.maxntid == Some([64, 1, 1]));
        assert_eq!(k.params[1].size(), 16);
        let body = k.body.as_ref().unwrap();
        let instrs: Vec<&Instr> =
            body.iter().filter_map(|s| if let Stmt::Instr(i) = s { Some(i) } else { None }).collect();
        assert_eq!(instrs[0].guard, Some(("%p1".into(), true)));
        assert_eq!(instrs[1].operands[0], Operand::Pair("%p1".into(), "%p2".into()));
        assert_eq!(instrs[1].operands[2], Operand::Imm(Lit::Int(3u64.wrapping_neg())));
        assert_eq!(instrs[2].operands[1], Operand::Addr { base: Some("%rd1".into()), offset: -8 });
        assert!(matches!(&instrs[3].operands[0], Operand::List(v) if v.len() == 1));
        assert!(body.iter().any(|s| matches!(s, Stmt::Label(l, _) if l == "LBB0_2")));
    }

    #[test]
    fn refusals_name_what() {
        let e = parse(&tokenize(".version 6.0\n.target sm_70\n.alias a, b;").unwrap()).unwrap_err();
        assert!(e.to_string().contains("alias"), "{e}");
        let e = parse(&tokenize(".version 6.0\n.target sm_70\n.global .texref t;").unwrap()).unwrap_err();
        assert!(e.to_string().contains("texref"), "{e}");
        assert!(parse(&tokenize(".target sm_70").unwrap()).is_err());
        assert!(parse(&tokenize(".version 6.0\n.target sm_70\n.entry k() { ret;").unwrap()).is_err());
    }
}
