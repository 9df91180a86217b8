//! Human output at a terminal and in a pipe: on a terminal (a tmux pane)
//! output goes through the pager, is coloured and fits the pane's width,
//! wide characters counted right; in a pipe there is no pager and no
//! colour, whatever the environment asks.

mod cli_support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use cli_support::*;
use dsh_session::store::{CreateOptions, Store};

/// A store with `demo`, `open` and `wide` (a user message of wide
/// characters).
fn store(dir: &Path) -> String {
    let db = dir.join("s.db");
    make_store(config("sqlite", &db, None));
    let store = Store::open(config("sqlite", &db, None)).unwrap();
    let s = store.create(CreateOptions::with_id("wide")).unwrap();
    let text = "日本語のテキスト".repeat(20);
    s.append_text(
        "user/message",
        &format!(
            r#"{{"id":"w1","role":"user","content":[{{"type":"text","text":"{text}"}}],"source":{{"kind":"user"}}}}"#
        ),
        Some(r#"{"surfaceOp":"append"}"#),
    )
    .unwrap();
    s.close().unwrap();
    store.flush().unwrap();
    s_owned(&db)
}

fn s_owned(p: &Path) -> String {
    s(p).to_string()
}

#[test]
fn in_a_pipe_there_is_no_pager_and_no_colour() {
    let dir = temp_dir("pipe");
    let db = store(&dir);
    for args in [
        vec!["list", &db],
        vec!["verify", &db],
        vec!["show", &db, "demo"],
        vec!["derive", &db, "demo"],
        vec!["stats", &db, "demo"],
    ] {
        // A pager that would swallow the output, and colour forced.
        let out = cli(&args)
            .env("DSH_PAGER", "cat >/dev/null")
            .env("PAGER", "cat >/dev/null")
            .env("CLICOLOR_FORCE", "1")
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.lines().count() >= 2, "{args:?}: no output: {text}");
        assert!(
            !text.contains('\u{1b}'),
            "{args:?}: colour in a pipe: {text}"
        );
    }
    // The derive of wide text is cut to 160 columns in a pipe, counted
    // in display columns.
    let (_, out, _) = run(&["derive", &db, "wide"]);
    let row = out.lines().nth(1).unwrap();
    let content = row.split("  ").last().unwrap();
    assert!(content.ends_with('…'), "{row}");
    assert!(console::measure_text_width(content) <= 160, "{row}");
}

/// Run `dsh-session ARGS…` in a tmux pane `width` columns wide, with the
/// environment `env` (`NAME=value …`, shell-quoted); what the pane shows
/// once it ended.
fn in_tmux(width: u16, env: &str, args: &[&str]) -> Option<String> {
    let tmux = |a: &[&str]| Command::new("tmux").args(a).output();
    // A server of its own for each run (one being killed refuses a new
    // session).
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let socket = format!("dsh-cli-{}-{run}", std::process::id());
    let bin = assert_cmd::cargo::cargo_bin("dsh-session");
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let command = format!(
        "env -u NO_COLOR -u CLICOLOR TERM=xterm-256color {env} '{}' {}; echo \"exit $?\"; sleep 60",
        bin.display(),
        quoted.join(" ")
    );
    let started = tmux(&[
        "-L",
        &socket,
        "new-session",
        "-d",
        "-x",
        &width.to_string(),
        "-y",
        "50",
        &command,
    ])
    .ok()?;
    assert!(
        started.status.success(),
        "tmux: {}",
        String::from_utf8_lossy(&started.stderr)
    );
    let t = Instant::now();
    let mut shown = String::new();
    while t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(100));
        let pane = tmux(&["-L", &socket, "capture-pane", "-p", "-e"]).ok()?;
        shown = String::from_utf8_lossy(&pane.stdout).into_owned();
        if shown.contains("exit ") {
            break;
        }
    }
    let _ = tmux(&["-L", &socket, "kill-server"]);
    Some(shown)
}

#[test]
fn on_a_terminal_output_is_paged_coloured_and_fits_its_width() {
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("skipped: no tmux (apt-get install tmux)");
        return;
    }
    let dir = temp_dir("tty");
    let db = store(&dir);
    let paged = dir.join("paged.txt");
    // The pager gets the output: here it keeps a copy and shows it.
    let pager = format!("DSH_PAGER='tee {}'", s(&paged));
    let shown = in_tmux(60, &pager, &["verify", &db]).expect("tmux runs");
    assert!(shown.contains("exit 1"), "{shown}");
    let copy = std::fs::read_to_string(&paged).expect("the pager ran");
    assert!(copy.contains("demo: \u{1b}[32mclean"), "coloured: {copy:?}");
    // Every line fits the pane, wide characters counted as two columns.
    std::fs::remove_file(&paged).unwrap();
    let shown = in_tmux(60, &pager, &["derive", &db, "wide"]).expect("tmux runs");
    assert!(shown.contains("exit 0"), "{shown}");
    let copy = std::fs::read_to_string(&paged).expect("the pager ran");
    let lines: Vec<&str> = copy.lines().collect();
    assert!(lines.len() >= 2, "{copy}");
    for line in &lines {
        assert!(console::measure_text_width(line) <= 60, "too wide: {line}");
    }
    assert!(
        lines[1].contains("日本語") && lines[1].ends_with('…'),
        "{copy}"
    );
    // --no-pager: straight to the terminal.
    std::fs::remove_file(&paged).unwrap();
    let shown = in_tmux(60, &pager, &["--no-pager", "list", &db]).expect("tmux runs");
    assert!(
        shown.contains("exit 0") && shown.contains("wide"),
        "{shown}"
    );
    assert!(!paged.exists(), "--no-pager paged");
    // NO_COLOR: no colour, still paged.
    let no_colour = format!("{pager} NO_COLOR=1");
    let shown = in_tmux(60, &no_colour, &["verify", &db, "demo"]).expect("tmux runs");
    assert!(shown.contains("exit 0"), "{shown}");
    let copy = std::fs::read_to_string(&paged).expect("the pager ran");
    assert!(copy.contains("demo: clean"), "{copy:?}");
    assert!(!copy.contains('\u{1b}'), "{copy:?}");
}
