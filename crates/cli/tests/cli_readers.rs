//! The CLI's reading commands beside a running app: while a store held by
//! a writer in this process takes turns and flushes, `dsh-session list`,
//! `show` and `verify` (other processes) read it, every time a prefix of
//! what the writer ends with.

mod cli_support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cli_support::*;
use dsh_session::store::Store;

fn turn(s: &dsh_session::store::LiveSession, n: u64) {
    s.append_text("turn/start", &format!(r#"{{"turn":{n}}}"#), None)
        .unwrap();
    s.append_text(
        "user/message",
        &format!(
            r#"{{"id":"u{n}","role":"user","content":[{{"type":"text","text":"q{n}"}}],"source":{{"kind":"user"}}}}"#
        ),
        Some(r#"{"surfaceOp":"append"}"#),
    )
    .unwrap();
    s.append_text(
        "turn/end",
        &format!(r#"{{"turn":{n},"reason":{{"kind":"completed"}}}}"#),
        None,
    )
    .unwrap();
}

#[test]
fn reading_commands_work_while_an_app_writes_the_store() {
    for (backend, compression, name) in [
        ("jsonl", Some("zstd"), "root"),
        ("jsonl", Some("none"), "root"),
        ("sqlite", None, "store.db"),
    ] {
        let dir = temp_dir("cli-readers");
        let path = dir.join(name);
        let store = Store::open(config(backend, &path, compression)).unwrap();
        let s = store
            .create(dsh_session::store::CreateOptions::with_id("live"))
            .unwrap();
        turn(&s, 1);
        s.flush().unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let writing = {
            let (s, done) = (s.clone(), done.clone());
            std::thread::spawn(move || {
                let mut n = 2;
                while !done.load(Ordering::SeqCst) {
                    turn(&s, n);
                    s.flush().unwrap();
                    n += 1;
                    std::thread::sleep(Duration::from_millis(3));
                }
            })
        };
        let db = cli_support::s(&path).to_string();
        let mut shown = Vec::new();
        for _ in 0..5 {
            let (code, out, err) = run(&["--json", "list", &db]);
            assert_eq!(code, 0, "{backend}: list: {err}");
            assert!(out.contains("\"live\""), "{out}");
            let (code, out, err) = run(&["--json", "show", &db, "live"]);
            assert_eq!(code, 0, "{backend}: show: {err}");
            shown.push(out.lines().map(str::to_string).collect::<Vec<_>>());
            let (code, _, err) = run(&["verify", &db, "live"]);
            // The writer may be between the turn's events: an open turn
            // is repairable (1), never damage.
            assert!(code == 0 || code == 1, "{backend}: verify: {code} {err}");
        }
        done.store(true, Ordering::SeqCst);
        writing.join().unwrap();
        let all: Vec<String> = s
            .with(|session| {
                Ok(session
                    .events()
                    .iter()
                    .map(|e| e.text().to_string())
                    .collect())
            })
            .unwrap();
        for lines in &shown {
            assert!(lines.len() >= 3, "{backend}: less than the first flush");
            assert_eq!(lines[..], all[..lines.len()], "{backend}: not a prefix");
        }
        assert!(
            shown.last().unwrap().len() > shown[0].len() || all.len() == shown[0].len(),
            "{backend}: the reads never saw the writer's progress"
        );
    }
}
