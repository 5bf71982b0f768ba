//! Strings other programs chose, as the command line shows them.
//!
//! A client names itself in `Hello`, and that name reaches every
//! `hetsched status` (and the Prometheus text) of every user. A name with
//! an escape sequence could move the cursor or clear the screen; one with
//! a newline could add a line to the table or a metric to the exposition.
//! So every such string is shown escaped: control characters and
//! invisible formatting characters as `\u{1b}`-style escapes (`\n`, `\t`,
//! `\r` by their usual names) and a backslash as `\\`, so an escape can
//! always be told from the same characters typed literally. Ordinary names
//! are shown unchanged. JSON output needs none of this: serde escapes.

use hetsched_protocol::{DomainInfo, StatusReport};
use std::borrow::Cow;
use std::fmt::Write as _;

/// Characters shown as an escape: C0 and C1 controls and DEL (which
/// include ESC and the one-byte CSI), line and paragraph separators, and
/// the invisible formatting characters that hide or reorder text
/// (zero-width spaces and joiners, bidirectional overrides and isolates,
/// soft hyphen, byte-order mark, interlinear annotation, tags).
fn escaped(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00ad}'
                | '\u{034f}'
                | '\u{061c}'
                | '\u{115f}'
                | '\u{1160}'
                | '\u{17b4}'
                | '\u{17b5}'
                | '\u{180e}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{206f}'
                | '\u{3164}'
                | '\u{feff}'
                | '\u{ffa0}'
                | '\u{fff9}'..='\u{fffb}'
                | '\u{e0000}'..='\u{e007f}'
        )
}

/// `s` as a terminal may show it: unchanged unless it holds a backslash
/// or a character [`escaped`] names.
pub fn text(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c == '\\' || escaped(c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if escaped(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn own(s: &mut String) {
    if let Cow::Owned(t) = text(s) {
        *s = t;
    }
}

/// A Prometheus label value from a string already passed through
/// [`text`]: the exposition format's own escapes for `\` and `"` (the
/// newline it also escapes cannot be left by then).
pub fn label(shown: &str) -> String {
    shown.replace('\\', "\\\\").replace('"', "\\\"")
}

/// The report with every string in it shown escaped ([`text`]): client
/// names, unit names, kinds, kernels and throttles, the daemon's version
/// and socket. Escape once, where a command gets the report, and print
/// the copy.
pub fn report(r: &StatusReport) -> StatusReport {
    let mut r = r.clone();
    own(&mut r.daemon.version);
    own(&mut r.daemon.socket);
    for u in &mut r.units {
        own(&mut u.info.name);
        own(&mut u.info.kind);
        u.info.kernels.iter_mut().for_each(own);
        if let Some(t) = &mut u.info.throttle {
            own(t);
        }
    }
    for c in &mut r.clients {
        own(&mut c.name);
    }
    r
}

/// The domains with their names, cgroups and unit names shown escaped.
pub fn domains(domains: &[DomainInfo]) -> Vec<DomainInfo> {
    let mut out = domains.to_vec();
    for d in &mut out {
        own(&mut d.name);
        own(&mut d.cgroup);
        for (unit, _) in &mut d.unit_credits {
            own(unit);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_names_are_shown_unchanged() {
        for s in [
            "hetsched-load",
            "web app",
            "größe",
            "名前",
            "it's \"x\"",
            "",
        ] {
            assert!(matches!(text(s), Cow::Borrowed(_)), "{s}");
        }
    }

    #[test]
    fn controls_and_invisible_characters_are_escaped() {
        assert_eq!(text("\x1b[2J"), "\\u{1b}[2J");
        assert_eq!(text("a\nb"), "a\\nb");
        assert_eq!(text("a\r\tb"), "a\\r\\tb");
        assert_eq!(text("\u{9b}31m"), "\\u{9b}31m");
        assert_eq!(text("x\u{7f}"), "x\\u{7f}");
        assert_eq!(text("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(text("a\u{200b}b"), "a\\u{200b}b");
        assert_eq!(text("a\u{2028}b"), "a\\u{2028}b");
        // A backslash is doubled, so a typed `\u{1b}` is not an ESC.
        assert_eq!(text("\\u{1b}"), "\\\\u{1b}");
        for s in ["\x1b[2J", "a\nb", "\u{85}", "\u{2029}"] {
            let shown = text(s);
            assert!(!shown.chars().any(escaped), "{shown}");
        }
    }

    #[test]
    fn labels_keep_to_one_line_and_their_quotes() {
        let shown = text("a\"b\nc\\");
        let l = label(&shown);
        assert_eq!(l, "a\\\"b\\\\nc\\\\\\\\");
        assert!(!l.contains('\n'));
    }
}
