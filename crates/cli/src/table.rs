//! Human tables that fit the terminal and stream: column widths come from
//! the first page of rows (all of them for a short table), measured in
//! display columns (a wide character takes two); on a terminal the table
//! fits its width, the widest text columns cut with `…`. Later rows are
//! printed as they come, cut to the same widths on a terminal (in a pipe
//! a longer cell is printed whole).

use console::{pad_str, truncate_str, Alignment, Style};

use super::output::{terminal_safe, Out};
use super::Ctx;

/// How many rows decide the column widths.
const PAGE: usize = 256;

/// A column is never cut below this many display columns.
const MIN_CUT: usize = 8;

/// A table being printed.
pub struct Table {
    header: Vec<String>,
    right: Vec<bool>,
    min: Vec<usize>,
    /// The terminal's width, when the table must fit it.
    fit: Option<usize>,
    /// Before the widths are known: the rows of the first page.
    page: Vec<Vec<String>>,
    widths: Option<Vec<usize>>,
    indent: &'static str,
    bold: Style,
    /// No header line.
    bare: bool,
}

impl Table {
    /// A table with columns `header`; `right[i]` right-aligns column `i`.
    /// On a terminal it fits its width and its header is bold.
    pub fn new(ctx: Ctx, header: &[&str], right: &[bool]) -> Table {
        Table {
            header: header.iter().map(|h| h.to_string()).collect(),
            right: (0..header.len())
                .map(|i| right.get(i).copied().unwrap_or(false))
                .collect(),
            min: vec![0; header.len()],
            fit: ctx.term.width,
            page: Vec::new(),
            widths: None,
            indent: "",
            bold: Style::new().bold().force_styling(ctx.term.colour),
            bare: false,
        }
    }

    /// Column `col` is at least `width` wide (a width known before the
    /// rows come, such as the digits of the last seq).
    pub fn min_width(mut self, col: usize, width: usize) -> Table {
        self.min[col] = width;
        self
    }

    /// Every line starts with `indent`.
    pub fn indent(mut self, indent: &'static str) -> Table {
        self.indent = indent;
        self
    }

    /// No header line (a list of labelled values).
    pub fn bare(mut self) -> Table {
        self.bare = true;
        self
    }

    /// Print `row` (once the widths are known; the first page waits).
    pub fn push(&mut self, out: &mut Out, row: Vec<String>) {
        let row: Vec<String> = row
            .into_iter()
            .map(|c| terminal_safe(&c).into_owned())
            .collect();
        match &self.widths {
            Some(w) => {
                let line = render(&row, w, &self.right, self.fit.is_some());
                out.raw(&format!("{}{line}\n", self.indent));
            }
            None => {
                self.page.push(row);
                if self.page.len() >= PAGE {
                    self.lay_out(out);
                }
            }
        }
    }

    /// Print what is still waiting (a table shorter than a page).
    pub fn finish(mut self, out: &mut Out) {
        if self.widths.is_none() {
            self.lay_out(out);
        }
    }

    fn lay_out(&mut self, out: &mut Out) {
        let avail = self.fit.map(|w| w.saturating_sub(self.indent.len()));
        let widths = widths(&self.header, &self.page, &self.min, &self.right, avail);
        let cut = self.fit.is_some();
        if !self.bare {
            let header = render(&self.header, &widths, &self.right, cut);
            out.raw(&format!("{}{}\n", self.indent, self.bold.apply_to(header)));
        }
        for row in std::mem::take(&mut self.page) {
            let line = render(&row, &widths, &self.right, cut);
            out.raw(&format!("{}{line}\n", self.indent));
        }
        self.widths = Some(widths);
    }
}

/// The display width of `cell`.
fn width(cell: &str) -> usize {
    console::measure_text_width(cell)
}

/// Column widths: the widest of the header, the rows and `min`; with
/// `avail`, cut to fit it, the widest left-aligned column first.
fn widths(
    header: &[String],
    rows: &[Vec<String>],
    min: &[usize],
    right: &[bool],
    avail: Option<usize>,
) -> Vec<usize> {
    let mut w: Vec<usize> = header
        .iter()
        .zip(min)
        .map(|(h, m)| width(h).max(*m))
        .collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(w.len()) {
            w[i] = w[i].max(width(cell));
        }
    }
    let Some(avail) = avail else {
        return w;
    };
    let total = |w: &[usize]| w.iter().sum::<usize>() + 2 * w.len().saturating_sub(1);
    while total(&w) > avail {
        let widest = (0..w.len())
            .filter(|&i| !right[i] && w[i] > MIN_CUT)
            .max_by_key(|&i| (w[i], i));
        let Some(i) = widest else {
            break;
        };
        let over = total(&w) - avail;
        w[i] = w[i].saturating_sub(over).max(MIN_CUT);
    }
    w
}

/// One line: cells padded (or, with `cut`, cut with `…`) to `widths`,
/// two spaces apart; the last column is not padded.
fn render(row: &[String], widths: &[usize], right: &[bool], cut: bool) -> String {
    let mut line = String::new();
    for (i, w) in widths.iter().enumerate() {
        let cell = row.get(i).map_or("", String::as_str);
        let last = i + 1 == widths.len();
        let cell = match cut {
            true => truncate_str(cell, *w, "…"),
            false => cell.into(),
        };
        let align = if right[i] {
            Alignment::Right
        } else {
            Alignment::Left
        };
        if last && !right[i] {
            line.push_str(&cell);
        } else {
            line.push_str(&pad_str(&cell, *w, align, None));
        }
        if !last {
            line.push_str("  ");
        }
    }
    line.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(rows: &[&[&str]]) -> Vec<Vec<String>> {
        rows.iter()
            .map(|r| r.iter().map(|c| c.to_string()).collect())
            .collect()
    }

    #[test]
    fn columns_align_in_display_columns() {
        let header = rows(&[&["A", "BB", "C"]]).remove(0);
        let body = rows(&[&["日本", "1", "x"], &["xyz", "22", "wide 語"]]);
        let w = widths(&header, &body, &[0, 0, 0], &[false, true, false], None);
        assert_eq!(w, [4, 2, 7]);
        let right = [false, true, false];
        assert_eq!(render(&header, &w, &right, false), "A     BB  C");
        assert_eq!(render(&body[0], &w, &right, false), "日本   1  x");
        assert_eq!(render(&body[1], &w, &right, false), "xyz   22  wide 語");
    }

    #[test]
    fn a_table_fits_the_terminal_by_cutting_its_widest_text_column() {
        let header = rows(&[&["SEQ", "TYPE", "DATA"]]).remove(0);
        let data = "d".repeat(100);
        let body = vec![vec!["7".to_string(), "user/message".into(), data.clone()]];
        let right = [true, false, false];
        let w = widths(&header, &body, &[6, 0, 0], &right, Some(40));
        assert_eq!(w, [6, 12, 18]);
        let line = render(&body[0], &w, &right, true);
        assert_eq!(width(&line), 40);
        assert!(line.ends_with("ddd…"), "{line}");
        // Wide characters are cut on a column boundary, never in half.
        let body = vec![vec!["1".into(), "x".into(), "語".repeat(30)]];
        let line = render(&body[0], &w, &right, true);
        assert!(width(&line) <= 40, "{line}");
        // Nothing left to cut: the numbers stay whole.
        let w = widths(&header, &body, &[6, 0, 0], &right, Some(10));
        assert_eq!(w, [6, 4, 8]);
    }
}
