//! Many threads race appends, flushes, closes, reopens, forks and derives
//! on a few sessions of one store (flushes of different sessions share
//! group commits). A child process does the racing and prints every
//! acknowledgement as it comes: an event whose flush or close returned
//! OK, and the events an open wrote (repair closers, end-seed markers),
//! which are durable when the open returns. This process kills it with
//! SIGKILL in the middle of the race. A fresh read of the store must then
//! hold every acknowledged event at its seq, byte for byte, and no seq may
//! be acknowledged with two different events.
//!
//! Every backend: memory (checked in the racing process), SQLite, JSONL
//! (zstd and raw) and PostgreSQL (with `DSH_TEST_POSTGRES_URL`). The race
//! lasts `DSH_RACE_SECS` seconds a backend (default 2); `tests/soak.sh`
//! runs it longer.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dsh_session::engine::{Intent, Vocabulary};
use dsh_session::json::{Object, Value};
use dsh_session::store::{
    BackendConfig, CreateOptions, ForkOptions, LiveSession, Store, StoreConfig,
};

mod common;

use common::Lcg;

const CHILD_ENV: &str = "DSH_RACE_CHILD";
const SESSIONS: usize = 4;
const MAX_FORKS: usize = 12;

/// One live handle and the events it committed, in seq order.
struct Handle {
    id: String,
    live: Arc<LiveSession>,
    log: Mutex<Vec<(u64, String)>>,
}

/// The sessions raced on: each id with its live handle, if any.
type Slots = Mutex<Vec<(String, Option<Arc<Handle>>)>>;

/// Where the racing threads report acknowledgements: kept, and printed
/// at once (`ACK\t<id>\t<seq>\t<text>`) by a racing child process.
#[derive(Default)]
struct AckList {
    list: Mutex<Vec<(String, u64, String)>>,
    print: bool,
}

type Acks = Arc<AckList>;

fn ack(acks: &Acks, id: &str, events: &[(u64, String)]) {
    let mut a = acks.list.lock().unwrap();
    if acks.print {
        let mut out = std::io::stdout().lock();
        for (seq, text) in events {
            writeln!(out, "ACK\t{id}\t{seq}\t{text}").unwrap();
        }
        out.flush().unwrap();
    }
    a.extend(events.iter().map(|(s, t)| (id.to_string(), *s, t.clone())));
}

fn obj(pairs: Vec<(&str, Value)>) -> Value {
    Value::Object(Object::from_iter(pairs))
}

fn num(n: u64) -> Value {
    Value::Number(n as f64)
}

/// A handle over `live`, whose log so far counts as written by the open
/// (`acked`: the open returned, so all of it is durable).
fn handle(live: Arc<LiveSession>, acks: &Acks, acked: bool) -> Arc<Handle> {
    let log: Vec<(u64, String)> = live
        .with(|s| {
            Ok(s.events()
                .iter()
                .map(|e| (e.seq, e.text().to_string()))
                .collect())
        })
        .unwrap_or_default();
    if acked {
        ack(acks, live.id(), &log);
    }
    Arc::new(Handle {
        id: live.id().to_string(),
        live,
        log: Mutex::new(log),
    })
}

/// One random operation on a random session slot.
fn step(
    store: &Arc<Store>,
    slots: &Slots,
    acks: &Acks,
    rng: &mut Lcg,
    tag: u64,
    forks: &AtomicU64,
) {
    let (id, current) = {
        let s = slots.lock().unwrap();
        let i = rng.below(s.len() as u64) as usize;
        s[i].clone()
    };
    let put = |h: Option<Arc<Handle>>, only_if: Option<&Arc<Handle>>| {
        let mut s = slots.lock().unwrap();
        if let Some(slot) = s.iter_mut().find(|(i, _)| *i == id) {
            let same = match (&slot.1, only_if) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            };
            if same {
                slot.1 = h;
            }
        }
    };
    let op = rng.below(100);
    let Some(h) = current else {
        // No handle: open the stored session (or create a new one).
        let opened = match store.open_session(&id) {
            Ok(dsh_session::store::Opened { session: live, .. }) => Some(handle(live, acks, true)),
            Err(_) => store
                .create(CreateOptions::with_id(&id))
                .ok()
                .map(|live| handle(live, acks, true)),
        };
        if let Some(new) = opened {
            put(Some(new), None);
        }
        return;
    };
    match op {
        0..=54 => {
            let mut log = h.log.lock().unwrap();
            let n = tag * 1_000_000 + log.len() as u64;
            let r = match rng.below(6) {
                0 => h.live.append(
                    "turn/start",
                    obj(vec![("turn", num(1 + n % 50))]),
                    Intent::none(),
                ),
                1 => {
                    let reason = obj(vec![("kind", Value::str("completed"))]);
                    let data = obj(vec![("turn", num(1 + n % 50)), ("reason", reason)]);
                    h.live.append("turn/end", data, Intent::none())
                }
                2 => {
                    let text = obj(vec![
                        ("type", Value::str("text")),
                        ("text", Value::str(&format!("message {n}"))),
                    ]);
                    let data = obj(vec![
                        ("id", Value::str(&format!("u{n}"))),
                        ("role", Value::str("user")),
                        ("content", Value::Array(vec![text])),
                        ("source", obj(vec![("kind", Value::str("user"))])),
                    ]);
                    h.live.append("user/message", data, Intent::append())
                }
                _ => h
                    .live
                    .append("race/note", obj(vec![("n", num(n))]), Intent::none()),
            };
            if let Ok(e) = r {
                log.push((e.seq, e.text().to_string()));
            }
        }
        55..=69 => {
            let log = h.log.lock().unwrap().clone();
            if h.live.flush().is_ok() {
                ack(acks, &h.id, &log);
            }
        }
        70..=76 => {
            let log = h.log.lock().unwrap().clone();
            let closed = h.live.close();
            if closed.is_ok() {
                ack(acks, &h.id, &log);
            }
            put(None, Some(&h));
        }
        77..=84 => {
            // A second open of a live session must be refused.
            if let Ok(dsh_session::store::Opened { session: live, .. }) = store.open_session(&id) {
                let other = handle(live, acks, true);
                put(Some(other), Some(&h));
            }
        }
        85..=89 => {
            let n = forks.fetch_add(1, Ordering::SeqCst);
            if n as usize >= MAX_FORKS {
                return;
            }
            let child_id = format!("fork-{n}");
            if let Ok(child) = h.live.fork(ForkOptions::default().with_id(&child_id)) {
                let child = handle(child, acks, false);
                slots.lock().unwrap().push((child_id, Some(child)));
            }
        }
        _ => {
            let _ = h.live.derive();
        }
    }
}

/// The racing process: `threads` threads for `secs` seconds, every
/// acknowledgement printed as `ACK\t<id>\t<seq>\t<text>`; exits without
/// closing anything.
fn race(config: StoreConfig, threads: u64, secs: f64, print: bool) -> (Arc<Store>, Acks) {
    let store = Store::open(config).expect("open the store");
    let acks: Acks = Arc::new(AckList {
        list: Mutex::default(),
        print,
    });
    let slots: Slots = Mutex::new(Vec::new());
    for i in 0..SESSIONS {
        let id = format!("s{i}");
        let live = store.create(CreateOptions::with_id(&id)).expect("create");
        slots
            .lock()
            .unwrap()
            .push((id, Some(handle(live, &acks, false))));
    }
    let forks = AtomicU64::new(0);
    let until = Instant::now() + Duration::from_secs_f64(secs);
    std::thread::scope(|scope| {
        for t in 0..threads {
            let (store, slots, acks, forks) = (&store, &slots, &acks, &forks);
            scope.spawn(move || {
                let mut rng = Lcg(0x5eed + t * 7919);
                let mut k = 0;
                while Instant::now() < until {
                    k += 1;
                    step(store, slots, acks, &mut rng, t * 100_000 + k, forks);
                }
            });
        }
    });
    // The handles stay open: the caller exits (or checks) without closing
    // them, as a host that crashes would.
    std::mem::forget(slots);
    (store, acks)
}

/// The configuration the child and the checker share, from its name.
fn config(name: &str, dir: &str) -> Option<StoreConfig> {
    let mut c = match name {
        "memory" => StoreConfig::memory(),
        "sqlite" => StoreConfig::sqlite(PathBuf::from(dir).join("race.db")),
        "jsonl" => StoreConfig::jsonl(dir),
        "jsonl-raw" => StoreConfig::new(BackendConfig::Jsonl {
            path: dir.into(),
            zstd: false,
        }),
        "postgres" => {
            let url = std::env::var("DSH_TEST_POSTGRES_URL").ok()?;
            StoreConfig::new(BackendConfig::postgres(url, dir))
        }
        _ => unreachable!("{name}"),
    };
    c.batch_window_ms = 2;
    c.vocabulary = Vocabulary::new(["race/note"]).unwrap();
    Some(c)
}

#[test]
fn race_child_process() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (name, rest) = spec.split_once('\t').unwrap();
    let (secs, dir) = rest.split_once('\t').unwrap();
    let config = config(name, dir).expect("configured");
    let raced = race(config, 16, secs.parse().unwrap(), true);
    std::mem::forget(raced);
    std::process::exit(0);
}

/// Acknowledgements by (session, seq), refusing two different events
/// acknowledged at one seq.
fn by_seq(acks: &[(String, u64, String)]) -> BTreeMap<(String, u64), String> {
    let mut map = BTreeMap::new();
    for (id, seq, text) in acks {
        if let Some(other) = map.insert((id.clone(), *seq), text.clone()) {
            assert_eq!(
                &other, text,
                "session {id} seq {seq} was acknowledged with two different events"
            );
        }
    }
    map
}

/// Every acknowledged event is in `store` at its seq, byte for byte.
fn check(store: &Arc<Store>, acks: &BTreeMap<(String, u64), String>, what: &str) {
    let mut stored: BTreeMap<String, Vec<Arc<dsh_session::engine::Event>>> = BTreeMap::new();
    for ((id, seq), text) in acks {
        let events = stored.entry(id.clone()).or_insert_with(|| {
            store
                .inspect(id)
                .unwrap_or_else(|e| panic!("{what}: session {id} unreadable: {e}"))
                .events
        });
        let got = events.get(*seq as usize).unwrap_or_else(|| {
            panic!(
                "{what}: session {id}: acknowledged seq {seq} is not stored ({} events)",
                events.len()
            )
        });
        assert_eq!(
            got.text(),
            text,
            "{what}: session {id} seq {seq}: the stored event is not the acknowledged one"
        );
    }
}

fn run(name: &str) {
    let secs: f64 = std::env::var("DSH_RACE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    let dir = match name {
        "postgres" => format!("race_{}", std::process::id()),
        _ => {
            let d = std::env::temp_dir().join(format!("dsh-race-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).unwrap();
            // Windows: a directory nobody else may write already passes.
            #[cfg(unix)]
            {
                let perm = std::os::unix::fs::PermissionsExt::from_mode(0o700);
                std::fs::set_permissions(&d, perm).unwrap();
            }
            d.to_string_lossy().into_owned()
        }
    };
    let Some(config) = config(name, &dir) else {
        eprintln!("skipped {name}: no DSH_TEST_POSTGRES_URL");
        return;
    };
    if name == "memory" {
        let (store, acks) = race(config, 16, secs, false);
        let acks = by_seq(&acks.list.lock().unwrap());
        check(&store, &acks, name);
        return;
    }
    // The child races longer than it is let live: it dies mid-race.
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "race_child_process", "--nocapture", "--quiet"])
        .env(CHILD_ENV, format!("{name}\t{}\t{dir}", secs + 60.0))
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the racing child");
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in BufReader::new(stdout).lines() {
            match line {
                Ok(l) => lines.push(l),
                Err(_) => break,
            }
        }
        lines
    });
    std::thread::sleep(Duration::from_secs_f64(secs));
    child.kill().expect("SIGKILL the racing child");
    let status = child.wait().unwrap();
    assert!(
        !status.success(),
        "the racing child ended before it was killed"
    );
    let mut acks = Vec::new();
    for line in reader.join().unwrap() {
        let mut f = line.splitn(4, '\t');
        if f.next() != Some("ACK") {
            continue;
        }
        let (id, seq, text) = (f.next().unwrap(), f.next().unwrap(), f.next().unwrap());
        acks.push((id.to_string(), seq.parse().unwrap(), text.to_string()));
    }
    assert!(
        acks.len() > 100,
        "{name}: only {} acknowledgements",
        acks.len()
    );
    let acks = by_seq(&acks);
    let store = Store::open(config.read_only()).expect("open the store to check");
    check(&store, &acks, name);
    eprintln!("{name}: {} acknowledged events checked", acks.len());
    drop(store);
    if name != "postgres" {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn racing_handles_on_memory_acknowledge_only_stored_events() {
    run("memory");
}

#[test]
fn racing_handles_on_sqlite_acknowledge_only_stored_events() {
    run("sqlite");
}

#[test]
fn racing_handles_on_zstd_jsonl_acknowledge_only_stored_events() {
    run("jsonl");
}

#[test]
fn racing_handles_on_raw_jsonl_acknowledge_only_stored_events() {
    run("jsonl-raw");
}

#[test]
fn racing_handles_on_postgres_acknowledge_only_stored_events() {
    run("postgres");
}
