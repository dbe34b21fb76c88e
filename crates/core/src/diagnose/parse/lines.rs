//! The lines of a pasted log as the console parser reads them: what a paste or a stored copy
//! adds (terminal colour codes, HTML entities, Markdown quotes, a prefix on every line,
//! timestamps, logger names and levels) removed, one-line pastes of a whole traceback split back
//! into lines, code fences dropped. No reading of what the lines say.

use regex::Regex;
use std::borrow::Cow;
use std::sync::LazyLock;

/// A terminal's colour and cursor codes (CSI: `ESC[31m`, `ESC[0m`, `ESC[1;33m`, `ESC[2K`), and
/// colour codes whose escape character a copy lost (`[31m`, `[0m`). Other escapes (a window
/// title's OSC) stay, for the output to show them escaped.
static ANSI_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\x1b\[[0-9;?]*[A-Za-z]|\[\d{1,3}(?:;\d{1,3})*m").expect("static regex")
});

/// The HTML entities a stored web copy shows for what the console printed.
const ENTITIES: &[(&str, &str)] = &[
    ("&lt;", "<"),
    ("&gt;", ">"),
    ("&quot;", "\""),
    ("&#39;", "'"),
    ("&#x27;", "'"),
    ("&#34;", "\""),
    ("&nbsp;", " "),
    // last, so `&amp;lt;` becomes `&lt;`, not `<`
    ("&amp;", "&"),
];

/// Spaces a web copy writes as no-break or other Unicode spaces, and zero-width characters.
fn is_odd_space(c: char) -> bool {
    matches!(
        c,
        '\u{a0}' | '\u{2000}'..='\u{200b}' | '\u{202f}' | '\u{205f}' | '\u{3000}' | '\u{feff}'
    )
}

/// The text with terminal colour codes removed, HTML entities decoded (once), and no-break and
/// other Unicode spaces as plain spaces (zero-width ones dropped).
pub(super) fn unescape(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    if text.chars().any(is_odd_space) {
        out = Cow::Owned(
            text.chars()
                .filter_map(|c| match c {
                    '\u{200b}' | '\u{feff}' => None,
                    c if is_odd_space(c) => Some(' '),
                    c => Some(c),
                })
                .collect(),
        );
    }
    if ANSI_RE.is_match(&out) {
        out = Cow::Owned(ANSI_RE.replace_all(&out, "").into_owned());
    }
    if out.contains('&') && ENTITIES.iter().any(|(e, _)| out.contains(e)) {
        let mut s = out.into_owned();
        for (entity, ch) in ENTITIES {
            s = s.replace(entity, ch);
        }
        out = Cow::Owned(s);
    }
    out
}

/// A prefix a launcher or container puts before every line: a bracketed tag (`[ComfyUI] `) or
/// docker compose's service column (`comfyui  | `).
static LINE_PREFIX_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:\[[^\]\s\d][^\]]{0,40}\]\s?|[A-Za-z][\w.\-]{0,40}\s*\|\s)")
        .expect("static regex")
});

/// The line ComfyUI's weight adapters log when a patch fails (`comfy/weight_adapter/*.py`:
/// `ERROR {name} {key} {e}`), whose first word is not a logger's level.
static ADAPTER_ERROR_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^ERROR (?:lora|loha|lokr|glora|oft|boft) ").expect("static regex")
});

/// SwarmUI's tag on each line of the ComfyUI backend it runs (`[ComfyUI-0/STDERR] …`), removed
/// wherever it stands (on a single quoted line too, not only when every line has it).
static BACKEND_TAG_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\[ComfyUI-\d+/(?:STDERR|STDOUT)\]\s?").expect("static regex"));

/// The prefix every non-empty line starts with, when the first one has a prefix of that form.
fn common_prefix<'a>(lines: &[&'a str]) -> Option<&'a str> {
    let mut shown = lines.iter().filter(|l| !l.trim().is_empty());
    let first = shown.next()?;
    if RANK_PREFIX_RE.is_match(first) {
        // A worker's rank, taken off each line on its own (strip_paste_prefix).
        return None;
    }
    let prefix = LINE_PREFIX_RE.find(first)?.as_str().trim_end();
    shown.all(|l| l.starts_with(prefix)).then_some(prefix)
}

/// One pass over what a paste puts before the console's own text: quotes, a worker's rank, a
/// journal's prefix, a logger's time columns, a timestamp and the level word after it (not the
/// `ERROR` ComfyUI's weight adapters print as their own first word: `ERROR lora <key> <error>`),
/// a short time.
fn strip_paste_prefix(s: &str) -> &str {
    let s = QUOTE_RE.find(s).map_or(s, |m| &s[m.end()..]);
    let s = RANK_PREFIX_RE.find(s).map_or(s, |m| &s[m.end()..]);
    let s = journal_prefix_end(s).map_or(s, |end| &s[end..]);
    let s = TIME_COLUMNS_RE.find(s).map_or(s, |m| &s[m.end()..]);
    let s = match TIMESTAMP_RE.find(s) {
        Some(m) if ADAPTER_ERROR_RE.is_match(&s[m.end()..]) => &s[m.end()..],
        Some(m) => {
            let rest = &s[m.end()..];
            BARE_LEVEL_RE.find(rest).map_or(rest, |m| &rest[m.end()..])
        }
        None => s,
    };
    SHORT_TIME_RE.find(s).map_or(s, |m| &s[m.end()..])
}

/// A line without what a paste puts before the console's own text ([`strip_paste_prefix`]
/// until nothing more goes): the level word a logger writes into the line
/// (`ERROR:aimdo_setup_hooks:`) is kept.
fn without_paste_prefix(raw: &str) -> &str {
    let mut s = raw;
    for _ in 0..3 {
        let before = s.len();
        s = strip_paste_prefix(s);
        if s.len() == before {
            break;
        }
    }
    s
}

/// torch.distributed's prefix on each line a worker process prints (`[rank1]: Traceback …`).
static RANK_PREFIX_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\[rank\d+\]:\s?").expect("static regex"));
static QUOTE_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*(?:>\s?)+").expect("static regex"));
static TIMESTAMP_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?\s*(?:-\s+)?").expect("static regex")
});
/// systemd's journal (`journalctl`) or syslog before each line: `Nov 24 10:19:34 host
/// python3[20275]: `.
static JOURNAL_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \S+ (?P<prog>[\w.\-@]+)(?:\[\d+\])?: ")
        .expect("static regex")
});

/// The end of a journal prefix before a program's own line, kept when the program is the
/// system's (the kernel, systemd's units, earlyoom): their name is part of what the line says.
fn journal_prefix_end(line: &str) -> Option<usize> {
    let c = JOURNAL_RE.captures(line)?;
    let prog = c["prog"].to_lowercase();
    let system = prog == "kernel" || prog.starts_with("systemd") || prog.starts_with("earlyoom");
    (!system).then(|| c.get(0).map_or(0, |m| m.end()))
}
/// A logger's own time and level columns (`10:19:34 | INFO     | - | `, loguru's layout as
/// ComfyUI forks and launchers configure it).
static TIME_COLUMNS_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\s*\|\s*(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s*\|(?:\s*[^|]{0,40}\|)?\s?")
        .expect("static regex")
});
/// A short time before the line: `[10:19:34]`, or SwarmUI's `10:19:34.590 [Warning] ` with its
/// level after it.
static SHORT_TIME_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^\s*(?:\[\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\]|\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\s+\[(?:info|init|warning|error|debug|verbose)\])\s*").expect("static regex")
});
static LOGGER_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:[A-Za-z_][\w.]*\s+-\s+)?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+-\s+")
        .expect("static regex")
});
/// A level word right after a timestamp (`2026-05-12 23:34:51,752 INFO …`, loguru's `… | INFO
/// | …`).
static BARE_LEVEL_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:\|\s*)?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)(?:\s*\|\s*|\s+-\s+|:?\s+)")
        .expect("static regex")
});
static LEVEL_TAG_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^\[(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\]\s*").expect("static regex")
});
static COLON_LOGGER_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL):[\w.]*:\s?").expect("static regex")
});
static SPLIT_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?i)(?:\s+file\s+"[^"]+",\s*line\s+\d+|!!!\s*exception during processing|traceback \(most recent call last\))"#).expect("static regex")
});
/// A tqdm progress bar (`…%|…| k/n […]`) with more text glued after its closing bracket: tqdm
/// ends its line with `\r`, so the next console line lands on the same line of a paste.
static GLUED_BAR_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?P<bar>.*?\d{1,3}%\s*\|[^|]*\|\s*\d+/\d+\s*\[[^\]]*\])(?P<rest>\S.*)$")
        .expect("static regex")
});

/// comfy-aimdo's C logger's location (`aimdo: src/vrambuf.c:42:`) ending a line, and a level
/// word (`ERROR:`) starting the next: one record broken in two by the console or the paste
/// (comfy-aimdo#74: `aimdo: /project/src-posix/cuda-funchooks.c:37:` / `ERROR:aimdo_setup_hooks:`).
static AIMDO_PLACE_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"aimdo:\s*\S+:\d+:\s*$").expect("static regex"));
static AIMDO_LEVEL_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):").expect("static regex")
});

/// The raw lines, a prefix on every line (`[ComfyUI] `, `comfyui  | `) removed and an aimdo
/// record broken after its location joined back into one line (also when each half carries a
/// paste's prefix).
fn join_broken_aimdo(text: &str) -> Vec<String> {
    let raw_lines: Vec<&str> = text.lines().collect();
    let prefix = common_prefix(&raw_lines);
    let mut out: Vec<String> = Vec::new();
    for raw in raw_lines {
        let raw = match prefix.and_then(|p| raw.strip_prefix(p)) {
            Some(rest) => rest.strip_prefix(' ').unwrap_or(rest),
            None => raw,
        };
        if let Some(prev) = out.last_mut() {
            let core = without_paste_prefix(raw);
            if AIMDO_PLACE_RE.is_match(prev) && AIMDO_LEVEL_RE.is_match(core) {
                prev.truncate(prev.trim_end().len());
                prev.push_str(core.trim_start());
                continue;
            }
        }
        out.push(raw.to_string());
    }
    out
}

/// The text inside one pair of Markdown inline-code backticks, when the whole paste is one
/// such span (`` `CUDA out of memory. …` ``); a code fence is not one.
fn without_inline_code(text: &str) -> &str {
    let t = text.trim();
    match t.strip_prefix('`').and_then(|r| r.strip_suffix('`')) {
        Some(inner) if !t.starts_with("``") && !inner.contains('`') => inner,
        _ => text,
    }
}

/// A traceback frame whose quoted path a hard wrap cut (`File "C:\…\comfy_` / `aimdo\x.py",
/// line 5, in f`): the open quote has no close on its line.
static OPEN_FRAME_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"(?i)^\W*file\s+"[^"]*$"#).expect("static regex"));

/// Frames cut by a hard wrap joined back (at most three pieces onto one frame).
fn join_wrapped_frames(lines: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(lines.len());
    let mut joins = 0;
    for line in lines {
        if let Some(prev) = out.last_mut() {
            let open = OPEN_FRAME_RE.is_match(prev.trim_end());
            if open && joins < 3 && !line.trim().is_empty() {
                prev.truncate(prev.trim_end().len());
                prev.push_str(without_paste_prefix(&line).trim_start());
                joins += 1;
                continue;
            }
        }
        joins = 0;
        out.push(line);
    }
    out
}

/// A progress bar pasted without its glyphs, the count between two bars (`0% | 0/20 | Model
/// Initializing ...`, ComfyUI#16230): written back in tqdm's order (`0%|| 0/20 [Model …]`).
static BARE_BAR_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?P<pct>\d{1,3})%\s*\|\s*(?P<v>\d+)/(?P<m>\d+)\s*\|\s*(?P<rest>[^|\[\]]*)$")
        .expect("static regex")
});

fn bare_bar(line: String) -> String {
    match BARE_BAR_RE.captures(&line) {
        Some(c) => format!(
            "{}%|| {}/{} [{}]",
            &c["pct"],
            &c["v"],
            &c["m"],
            c["rest"].trim()
        ),
        None => line,
    }
}

/// Splits a progress bar from the console line glued after it (the line cleaned again).
fn split_glued_bar(line: String) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(c) = GLUED_BAR_RE.captures(&rest) {
        out.push(c["bar"].to_string());
        let next = clean_line(&c["rest"]);
        if next == rest {
            break;
        }
        rest = next;
    }
    out.push(rest);
    out
}

/// One cleaned line: prefixes (quotes, timestamps, log levels) removed.
pub(super) fn clean_line(raw: &str) -> String {
    let mut s = raw.trim_end().to_string();
    for _ in 0..3 {
        let before = s.clone();
        s = strip_paste_prefix(&s).to_string();
        // A logger's own name and level, which `without_paste_prefix` keeps.
        s = LOGGER_RE.replace(&s, "").into_owned();
        s = LEVEL_TAG_RE.replace(&s, "").into_owned();
        s = COLON_LOGGER_RE.replace(&s, "").into_owned();
        s = BACKEND_TAG_RE.replace(&s, "").into_owned();
        if s == before {
            break;
        }
    }
    let t = s.trim_start();
    // One line quoted as inline code (`` `AttributeError: …` ``, or with two backticks), not a
    // fence.
    let ticks = t.len() - t.trim_start_matches('`').len();
    let t = match (1..=2).contains(&ticks).then(|| {
        let fence = &t[..ticks];
        t[ticks..].strip_suffix(fence)
    }) {
        Some(Some(inner)) if !inner.trim().is_empty() && !inner.contains('`') => inner.trim(),
        _ => t,
    };
    // An inline-code span the paste opened on one line and closed on another: its lone
    // backtick at the line's start or end.
    let t = match t.matches('`').count() {
        1 if t.len() > 1 => t
            .strip_prefix('`')
            .or_else(|| t.strip_suffix('`'))
            .unwrap_or(t),
        _ => t,
    };
    let t = t
        .strip_prefix('\'')
        .filter(|rest| rest.matches('\'').count() % 2 == 0)
        .unwrap_or(t);
    if t.starts_with("File \"") || t.starts_with("file \"") {
        // keep frames left-aligned; code lines keep their indentation
        t.to_string()
    } else if s.starts_with("    ") || s.starts_with('\t') {
        s
    } else {
        t.to_string()
    }
}

/// Splits flattened one-line pastes before each `File "..."` and after the message.
pub(super) fn split_flattened(line: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut last = 0;
    // A tqdm bar inside a flattened paste: after other text that is not its description (tqdm
    // writes `desc: NN%|…`, so a bar after `desc:` stays with it).
    let bars = FLAT_BAR_RE
        .find_iter(line)
        .filter(|m| !line[..m.start()].trim_end().ends_with(':'));
    // The frontend's error report flattened onto one line: its headers, fields and fences.
    let report = line.trim_start().starts_with("# ") && line.contains(" ## ");
    let report_marks = FLAT_REPORT_RE
        .find_iter(line)
        .filter(|_| report)
        .map(|m| m.start() + 1);
    let mut cuts: Vec<usize> = SPLIT_RE
        .find_iter(line)
        .map(|m| m.start())
        .chain(bars.map(|m| m.start()))
        .chain(report_marks)
        .collect();
    cuts.sort_unstable();
    for start in cuts {
        if start > last {
            parts.push(line[last..start].trim().to_string());
            last = start;
        }
    }
    parts.push(line[last..].trim().to_string());
    // A fence of the flattened report is no line.
    let fence = |p: &str| report && p.chars().all(|c| c == '`');
    parts.retain(|p| !p.is_empty() && !fence(p));
    if parts.is_empty() {
        parts.push(String::new());
    }
    parts
}

/// The error report's markers inside a flattened line: a section header, a field, a fence.
static FLAT_REPORT_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\s(?:##\s|-\s\*\*|```)").expect("static regex"));

/// A tqdm bar's start (`NN%|`) after whitespace, inside a longer line.
static FLAT_BAR_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\s\d{1,3}%\s*\|").expect("static regex"));

/// The lines of a pasted text, cleaned (`clean_line`), with flattened one-line pastes split,
/// a progress bar split from the line glued after it, and Markdown code fences left out.
pub(super) fn normalise(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let text = unescape(text);
    for raw in join_wrapped_frames(join_broken_aimdo(without_inline_code(&text))) {
        let trimmed = raw.trim();
        if trimmed.starts_with("```") {
            continue;
        }
        for part in split_flattened(&clean_line(&raw)) {
            out.extend(split_glued_bar(bare_bar(part)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{clean_line, normalise, split_flattened, unescape};

    #[test]
    fn an_adapters_error_keeps_its_word_and_a_quoted_line_its_text() {
        assert_eq!(
            clean_line("[2026-05-12 23:34:51.752] ERROR lora diffusion_model.x.weight shape"),
            "ERROR lora diffusion_model.x.weight shape"
        );
        assert_eq!(
            clean_line("2026-05-12 23:34:51,752 ERROR something broke"),
            "something broke"
        );
        assert_eq!(
            clean_line("> `AttributeError: type object 'X' has no attribute 'y'`"),
            "AttributeError: type object 'X' has no attribute 'y'"
        );
        // An inline span opened on the message's line and closed lines later.
        assert_eq!(
            clean_line("`AssertionError: only support square feature maps"),
            "AssertionError: only support square feature maps"
        );
        assert_eq!(
            clean_line("ValueError: bad input`"),
            "ValueError: bad input"
        );
    }

    /// A bar inside a flattened paste is a line of its own; a bar after its description stays
    /// with it.
    #[test]
    fn a_bar_inside_a_flattened_paste_is_split_off() {
        assert_eq!(
            split_flattened("loaded completely; 16802.60 MB usable, 4300.48 MB loaded, full load: True 0%| | 0/9 [00:00<?, ?it/s] !!! Exception during processing !!! boom"),
            vec![
                "loaded completely; 16802.60 MB usable, 4300.48 MB loaded, full load: True",
                "0%| | 0/9 [00:00<?, ?it/s]",
                "!!! Exception during processing !!! boom",
            ]
        );
        let report = "# ComfyUI Error Report ## Error Details - **Node ID:** 142 - **Node Type:** ApplyX - **Exception Type:** RuntimeError - **Exception Message:** the adapter is missing.  ## Stack Trace ```   File \"E:\\ComfyUI\\execution.py\", line 498, in execute";
        assert_eq!(
            split_flattened(report),
            vec![
                "# ComfyUI Error Report",
                "## Error Details",
                "- **Node ID:** 142",
                "- **Node Type:** ApplyX",
                "- **Exception Type:** RuntimeError",
                "- **Exception Message:** the adapter is missing.",
                "## Stack Trace",
                "File \"E:\\ComfyUI\\execution.py\", line 498, in execute",
            ]
        );
        let shards = "Loading checkpoint shards:  50%|█████     | 1/2 [00:03<00:03,  3.10s/it]";
        assert_eq!(split_flattened(shards), vec![shards]);
    }

    #[test]
    fn swarmuis_backend_tag_is_removed_on_any_line() {
        assert_eq!(
            clean_line("> [ComfyUI-0/STDERR] RuntimeError: Found no NVIDIA driver"),
            "RuntimeError: Found no NVIDIA driver"
        );
        assert_eq!(
            clean_line("06:10:10.590 [Warning] [ComfyUI-0/STDERR] torch.OutOfMemoryError: CUDA"),
            "torch.OutOfMemoryError: CUDA"
        );
    }

    #[test]
    fn prefixes_are_removed() {
        assert_eq!(
            clean_line(
                "2024-09-11 11:23:11,827 - root - ERROR - !!! Exception during processing !!! x"
            ),
            "!!! Exception during processing !!! x"
        );
        assert_eq!(
            clean_line("> [ERROR] Traceback (most recent call last):"),
            "Traceback (most recent call last):"
        );
        assert_eq!(
            clean_line("2025-03-16T16:29:14.056438 - got prompt"),
            "got prompt"
        );
        // The desktop app's comfyui.log / main.log (ComfyUI issue #8128): lower-case levels.
        assert_eq!(
            clean_line("[2025-05-15 10:28:50.312] [info]  VAE load device: cuda:0, offload device: cpu, dtype: torch.bfloat16"),
            "VAE load device: cuda:0, offload device: cpu, dtype: torch.bfloat16"
        );
        assert_eq!(
            clean_line("[2025-05-15 10:28:55.140] [error] Python process exited with code 3221225477 and signal null"),
            "Python process exited with code 3221225477 and signal null"
        );
    }

    /// tqdm ends a bar with `\r`, so the next console line is glued to it (ComfyUI #12763).
    #[test]
    fn a_line_glued_to_a_progress_bar_is_split_off() {
        let lines = normalise("  5%|#####     | 1/20 [00:11<03:31, 11.13s/it,  Model Initialization complete!  ]aimdo: src/model-vbar.c:74:WARNING:VBAR 0000024A04168030: Page 519 pin_count=4\n 60%|######    | 12/20 [24:30<13:37, 102.17s/it][ERROR] aimdo: src/hostbuf.c:46:ERROR:hostbuf_grow: requested 55036112896 bytes beyond reserved host buffer 54886072320\n 40%|####      | 8/20 [00:05<00:07,  1.6it/s]\n");
        assert_eq!(
            lines,
            [
                "5%|#####     | 1/20 [00:11<03:31, 11.13s/it,  Model Initialization complete!  ]",
                "aimdo: src/model-vbar.c:74:WARNING:VBAR 0000024A04168030: Page 519 pin_count=4",
                "60%|######    | 12/20 [24:30<13:37, 102.17s/it]",
                "aimdo: src/hostbuf.c:46:ERROR:hostbuf_grow: requested 55036112896 bytes beyond reserved host buffer 54886072320",
                "40%|####      | 8/20 [00:05<00:07,  1.6it/s]",
            ]
        );
    }

    /// A bar pasted without glyphs keeps its count (ComfyUI#16230).
    #[test]
    fn a_bar_without_glyphs_is_read_as_a_bar() {
        let lines = normalise("0% | 0/20 | Model Initializing ...\n| a | b |\n");
        assert_eq!(lines[0], "0%|| 0/20 [Model Initializing ...]");
        assert_eq!(
            crate::comfy::console::classify(&lines[0]),
            Some(crate::comfy::console::ConsoleLine::Bar(
                crate::comfy::console::BarState {
                    desc: String::new(),
                    value: 0,
                    max: 20
                }
            ))
        );
        assert_eq!(lines[1], "| a | b |");
    }

    /// comfy-aimdo#74: the logger's location and its ERROR record on two lines.
    #[test]
    fn an_aimdo_record_broken_after_its_location_is_joined() {
        let lines = normalise("aimdo: /project/src-posix/cuda-funchooks.c:37:\nERROR:aimdo_setup_hooks:\nfunchook_prepare(cuMemAlloc_v2) failed: 8\nmodel_type FLOW:\nERROR: x\n");
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert_eq!(
            lines[0],
            "aimdo: /project/src-posix/cuda-funchooks.c:37:ERROR:aimdo_setup_hooks:"
        );
        assert_eq!(lines[2], "model_type FLOW:");
    }

    /// Colour codes (with or without their escape character) and HTML entities are undone once.
    #[test]
    fn colour_codes_and_entities_are_removed() {
        assert_eq!(
            unescape("\x1b[1;31mERROR\x1b[0m x [31my[0m &lt;a&gt; &quot;b&quot; c&#39;s &amp;lt;"),
            "ERROR x y <a> \"b\" c's &lt;"
        );
        assert_eq!(unescape("[mps] 12m"), "[mps] 12m");
    }

    /// A prefix on every line (a launcher's tag, docker compose's service column) goes; a level
    /// word after a timestamp goes; an aimdo record broken in two under a prefix is joined.
    #[test]
    fn a_prefix_on_every_line_is_removed() {
        assert_eq!(
            normalise("[ComfyUI] got prompt\n[ComfyUI]   File \"a.py\", line 1, in f\n"),
            ["got prompt", "File \"a.py\", line 1, in f"]
        );
        assert_eq!(normalise("comfyui  | x\ncomfyui  | y\n"), ["x", "y"]);
        assert_eq!(normalise("[A] x\n[B] y\n"), ["[A] x", "[B] y"]);
        assert_eq!(
            clean_line("2026-05-12 23:34:51,752 INFO got prompt"),
            "got prompt"
        );
        assert_eq!(
            clean_line("2026-05-12 23:34:51.752 | ERROR    | boom"),
            "boom"
        );
        let lines = normalise("> 2026-05-12 23:34:51,752 INFO aimdo: /p/src/hooks.c:37:\n> 2026-05-12 23:34:51,752 INFO ERROR:aimdo_setup_hooks:\n");
        assert_eq!(lines, ["aimdo: /p/src/hooks.c:37:ERROR:aimdo_setup_hooks:"]);
    }

    /// A paste that is one inline-code span is read without its backticks.
    #[test]
    fn an_inline_code_span_is_unwrapped() {
        assert_eq!(normalise("`Killed`"), ["Killed"]);
        assert_eq!(normalise("```\nKilled\n```"), ["Killed"]);
        assert_eq!(normalise("`a` and `b`"), ["`a` and `b`"]);
        assert_eq!(normalise("a\u{a0}b\u{200b}c"), ["a bc"]);
    }

    /// A frame whose quoted path a hard wrap cut is one line again.
    #[test]
    fn a_frame_cut_by_a_hard_wrap_is_joined() {
        let lines = normalise("  File \"/venv/lib/python3.10/site-packages/comfy_\naimdo/model_vbar.py\", line 50 in __init__\n  File \"/c/a.py\", line 1, in f\n");
        assert_eq!(
            lines,
            [
                "File \"/venv/lib/python3.10/site-packages/comfy_aimdo/model_vbar.py\", line 50 in __init__",
                "File \"/c/a.py\", line 1, in f"
            ]
        );
    }

    #[test]
    fn flattened_paste_is_split() {
        let parts = split_flattened("error occurred when executing x: boom file \"a.py\", line 1, in f g() file \"b.py\", line 2, in h k()");
        assert_eq!(parts.len(), 3);
        assert!(parts[1].starts_with("file \"a.py\""));
    }
}
