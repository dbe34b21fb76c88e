//! The one sanitiser for text that came from a server or a workflow (error messages, node types,
//! device names, versions, pack names, console lines) before it is shown on a terminal or
//! written into Markdown.
//!
//! A terminal acts on control characters: ESC starts sequences that set the window title
//! (OSC 0), write the clipboard (OSC 52) or move the cursor, BEL rings, a lone CR lets a line
//! overwrite itself, C1 characters act as ESC sequences on some terminals, and bidirectional
//! overrides and isolates (U+202A–202E, U+2066–2069, U+200E/200F, U+061C) reorder what is
//! shown (the "Trojan Source" trick). [`escape_controls`] replaces each of them by its
//! JSON-style escape (`\u001b`, `\u202e`): visible, never emitted. Newlines and tabs stay (a
//! multi-line block stays one), and so does a CR that ends a line (`\r\n`).
//!
//! The escape is JSON's own, so applying it to a whole JSON document keeps it valid and its
//! strings unchanged when parsed (a raw control or bidi character can only sit inside a JSON
//! string, where `\uXXXX` means that character): the command line runs everything it prints
//! through this one function, `--json` output included.

use std::borrow::Cow;

/// Whether `c` must not reach a terminal or a Markdown file as it is: the C0 controls except
/// newline and tab, DEL, the C1 controls, and the bidirectional formatting characters.
pub fn is_unsafe(c: char) -> bool {
    matches!(
        c,
        '\0'..='\x08'
            | '\x0b'..='\x1f'
            | '\x7f'..='\u{9f}'
            | '\u{061c}'
            | '\u{200e}'
            | '\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
    )
}

/// `text` with every [unsafe](is_unsafe) character replaced by its escape `\uXXXX` (four
/// lower-case hex digits), except a CR directly before a newline. Borrows when there is nothing
/// to replace.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    escape_where(text, is_unsafe)
}

/// Like [`escape_controls`], for the log lines of `tracing`'s formatter, which escapes ESC,
/// BEL and the C1 controls in logged values itself and colours its own output with ESC
/// sequences: those ESCs pass, every other unsafe character (NUL, a lone CR, the bidi
/// overrides) is escaped.
pub fn escape_log_line(text: &str) -> Cow<'_, str> {
    escape_where(text, |c| c != '\x1b' && is_unsafe(c))
}

fn escape_where(text: &str, unsafe_char: impl Fn(char) -> bool) -> Cow<'_, str> {
    let needs = |(i, c): (usize, char)| {
        unsafe_char(c) && !(c == '\r' && text.as_bytes().get(i + 1) == Some(&b'\n'))
    };
    let Some(first) = text.char_indices().find(|&ic| needs(ic)).map(|(i, _)| i) else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len() + 16);
    out.push_str(&text[..first]);
    for (i, c) in text[first..].char_indices() {
        if needs((first + i, c)) {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `s` with its first character upper-cased (for a sentence built from a lower-case part).
pub(crate) fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_sequences_become_visible_escapes() {
        // OSC 0 (window title) ended by BEL, OSC 52 (clipboard write) ended by ST, a CSI.
        assert_eq!(
            escape_controls("a\x1b]0;pwned\x07b"),
            "a\\u001b]0;pwned\\u0007b"
        );
        assert_eq!(
            escape_controls("\x1b]52;c;cm0gLXJmIH4=\x1b\\"),
            "\\u001b]52;c;cm0gLXJmIH4=\\u001b\\"
        );
        assert_eq!(escape_controls("\x1b[2J"), "\\u001b[2J");
        assert_eq!(escape_controls("nul\0del\x7f"), "nul\\u0000del\\u007f");
        // C1: CSI (U+009B) and the 8-bit OSC (U+009D).
        assert_eq!(escape_controls("\u{9b}31m\u{9d}"), "\\u009b31m\\u009d");
    }

    #[test]
    fn bidi_overrides_and_isolates_become_visible_escapes() {
        for (c, escaped) in [
            ('\u{202a}', "\\u202a"),
            ('\u{202e}', "\\u202e"),
            ('\u{2066}', "\\u2066"),
            ('\u{2069}', "\\u2069"),
            ('\u{200e}', "\\u200e"),
            ('\u{200f}', "\\u200f"),
            ('\u{061c}', "\\u061c"),
        ] {
            assert_eq!(escape_controls(&format!("x{c}y")), format!("x{escaped}y"));
        }
    }

    #[test]
    fn newlines_tabs_and_ordinary_unicode_stay() {
        let text = "line 1\n\tline 2\r\nRTX 4090 · 24 GiB — ünïcödé 東京 😀";
        assert!(matches!(escape_controls(text), Cow::Borrowed(_)));
        // A lone CR (overwrites the line on a terminal) is escaped; one before \n is not.
        assert_eq!(escape_controls("ok\rfake\r\n"), "ok\\u000dfake\r\n");
        assert_eq!(escape_controls("end\r"), "end\\u000d");
    }

    #[test]
    fn log_lines_keep_the_formatters_colours_only() {
        assert_eq!(
            escape_log_line("\x1b[2mDEBUG\x1b[0m node \\x1b]0;t\0\u{202e}"),
            "\x1b[2mDEBUG\x1b[0m node \\x1b]0;t\\u0000\\u202e"
        );
    }

    #[test]
    fn json_stays_valid_and_its_strings_unchanged() {
        let original = "t\u{202e}xt \u{1b}]0;x\u{7} \u{85} \u{9b}";
        let doc = serde_json::to_string_pretty(&serde_json::json!({"m": original})).unwrap();
        let safe = escape_controls(&doc);
        assert!(!safe.chars().any(is_unsafe), "{safe}");
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back["m"], original);
    }
}
