//! Report: the rows of the results table, their formatting as a Markdown
//! table and as JSON.

use std::fmt::Write as _;

use serde_json::{json, Value};

/// One line of the table. `clock` says which clock the row's figures and
/// ratio use: `cpu` (CPU time of the calling thread; for open, of the whole
/// child process) or `wall` (elapsed time).
pub struct Row {
    pub name: String,
    pub clock: &'static str,
    pub ours: f64,
    pub unit: &'static str,
    pub base: Option<f64>,
    pub base_label: String,
    pub ratio: Option<f64>,
    pub target: String,
    pub pass: Option<bool>,
    pub note: String,
}

pub fn row(name: impl Into<String>, clock: &'static str, ours: f64, unit: &'static str) -> Row {
    Row {
        name: name.into(),
        clock,
        ours,
        unit,
        base: None,
        base_label: String::new(),
        ratio: None,
        target: String::new(),
        pass: None,
        note: String::new(),
    }
}

impl Row {
    /// The baseline, and the ratio `ours / baseline`.
    pub fn base(mut self, v: f64, label: impl Into<String>) -> Row {
        self.base = Some(v);
        self.base_label = label.into();
        self.ratio = Some(self.ours / v);
        self
    }
    pub fn target(mut self, target: impl Into<String>, pass: bool) -> Row {
        self.target = target.into();
        self.pass = Some(pass);
        self
    }
    pub fn note(mut self, note: impl Into<String>) -> Row {
        self.note = note.into();
        self
    }
}

fn fmt_val(v: f64, unit: &str) -> String {
    if v.is_nan() {
        return "n/a".into();
    }
    match unit {
        "s" if v < 1e-3 => format!("{:.1} µs", v * 1e6),
        "s" if v < 1.0 => format!("{:.2} ms", v * 1e3),
        "s" => format!("{v:.3} s"),
        "ev/s" if v >= 1e6 => format!("{:.2}M ev/s", v / 1e6),
        "ev/s" => format!("{:.1}k ev/s", v / 1e3),
        "B" if v >= 1e9 => format!("{:.2} GB", v / 1e9),
        "B" => format!("{:.1} MB", v / 1e6),
        _ => format!("{v:.3} {unit}"),
    }
}

pub struct Report {
    pub rows: Vec<Row>,
}

impl Report {
    pub fn push(&mut self, row: Row) {
        eprintln!(
            "  {:<46} {:>4} {:>14}  ratio {}",
            row.name,
            row.clock,
            fmt_val(row.ours, row.unit),
            row.ratio.map_or("—".into(), |r| format!("{r:.3}"))
        );
        self.rows.push(row);
    }

    pub fn table(&self) -> String {
        let cells: Vec<[String; 7]> = self
            .rows
            .iter()
            .map(|r| {
                [
                    r.name.clone(),
                    r.clock.into(),
                    fmt_val(r.ours, r.unit),
                    r.base.map_or("—".into(), |b| {
                        format!("{} ({})", fmt_val(b, r.unit), r.base_label)
                    }),
                    r.ratio.map_or("—".into(), |x| format!("{x:.3}")),
                    if r.target.is_empty() {
                        "—".into()
                    } else {
                        r.target.clone()
                    },
                    match r.pass {
                        Some(true) => "pass".into(),
                        Some(false) => "FAIL".into(),
                        None => "—".into(),
                    },
                ]
            })
            .collect();
        let head = [
            "figure", "clock", "ours", "baseline", "ratio", "target", "result",
        ];
        let left = |i: usize| matches!(i, 0 | 1 | 3 | 5);
        let mut w = head.map(|h| h.chars().count());
        for c in &cells {
            for (i, x) in c.iter().enumerate() {
                w[i] = w[i].max(x.chars().count());
            }
        }
        let line = |c: &[String]| {
            let mut s = String::from("|");
            for (i, x) in c.iter().enumerate() {
                let pad = " ".repeat(w[i] - x.chars().count());
                if left(i) {
                    let _ = write!(s, " {x}{pad} |");
                } else {
                    let _ = write!(s, " {pad}{x} |");
                }
            }
            s.push('\n');
            s
        };
        let mut s = line(&head.map(String::from));
        s.push('|');
        for (i, width) in w.iter().enumerate() {
            let dashes = "-".repeat(*width);
            if left(i) {
                let _ = write!(s, "{dashes}--|");
            } else {
                let _ = write!(s, "-{dashes}:|");
            }
        }
        s.push('\n');
        for c in &cells {
            s.push_str(&line(c));
        }
        s
    }

    pub fn json(&self) -> Value {
        Value::Array(
            self.rows
                .iter()
                .map(|r| {
                    json!({
                        "figure": r.name.trim(),
                        "clock": r.clock,
                        "ours": r.ours,
                        "unit": r.unit,
                        "baseline": r.base,
                        "baselineLabel": r.base_label,
                        "ratio": r.ratio,
                        "target": r.target,
                        "pass": r.pass,
                        "note": r.note,
                    })
                })
                .collect(),
        )
    }
}

pub fn fmt_n(n: usize) -> String {
    match n {
        n if n >= 1_000_000 && n % 1_000_000 == 0 => format!("{}M", n / 1_000_000),
        n if n >= 1_000 && n % 1_000 == 0 => format!("{}k", n / 1_000),
        n => n.to_string(),
    }
}
