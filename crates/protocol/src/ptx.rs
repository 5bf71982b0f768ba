//! Kernels a client registers with a served CUDA unit: a PTX module and a
//! declaration of the kernel's signature.
//!
//! PTX does not say what a parameter is for (a pointer is a plain
//! `.u64`), so for a CUDA unit the `entry` of `RegisterKernel` declares
//! it: `scale(const ptr, ptr, f32)`, the kernel's name and one kind per
//! parameter ([`DeclKind`]): `ptr` (a buffer), `const ptr` (a buffer the
//! kernel only reads: it cannot be copied out), `u32`, `i32`, `u64`,
//! `f32`. Dynamic shared memory is not a parameter in CUDA, so there is
//! no counterpart of OpenCL's `__local`.
//!
//! [`ptx_signature`] parses the declaration and the PTX's
//! `.entry NAME ( .param ... )` list, checks that they agree parameter by
//! parameter (count, and size: 8-byte kinds against `.u64`/`.b64`/`.s64`,
//! 4-byte kinds against `.u32`/`.s32`/`.b32`/`.f32`), and gives the
//! [`KernelSignature`] calls are checked against, with the PTX's
//! parameter names. Every mismatch names the parameter. Everything here
//! is outside input and pure; `fuzz/fuzz_targets/ptx_signature.rs` fuzzes
//! it.

use crate::kernel_signature::{KernelSignature, MAX_ENTRY_BYTES, MAX_PARAMS, ParamKind, ParamSpec};

/// Longest declaration (`name(kind, ...)`) a client may send.
pub const MAX_DECLARATION_BYTES: usize = 4096;

/// The kinds a declaration lists, as a client writes them.
pub const KINDS: &str = "ptr, const ptr, u32, i32, u64, f32";

/// What one declared parameter takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeclKind {
    /// A buffer in the data region, passed as its device address.
    Ptr,
    /// A buffer the kernel only reads: never copied out.
    ConstPtr,
    U32,
    I32,
    U64,
    F32,
}

impl DeclKind {
    pub const ALL: [DeclKind; 6] = [
        DeclKind::Ptr,
        DeclKind::ConstPtr,
        DeclKind::U32,
        DeclKind::I32,
        DeclKind::U64,
        DeclKind::F32,
    ];

    /// As a declaration writes it.
    pub fn name(self) -> &'static str {
        match self {
            DeclKind::Ptr => "ptr",
            DeclKind::ConstPtr => "const ptr",
            DeclKind::U32 => "u32",
            DeclKind::I32 => "i32",
            DeclKind::U64 => "u64",
            DeclKind::F32 => "f32",
        }
    }

    /// Bytes of the kernel parameter it is passed as.
    pub fn bytes(self) -> u64 {
        match self {
            DeclKind::Ptr | DeclKind::ConstPtr | DeclKind::U64 => 8,
            DeclKind::U32 | DeclKind::I32 | DeclKind::F32 => 4,
        }
    }

    /// What a call passes for it.
    pub fn param_kind(self) -> ParamKind {
        match self {
            DeclKind::Ptr => ParamKind::Buffer { read_only: false },
            DeclKind::ConstPtr => ParamKind::Buffer { read_only: true },
            DeclKind::U32 => ParamKind::U32,
            DeclKind::I32 => ParamKind::I32,
            DeclKind::U64 => ParamKind::U64,
            DeclKind::F32 => ParamKind::F32,
        }
    }

    /// Parses one kind; words may be separated by any whitespace.
    fn parse(text: &str) -> Option<DeclKind> {
        let words: Vec<&str> = text.split_whitespace().collect();
        DeclKind::ALL
            .into_iter()
            .find(|k| k.name().split(' ').eq(words.iter().copied()))
    }

    /// The PTX parameter types it may be passed as.
    fn fits(self, ty: &str) -> bool {
        match self.bytes() {
            8 => matches!(ty, ".u64" | ".b64" | ".s64"),
            _ => matches!(ty, ".u32" | ".b32" | ".s32" | ".f32"),
        }
    }
}

/// A parsed declaration: the kernel's name and its parameters' kinds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Declaration {
    pub name: String,
    pub params: Vec<DeclKind>,
}

/// Whether `s` is a kernel name: an ASCII identifier.
pub fn is_identifier(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether `entry` is a declaration (`name(...)`) rather than a bare
/// kernel name.
pub fn is_declaration(entry: &str) -> bool {
    entry.contains('(')
}

fn clip(s: &str) -> String {
    s.chars().take(64).collect()
}

/// Parses `name(kind, kind, ...)`.
pub fn parse_declaration(entry: &str) -> Result<Declaration, String> {
    if entry.len() > MAX_DECLARATION_BYTES {
        return Err(format!(
            "a declaration of {} bytes: it may have at most {MAX_DECLARATION_BYTES}",
            entry.len()
        ));
    }
    let text = entry.trim();
    let Some((name, rest)) = text.split_once('(') else {
        return Err(format!(
            "{:?} declares no parameters: a CUDA unit needs the kernel's signature, \
             `name(kind, ...)` with kinds {KINDS}",
            clip(text)
        ));
    };
    let name = name.trim();
    if !is_identifier(name) || name.len() > MAX_ENTRY_BYTES {
        return Err(format!(
            "{:?} is not a kernel name (an identifier of at most {MAX_ENTRY_BYTES} bytes)",
            clip(name)
        ));
    }
    let Some(inner) = rest.trim_end().strip_suffix(')') else {
        return Err(format!("the declaration of `{name}` does not end with `)`"));
    };
    if inner.contains(['(', ')']) {
        return Err(format!(
            "the declaration of `{name}` has a parenthesis inside its parameter list"
        ));
    }
    let mut params = Vec::new();
    if !inner.trim().is_empty() {
        for (index, text) in inner.split(',').enumerate() {
            if index >= MAX_PARAMS {
                return Err(format!(
                    "`{name}` declares more than {MAX_PARAMS} parameters; a served kernel may \
                     have at most {MAX_PARAMS}"
                ));
            }
            let text = text.trim();
            let kind = DeclKind::parse(text).ok_or_else(|| {
                let bad = |what: String| format!("parameter {index} of `{name}`: {what}");
                if text.is_empty() {
                    bad("no kind (an empty place in the list)".into())
                } else if text.contains("local") || text.contains("shared") {
                    bad(format!(
                        "`{}`: dynamic shared memory is not a parameter of a CUDA kernel, so \
                         there is no `__local` here; the kinds are {KINDS}",
                        clip(text)
                    ))
                } else {
                    bad(format!(
                        "`{}` is not a kind; the kinds are {KINDS}",
                        clip(text)
                    ))
                }
            })?;
            params.push(kind);
        }
    }
    Ok(Declaration {
        name: name.to_string(),
        params,
    })
}

/// One parameter of a PTX `.entry`, as the PTX declares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxParam {
    pub name: String,
    /// Its type directive (`.u64`, `.f32`).
    pub ty: String,
    /// Its size in bytes (an array's whole size).
    pub bytes: u64,
    /// It is an array (`.b8 name[16]`: a structure passed by value).
    pub array: bool,
}

/// Bytes of a PTX fundamental type, or `None` for a type a kernel
/// parameter cannot have here.
fn type_bytes(ty: &str) -> Option<u64> {
    Some(match ty {
        ".u8" | ".s8" | ".b8" => 1,
        ".u16" | ".s16" | ".b16" | ".f16" | ".bf16" => 2,
        ".u32" | ".s32" | ".b32" | ".f32" | ".f16x2" | ".bf16x2" => 4,
        ".u64" | ".s64" | ".b64" | ".f64" => 8,
        _ => return None,
    })
}

/// Attributes of a kernel parameter that do not change what it is.
fn is_param_attribute(tok: &str) -> bool {
    matches!(
        tok,
        ".ptr" | ".global" | ".const" | ".local" | ".shared" | ".param"
    )
}

/// Words and punctuation of `ptx`, without its comments. A word is a run
/// of identifier characters (with `.`, `$` and `%`), so a directive such
/// as `.entry` is one word; anything else is one character.
fn tokens(ptx: &str) -> Vec<&str> {
    let word = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '$' | '%');
    let bytes = ptx.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let rest = &ptx[i..];
        let c = rest.chars().next().expect("i is at a character");
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if let Some(body) = rest.strip_prefix("/*") {
            i += body.find("*/").map_or(rest.len(), |e| e + 4);
        } else if c.is_whitespace() {
            i += c.len_utf8();
        } else if word(c) {
            let len = rest.find(|c: char| !word(c)).unwrap_or(rest.len());
            out.push(&rest[..len]);
            i += len;
        } else {
            out.push(&rest[..c.len_utf8()]);
            i += c.len_utf8();
        }
    }
    out
}

/// The names of the kernels (`.entry`) `ptx` defines.
pub fn ptx_entries(ptx: &str) -> Vec<String> {
    let toks = tokens(ptx);
    toks.windows(2)
        .filter(|w| w[0] == ".entry")
        .map(|w| w[1].to_string())
        .collect()
}

/// The parameters of kernel `name` in `ptx`, or why they cannot be read.
pub fn parse_ptx_entry(ptx: &str, name: &str) -> Result<Vec<PtxParam>, String> {
    let toks = tokens(ptx);
    let starts: Vec<usize> = toks
        .windows(2)
        .enumerate()
        .filter(|(_, w)| w[0] == ".entry" && w[1] == name)
        .map(|(i, _)| i + 2)
        .collect();
    let start = match starts.as_slice() {
        [one] => *one,
        [] => {
            let found = ptx_entries(ptx);
            return Err(if found.is_empty() {
                format!("the PTX defines no kernel (`.entry`), so no `{name}`")
            } else {
                let list: Vec<String> = found.iter().take(16).map(|n| clip(n)).collect();
                format!(
                    "the PTX has no kernel `{name}`; its kernels (`.entry`) are {}",
                    list.join(", ")
                )
            });
        }
        _ => return Err(format!("the PTX defines kernel `{name}` more than once")),
    };
    // `.entry name { ... }` (no parameter list) or `.entry name ( ... )`.
    if toks.get(start) != Some(&"(") {
        return Ok(Vec::new());
    }
    let Some(len) = toks[start + 1..].iter().position(|t| *t == ")") else {
        return Err(format!(
            "the parameter list of `{name}` in the PTX does not end"
        ));
    };
    let list = &toks[start + 1..start + 1 + len];
    if list.is_empty() {
        return Ok(Vec::new());
    }
    let mut params = Vec::new();
    for (index, part) in list.split(|t| *t == ",").enumerate() {
        if index >= MAX_PARAMS {
            return Err(format!(
                "`{name}` has more than {MAX_PARAMS} parameters in the PTX; a served kernel \
                 may have at most {MAX_PARAMS}"
            ));
        }
        params.push(
            ptx_param(part)
                .map_err(|why| format!("parameter {index} of `{name}` in the PTX: {why}"))?,
        );
    }
    Ok(params)
}

/// One `.param [attributes] .type name[N]?` of an entry's list.
fn ptx_param(part: &[&str]) -> Result<PtxParam, String> {
    let text = || clip(&part.join(" "));
    if part.first() != Some(&".param") {
        return Err(format!("`{}` is not a `.param`", text()));
    }
    let mut ty = None;
    let mut i = 1;
    while i < part.len() && part[i].starts_with('.') {
        let tok = part[i];
        if tok == ".align" {
            // `.align N`: where it lies, not what it is.
            i += 2;
            continue;
        }
        if !is_param_attribute(tok) {
            if ty.is_some() {
                return Err(format!("`{}` has two types", text()));
            }
            ty = Some(tok);
        }
        i += 1;
    }
    let ty = ty.ok_or_else(|| format!("`{}` has no type", text()))?;
    let elem = type_bytes(ty).ok_or_else(|| {
        format!(
            "`{ty}` is not a type a served kernel's parameter may have (`{}`)",
            text()
        )
    })?;
    let name = match part.get(i) {
        Some(n) if !n.starts_with('.') && n.chars().all(|c| c != '.') => n.to_string(),
        _ => return Err(format!("`{}` has no name", text())),
    };
    let (bytes, array) = match &part[i + 1..] {
        [] => (elem, false),
        ["[", n, "]"] => match n.parse::<u64>() {
            Ok(n) if n > 0 => (elem.saturating_mul(n), true),
            _ => return Err(format!("`{}`: an array of {n:?} elements", text())),
        },
        ["[", "]"] => return Err(format!("`{}`: an array of no stated length", text())),
        _ => return Err(format!("`{}` is not a parameter this daemon reads", text())),
    };
    Ok(PtxParam {
        name,
        ty: ty.to_string(),
        bytes,
        array,
    })
}

/// The signature of the kernel `entry` declares (`name(kind, ...)`),
/// checked against its `.entry` in `ptx`: parameter names from the PTX,
/// kinds from the declaration.
pub fn ptx_signature(ptx: &str, entry: &str) -> Result<KernelSignature, String> {
    let decl = parse_declaration(entry)?;
    let name = &decl.name;
    if ptx.contains('\0') {
        return Err("the PTX holds a NUL byte; a PTX module is text".into());
    }
    let params = parse_ptx_entry(ptx, name)?;
    if params.len() != decl.params.len() {
        let names: Vec<&str> = params.iter().map(|p| p.name.as_str()).collect();
        return Err(format!(
            "`{name}` is declared with {} parameters, but its PTX entry has {} ({})",
            decl.params.len(),
            params.len(),
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        ));
    }
    let mut specs = Vec::with_capacity(params.len());
    for (index, (kind, param)) in decl.params.iter().zip(params).enumerate() {
        if param.array || !kind.fits(&param.ty) {
            return Err(format!(
                "parameter {index} `{}` of `{name}`: declared `{}` ({} bytes), but the PTX \
                 has `{}{}` ({} bytes); `{}` takes {}",
                param.name,
                kind.name(),
                kind.bytes(),
                param.ty,
                if param.array { "[..]" } else { "" },
                param.bytes,
                kind.name(),
                if kind.bytes() == 8 {
                    "`.u64`, `.b64` or `.s64`"
                } else {
                    "`.u32`, `.s32`, `.b32` or `.f32`"
                }
            ));
        }
        specs.push(ParamSpec {
            name: param.name,
            ty: kind.name().to_string(),
            kind: kind.param_kind(),
        });
    }
    Ok(KernelSignature {
        entry: name.clone(),
        params: specs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What `nvcc -ptx` writes for
    /// `extern "C" __global__ void scale(const float *src, float *dst, float factor)`.
    const SCALE_PTX: &str = r#"
//
// Generated by NVIDIA NVVM Compiler
//
.version 8.4
.target sm_52
.address_size 64

	// .globl	scale

.visible .entry scale(
	.param .u64 scale_param_0,
	.param .u64 .ptr .global .align 4 scale_param_1, /* dst */
	.param .f32 scale_param_2
)
{
	.reg .f32 	%f<4>;
	ret;
}

.visible .entry noargs()
{
	ret;
}

.entry bare
{
	ret;
}

.visible .entry byvalue(
	.param .align 8 .b8 byvalue_param_0[16],
	.param .f64 byvalue_param_1
)
{
	ret;
}
"#;

    #[test]
    fn a_declaration_parses_its_kinds() {
        let d = parse_declaration(" scale ( const  ptr, ptr,f32 ,u32, i32, u64 ) ").unwrap();
        assert_eq!(d.name, "scale");
        assert_eq!(
            d.params,
            [
                DeclKind::ConstPtr,
                DeclKind::Ptr,
                DeclKind::F32,
                DeclKind::U32,
                DeclKind::I32,
                DeclKind::U64
            ]
        );
        assert_eq!(parse_declaration("f()").unwrap().params, []);
        assert_eq!(parse_declaration("f( )").unwrap().params, []);
    }

    #[test]
    fn bad_declarations_say_what_is_wrong() {
        let err = |s: &str| parse_declaration(s).unwrap_err();
        assert!(err("scale").contains("needs the kernel's signature"));
        assert!(err("9x(ptr)").contains("not a kernel name"));
        assert!(err("(ptr)").contains("not a kernel name"));
        assert!(err("f(ptr").contains("does not end"));
        assert!(err("f(ptr))").contains("parenthesis"));
        let e = err("scale(ptr, float)");
        assert!(e.contains("parameter 1") && e.contains("`float`"), "{e}");
        let e = err("scale(ptr,,f32)");
        assert!(e.contains("parameter 1") && e.contains("empty"), "{e}");
        let e = err("reduce(ptr, local)");
        assert!(e.contains("shared memory"), "{e}");
        assert!(err("f(const)").contains("not a kind"));
        assert!(err("f(ptr const)").contains("not a kind"));
        let many = format!("f({})", vec!["u32"; MAX_PARAMS + 1].join(","));
        assert!(err(&many).contains(&format!("at most {MAX_PARAMS}")));
        let long = format!("{}(u32)", "a".repeat(MAX_ENTRY_BYTES + 1));
        assert!(err(&long).contains("not a kernel name"));
        let huge = format!("f({})", " ".repeat(MAX_DECLARATION_BYTES));
        assert!(err(&huge).contains("at most"));
    }

    #[test]
    fn ptx_entries_and_their_parameters_are_read() {
        assert_eq!(
            ptx_entries(SCALE_PTX),
            ["scale", "noargs", "bare", "byvalue"]
        );
        let p = parse_ptx_entry(SCALE_PTX, "scale").unwrap();
        let names: Vec<_> = p.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["scale_param_0", "scale_param_1", "scale_param_2"]);
        assert_eq!(p[1].ty, ".u64");
        assert_eq!(p[2].bytes, 4);
        assert_eq!(parse_ptx_entry(SCALE_PTX, "noargs").unwrap(), []);
        assert_eq!(parse_ptx_entry(SCALE_PTX, "bare").unwrap(), []);
        let b = parse_ptx_entry(SCALE_PTX, "byvalue").unwrap();
        assert!(b[0].array && b[0].bytes == 16);
        assert_eq!(b[1].ty, ".f64");
    }

    #[test]
    fn a_missing_or_unreadable_entry_is_refused() {
        let e = parse_ptx_entry(SCALE_PTX, "scal").unwrap_err();
        assert!(
            e.contains("no kernel `scal`") && e.contains("scale, noargs"),
            "{e}"
        );
        let e = parse_ptx_entry(".version 8.4\n", "f").unwrap_err();
        assert!(e.contains("defines no kernel"), "{e}");
        // In a comment it is not there.
        let e = parse_ptx_entry("// .entry f(.param .u32 a)\n", "f").unwrap_err();
        assert!(e.contains("defines no kernel"), "{e}");
        let twice = ".entry f() {} .entry f() {}";
        assert!(
            parse_ptx_entry(twice, "f")
                .unwrap_err()
                .contains("more than once")
        );
        let e = parse_ptx_entry(".entry f(.param .u32 a", "f").unwrap_err();
        assert!(e.contains("does not end"), "{e}");
        let e = parse_ptx_entry(".entry f(.param .u32 a, .param .texref t)", "f").unwrap_err();
        assert!(e.contains("parameter 1") && e.contains(".texref"), "{e}");
        let e = parse_ptx_entry(".entry f(.reg .u32 a)", "f").unwrap_err();
        assert!(
            e.contains("parameter 0") && e.contains("not a `.param`"),
            "{e}"
        );
        let e = parse_ptx_entry(".entry f(.param .u32)", "f").unwrap_err();
        assert!(e.contains("no name"), "{e}");
        let e = parse_ptx_entry(".entry f(.param .u32 .f32 a)", "f").unwrap_err();
        assert!(e.contains("two types"), "{e}");
        let e = parse_ptx_entry(".entry f(.param .b8 a[])", "f").unwrap_err();
        assert!(e.contains("array"), "{e}");
    }

    #[test]
    fn a_signature_takes_names_from_the_ptx_and_kinds_from_the_declaration() {
        let s = ptx_signature(SCALE_PTX, "scale(const ptr, ptr, f32)").unwrap();
        assert_eq!(s.entry, "scale");
        assert_eq!(
            s.params,
            [
                ParamSpec {
                    name: "scale_param_0".into(),
                    ty: "const ptr".into(),
                    kind: ParamKind::Buffer { read_only: true }
                },
                ParamSpec {
                    name: "scale_param_1".into(),
                    ty: "ptr".into(),
                    kind: ParamKind::Buffer { read_only: false }
                },
                ParamSpec {
                    name: "scale_param_2".into(),
                    ty: "f32".into(),
                    kind: ParamKind::F32
                },
            ]
        );
        assert_eq!(s.block_bytes(), 7 * 8);
        // A 4-byte parameter may be declared as any 4-byte kind, an
        // 8-byte one as any 8-byte kind.
        assert!(ptx_signature(SCALE_PTX, "scale(u64, u64, u32)").is_ok());
        assert!(
            ptx_signature(SCALE_PTX, "noargs()")
                .unwrap()
                .params
                .is_empty()
        );
        assert!(
            ptx_signature(SCALE_PTX, "bare()")
                .unwrap()
                .params
                .is_empty()
        );
    }

    #[test]
    fn every_mismatch_names_its_parameter() {
        let err = |d: &str| ptx_signature(SCALE_PTX, d).unwrap_err();
        let e = err("scale(ptr, ptr)");
        assert!(
            e.contains("2 parameters") && e.contains("has 3") && e.contains("scale_param_2"),
            "{e}"
        );
        let e = err("scale(ptr, ptr, f32, u32)");
        assert!(e.contains("4 parameters"), "{e}");
        let e = err("scale(ptr, u32, f32)");
        assert!(
            e.contains("parameter 1 `scale_param_1`") && e.contains("`u32` (4 bytes)"),
            "{e}"
        );
        let e = err("scale(ptr, ptr, ptr)");
        assert!(
            e.contains("parameter 2 `scale_param_2`") && e.contains(".f32"),
            "{e}"
        );
        // Same size, but not an integer: an f64 is not a u64 or a pointer.
        let e = err("byvalue(u64, u64)");
        assert!(e.contains("parameter 0") && e.contains("[..]"), "{e}");
        let e = ptx_signature(".entry g(.param .f64 x)", "g(u64)").unwrap_err();
        assert!(e.contains("parameter 0 `x`") && e.contains(".f64"), "{e}");
        let e = err("nothere(ptr)");
        assert!(e.contains("no kernel `nothere`"), "{e}");
        assert!(err("scale").contains("signature"));
        assert!(
            ptx_signature(".entry f()\0", "f()")
                .unwrap_err()
                .contains("NUL")
        );
    }

    #[test]
    fn identifiers_and_declarations_are_told_apart() {
        assert!(is_identifier("_Z5scalePKfPff") && is_identifier("a1"));
        assert!(!is_identifier("") && !is_identifier("1a") && !is_identifier("a-b"));
        assert!(is_declaration("f(ptr)") && !is_declaration("f"));
    }

    fn kind() -> impl Strategy<Value = DeclKind> {
        proptest::sample::select(DeclKind::ALL.to_vec())
    }

    proptest! {
        /// Any declaration written out with any spacing parses back to
        /// itself, and against PTX with parameters of the right sizes it
        /// gives a signature of its kinds, with the PTX's names.
        #[test]
        fn written_declarations_round_trip(
            kinds in proptest::collection::vec(kind(), 0..12),
            pad in proptest::collection::vec("[ \t\n]{0,2}", 0..4),
        ) {
            let sp = |i: usize| pad.get(i % pad.len().max(1)).cloned().unwrap_or_default();
            let list: Vec<String> = kinds
                .iter()
                .enumerate()
                .map(|(i, k)| format!("{}{}{}", sp(i), k.name().replace(' ', &format!(" {}", sp(i + 1))), sp(i + 2)))
                .collect();
            let text = format!("{}kern{}({})", sp(0), sp(1), list.join(","));
            let d = parse_declaration(&text).unwrap();
            prop_assert_eq!(&d.params, &kinds);
            let params: Vec<String> = kinds
                .iter()
                .enumerate()
                .map(|(i, k)| format!(".param .{} p{i}", if k.bytes() == 8 { "u64" } else { "f32" }))
                .collect();
            let ptx = format!(".version 8.0\n.visible .entry kern(\n{}\n)\n{{ ret; }}\n", params.join(",\n"));
            let s = ptx_signature(&ptx, &text).unwrap();
            prop_assert_eq!(s.params.len(), kinds.len());
            for (i, (p, k)) in s.params.iter().zip(&kinds).enumerate() {
                prop_assert_eq!(&p.name, &format!("p{i}"));
                prop_assert_eq!(p.kind, k.param_kind());
            }
        }

        /// Whatever the text, parsing neither panics nor gives more than
        /// the allowed parameters.
        #[test]
        fn any_text_is_refused_or_bounded(
            ptx in "(\\.entry|\\.param|\\.u64|\\.f32|\\.align|[(),\\[\\]{}]|[a-z0-9_]{1,4}|//|/\\*|\\*/|\n| ){0,40}",
            entry in "[a-z_(), ]{0,30}",
        ) {
            if let Ok(s) = ptx_signature(&ptx, &entry) {
                prop_assert!(s.params.len() <= MAX_PARAMS);
                prop_assert!(is_identifier(&s.entry));
            }
            for name in ptx_entries(&ptx) {
                if let Ok(p) = parse_ptx_entry(&ptx, &name) {
                    prop_assert!(p.len() <= MAX_PARAMS);
                }
            }
        }
    }
}
