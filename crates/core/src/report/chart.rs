//! The peak-memory chart of a ladder as a Mermaid `xychart-beta` block (GitHub renders it in
//! Markdown): several bar series and lines over one categorical x-axis, with the series' colours
//! set in the chart's front matter. It is kept in report.json (`workflows[].memory_chart`), ready
//! to paste into an issue comment; report.md, sized for an issue, says it is there.
//!
//! Mermaid's xychart has no missing value: every series holds one number per x label. A bar of
//! value 0 on a y-axis that starts at 0 has no height, so Mermaid draws nothing there — this is
//! how a series leaves a label out (the passed series is 0 where the step failed and the other
//! way round; checked in Mermaid 11's bar plot: the bar's height is the distance from the value
//! to the axis bottom, and newer versions that stack bar series set a 0 value's height to 0).
//! Lines cannot leave a gap: a missing line value is drawn at 0, so callers say so.

/// One series: a name (for the caption, not drawn: xychart has no legend), its colour, and one
/// value per x label (None draws nothing for a bar, 0 for a line).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Series {
    /// What it shows.
    pub name: String,
    /// A `#rrggbb` colour.
    pub color: &'static str,
    /// One value per x label.
    pub values: Vec<Option<f64>>,
}

/// A chart: title, y-axis label, x labels, bar series (drawn first) and line series.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct XyChart {
    /// The title.
    pub title: String,
    /// The y-axis label.
    pub y_label: String,
    /// The x-axis labels.
    pub labels: Vec<String>,
    /// Bar series, in drawing order.
    pub bars: Vec<Series>,
    /// Line series, drawn over the bars.
    pub lines: Vec<Series>,
}

impl XyChart {
    /// The fenced Mermaid block; None when no x label or no bar has a value.
    pub(crate) fn render(&self) -> Option<String> {
        if self.labels.is_empty() {
            return None;
        }
        let values = |s: &Series| s.values.iter().flatten().copied().collect::<Vec<f64>>();
        let max_bar = self.bars.iter().flat_map(values).fold(f64::NAN, f64::max);
        if max_bar.is_nan() {
            return None;
        }
        let max_line = self.lines.iter().flat_map(values).fold(0.0, f64::max);
        let top = nice_ceiling(max_bar.max(max_line) * 1.05);
        let series: Vec<&Series> = self.bars.iter().chain(&self.lines).collect();
        // Colours go to the plots in declaration order. Some Mermaid versions take the index
        // modulo (palette length − 1), so the palette repeats its last colour once more.
        let mut palette: Vec<&str> = series.iter().map(|s| s.color).collect();
        palette.push(palette.last().copied().unwrap_or("#757575"));
        let mut out = String::from("```mermaid\n---\nconfig:\n  themeVariables:\n    xyChart:\n");
        out.push_str(&format!(
            "      plotColorPalette: \"{}\"\n---\nxychart-beta\n",
            palette.join(", ")
        ));
        out.push_str(&format!("    title {}\n", quote(&self.title)));
        let labels: Vec<String> = self.labels.iter().map(|l| quote(l)).collect();
        out.push_str(&format!("    x-axis [{}]\n", labels.join(", ")));
        out.push_str(&format!(
            "    y-axis {} 0 --> {}\n",
            quote(&self.y_label),
            number(top)
        ));
        let row = |s: &Series| {
            (0..self.labels.len())
                .map(|i| number(s.values.get(i).copied().flatten().unwrap_or(0.0)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        for s in &self.bars {
            out.push_str(&format!("    bar [{}]\n", row(s)));
        }
        for s in &self.lines {
            out.push_str(&format!("    line [{}]\n", row(s)));
        }
        out.push_str("```\n");
        Some(out)
    }
}

/// Colour of the passed steps' bars.
pub(crate) const PASSED: &str = "#2e7d32";
/// Colour of the failed steps' bars.
pub(crate) const FAILED: &str = "#c62828";
/// Colour of the peak RAM line.
pub(crate) const RAM: &str = "#1565c0";
/// Colour of the device total line.
pub(crate) const TOTAL: &str = "#757575";

/// Whether a ladder outcome counts as a failure of the variant (the failed bar series).
fn is_failure(outcome: &str) -> bool {
    matches!(
        outcome,
        "failed" | "timeout" | "server_lost" | "memory_fallback"
    )
}

/// The peak-memory chart of a workflow's ladder and its caption (Markdown), so the picture says
/// what the table says: only the steps that ran are on the x-axis; peak VRAM of passed runs is
/// one bar series and of failed runs another (a step's label says how it ended when it did not
/// simply pass); peak RAM is a line when any run sampled it; the device total is the last line.
/// None when no run has a VRAM sample.
pub(crate) fn ladder_chart(w: &crate::report::model::WorkflowReport) -> Option<(String, String)> {
    let ran: Vec<&crate::report::model::LadderRow> =
        w.ladder.iter().filter(|r| r.outcome != "not_run").collect();
    let ram = ran.iter().any(|r| r.peak_ram_mib.is_some());
    let labels = ran
        .iter()
        .map(|r| {
            let how = match r.outcome.as_str() {
                "passed" if !r.delivered.memory_fallbacks.is_empty() => {
                    " (passed, fallback)".to_string()
                }
                "passed" => String::new(),
                other => format!(" ({})", other.replace('_', " ")),
            };
            format!("{} {}{how}", r.step, r.increment)
        })
        .collect();
    // A failed run's bar is what its OOM message proves it needed (up to the device total),
    // when that is more than the sampled peak, which can miss the spike before the OOM.
    let total = w.vram.total_mib;
    let vram = |keep: fn(&str) -> bool| -> Vec<Option<f64>> {
        ran.iter()
            .map(|r| {
                let needed = r.oom_needed_mib.map(|n| total.map_or(n, |t| n.min(t)));
                let peak = match (r.peak_vram_mib, needed) {
                    (Some(p), Some(n)) => Some(p.max(n)),
                    (p, n) => p.or(n),
                };
                peak.filter(|_| keep(&r.outcome))
            })
            .collect()
    };
    let mut lines = Vec::new();
    if ram {
        lines.push(Series {
            name: "peak RAM".into(),
            color: RAM,
            values: ran.iter().map(|r| r.peak_ram_mib).collect(),
        });
    }
    if let Some(total) = w.vram.total_mib {
        lines.push(Series {
            name: "device total".into(),
            color: TOTAL,
            values: vec![Some(total); ran.len()],
        });
    }
    let what = if ram {
        "Peak VRAM and RAM"
    } else {
        "Peak VRAM"
    };
    let chart = XyChart {
        title: match w.vram.sample_interval_ms {
            Some(ms) => format!("{what} per step (MiB, sampled every {ms} ms)"),
            None => format!("{what} per step (MiB)"),
        },
        y_label: "MiB".into(),
        labels,
        bars: vec![
            Series {
                name: "passed".into(),
                color: PASSED,
                values: vram(|o| o == "passed"),
            },
            Series {
                name: "failed".into(),
                color: FAILED,
                values: vram(is_failure),
            },
        ],
        lines,
    }
    .render()?;
    let mut caption = String::from(
        "Bars: peak VRAM of each step that ran — passed runs in the first series (green), failed \
         runs in the second (red; the step's label says how it ended)",
    );
    if ran
        .iter()
        .any(|r| r.oom_needed_mib.is_some() && is_failure(&r.outcome))
    {
        caption.push_str(
            "; a run that ran out of device memory is drawn at what its OOM message proves it \
             needed (up to the device's total) when that is more than the sampled peak",
        );
    }
    if ram {
        caption.push_str("; blue line: peak RAM of each step's run");
        if ran.iter().any(|r| r.peak_ram_mib.is_none()) {
            caption.push_str(" (0 where a run has no RAM sample)");
        }
    }
    if let Some(total) = w.vram.total_mib {
        let mib = if total >= 100.0 {
            format!("{total:.0} MiB")
        } else {
            format!("{total:.1} MiB")
        };
        caption.push_str(&format!("; grey line: the device's total ({mib})"));
    }
    let not_run = w.ladder.len() - ran.len();
    if not_run > 0 {
        caption.push_str(&format!(
            "; {not_run} step{} not run {} left out",
            if not_run == 1 { "" } else { "s" },
            if not_run == 1 { "is" } else { "are" }
        ));
    }
    let unsampled = ran
        .iter()
        .filter(|r| {
            (r.peak_vram_mib.is_none() && r.oom_needed_mib.is_none())
                || !(r.outcome == "passed" || is_failure(&r.outcome))
        })
        .count();
    if unsampled > 0 {
        caption.push_str(&format!(
            "; {unsampled} step{} without a VRAM sample or a pass/fail outcome {} no bar",
            if unsampled == 1 { "" } else { "s" },
            if unsampled == 1 { "has" } else { "have" }
        ));
    }
    caption.push('.');
    Some((chart, caption))
}

/// A Mermaid string literal: double quotes cannot be escaped there, so they become single ones;
/// line breaks become spaces.
fn quote(s: &str) -> String {
    let clean: String = s
        .chars()
        .map(|c| match c {
            '"' => '\'',
            '\n' | '\r' => ' ',
            c => c,
        })
        .collect();
    format!("\"{clean}\"")
}

/// A number as Mermaid reads it: integers without a fraction, else one decimal.
fn number(v: f64) -> String {
    if (v - v.round()).abs() < 0.05 {
        format!("{}", v.round() as i64)
    } else {
        format!("{v:.1}")
    }
}

/// Rounds up to a multiple of a fifth of the value's power of ten (at least 1): 8601 → 8800.
fn nice_ceiling(v: f64) -> f64 {
    if v <= 1.0 {
        return 1.0;
    }
    let step = 10f64.powf(v.log10().floor()) / 5.0;
    (v / step).ceil() * step
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(name: &str, color: &'static str, values: &[Option<f64>]) -> Series {
        Series {
            name: name.into(),
            color,
            values: values.to_vec(),
        }
    }

    fn chart() -> XyChart {
        XyChart {
            title: "Peak VRAM".into(),
            y_label: "MiB".into(),
            labels: vec![
                "0 minimal".into(),
                "1 \"res\"".into(),
                "4 lora (failed)".into(),
            ],
            bars: vec![
                series("passed", "#2e7d32", &[Some(1500.0), Some(7990.4), None]),
                series("failed", "#c62828", &[None, None, Some(8100.0)]),
            ],
            lines: vec![series("total", "#757575", &[Some(8192.0); 3])],
        }
    }

    #[test]
    fn each_series_is_one_bar_or_line_and_missing_bars_are_zero() {
        let c = chart().render().unwrap();
        assert!(c.starts_with("```mermaid\n---\nconfig:\n"), "{c}");
        assert!(c.contains("\n---\nxychart-beta\n"), "{c}");
        assert!(c.contains("x-axis [\"0 minimal\", \"1 'res'\", \"4 lora (failed)\"]"));
        let passed = c.find("    bar [1500, 7990.4, 0]\n").unwrap();
        let failed = c.find("    bar [0, 0, 8100]\n").unwrap();
        let total = c.find("    line [8192, 8192, 8192]\n").unwrap();
        assert!(passed < failed && failed < total, "{c}");
        assert!(c.contains("y-axis \"MiB\" 0 --> 8800"), "{c}");
        assert!(c.ends_with("```\n"));
    }

    #[test]
    fn the_palette_follows_the_declaration_order_with_the_last_colour_repeated() {
        let c = chart().render().unwrap();
        assert!(
            c.contains("      plotColorPalette: \"#2e7d32, #c62828, #757575, #757575\"\n"),
            "{c}"
        );
    }

    #[test]
    fn lines_raise_the_axis_and_draw_missing_values_at_zero() {
        let mut c = chart();
        c.lines.insert(
            0,
            series("ram", "#1565c0", &[Some(3000.0), None, Some(23552.0)]),
        );
        let text = c.render().unwrap();
        let ram = text.find("    line [3000, 0, 23552]\n").unwrap();
        let total = text.find("    line [8192, 8192, 8192]\n").unwrap();
        assert!(ram < total);
        assert!(text.contains("y-axis \"MiB\" 0 --> 26000"), "{text}");
    }

    #[test]
    fn no_values_or_no_labels_no_chart() {
        let mut c = chart();
        for b in &mut c.bars {
            b.values = vec![None; 3];
        }
        assert!(c.render().is_none());
        let mut c = chart();
        c.labels.clear();
        assert!(c.render().is_none());
    }

    #[test]
    fn nice_ceilings() {
        assert_eq!(nice_ceiling(8601.6), 8800.0);
        assert_eq!(nice_ceiling(25804.8), 26000.0);
        assert_eq!(nice_ceiling(24000.0), 24000.0);
        assert_eq!(nice_ceiling(1800.0), 1800.0);
        assert_eq!(nice_ceiling(0.5), 1.0);
    }
}
