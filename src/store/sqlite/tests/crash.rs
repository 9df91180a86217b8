//! A database a killed writer left behind, its acknowledged events still
//! in its WAL: reopened with exclusive locking while something outside
//! truncates its `-shm` file, and reached through a hard link. The
//! writers run in child processes (this test binary, started again with
//! [`CHILD_ENV`] set to its task).

use crate::rule::Rule;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};

use super::tests::{header, open, plain, values, TempDir};
use super::*;

/// `<task>:<first seq>:<count>:<database path>`: the child's task
/// (`shared`: append and wait to be killed, as long as stdin is open;
/// `exclusive`: open with exclusive locking, wait for a line on stdin,
/// append, exit).
const CHILD_ENV: &str = "DSH_SQLITE_TEST_CHILD";

/// Events `first..first + count` of session `s`.
fn events(first: u64, count: u64) -> Vec<Arc<Event>> {
    (first..first + count)
        .map(|seq| plain(seq, "x/e", &format!(r#"{{"n":{seq}}}"#), ""))
        .collect()
}

/// The child's side: run the task [`CHILD_ENV`] names, reporting on
/// stdout (`CHILD OPEN` once the store is open, `CHILD ACK <n>` once the
/// events before seq `n` are committed).
#[test]
fn child_process() {
    let Ok(task) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut parts = task.splitn(4, ':');
    let mut next = || parts.next().expect("child task");
    let (mode, first, count, path) = (next(), next(), next(), next());
    let first: u64 = first.parse().unwrap();
    let count: u64 = count.parse().unwrap();
    let mut b = SqliteBackend::open_with_locking(Path::new(path), 5000, mode == "exclusive")
        .expect("child open");
    println!("CHILD OPEN");
    if mode == "exclusive" {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).unwrap();
    }
    b.append(&header("s"), &events(first, count), first == 0)
        .expect("child append");
    println!("CHILD ACK {}", first + count);
    if mode == "shared" {
        // Killed here, the connection open: what it wrote stays in the WAL.
        // (A parent that fails before it kills closes stdin: then end.)
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
        std::process::exit(1);
    }
}

/// Start a child on `task`.
fn spawn(task: &str) -> (Child, impl Iterator<Item = String>) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "store::sqlite::tests_crash::child_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, task)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let out: ChildStdout = child.stdout.take().unwrap();
    let lines = BufReader::new(out).lines().map_while(|l| l.ok());
    (child, lines)
}

/// Read `lines` up to the one that says `want` (the test harness may
/// print before it on the same line).
fn wait_for(lines: &mut impl Iterator<Item = String>, want: &str) {
    assert!(
        lines.any(|l| l.contains(want)),
        "the child ended before it said {want:?}"
    );
}

fn side(db: &Path, suffix: &str) -> PathBuf {
    let mut p = db.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}

/// A writer with shared locking appends `count` events to session `s` of
/// `db` and is killed with SIGKILL: they are acknowledged, and still in
/// the WAL, beside the `-shm` the writer mapped.
fn killed_writer(db: &Path, count: u64) {
    let (mut child, mut lines) = spawn(&format!("shared:0:{count}:{}", db.display()));
    wait_for(&mut lines, &format!("CHILD ACK {count}"));
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    assert!(std::fs::metadata(side(db, "-wal")).unwrap().len() > 0);
    assert!(side(db, "-shm").exists());
}

/// The files of `pid`'s memory maps whose name contains `name`.
fn mapped(pid: u32, name: &str) -> Vec<String> {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap()
        .lines()
        .filter(|l| l.contains(name))
        .map(str::to_string)
        .collect()
}

/// `"locking": "exclusive"` on an existing WAL database (a killed
/// writer's, its `-wal` and `-shm` left behind): the reopened store maps
/// no `-shm`, so truncating that file while the store writes cannot raise
/// SIGBUS in it, and what it writes is durable.
#[test]
#[cfg_attr(
    not(target_os = "linux"),
    ignore = "reads the child's memory maps from /proc/<pid>/maps, which only Linux has"
)]
fn an_exclusive_reopen_maps_no_shm_file() {
    let dir = TempDir::new("exclusive-reopen");
    let db = dir.db();
    killed_writer(&db, 5);
    let (mut child, mut lines) = spawn(&format!("exclusive:5:20:{}", db.display()));
    wait_for(&mut lines, "CHILD OPEN");
    let maps = mapped(child.id(), "store.db-shm");
    // Pulled from under any mapping of it: a page of it read or written
    // afterwards is SIGBUS.
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(side(&db, "-shm"))
        .unwrap();
    writeln!(child.stdin.as_mut().unwrap(), "go").unwrap();
    let acked = lines.any(|l| l.contains("CHILD ACK 25"));
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), None, "the store was killed: {status}");
    assert!(acked && status.success(), "{status}");
    assert!(maps.is_empty(), "the store mapped its -shm: {maps:?}");
    let loaded = open(&db).load("s").unwrap().unwrap();
    assert_eq!(loaded.events, values(&events(0, 25)));
}

/// Every file in `dir` with its bytes, by name.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect();
    files.sort();
    files
}

/// A hard link to a database whose acknowledged events a killed writer
/// left in the WAL beside the original name. Through the link SQLite
/// would look for another WAL: the session would read as not found, and
/// a session written there would be undone when the original WAL is
/// replayed. So a database file with a second name is refused
/// (`sqlite.path-file`, `DSH_E_IO`, saying what to do), by writers and
/// readers alike and through either name, touching nothing; once the
/// link is removed the original name opens with every event.
#[test]
fn a_database_file_with_a_second_name_is_refused() {
    let dir = TempDir::new("hard-link");
    let db = dir.db();
    killed_writer(&db, 5);
    let link = dir.0.join("h.db");
    std::fs::hard_link(&db, &link).unwrap();
    let before = snapshot(&dir.0);
    for path in [&link, &db] {
        let refusals = [
            SqliteBackend::open(path, 100).unwrap_err(),
            SqliteBackend::open_with_locking(path, 100, true).unwrap_err(),
            SqliteBackend::open_read_only(path, 100).unwrap_err(),
        ];
        for err in refusals {
            assert_eq!(
                (err.status, err.rule),
                (Status::Io, Rule::SqlitePathFile),
                "{err}"
            );
            let m = &err.message;
            assert!(
                m.contains(&format!("{} has 2 hard links", path.display())),
                "{m}"
            );
            assert!(
                m.contains("WAL") && m.contains("remove the other names"),
                "{m}"
            );
        }
    }
    assert_eq!(snapshot(&dir.0), before, "a refused open changed a file");
    std::fs::remove_file(&link).unwrap();
    let loaded = open(&db).load("s").unwrap().unwrap();
    assert_eq!(loaded.events, values(&events(0, 5)));
}
