//! GitHub-flavoured Markdown building blocks (escaping, tables, fences, `<details>`, nodes as
//! code spans) and a checker that a rendered document is well-formed: tables have equal column
//! counts, code fences and `<details>` blocks are closed.

use std::fmt::Write as _;

/// What an empty cell or a missing value shows.
pub(crate) const DASH: &str = "—";

/// A heading of `level` (`## Title`) with the blank line after it.
pub(crate) fn heading(level: usize, title: &str) -> String {
    format!("{} {title}\n\n", "#".repeat(level))
}

/// The first 8 characters of a run id (the run folder's and the terminal's short form).
pub(crate) fn short(run_id: &str) -> String {
    run_id.chars().take(8).collect()
}

/// Escapes free text for a Markdown paragraph or list item: HTML-significant characters become
/// entities (so `<user>` or `<module>` stay visible on GitHub) and inline markup is neutralised.
///
/// Words GitHub would turn into a mention or a reference (see `links_on_github`) become code
/// spans: GitHub finds `@user`, `#12` and commit SHAs in the rendered text outside `<code>`,
/// `<pre>` and links, after Markdown escapes are resolved, so an escape (`\@`, `&#64;`) would not
/// stop the ping, but a code span does.
pub(crate) fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        // Brackets and punctuation around the word stay outside the code span.
        let core = word
            .trim_start_matches(['(', '[', '{', '"', '\''])
            .trim_end_matches([')', ']', '}', '"', '\'', '.', ',', ';', ':', '!', '?']);
        if !core.is_empty() && links_on_github(core) {
            let start = word.len() - word.trim_start_matches(['(', '[', '{', '"', '\'']).len();
            escape_into(&word[..start], out);
            out.push_str(&code(core));
            escape_into(&word[start + core.len()..], out);
        } else {
            escape_into(word, out);
        }
        word.clear();
    };
    for c in s.chars() {
        if c.is_whitespace() {
            flush(&mut word, &mut out);
            match c {
                '\r' => {}
                '\n' => out.push(' '),
                _ => out.push(c),
            }
        } else {
            word.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

fn escape_into(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '*' | '`' | '[' | ']' | '\\' | '|' => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
}

/// Whether GitHub could link `word` (no whitespace) to a person, team, issue, pull request or
/// commit when it appears in an issue: `@name` (also in `owner/repo@sha` and e-mail
/// addresses), `#12` (also `owner/repo#12`), `GH-12`, a run of 7 to 40 hex digits (a commit
/// SHA, whole or abbreviated), or a github.com address (a back-reference on the linked issue).
pub(crate) fn links_on_github(word: &str) -> bool {
    let b = word.as_bytes();
    let next_is = |i: usize, f: fn(&u8) -> bool| b.get(i + 1).is_some_and(f);
    let is_word = |c: &u8| c.is_ascii_alphanumeric() || *c == b'_';
    for (i, c) in b.iter().enumerate() {
        match c {
            b'@' if next_is(i, u8::is_ascii_alphanumeric) => return true,
            b'#' if next_is(i, u8::is_ascii_digit) => return true,
            b'-' if i >= 2
                && b[i - 2..i].eq_ignore_ascii_case(b"gh")
                && next_is(i, u8::is_ascii_digit) =>
            {
                return true
            }
            _ => {}
        }
    }
    if word.to_ascii_lowercase().contains("github.com/") {
        return true;
    }
    // Hex runs bounded by non-word characters.
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_hexdigit() && (i == 0 || !is_word(&b[i - 1])) {
            let start = i;
            while i < b.len() && b[i].is_ascii_hexdigit() {
                i += 1;
            }
            let bounded = i == b.len() || !is_word(&b[i]);
            if bounded && (7..=40).contains(&(i - start)) {
                return true;
            }
        } else {
            i += 1;
        }
    }
    false
}

/// An inline code span holding `s` verbatim (newlines become spaces; the backtick fence grows
/// when `s` itself contains backticks). Inside a table, `Table::row` escapes its pipes.
pub(crate) fn code(s: &str) -> String {
    let flat: String = s
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    if flat.is_empty() {
        return String::new();
    }
    let longest = longest_run(&flat, '`');
    let fence = "`".repeat(longest + 1);
    let pad = if flat.starts_with('`') || flat.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{flat}{pad}{fence}")
}

/// Free text in which `backtick` spans are code: the spans become code spans, the rest is
/// escaped like [`text`]. With an odd number of backticks everything is escaped text.
pub(crate) fn text_with_code(s: &str) -> String {
    if !s.matches('`').count().is_multiple_of(2) {
        return text(s);
    }
    s.split('`')
        .enumerate()
        .map(|(i, part)| if i % 2 == 1 { code(part) } else { text(part) })
        .collect()
}

/// Bold free text.
pub(crate) fn bold(s: &str) -> String {
    format!("**{}**", text(s))
}

/// A fenced code block with an info string; the fence is longer than any backtick run inside.
pub(crate) fn fence(info: &str, body: &str) -> String {
    let longest = body.lines().map(|l| longest_run(l, '`')).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    let mut out = format!("{fence}{info}\n");
    for line in body.lines() {
        out.push_str(line);
        out.push('\n');
    }
    out.push_str(&fence);
    out.push('\n');
    out
}

/// A collapsed `<details>` block whose body is Markdown (blank lines around it so GitHub renders
/// the body as Markdown).
pub(crate) fn details(summary: &str, body_markdown: &str) -> String {
    format!(
        "<details>\n<summary>{}</summary>\n\n{}\n</details>\n",
        html_escape(summary),
        body_markdown.trim_end()
    )
}

/// A node as `` `Class #id` ``: in a code span, so GitHub does not read `#id` as an issue. A
/// node inside a subgraph reads as the canvas shows it: `KSampler #125 in subgraph 'Sampler' #140`.
pub(crate) fn node(n: &crate::report::model::NodeRef) -> String {
    match &n.subgraph {
        Some(location) => {
            let (_, own) = crate::workflow::label::split_hierarchical(&n.id);
            code(&format!("{} #{own} in {location}", n.class_type))
        }
        None => code(&format!("{} #{}", n.class_type, n.id)),
    }
}

/// Escapes `<`, `>`, `&` and `"` for use inside HTML.
pub(crate) fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A GFM table. Cells are Markdown already (use [`text`] / [`code`] to build them); pipes and
/// newlines left in a cell are escaped here so every row keeps the header's column count.
#[derive(Debug, Clone, Default)]
pub(crate) struct Table {
    header: Vec<String>,
    align_right: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers (plain text).
    pub(crate) fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|h| text(h)).collect(),
            align_right: vec![false; header.len()],
            rows: Vec::new(),
        }
    }

    /// Right-aligns column `i` (numbers).
    pub(crate) fn right(mut self, i: usize) -> Table {
        if let Some(a) = self.align_right.get_mut(i) {
            *a = true;
        }
        self
    }

    /// Adds a row; missing cells are left empty and extra cells are joined into the last one.
    pub(crate) fn row(&mut self, cells: Vec<String>) {
        let n = self.header.len();
        let mut cells: Vec<String> = cells.into_iter().map(|c| cell(&c)).collect();
        if cells.len() > n && n > 0 {
            let extra = cells.split_off(n - 1).join(" ");
            cells.push(extra);
        }
        cells.resize(n, String::new());
        self.rows.push(cells);
    }

    /// Renders the table followed by a newline.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
        out.push_str(&line(&self.header));
        let delim: Vec<String> = self
            .align_right
            .iter()
            .map(|r| if *r { "---:".into() } else { "---".into() })
            .collect();
        out.push_str(&format!("|{}|\n", delim.join("|")));
        for row in &self.rows {
            out.push_str(&line(row));
        }
        out
    }
}

/// Makes one table cell safe: unescaped pipes are escaped, line breaks become `<br>`.
fn cell(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut prev_backslash = false;
    for c in s.trim().chars() {
        match c {
            '|' if !prev_backslash => out.push_str("\\|"),
            '\n' => out.push_str("<br>"),
            '\r' => {}
            _ => out.push(c),
        }
        prev_backslash = c == '\\' && !prev_backslash;
    }
    out
}

fn longest_run(s: &str, ch: char) -> usize {
    let (mut best, mut cur) = (0, 0);
    for c in s.chars() {
        if c == ch {
            cur += 1;
            best = best.max(cur);
        } else {
            cur = 0;
        }
    }
    best
}

/// One problem found by [`check`], with its 1-based line number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// Checks that a Markdown document is well-formed for GitHub: code fences are closed, every
/// table row has the header's column count and the delimiter row matches, tables start after a
/// blank line, `<details>`/`<summary>` tags are balanced and properly nested, and a blank line
/// follows `</summary>` (else GitHub does not render the body as Markdown).
pub fn check(doc: &str) -> Vec<Problem> {
    let mut problems = Vec::new();
    let lines: Vec<&str> = doc.lines().collect();
    let mut open_fence: Option<(char, usize, usize)> = None;
    let mut details_stack: Vec<usize> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim_start();
        if let Some((ch, len, start)) = open_fence {
            if let Some((c2, l2, rest)) = fence_marker(trimmed) {
                if c2 == ch && l2 >= len && rest.trim().is_empty() {
                    open_fence = None;
                }
            }
            let _ = start;
            i += 1;
            continue;
        }
        if let Some((ch, len, _)) = fence_marker(trimmed) {
            open_fence = Some((ch, len, i + 1));
            i += 1;
            continue;
        }
        // HTML blocks we emit: <details>, <summary>…</summary>, </details>.
        let mut rest = trimmed;
        while let Some(pos) = rest.find('<') {
            let tail = &rest[pos..];
            if tail.starts_with("<details>") || tail.starts_with("<details ") {
                details_stack.push(i + 1);
            } else if tail.starts_with("</details>") {
                if details_stack.pop().is_none() {
                    problems.push(Problem {
                        line: i + 1,
                        message: "</details> without an open <details>".into(),
                    });
                }
            } else if tail.starts_with("<summary>") {
                if details_stack.is_empty() {
                    problems.push(Problem {
                        line: i + 1,
                        message: "<summary> outside <details>".into(),
                    });
                }
                if !tail.contains("</summary>") {
                    problems.push(Problem {
                        line: i + 1,
                        message: "<summary> not closed on the same line".into(),
                    });
                } else if tail.trim_end().ends_with("</summary>")
                    && lines.get(i + 1).is_some_and(|l| !l.trim().is_empty())
                {
                    problems.push(Problem {
                        line: i + 1,
                        message:
                            "no blank line after </summary>: GitHub renders the body as raw text"
                                .into(),
                    });
                }
            }
            rest = &tail[1..];
        }
        if is_table_line(trimmed) {
            let start = i;
            let mut block = Vec::new();
            while i < lines.len() && is_table_line(lines[i].trim_start()) {
                block.push(lines[i].trim_start());
                i += 1;
            }
            if start > 0 && !lines[start - 1].trim().is_empty() {
                problems.push(Problem {
                    line: start + 1,
                    message: "table does not start after a blank line".into(),
                });
            }
            check_table(&block, start + 1, &mut problems);
            continue;
        }
        i += 1;
    }
    if let Some((ch, len, start)) = open_fence {
        problems.push(Problem {
            line: start,
            message: format!("code fence {} never closed", ch.to_string().repeat(len)),
        });
    }
    for line in details_stack {
        problems.push(Problem {
            line,
            message: "<details> never closed".into(),
        });
    }
    problems
}

fn fence_marker(line: &str) -> Option<(char, usize, &str)> {
    let ch = line.chars().next()?;
    if ch != '`' && ch != '~' {
        return None;
    }
    let len = line.chars().take_while(|c| *c == ch).count();
    if len < 3 {
        return None;
    }
    let rest = &line[len..];
    if ch == '`' && rest.contains('`') {
        return None;
    }
    Some((ch, len, rest))
}

fn is_table_line(line: &str) -> bool {
    line.starts_with('|')
}

/// Counts cells of a table row: splits on pipes not escaped by a backslash, ignoring the
/// optional leading and trailing pipe.
pub(crate) fn count_cells(row: &str) -> usize {
    let row = row.trim();
    let mut count = 0;
    let mut prev_backslash = false;
    let mut seen_content = false;
    let chars: Vec<char> = row.chars().collect();
    for (idx, c) in chars.iter().enumerate() {
        if *c == '|' && !prev_backslash {
            if idx == 0 {
                continue;
            }
            count += 1;
            seen_content = false;
            if idx == chars.len() - 1 {
                return count;
            }
        } else if !c.is_whitespace() || seen_content {
            seen_content = true;
        }
        prev_backslash = *c == '\\' && !prev_backslash;
    }
    count + 1
}

fn check_table(block: &[&str], first_line: usize, problems: &mut Vec<Problem>) {
    let header = count_cells(block[0]);
    let Some(delim) = block.get(1) else {
        problems.push(Problem {
            line: first_line,
            message: "table has a header but no delimiter row".into(),
        });
        return;
    };
    let delim_ok = delim.trim().trim_matches('|').split('|').all(|c| {
        let c = c.trim();
        !c.is_empty()
            && c.trim_start_matches(':')
                .trim_end_matches(':')
                .chars()
                .all(|x| x == '-')
            && c.contains('-')
    });
    if !delim_ok {
        problems.push(Problem {
            line: first_line + 1,
            message: format!("second table line is not a delimiter row: {delim}"),
        });
    }
    for (k, row) in block.iter().enumerate().skip(1) {
        let n = count_cells(row);
        if n != header {
            let mut message = String::new();
            let _ = write!(message, "table row has {n} cells, the header has {header}");
            problems.push(Problem {
                line: first_line + k,
                message,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_github_would_link_become_code_spans() {
        for (raw, want) in [
            ("ask @alice", "ask `@alice`"),
            ("see #12.", "see `#12`."),
            ("(node #5), or [@bob]:", "(node `#5`), or \\[`@bob`\\]:"),
            ("fixes GH-12", "fixes `GH-12`"),
            ("in owner/repo#12 now", "in `owner/repo#12` now"),
            ("at owner/repo@abc1234", "at `owner/repo@abc1234`"),
            ("commit 1a2b3c4d5e6f", "commit `1a2b3c4d5e6f`"),
            ("@org/team-x", "`@org/team-x`"),
            ("mail me@example.com", "mail `me@example.com`"),
            (
                "https://github.com/o/r/issues/1",
                "`https://github.com/o/r/issues/1`",
            ),
            ("KSampler (node 12)", "KSampler (node 12)"),
            ("42 steps, cfg 7.5, 3 GiB", "42 steps, cfg 7.5, 3 GiB"),
            ("a 64-hex sha256 is not a commit: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "a 64-hex sha256 is not a commit: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
            ("C# and x@ and #tag", "C# and x@ and #tag"),
        ] {
            assert_eq!(text(raw), want, "{raw}");
        }
        // Inside a table the code span keeps its pipes escaped.
        let mut t = Table::new(&["a"]);
        t.row(vec![text("@x|y")]);
        assert!(t.render().contains("`@x\\|y`"), "{}", t.render());
    }

    #[test]
    fn text_escapes_html_and_markup() {
        assert_eq!(text("a <user> *b* | c"), "a &lt;user&gt; \\*b\\* \\| c");
        assert_eq!(text("line1\nline2"), "line1 line2");
    }

    #[test]
    fn code_grows_its_fence_and_escapes_pipes() {
        assert_eq!(code("a|b"), "`a|b`");
        assert_eq!(code("x `y` z"), "``x `y` z``");
        assert_eq!(code("`start"), "`` `start ``");
        assert_eq!(code(""), "");
    }

    #[test]
    fn text_with_code_spans() {
        assert_eq!(
            text_with_code("run `dmesg | grep oom` or <x>"),
            "run `dmesg | grep oom` or &lt;x&gt;"
        );
        assert_eq!(text_with_code("odd ` tick"), "odd \\` tick");
    }

    #[test]
    fn fence_is_longer_than_inner_backticks() {
        let f = fence("text", "a\n````\nb");
        assert!(f.starts_with("`````text\n"));
        assert!(check(&f).is_empty(), "{:?}", check(&f));
    }

    #[test]
    fn table_rows_keep_header_width() {
        let mut t = Table::new(&["a", "b", "c"]).right(2);
        t.row(vec!["1".into(), "x|y".into()]);
        t.row(vec!["1".into(), "2".into(), "3".into(), "4".into()]);
        t.row(vec!["multi\nline".into(), "`a\\|b`".into(), "".into()]);
        let doc = format!("\n{}", t.render());
        assert!(doc.contains("|---|---|---:|"));
        assert!(doc.contains("multi<br>line"));
        assert!(check(&doc).is_empty(), "{:?}", check(&doc));
    }

    #[test]
    fn count_cells_handles_escapes_and_edges() {
        assert_eq!(count_cells("| a | b |"), 2);
        assert_eq!(count_cells("| a \\| b | c |"), 2);
        assert_eq!(count_cells("|---|---:|"), 2);
        assert_eq!(count_cells("| a | b"), 2);
        assert_eq!(count_cells("|  |  |"), 2);
    }

    #[test]
    fn checker_finds_each_kind_of_problem() {
        let bad_table = "text\n| a | b |\n|---|---|\n| 1 | 2 | 3 |\n";
        let p = check(bad_table);
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(p.iter().any(|x| x.message.contains("3 cells")));
        assert!(p.iter().any(|x| x.message.contains("blank line")));

        let no_delim = "\n| a | b |\n| 1 | 2 |\n";
        assert!(check(no_delim)[0].message.contains("delimiter"));

        let open_fence = "```text\ncode\n";
        assert!(check(open_fence)[0].message.contains("never closed"));

        let open_details = "<details>\n<summary>x</summary>\n\nbody\n";
        assert!(check(open_details)[0]
            .message
            .contains("<details> never closed"));

        let stray = "</details>\n";
        assert!(check(stray)[0].message.contains("without an open"));

        let cramped = "<details>\n<summary>x</summary>\nbody\n</details>\n";
        assert!(check(cramped)[0].message.contains("no blank line"));

        let fenced_pipes = "```\n| not | a table\n```\n";
        assert!(check(fenced_pipes).is_empty());
    }

    #[test]
    fn details_block_is_well_formed() {
        let d = details(
            "Traceback <1>",
            &fence("text", "File \"x\", line 1, in <module>"),
        );
        assert!(d.contains("<summary>Traceback &lt;1&gt;</summary>\n\n"));
        assert!(check(&d).is_empty(), "{:?}", check(&d));
    }
}
