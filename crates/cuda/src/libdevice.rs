//! libdevice functions that PTX declares `.extern` and no driver resolves. TVM's NVPTX back end
//! calls libdevice (`__nv_fmaf`, ...) and links its bitcode in at build time; an export made
//! without it (TVM v0.8's `mlp2_nvptx.so`) keeps the calls as `.extern .func` declarations, and
//! a real driver's JIT then fails with an unresolved external. For the functions that are one
//! PTX instruction with libdevice's default semantics (IEEE rounding, no flush to zero), the
//! declaration is replaced here by a definition before the PTX reaches the driver; others stay
//! as they are, and [`unresolved`] names them when the driver refuses the module.

/// Name, operand type, number of operands, instruction.
const FUNCS: &[(&str, &str, usize, &str)] = &[
    ("__nv_fmaf", "f32", 3, "fma.rn.f32"),
    ("__nv_fma", "f64", 3, "fma.rn.f64"),
    ("__nv_fabsf", "f32", 1, "abs.f32"),
    ("__nv_fabs", "f64", 1, "abs.f64"),
    ("__nv_sqrtf", "f32", 1, "sqrt.rn.f32"),
    ("__nv_sqrt", "f64", 1, "sqrt.rn.f64"),
    ("__nv_fminf", "f32", 2, "min.f32"),
    ("__nv_fmaxf", "f32", 2, "max.f32"),
    ("__nv_fmin", "f64", 2, "min.f64"),
    ("__nv_fmax", "f64", 2, "max.f64"),
    ("__nv_floorf", "f32", 1, "cvt.rmi.f32.f32"),
    ("__nv_ceilf", "f32", 1, "cvt.rpi.f32.f32"),
    ("__nv_truncf", "f32", 1, "cvt.rzi.f32.f32"),
    ("__nv_floor", "f64", 1, "cvt.rmi.f64.f64"),
    ("__nv_ceil", "f64", 1, "cvt.rpi.f64.f64"),
    ("__nv_trunc", "f64", 1, "cvt.rzi.f64.f64"),
];

/// One `.extern .func` declaration: its byte range (through the closing `;`), the function's
/// name and its parameter types (`.b32`, `.b64`, ...), with the return's type first if any.
struct Decl<'a> {
    range: std::ops::Range<usize>,
    name: &'a str,
    ret: Option<&'a str>,
    params: Vec<&'a str>,
}

fn declarations(ptx: &str) -> Vec<Decl<'_>> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = ptx[from..].find(".extern .func") {
        let start = from + i;
        let Some(len) = ptx[start..].find(';') else { break };
        let text = &ptx[start..start + len];
        from = start + len + 1;
        let mut rest = text[".extern .func".len()..].trim_start();
        let mut ret = None;
        if rest.starts_with('(') {
            let Some(close) = rest.find(')') else { continue };
            ret = rest[1..close].split_whitespace().find(|t| t.starts_with(".b") || t.starts_with(".f"));
            rest = rest[close + 1..].trim_start();
        }
        let name_end = rest.find(|c: char| c.is_whitespace() || c == '(').unwrap_or(rest.len());
        let name = &rest[..name_end];
        let params = rest[name_end..]
            .split(',')
            .filter_map(|p| p.split_whitespace().find(|t| t.starts_with(".b") || t.starts_with(".f")))
            .collect();
        out.push(Decl { range: start..start + len + 1, name, ret, params });
    }
    out
}

/// The PTX with the known libdevice declarations replaced by definitions, or `None` when it
/// declares none of them.
pub fn define_externs(ptx: &str) -> Option<String> {
    let mut out = String::with_capacity(ptx.len() + 1024);
    let mut last = 0;
    for d in declarations(ptx) {
        let Some(&(name, ty, n, instr)) = FUNCS.iter().find(|f| f.0 == d.name) else { continue };
        let bits = if ty == "f32" { ".b32" } else { ".b64" };
        if d.ret != Some(bits) || d.params.len() != n || d.params.iter().any(|p| *p != bits) {
            continue;
        }
        let params: Vec<String> = (0..n).map(|k| format!(".param {bits} {name}_p{k}")).collect();
        let mut body = format!(".func (.param {bits} func_retval0) {name}({})\n{{\n", params.join(", "));
        // Registers %tvmrt_s<k> / %tvmrt_d<k> (ptxas refuses ones named like %x_f32<k>).
        let r = if ty == "f32" { "%tvmrt_s" } else { "%tvmrt_d" };
        body += &format!("\t.reg .{ty} {r}<{}>;\n", n + 1);
        for k in 0..n {
            body += &format!("\tld.param.{ty} {r}{k}, [{name}_p{k}];\n");
        }
        let operands: Vec<String> = (0..n).map(|k| format!("{r}{k}")).collect();
        body += &format!("\t{instr} {r}{n}, {};\n", operands.join(", "));
        body += &format!("\tst.param.{ty} [func_retval0+0], {r}{n};\n\tret;\n}}");
        out += &ptx[last..d.range.start];
        out += &body;
        last = d.range.end;
    }
    if last == 0 {
        return None;
    }
    out += &ptx[last..];
    Some(out)
}

/// The libdevice functions the PTX still declares `.extern` (after [`define_externs`]).
pub fn unresolved(ptx: &str) -> Vec<&str> {
    declarations(ptx).into_iter().map(|d| d.name).filter(|n| n.starts_with("__nv_")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DECL: &str = ".version 6.0\n.target sm_70\n.address_size 64\n\
        .extern .func  (.param .b32 func_retval0) __nv_fmaf\n(\n\t.param .b32 __nv_fmaf_param_0,\n\t\
        .param .b32 __nv_fmaf_param_1,\n\t.param .b32 __nv_fmaf_param_2\n)\n;\n\
        .extern .func  (.param .b64 func_retval0) __nv_expm1\n(\n\t.param .b64 __nv_expm1_param_0\n)\n;\n\
        .visible .entry k() { ret; }\n";

    #[test]
    fn known_functions_are_defined_others_stay_declared() {
        let out = define_externs(DECL).expect("__nv_fmaf is known");
        assert!(!out.contains(".extern .func  (.param .b32 func_retval0) __nv_fmaf"), "{out}");
        assert!(out.contains(".func (.param .b32 func_retval0) __nv_fmaf(.param .b32 __nv_fmaf_p0"), "{out}");
        assert!(out.contains("fma.rn.f32 %tvmrt_s3, %tvmrt_s0, %tvmrt_s1, %tvmrt_s2;"), "{out}");
        assert!(out.ends_with(".visible .entry k() { ret; }\n"));
        assert_eq!(unresolved(&out), vec!["__nv_expm1"]);
        assert_eq!(unresolved(DECL), vec!["__nv_fmaf", "__nv_expm1"]);
    }

    #[test]
    fn a_declaration_with_other_types_is_left_alone() {
        let odd = DECL.replace("__nv_fmaf_param_2", "__nv_fmaf_param_2,\n\t.param .b32 extra");
        assert!(define_externs(&odd).is_none());
        assert!(define_externs(".version 6.0\n.visible .entry k() { ret; }").is_none());
    }
}
