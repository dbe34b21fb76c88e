//! Keeping `report.md` under GitHub's issue-body limit (65 536 characters): how long a text is
//! as GitHub may count it, the trimming levels the Markdown tries in turn (long tracebacks,
//! inputs, messages and console excerpts shortened in the middle, saying so), and a last cut at
//! a section boundary. report.json and the run folders always keep everything whole.

use super::md::{code, fence};
use crate::report::model::Evidence;

/// GitHub refuses an issue body longer than this ("body is too long (maximum is 65536
/// characters)").
pub const GITHUB_BODY_LIMIT: usize = 65_536;

/// The length of `s` as GitHub could count it, on the safe side: UTF-16 code units (never fewer
/// than Unicode scalar values; a browser's `maxlength` counts these) plus one for every line
/// break (a browser submits a textarea's line breaks as CR LF). A text at most
/// [`GITHUB_BODY_LIMIT`] long by this count is within the limit whether GitHub counts scalar
/// values, UTF-16 units, or the 262 144 bytes some of its checks use (at most 3 UTF-8 bytes per
/// UTF-16 unit).
pub fn github_length(s: &str) -> usize {
    s.encode_utf16().count() + s.matches('\n').count()
}

/// How much of the long parts report.md shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Lines of the traceback.
    pub traceback_lines: usize,
    /// Lines of the failing node's inputs (pretty JSON).
    pub inputs_lines: usize,
    /// Lines of the exception message.
    pub message_lines: usize,
    /// Lines of the server console excerpt.
    pub console_lines: usize,
    /// Lines of the kernel log.
    pub kernel_lines: usize,
    /// Characters of any one line of those.
    pub line_chars: usize,
    /// Warnings listed (the rest are counted).
    pub warnings: usize,
}

/// The levels tried in turn, the first one that fits is used.
pub(crate) const LEVELS: [Limits; 4] = [
    // The first level is sized for an issue (the demo's reports under 12 KB): report.json
    // and the run folders keep everything whole.
    Limits {
        traceback_lines: 18,
        inputs_lines: 40,
        message_lines: 12,
        console_lines: 14,
        kernel_lines: 20,
        line_chars: 160,
        warnings: 20,
    },
    Limits {
        traceback_lines: 60,
        inputs_lines: 40,
        message_lines: 20,
        console_lines: 40,
        kernel_lines: 20,
        line_chars: 500,
        warnings: 30,
    },
    Limits {
        traceback_lines: 20,
        inputs_lines: 15,
        message_lines: 8,
        console_lines: 20,
        kernel_lines: 8,
        line_chars: 300,
        warnings: 10,
    },
    Limits {
        traceback_lines: 8,
        inputs_lines: 6,
        message_lines: 4,
        console_lines: 8,
        kernel_lines: 4,
        line_chars: 160,
        warnings: 3,
    },
];

/// Lines kept of a long text: a quarter from the head, the rest from the tail (where a
/// traceback's innermost frame and a console's exception are), with a marker line where lines
/// were left out; lines longer than `line_chars` are cut, saying how much.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Trimmed {
    /// The lines shown.
    pub lines: Vec<String>,
    /// Lines left out in the middle.
    pub omitted: usize,
    /// Lines cut short.
    pub cut: usize,
}

impl Trimmed {
    /// Whether anything was left out or cut.
    #[cfg(test)]
    pub(crate) fn is_trimmed(&self) -> bool {
        self.omitted > 0 || self.cut > 0
    }

    /// What was left out, in words (`12 lines left out in the middle, 2 long lines cut after
    /// 400 characters`), or None.
    pub(crate) fn note(&self, line_chars: usize) -> Option<String> {
        let mut parts = Vec::new();
        if self.omitted > 0 {
            parts.push(format!("{} lines left out in the middle", self.omitted));
        }
        if self.cut > 0 {
            parts.push(format!(
                "{} long line{} cut after {line_chars} characters",
                self.cut,
                if self.cut == 1 { "" } else { "s" }
            ));
        }
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}

/// `line` when at most `max_chars` long, else its start and end with the middle left out,
/// marked (`… [1234 characters left out] …`): an exception's figures are at both ends.
pub(crate) fn cut_middle(line: &str, max_chars: usize) -> String {
    let n = line.chars().count();
    if n <= max_chars {
        return line.to_string();
    }
    let head = max_chars / 2;
    let tail = max_chars - head;
    let start: String = line.chars().take(head).collect();
    let end: String = line.chars().skip(n - tail).collect();
    format!(
        "{start} [… {} characters left out …] {end}",
        n - head - tail
    )
}

/// Trims `lines` to at most `max_lines` lines (at least 3) of at most `line_chars` characters.
pub(crate) fn trim_middle<S: AsRef<str>>(
    lines: &[S],
    max_lines: usize,
    line_chars: usize,
) -> Trimmed {
    let max = max_lines.max(3);
    let mut omitted = 0;
    let mut out: Vec<String> = if lines.len() > max {
        let head = (max - 1) / 4;
        let tail = max - 1 - head;
        omitted = lines.len() - head - tail;
        let mut v: Vec<String> = lines[..head]
            .iter()
            .map(|s| s.as_ref().to_string())
            .collect();
        v.push(format!("[… {omitted} lines left out here …]"));
        v.extend(
            lines[lines.len() - tail..]
                .iter()
                .map(|s| s.as_ref().to_string()),
        );
        v
    } else {
        lines.iter().map(|s| s.as_ref().to_string()).collect()
    };
    let mut cut = 0;
    for l in &mut out {
        let n = l.chars().count();
        if n > line_chars {
            let keep: String = l.chars().take(line_chars).collect();
            *l = format!("{keep} [… {} more characters]", n - line_chars);
            cut += 1;
        }
    }
    Trimmed {
        lines: out,
        omitted,
        cut,
    }
}

/// Where the whole of a trimmed part is: the run's `run.json` and report.json.
pub(super) fn whole_in(e: &Evidence, what: &str) -> String {
    match &e.run_dir {
        Some(dir) => format!(
            "the whole {what} is in {} and report.json",
            // Joined, not formatted: `C:\…\04-x\run.json` on Windows, not `…\04-x/run.json`.
            code(&super::super::naming::display(
                &std::path::Path::new(dir).join("run.json")
            ))
        ),
        None => format!("the whole {what} is in report.json"),
    }
}

/// A trimmed part in a fenced block, with what was left out above it.
pub(crate) fn trimmed_block(
    e: &Evidence,
    what: &str,
    info: &str,
    t: &Trimmed,
    line_chars: usize,
) -> String {
    let mut body = String::new();
    if let Some(note) = t.note(line_chars) {
        let mut note = format!("{note}; {}.", whole_in(e, what));
        note[..1].make_ascii_uppercase();
        body.push_str(&note);
        body.push_str("\n\n");
    }
    body.push_str(&fence(info, &t.lines.join("\n")));
    body
}

/// The note that ends a document cut by [`cut_to_fit`].
pub(crate) const CUT_NOTE: &str = "**report.md was cut here to stay under GitHub's 65 536-character issue-body limit.** The \
rest (and everything above in full) is in report.json and the run folders; attach them (`comfy-bisect report SESSION --bundle report.zip`).\n";

/// Cuts `doc` at the last blank line outside code fences, `<details>` blocks and tables that
/// leaves room for [`CUT_NOTE`] within `limit`, and appends the note. Returns `doc` unchanged
/// when it fits.
pub(crate) fn cut_to_fit(doc: &str, limit: usize) -> String {
    if github_length(doc) <= limit {
        return doc.to_string();
    }
    let room = limit.saturating_sub(github_length(CUT_NOTE) + 2);
    let mut best = 0;
    let mut fence: Option<(char, usize)> = None;
    let mut details = 0usize;
    let mut used = 0usize;
    let mut pos = 0usize;
    for line in doc.split_inclusive('\n') {
        let t = line.trim();
        match fence {
            Some((c, n)) => {
                if t.len() >= n && t.chars().all(|x| x == c) {
                    fence = None;
                }
            }
            None => {
                let c = t.chars().next().unwrap_or(' ');
                let run = t.chars().take_while(|x| *x == c).count();
                if (c == '`' || c == '~') && run >= 3 {
                    fence = Some((c, run));
                } else if t.starts_with("<details") {
                    details += 1;
                } else if t.starts_with("</details>") {
                    details = details.saturating_sub(1);
                }
            }
        }
        used += github_length(line);
        pos += line.len();
        if used > room {
            break;
        }
        if t.is_empty() && fence.is_none() && details == 0 {
            best = pos;
        }
    }
    let mut out = doc[..best].to_string();
    if !out.ends_with("\n\n") && !out.is_empty() {
        out.push('\n');
    }
    out.push_str(CUT_NOTE);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_counts_utf16_units_and_line_breaks_twice() {
        assert_eq!(github_length("abc"), 3);
        assert_eq!(github_length("a\nb\n"), 6);
        // U+00D7 is one unit, U+1F308 (outside the BMP) two.
        assert_eq!(github_length("×"), 1);
        assert_eq!(github_length("\u{1F308}"), 2);
    }

    #[test]
    fn trimming_keeps_a_quarter_of_the_head_and_the_tail() {
        let lines: Vec<String> = (0..100).map(|i| format!("l{i}")).collect();
        let t = trim_middle(&lines, 9, 100);
        assert_eq!(
            t.lines,
            vec![
                "l0",
                "l1",
                "[… 92 lines left out here …]",
                "l94",
                "l95",
                "l96",
                "l97",
                "l98",
                "l99"
            ]
        );
        assert_eq!(t.note(100).unwrap(), "92 lines left out in the middle");
        let short = trim_middle(&["x".repeat(10)], 9, 4);
        assert_eq!(short.lines, vec!["xxxx [… 6 more characters]"]);
        assert_eq!(short.note(4).unwrap(), "1 long line cut after 4 characters");
        assert!(!trim_middle(&["a", "b"], 9, 4).is_trimmed());
    }

    #[test]
    fn a_cut_lands_outside_fences_and_details_and_says_so() {
        let mut doc = String::from("# t\n\n**Verdict:** x\n\n| a |\n|---|\n| 1 |\n\n");
        doc.push_str("<details>\n<summary>s</summary>\n\n```text\n");
        for i in 0..2000 {
            doc.push_str(&format!("line {i}\n\nmore\n"));
        }
        doc.push_str("```\n</details>\n\n## After\n\ntext\n");
        let cut = cut_to_fit(&doc, 2000);
        assert!(github_length(&cut) <= 2000);
        assert!(cut.starts_with("# t\n\n**Verdict:** x\n\n| a |\n|---|\n| 1 |\n\n"));
        assert!(cut.ends_with(CUT_NOTE));
        assert!(!cut.contains("<details>"), "{cut}");
        assert!(super::super::md::check(&cut).is_empty());
        assert_eq!(cut_to_fit("short\n", 2000), "short\n");
    }
}
