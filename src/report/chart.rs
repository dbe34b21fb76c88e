//! Mermaid `xychart-beta` charts (GitHub renders them in Markdown): peak VRAM per ladder step
//! as bars, peak RAM as a line over them, with the card's total as a reference line.

/// One bar: its x-axis label and value (None = no sample; drawn as 0).
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// The x-axis label.
    pub label: String,
    /// The value.
    pub value: Option<f64>,
}

/// Renders a fenced Mermaid bar chart with an optional horizontal reference line at
/// `reference` (drawn as a line series of equal values). Returns None when no bar has a value.
pub fn bar_chart(
    title: &str,
    y_label: &str,
    bars: &[Bar],
    reference: Option<f64>,
) -> Option<String> {
    bar_line_chart(title, y_label, bars, &[], reference)
}

/// Like [`bar_chart`], with a second series drawn as a line over the bars (one value per bar,
/// None drawn as 0; empty = no such line), before the reference line.
pub fn bar_line_chart(
    title: &str,
    y_label: &str,
    bars: &[Bar],
    line: &[Option<f64>],
    reference: Option<f64>,
) -> Option<String> {
    let max_bar = bars.iter().filter_map(|b| b.value).fold(f64::NAN, f64::max);
    if max_bar.is_nan() {
        return None;
    }
    let max_line = line.iter().flatten().fold(0.0, |a: f64, b| a.max(*b));
    let top = reference.unwrap_or(0.0).max(max_bar).max(max_line);
    let top = nice_ceiling(top * 1.05);
    let labels: Vec<String> = bars.iter().map(|b| quote(&b.label)).collect();
    let values: Vec<String> = bars
        .iter()
        .map(|b| number(b.value.unwrap_or(0.0)))
        .collect();
    let mut out = String::from("```mermaid\nxychart-beta\n");
    out.push_str(&format!("    title {}\n", quote(title)));
    out.push_str(&format!("    x-axis [{}]\n", labels.join(", ")));
    out.push_str(&format!(
        "    y-axis {} 0 --> {}\n",
        quote(y_label),
        number(top)
    ));
    out.push_str(&format!("    bar [{}]\n", values.join(", ")));
    if !line.is_empty() {
        let values: Vec<String> = line.iter().map(|v| number(v.unwrap_or(0.0))).collect();
        out.push_str(&format!("    line [{}]\n", values.join(", ")));
    }
    if let Some(r) = reference {
        let line: Vec<String> = bars.iter().map(|_| number(r)).collect();
        out.push_str(&format!("    line [{}]\n", line.join(", ")));
    }
    out.push_str("```\n");
    Some(out)
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

    #[test]
    fn chart_has_bars_labels_and_reference_line() {
        let bars = vec![
            Bar {
                label: "0 minimal".into(),
                value: Some(1500.0),
            },
            Bar {
                label: "1 \"res\"".into(),
                value: Some(7990.4),
            },
            Bar {
                label: "2 lora".into(),
                value: None,
            },
        ];
        let c = bar_chart("Peak VRAM", "MiB", &bars, Some(8192.0)).unwrap();
        assert!(c.starts_with("```mermaid\nxychart-beta\n"));
        assert!(c.contains("x-axis [\"0 minimal\", \"1 'res'\", \"2 lora\"]"));
        assert!(c.contains("bar [1500, 7990.4, 0]"));
        assert!(c.contains("line [8192, 8192, 8192]"));
        assert!(c.contains("y-axis \"MiB\" 0 --> 8800"));
        assert!(c.ends_with("```\n"));
    }

    #[test]
    fn a_second_series_is_a_line_before_the_reference_and_raises_the_axis() {
        let bars = vec![
            Bar {
                label: "0 minimal".into(),
                value: Some(1500.0),
            },
            Bar {
                label: "1 upscale".into(),
                value: Some(2000.0),
            },
        ];
        let c = bar_line_chart(
            "t",
            "MiB",
            &bars,
            &[Some(3000.0), Some(23552.0)],
            Some(8192.0),
        )
        .unwrap();
        let bar = c.find("bar [1500, 2000]").unwrap();
        let ram = c.find("line [3000, 23552]").unwrap();
        let total = c.find("line [8192, 8192]").unwrap();
        assert!(bar < ram && ram < total, "{c}");
        assert!(c.contains("y-axis \"MiB\" 0 --> 26000"), "{c}");
    }

    #[test]
    fn no_values_no_chart() {
        let bars = vec![Bar {
            label: "0".into(),
            value: None,
        }];
        assert!(bar_chart("t", "y", &bars, Some(1.0)).is_none());
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
