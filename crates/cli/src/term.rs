//! What the terminal allows, decided once per run as git does: human
//! output fits the terminal's width, goes through a pager and uses colour
//! only when stdout is a terminal; progress is drawn only when stderr is
//! one. `--no-pager` (or an empty `DSH_PAGER`/`PAGER`, or `cat`) turns the
//! pager off; `NO_COLOR` (and `CLICOLOR=0`) turns colour off.

use std::io;
use std::process::{Child, ChildStdin, Command, Stdio};

/// The terminal facts of one run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Term {
    /// Stdout is a terminal.
    pub stdout: bool,
    /// Stderr is a terminal.
    pub stderr: bool,
    /// The width human output fits (stdout is a terminal that tells).
    pub width: Option<usize>,
    /// Human output may use colour.
    pub colour: bool,
    /// Human output may go through a pager.
    pub pager: bool,
}

impl Term {
    /// The facts of this process's stdout and stderr (`no_pager`:
    /// `--no-pager`).
    pub fn detect(no_pager: bool) -> Term {
        let out = console::Term::stdout();
        let stdout = out.is_term();
        Term {
            stdout,
            stderr: console::Term::stderr().is_term(),
            width: stdout
                .then(|| out.size_checked())
                .flatten()
                .map(|(_, cols)| usize::from(cols)),
            // console reads NO_COLOR, CLICOLOR and TERM=dumb.
            colour: stdout && console::colors_enabled(),
            pager: stdout && !no_pager,
        }
    }
}

/// The pager command: `DSH_PAGER`, else `PAGER`, else `less`; `None` when
/// it is empty or `cat` (no pager).
fn pager_command() -> Option<String> {
    let command = std::env::var("DSH_PAGER")
        .or_else(|_| std::env::var("PAGER"))
        .unwrap_or_else(|_| "less".to_string());
    let command = command.trim();
    (!command.is_empty() && command != "cat").then(|| command.to_string())
}

/// A running pager that reads what the command prints.
pub struct Pager {
    child: Child,
}

impl Pager {
    /// Start the pager through `sh -c`, as git does: with `LESS=FRX`
    /// unless `LESS` is set (quit when the text fits one screen, pass
    /// colours, leave the text on the screen) and `LV=-c`. `None` when
    /// there is no pager to start.
    pub fn start() -> Option<(Pager, ChildStdin)> {
        let command = pager_command()?;
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(&command).stdin(Stdio::piped());
        if std::env::var_os("LESS").is_none() {
            cmd.env("LESS", "FRX");
        }
        if std::env::var_os("LV").is_none() {
            cmd.env("LV", "-c");
        }
        let mut child = cmd.spawn().ok()?;
        let stdin = child.stdin.take()?;
        Some((Pager { child }, stdin))
    }

    /// Wait for the reader to quit (its input was closed before).
    pub fn wait(mut self) -> io::Result<()> {
        self.child.wait().map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_pager_is_started_for_an_empty_or_cat_pager() {
        // (Only the choice of command: the tests' stdout is no terminal.)
        std::env::set_var("DSH_PAGER", "cat");
        assert_eq!(pager_command(), None);
        std::env::set_var("DSH_PAGER", "  ");
        assert_eq!(pager_command(), None);
        std::env::set_var("DSH_PAGER", "less -S");
        assert_eq!(pager_command().as_deref(), Some("less -S"));
        std::env::remove_var("DSH_PAGER");
    }
}
