//! The run's share of the server console. ComfyUI's console is global (every subscribed client
//! gets every prompt's lines), so the lines are attributed by their place in our socket's frame
//! order: our `got prompt` is the first one after we submitted; our execution's lines come after
//! our `execution_start` frame; they end with the first `Prompt executed in …` after our
//! terminal event. `got prompt` lines of other clients inside that window (and the validation
//! lines that follow them) are left out, and the record says so. Pure: fed by `execute`.

use crate::comfy::console::{classify, lines_of, ConsoleLine, MemoryEvent, MemoryParser};
use crate::comfy::LogEntry;
use serde::{Deserialize, Serialize};

/// File name of the run's console lines inside a run folder.
pub const SERVER_LOG_FILE: &str = "server.log";

/// What the run record says about the console (`run.json` → `console`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConsoleInfo {
    /// The server streams its console (`/internal/logs/subscribe` answered).
    pub available: bool,
    /// Why there is no console, or what limits it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Lines kept for this run (the run folder's `server.log`).
    pub lines: usize,
    /// Our prompt's `got prompt` line was seen.
    pub start_seen: bool,
    /// The `Prompt executed in …` line that ends our prompt was seen.
    pub end_seen: bool,
    /// Lines taken from `/internal/logs/raw` because the socket missed them.
    #[serde(default)]
    pub backfilled: usize,
    /// Lines left out as other prompts' (before ours, or other clients' submissions).
    #[serde(default)]
    pub foreign_lines: usize,
    /// Lines of ours left out of `server.log` because the console was flooded (the first
    /// and the last 10 000 are kept).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_lines: usize,
    /// Reasons the attribution may be wrong (empty when sure).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unsure: Vec<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Before our `POST /prompt`: every line is someone else's.
    Before,
    /// Submitted, our prompt not started: our `got prompt`, then others' lines.
    Submitted,
    /// Our `execution_start` was seen.
    Running,
    /// Our terminal event was seen; waiting for `Prompt executed`.
    Ended,
    /// `Prompt executed` seen: nothing more is ours.
    Done,
}

/// Collects one run's console lines.
#[derive(Debug)]
pub(crate) struct RunConsole {
    phase: Phase,
    /// The first [`HEAD_LINES`] lines of ours.
    kept: Vec<(String, String)>,
    /// The last [`TAIL_LINES`] lines of ours after those (a flood's middle is dropped).
    tail: std::collections::VecDeque<(String, String)>,
    /// Lines of ours dropped between `kept` and `tail`.
    dropped: usize,
    /// Inside another client's validation output (after its `got prompt`).
    foreign_validation: bool,
    /// Right after our own `got prompt` (our own validation lines follow).
    own_validation: bool,
    foreign_got_prompts: usize,
    foreign_lines: usize,
    backfilled: usize,
    start_seen: bool,
    end_seen: bool,
    unsure: Vec<String>,
}

/// Console lines kept from the start of a run, and from its end: a server (or a node) that
/// floods its console cannot grow `server.log` and the run's memory without bound; the lines
/// that place a failure — the first ones and the last ones — are kept.
const HEAD_LINES: usize = 10_000;
/// See [`HEAD_LINES`].
const TAIL_LINES: usize = 10_000;
/// Longest console line kept (bytes; a longer one is cut at a character boundary).
const MAX_LINE_BYTES: usize = 16 * 1024;

impl Default for RunConsole {
    fn default() -> Self {
        RunConsole::new()
    }
}

/// Lines ComfyUI prints while validating a prompt, right after its `got prompt`.
fn is_validation_line(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("Failed to validate prompt")
        || t.starts_with("* ")
        || t.starts_with("- ")
        || t.starts_with("Output will be ignored")
        || t.starts_with("invalid prompt:")
}

impl RunConsole {
    /// A collector before submission.
    pub(crate) fn new() -> RunConsole {
        RunConsole {
            phase: Phase::Before,
            kept: Vec::new(),
            tail: std::collections::VecDeque::new(),
            dropped: 0,
            foreign_validation: false,
            own_validation: false,
            foreign_got_prompts: 0,
            foreign_lines: 0,
            backfilled: 0,
            start_seen: false,
            end_seen: false,
            unsure: Vec::new(),
        }
    }

    /// Our `POST /prompt` is about to be sent.
    pub(crate) fn submitted(&mut self) {
        if self.phase == Phase::Before {
            self.phase = Phase::Submitted;
        }
    }

    /// Our `execution_start` was received.
    pub(crate) fn started(&mut self) {
        if matches!(self.phase, Phase::Before | Phase::Submitted) {
            self.phase = Phase::Running;
        }
    }

    /// Our terminal event (success, error, interrupted) was received.
    pub(crate) fn ended(&mut self) {
        if self.phase != Phase::Done {
            self.phase = Phase::Ended;
        }
    }

    /// `Prompt executed` of our prompt was seen: no more lines are ours.
    pub(crate) fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// Lines kept so far.
    pub(crate) fn len(&self) -> usize {
        self.kept.len() + self.tail.len()
    }

    /// The last line kept.
    fn last_kept(&self) -> Option<&(String, String)> {
        self.tail.back().or(self.kept.last())
    }

    /// Feeds console writes in the order they arrived on our socket.
    pub(crate) fn feed(&mut self, entries: &[LogEntry]) {
        for (t, line) in lines_of(entries) {
            self.line(t, line);
        }
    }

    fn keep(&mut self, t: &str, line: &str) {
        let mut line = line.trim_end();
        if line.len() > MAX_LINE_BYTES {
            let mut cut = MAX_LINE_BYTES;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            line = &line[..cut];
        }
        let entry = (t.to_string(), line.to_string());
        if self.kept.len() < HEAD_LINES {
            self.kept.push(entry);
            return;
        }
        self.tail.push_back(entry);
        if self.tail.len() > TAIL_LINES {
            self.tail.pop_front();
            self.dropped += 1;
        }
    }

    fn foreign(&mut self) {
        self.foreign_lines += 1;
    }

    fn line(&mut self, t: &str, line: &str) {
        let kind = classify(line);
        let got_prompt = kind == Some(ConsoleLine::GotPrompt);
        let executed = matches!(kind, Some(ConsoleLine::PromptExecuted { .. }));
        match self.phase {
            Phase::Before | Phase::Done => self.foreign(),
            Phase::Submitted => {
                if got_prompt && !self.start_seen {
                    self.start_seen = true;
                    self.own_validation = true;
                    self.keep(t, line);
                } else if self.own_validation && is_validation_line(line) {
                    self.keep(t, line);
                } else {
                    self.own_validation = false;
                    if got_prompt {
                        self.foreign_got_prompts += 1;
                    }
                    // Lines of a prompt that runs ahead of ours, or another submission.
                    self.foreign();
                }
            }
            Phase::Running | Phase::Ended => {
                self.own_validation = false;
                if got_prompt {
                    self.foreign_got_prompts += 1;
                    self.foreign_validation = true;
                    self.foreign();
                    return;
                }
                if self.foreign_validation && is_validation_line(line) {
                    self.foreign();
                    return;
                }
                self.foreign_validation = false;
                self.keep(t, line);
                if executed {
                    if self.phase == Phase::Running {
                        self.unsure.push(
                            "`Prompt executed` came before our prompt's end event on the socket"
                                .into(),
                        );
                    }
                    self.end_seen = true;
                    self.phase = Phase::Done;
                }
            }
        }
    }

    /// Adds the lines the socket missed from `/internal/logs/raw` (the console's ring buffer):
    /// those after the last line kept, up to our `Prompt executed`. `ahead` is how many prompts
    /// were seen ahead of ours (their lines cannot be told from ours once the socket is gone
    /// before our prompt started).
    pub(crate) fn backfill(&mut self, raw: &[LogEntry], ahead: usize) {
        if self.is_done() {
            return;
        }
        let raw_lines: Vec<(&str, &str)> = lines_of(raw).collect();
        let start = match self.last_kept() {
            Some((t, l)) => match raw_lines
                .iter()
                .rposition(|(rt, rl)| rt == t && rl.trim_end() == l)
            {
                Some(i) => i + 1,
                None => {
                    self.unsure.push(
                        "the socket missed console lines and /internal/logs/raw no longer holds \
                         our last line (its ring buffer moved on): the console is incomplete"
                            .into(),
                    );
                    return;
                }
            },
            None => {
                self.unsure.push(
                    "the socket missed our prompt's `got prompt`: /internal/logs/raw cannot tell \
                     our lines from other prompts', so none were taken from it"
                        .into(),
                );
                return;
            }
        };
        if self.phase == Phase::Submitted {
            // Our start event was missed too; what follows our `got prompt` is ours only if no
            // prompt ran ahead of ours.
            if ahead > 0 {
                self.unsure.push(format!(
                    "the socket dropped before our prompt started and {ahead} prompt(s) were \
                     ahead of ours: lines before ours may be theirs"
                ));
            }
            self.phase = Phase::Running;
        }
        let before = self.len();
        for (t, line) in &raw_lines[start..] {
            self.line(t, line);
            if self.is_done() {
                break;
            }
        }
        self.backfilled += self.len() - before;
    }

    /// The record, the text of `server.log` (`<server time> <line>` per line) and the memory
    /// events of the kept lines.
    pub(crate) fn finish(
        self,
        available: bool,
        note: Option<String>,
    ) -> (ConsoleInfo, String, Vec<MemoryEvent>) {
        let mut unsure = self.unsure;
        if self.foreign_got_prompts > 0 {
            unsure.push(format!(
                "{} other prompt(s) were submitted during our run; their `got prompt` and \
                 validation lines were left out, any other line they caused could not be told apart",
                self.foreign_got_prompts
            ));
        }
        if available && !self.end_seen {
            unsure.push("our prompt's `Prompt executed` line was not seen".into());
        }
        if self.dropped > 0 {
            unsure.push(format!(
                "the console was flooded: {} of our lines between the first {HEAD_LINES} and the \
                 last {TAIL_LINES} were left out of server.log",
                self.dropped
            ));
        }
        let lines = self.kept.len() + self.tail.len();
        let mut parser = MemoryParser::new();
        let mut text = String::new();
        for (i, (t, line)) in self.kept.iter().chain(self.tail.iter()).enumerate() {
            if i == self.kept.len() && self.dropped > 0 {
                text.push_str(&format!(
                    "… {} console lines left out (only the first {HEAD_LINES} and the last \
                     {TAIL_LINES} are kept) …\n",
                    self.dropped
                ));
            }
            parser.feed(Some(t), line);
            text.push_str(t);
            text.push(' ');
            text.push_str(line.trim_start_matches('\r'));
            text.push('\n');
        }
        let info = ConsoleInfo {
            available,
            note,
            lines,
            dropped_lines: self.dropped,
            start_seen: self.start_seen,
            end_seen: self.end_seen,
            backfilled: self.backfilled,
            foreign_lines: self.foreign_lines,
            unsure: if available { unsure } else { Vec::new() },
        };
        (info, text, parser.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(t: &str, m: &str) -> LogEntry {
        LogEntry {
            t: t.into(),
            m: m.into(),
        }
    }

    #[test]
    fn a_flooded_console_keeps_its_first_and_last_lines() {
        let mut c = RunConsole::new();
        c.submitted();
        c.feed(&[e("00", "got prompt\n")]);
        c.started();
        let n = HEAD_LINES + TAIL_LINES + 5_000;
        let flood: Vec<LogEntry> = (1..n)
            .map(|i| e(&format!("{i:06}"), &format!("line {i}\n")))
            .collect();
        c.feed(&flood);
        let long = "x".repeat(MAX_LINE_BYTES + 100) + "é";
        c.feed(&[
            e("999998", &format!("{long}\n")),
            e("999999", "Prompt executed in 1.00 seconds\n"),
        ]);
        assert_eq!(c.len(), HEAD_LINES + TAIL_LINES);
        let (info, text, _) = c.finish(true, None);
        assert_eq!(info.lines, HEAD_LINES + TAIL_LINES);
        assert_eq!(info.dropped_lines, n + 2 - HEAD_LINES - TAIL_LINES);
        assert!(info.end_seen);
        assert!(
            info.unsure.iter().any(|u| u.contains("flooded")),
            "{:?}",
            info.unsure
        );
        assert!(text.starts_with("00 got prompt\n000001 line 1\n"));
        assert!(text.contains("console lines left out"));
        assert!(text.ends_with("999999 Prompt executed in 1.00 seconds\n"));
        let cut = text.lines().find(|l| l.starts_with("999998")).unwrap();
        assert_eq!(cut.len(), "999998 ".len() + MAX_LINE_BYTES);
    }

    #[test]
    fn other_prompts_lines_are_left_out() {
        let mut c = RunConsole::new();
        c.feed(&[e("00", "Prompt executed in 1.00 seconds\n")]);
        c.submitted();
        c.feed(&[
            e("01", "got prompt\n"),
            // a prompt ahead of ours still runs
            e("02", "Requested to load Flux\n"),
            e("03", "Prompt executed in 9.00 seconds\n"),
        ]);
        c.started();
        c.feed(&[
            e("04", "Requested to load BaseModel\n"),
            // another client submits an invalid prompt while ours runs
            e("05", "got prompt\n"),
            e("06", "Failed to validate prompt for output 9:\n"),
            e("07", "* CheckpointLoaderSimple 4:\n"),
            e("08", "  - Value not in list: ckpt_name\n"),
            e("09", "Output will be ignored\n"),
            e(
                "10",
                "invalid prompt: {'type': 'prompt_outputs_failed_validation'}\n",
            ),
            e(
                "11",
                "loaded completely 9.5367431640625e+25 3278.812271118164 True\n",
            ),
        ]);
        c.ended();
        c.feed(&[
            e("12", "Prompt executed in 2.00 seconds\n"),
            e("13", "got prompt\n"),
        ]);
        assert!(c.is_done());
        let (info, text, events) = c.finish(true, None);
        assert_eq!(
            text,
            "01 got prompt\n04 Requested to load BaseModel\n11 loaded completely 9.5367431640625e+25 3278.812271118164 True\n12 Prompt executed in 2.00 seconds\n"
        );
        assert_eq!(info.foreign_lines, 10);
        assert!(info.start_seen && info.end_seen);
        assert_eq!(info.unsure.len(), 1, "{:?}", info.unsure);
        assert_eq!(events.len(), 1);
    }

    #[test]
    fn backfill_continues_after_the_last_line_kept() {
        let mut c = RunConsole::new();
        c.submitted();
        c.feed(&[e("01", "got prompt\n")]);
        c.started();
        c.feed(&[e("02", "Requested to load BaseModel\n")]);
        // the socket drops here; the run ends
        c.ended();
        let raw = [
            e("00", "Prompt executed in 1.00 seconds\n"),
            e("01", "got prompt\n"),
            e("02", "Requested to load BaseModel\n"),
            e("03", "loaded completely 9.5367431640625e+25 3278.812271118164 True\n"),
            e("04", "Warning: Ran out of memory when regular VAE decoding, retrying with tiled VAE decoding.\n"),
            e("05", "Prompt executed in 2.00 seconds\n"),
            e("06", "got prompt\n"),
        ];
        c.backfill(&raw, 0);
        let (info, _, events) = c.finish(true, None);
        assert_eq!((info.lines, info.backfilled), (5, 3));
        assert!(info.end_seen && info.unsure.is_empty(), "{info:?}");
        assert!(events.iter().any(MemoryEvent::is_fallback));
    }

    #[test]
    fn backfill_without_our_start_takes_nothing_and_says_so() {
        let mut c = RunConsole::new();
        c.submitted();
        c.ended();
        c.backfill(
            &[
                e("01", "got prompt\n"),
                e("02", "Prompt executed in 1 seconds\n"),
            ],
            0,
        );
        let (info, text, _) = c.finish(true, None);
        assert_eq!(text, "");
        assert!(!info.unsure.is_empty());
    }
}
