//! The server console of the first failing run in `report.md`: its lines from our prompt's
//! `got prompt` to the end (the run folder's `server.log`, `<server time> <line>`), with the
//! progress bars' intermediate states folded into their last one and the middle left out when
//! it is long — what was left out is said, and where the whole file is. The lines come from the
//! redacted report (so they are redacted like the rest) and are shown in a fenced block, where
//! GitHub links no mention or reference (like the traceback).

use super::budget::trim_middle;
use super::md::{code, details, fence};
use crate::comfy::console::{classify, ConsoleLine};
use crate::report::model::Evidence;
use crate::text::capitalize;

/// What the Markdown shows of a console.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Excerpt {
    /// The lines shown (a marker line stands where lines were left out).
    pub lines: Vec<String>,
    /// Lines in the whole console (from `got prompt`).
    pub total: usize,
    /// Intermediate progress-bar states not shown (their bar's last state is).
    pub folded_bars: usize,
    /// Lines left out in the middle.
    pub omitted: usize,
    /// Lines cut to `line_chars`.
    pub cut_lines: usize,
    /// Traceback lines replaced by one line (the report shows the traceback once, above).
    pub folded_traceback: usize,
}

/// The text of a `server.log` line (after its server time).
fn body(line: &str) -> &str {
    line.split_once(' ').map(|(_, b)| b).unwrap_or(line)
}

/// The excerpt of `lines` (`server.log` lines) with at most `max_lines` lines of at most
/// `line_chars` characters each; with `fold_traceback`, a Python traceback is one line (the
/// report prints the traceback itself once, above the console).
pub(crate) fn excerpt(
    lines: &[String],
    max_lines: usize,
    line_chars: usize,
    fold_traceback: bool,
) -> Excerpt {
    let start = lines
        .iter()
        .position(|l| classify(body(l)) == Some(ConsoleLine::GotPrompt))
        .unwrap_or(0);
    let lines = &lines[start..];
    // Fold each bar's run of states into its last one.
    let mut kept: Vec<&String> = Vec::new();
    let mut folded_bars = 0;
    let mut last_bar: Option<(String, u64, u64)> = None;
    let (folded, folded_traceback) = if fold_traceback {
        fold_tracebacks(lines)
    } else {
        (lines.to_vec(), 0)
    };
    for line in &folded {
        match classify(body(line)) {
            Some(ConsoleLine::Bar(bar)) => {
                let same = last_bar
                    .as_ref()
                    .is_some_and(|(d, v, m)| *d == bar.desc && *m == bar.max && bar.value >= *v);
                if same {
                    kept.pop();
                    folded_bars += 1;
                }
                last_bar = Some((bar.desc, bar.value, bar.max));
            }
            _ => last_bar = None,
        }
        kept.push(line);
    }
    let total = kept.len() + folded_bars + folded_traceback;
    let t = trim_middle(&kept, max_lines, line_chars);
    Excerpt {
        lines: t.lines,
        total,
        folded_bars,
        omitted: t.omitted,
        cut_lines: t.cut,
        folded_traceback,
    }
}

/// A message's first line at most this long stays where the console repeats it.
const MESSAGE_KEPT: usize = 80;

/// What stands for the exception's message where the console repeats it.
const MESSAGE_ABOVE: &str = "[the message, under Debug Logs]";

/// The lines with the exception's message, where the console prints it again
/// (`!!! Exception during processing !!! MESSAGE`, `torch.OutOfMemoryError: MESSAGE`): its
/// further lines left out and a long first line replaced by [`MESSAGE_ABOVE`]: the report
/// shows the whole message once, under Debug Logs. Returns the lines and how many lines went
/// or were shortened.
fn fold_message(lines: &[String], message: &str) -> (Vec<String>, usize) {
    let parts: Vec<&str> = message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let Some(first) = parts.first() else {
        return (lines.to_vec(), 0);
    };
    let mut out = Vec::with_capacity(lines.len());
    let mut folded = 0;
    let mut i = 0;
    while i < lines.len() {
        i += 1;
        let line = lines[i - 1].trim_end();
        if !body(line).ends_with(first) {
            out.push(lines[i - 1].clone());
            continue;
        }
        // A long first line (an OOM message with its figures) is said once, under Debug Logs.
        if first.chars().count() > MESSAGE_KEPT {
            out.push(format!(
                "{}{MESSAGE_ABOVE}",
                &line[..line.len() - first.len()]
            ));
            folded += 1;
        } else {
            out.push(lines[i - 1].clone());
        }
        // The message's further lines, in order (blank lines between them go too).
        let mut k = 1;
        while i < lines.len() && k < parts.len() {
            let b = body(&lines[i]).trim();
            if b.is_empty() {
                i += 1;
                folded += 1;
            } else if b == parts[k] {
                i += 1;
                k += 1;
                folded += 1;
            } else {
                break;
            }
        }
    }
    (out, folded)
}

/// The lines with each Python traceback (`Traceback (most recent call last):` and its
/// indented frame lines) replaced by one marker line, and how many lines went.
fn fold_tracebacks(lines: &[String]) -> (Vec<String>, usize) {
    let mut out = Vec::with_capacity(lines.len());
    let mut folded = 0;
    let mut i = 0;
    while i < lines.len() {
        if !body(&lines[i]).starts_with("Traceback (most recent call last):") {
            out.push(lines[i].clone());
            i += 1;
            continue;
        }
        let mut j = i + 1;
        while j < lines.len() && body(&lines[j]).starts_with(' ') {
            j += 1;
        }
        let time = lines[i].split_once(' ').map(|(t, _)| t).unwrap_or("");
        let n = j - i - 1;
        out.push(format!(
            "{time} Traceback (most recent call last): … {n} frame line{}, under Debug Logs",
            if n == 1 { "" } else { "s" }
        ));
        folded += j - i - 1;
        i = j;
    }
    (out, folded)
}

/// `n` and `what`, plural when `n` is not 1 (`3 frame lines`).
fn lines(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// The date of a `server.log` line (`2026-12-01` of `2026-12-01T10:00:00.123456 got prompt`).
fn date_of(line: &str) -> Option<&str> {
    let (date, _) = line.split_once('T')?;
    let b = date.as_bytes();
    (b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && date.bytes().filter(u8::is_ascii_digit).count() == 8)
        .then_some(date)
}

/// A `server.log` line with its time of day to the millisecond instead of its whole server
/// time (`10:00:00.123 got prompt`).
fn time_of_day(line: &str) -> String {
    let Some((time, rest)) = line.split_once(' ') else {
        return line.to_string();
    };
    let clock = time.split_once('T').map(|(_, c)| c).unwrap_or(time);
    let clock = match clock.split_once('.') {
        Some((hms, frac)) => format!("{hms}.{}", frac.chars().take(3).collect::<String>()),
        None => clock.to_string(),
    };
    format!("{clock} {rest}")
}

/// The `<details>` block with the failing run's console (empty when it has none).
pub fn markdown(e: &Evidence, max_lines: usize, line_chars: usize) -> String {
    if e.console.is_empty() {
        return String::new();
    }
    let fold = !e.traceback.is_empty();
    let (console, folded_message) = match e.exception_message.as_deref().filter(|_| fold) {
        Some(m) => fold_message(&e.console, m),
        None => (e.console.clone(), 0),
    };
    let mut x = excerpt(&console, max_lines, line_chars, fold);
    x.total += folded_message;
    let mut notes = Vec::new();
    if x.folded_bars > 0 {
        notes.push(format!(
            "{} progress-bar states are folded into each bar's last",
            x.folded_bars
        ));
    }
    // The traceback and the exception's message are shown once, under Debug Logs.
    let above = match (x.folded_traceback, folded_message) {
        (0, 0) => None,
        (t, 0) => Some(format!("the traceback ({})", lines(t, "frame line"))),
        (0, m) => Some(format!(
            "the exception's message ({} here)",
            lines(m, "line")
        )),
        (t, m) => Some(format!(
            "the traceback ({}) and the exception's message ({} here)",
            lines(t, "frame line"),
            lines(m, "line")
        )),
    };
    if let Some(above) = above {
        let verb = if folded_message > 0 && x.folded_traceback > 0 {
            "are"
        } else {
            "is"
        };
        notes.push(format!("{above} {verb} under Debug Logs"));
    }
    if x.omitted > 0 {
        notes.push(format!("{} lines are left out in the middle", x.omitted));
    }
    if x.cut_lines > 0 {
        notes.push(format!(
            "{} long lines are cut after {line_chars} characters",
            x.cut_lines
        ));
    }
    let mut body = String::new();
    if !notes.is_empty() {
        let whole = match &e.console_file {
            Some(f) => format!("the whole console is in {} and report.json", code(f)),
            None => "the whole console is in report.json".to_string(),
        };
        body.push_str(&format!("{}; {whole}.\n\n", capitalize(&notes.join("; "))));
    }
    // The lines' date is said once, in the summary; each line keeps its time of day.
    let date = x.lines.first().and_then(|l| date_of(l)).map(str::to_string);
    let lines: Vec<String> = x
        .lines
        .iter()
        .map(|l| match (&date, date_of(l)) {
            (Some(d), Some(ld)) if d == ld => time_of_day(l),
            _ => l.clone(),
        })
        .collect();
    body.push_str(&fence("text", &lines.join("\n")));
    let on = date.map(|d| format!("{d}, ")).unwrap_or_default();
    let summary = if x.lines.len() == x.total {
        format!(
            "Server console of the failing run ({on}{} lines, from got prompt)",
            x.total
        )
    } else {
        format!(
            "Server console of the failing run ({on}{} lines from got prompt, {} shown)",
            x.total,
            x.lines.len()
        )
    };
    let mut out = details(&summary, &body);
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(lines: &[&str]) -> Vec<String> {
        lines
            .iter()
            .enumerate()
            .map(|(i, l)| format!("2026-12-01T10:00:{i:02}.000000 {l}"))
            .collect()
    }

    #[test]
    fn a_traceback_the_report_shows_above_is_one_line_of_the_console() {
        let lines = log(&[
            "got prompt",
            "!!! Exception during processing !!! CUDA out of memory.",
            "Traceback (most recent call last):",
            "  File \"/x/execution.py\", line 496, in execute",
            "    output_data = get_output_data()",
            "  File \"/x/nodes.py\", line 1525, in sample",
            "torch.OutOfMemoryError: CUDA out of memory.",
            "Prompt executed in 1.00 seconds",
        ]);
        let x = excerpt(&lines, 60, 400, true);
        assert_eq!(x.folded_traceback, 3);
        assert_eq!(x.total, 8);
        assert_eq!(x.lines.len(), 5);
        assert!(x.lines[2]
            .ends_with("Traceback (most recent call last): … 3 frame lines, under Debug Logs"));
        assert!(x.lines[3].ends_with("torch.OutOfMemoryError: CUDA out of memory."));
        assert!(!x.lines.iter().any(|l| l.contains("File \"")));
        // Without a traceback above, the console keeps it.
        assert_eq!(excerpt(&lines, 60, 400, false).lines.len(), 8);
    }

    #[test]
    fn lines_before_got_prompt_are_skipped_and_bars_fold_into_their_last_state() {
        let lines = log(&[
            "Prompt executed in 1.00 seconds",
            "got prompt",
            "  0%|          | 0/20 [00:00<?, ?it/s]",
            " 50%|█████     | 10/20 [00:05<00:05,  2.0it/s]",
            " 60%|██████    | 12/20 [00:06<00:04,  2.0it/s]",
            "  0%|          | 0/4 [00:00<?, ?it/s]",
            "  25%|██       | 1/4 [00:00<?, ?it/s]",
            "Got an OOM, unloading all loaded models.",
        ]);
        let x = excerpt(&lines, 60, 400, false);
        assert_eq!(x.total, 7);
        assert_eq!(x.folded_bars, 3);
        assert_eq!(x.omitted, 0);
        let bodies: Vec<&str> = x.lines.iter().map(|l| body(l)).collect();
        assert_eq!(
            bodies,
            vec![
                "got prompt",
                " 60%|██████    | 12/20 [00:06<00:04,  2.0it/s]",
                "  25%|██       | 1/4 [00:00<?, ?it/s]",
                "Got an OOM, unloading all loaded models."
            ]
        );
    }

    #[test]
    fn a_long_console_keeps_its_head_and_a_longer_tail_and_says_what_is_left_out() {
        let mut lines = vec!["got prompt".to_string()];
        lines.extend((0..200).map(|i| format!("line {i}")));
        lines.push("Prompt executed in 9.00 seconds".into());
        let lines = log(&lines.iter().map(String::as_str).collect::<Vec<_>>());
        let x = excerpt(&lines, 21, 400, false);
        assert_eq!(x.lines.len(), 21);
        assert_eq!(x.omitted, 202 - 20);
        assert_eq!(body(&x.lines[0]), "got prompt");
        assert_eq!(x.lines[5], "[… 182 lines left out here …]");
        assert!(x.lines[20].ends_with("Prompt executed in 9.00 seconds"));
        let e = Evidence {
            console: lines,
            console_file: Some("runs/s/04-LoRA-x/server.log".into()),
            ..evidence()
        };
        let md = markdown(&e, 21, 400);
        assert!(md.starts_with("<details>\n<summary>Server console of the failing run (2026-12-01, 202 lines from got prompt, 21 shown)</summary>\n\n182 lines are left out in the middle; the whole console is in `runs/s/04-LoRA-x/server.log` and report.json.\n\n```text\n"), "{md}");
        assert!(super::super::md::check(&md).is_empty());
    }

    #[test]
    fn long_lines_are_cut_and_mentions_stay_inside_the_fence() {
        let long = format!("got prompt {}", "x".repeat(1000));
        let lines = log(&[
            &long,
            "ping @alice about #12 and GH-3",
            "Prompt executed in 1 s",
        ]);
        let x = excerpt(&lines, 60, 100, false);
        assert_eq!(x.cut_lines, 1);
        assert!(x.lines[0].ends_with(&format!("[… {} more characters]", 27 + 1011 - 100)));
        let e = Evidence {
            console: lines,
            ..evidence()
        };
        let md = markdown(&e, 60, 100);
        let fence_start = md.find("```text\n").unwrap();
        let fence_end = md.rfind("```\n").unwrap();
        let at = md.find("@alice").unwrap();
        assert!(fence_start < at && at < fence_end, "{md}");
        assert!(md.contains("the whole console is in report.json"));
    }

    #[test]
    fn no_console_no_block() {
        assert_eq!(markdown(&evidence(), 60, 400), "");
    }

    /// The run's `run.json` is named with the platform's separator throughout.
    #[test]
    fn the_whole_part_is_named_in_the_runs_folder() {
        let dir = if cfg!(windows) {
            r"C:\runs\s\04-LoRA-x"
        } else {
            "runs/s/04-LoRA-x"
        };
        let e = Evidence {
            run_dir: Some(dir.into()),
            ..evidence()
        };
        let want = if cfg!(windows) {
            r"`C:\runs\s\04-LoRA-x\run.json`"
        } else {
            "`runs/s/04-LoRA-x/run.json`"
        };
        assert_eq!(
            super::super::budget::whole_in(&e, "traceback"),
            format!("the whole traceback is in {want} and report.json")
        );
    }

    fn evidence() -> Evidence {
        Evidence {
            step: 4,
            increment: "LoRA".into(),
            run_id: None,
            outcome: "failed".into(),
            node: None,
            exception_type: None,
            exception_message: None,
            failure_kind: None,
            stage: None,
            stage_evidence: None,
            stage_confidence: None,
            numbers: Default::default(),
            numbers_consistent: None,
            numbers_notes: vec![],
            last_progress: None,
            traceback: vec![],
            current_inputs: Default::default(),
            inputs_restored: Vec::new(),
            detail: None,
            oom_kill: None,
            kernel_log: None,
            kernel_lines: vec![],
            host_ram: None,
            console: vec![],
            console_file: None,
            run_dir: None,
        }
    }
}
