//! The PostgreSQL backend against a real server (`DSH_TEST_POSTGRES_URL`;
//! each test in a schema of its own; skipped, saying so, without one):
//! schema creation and refusal, one writer per session, readers on other
//! connections, a lost connection, forks copied inside the database; in
//! `network`, a connection through a proxy that loses a COMMIT's reply or
//! turns into a black hole.

mod network;
mod proxy;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use postgres::{Client, NoTls};

use crate::error::Status;
use crate::rule::Rule;
use crate::store::{CreateOptions, ForkOptions, LiveSession, Store, StoreConfig};

fn url() -> Option<String> {
    match std::env::var("DSH_TEST_POSTGRES_URL") {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            eprintln!("skipped: no PostgreSQL server (set DSH_TEST_POSTGRES_URL, as scripts/test.sh does)");
            None
        }
    }
}

fn fresh_schema() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "u_{}_{}_{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A test's own schema (dropped at the end) and an admin connection.
struct Fixture {
    url: String,
    schema: String,
    admin: Client,
}

impl Fixture {
    fn new() -> Option<Fixture> {
        let url = url()?;
        let admin = Client::connect(&url, NoTls).expect("connect to the test server");
        Some(Fixture {
            url,
            schema: fresh_schema(),
            admin,
        })
    }

    fn config(&self) -> StoreConfig {
        self.config_at(&self.url)
    }

    /// The store of this test's schema, reached at `url`.
    fn config_at(&self, url: &str) -> StoreConfig {
        let mut c = StoreConfig::postgres(url);
        if let super::super::BackendConfig::Postgres { schema, .. } = &mut c.backend {
            *schema = self.schema.clone();
        }
        c
    }

    /// [`Fixture::config`] whose connections carry the application name
    /// `name` (for [`Fixture::terminate`]).
    fn config_named(&self, name: &str) -> StoreConfig {
        let mut c = self.config();
        let sep = if self.url.contains('?') { '&' } else { '?' };
        if let super::super::BackendConfig::Postgres { url, .. } = &mut c.backend {
            url.push_str(&format!("{sep}application_name={}-{name}", self.schema));
        }
        c
    }

    /// End, from the server, the connections of [`Fixture::config_named`]
    /// `name`.
    fn terminate(&mut self, name: &str) {
        let app = format!("{}-{name}", self.schema);
        self.admin
            .execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
                &[&app],
            )
            .unwrap();
    }

    fn store(&self) -> Arc<Store> {
        Store::open(self.config()).expect("open the postgres store")
    }

    fn reader(&self) -> Arc<Store> {
        Store::open(self.config().read_only()).expect("open a reader")
    }

    fn sql(&mut self, text: &str) {
        let text = text.replace("$S", &format!("\"{}\"", self.schema));
        self.admin.batch_execute(&text).expect(&text);
    }

    fn count(&mut self, text: &str) -> i64 {
        let text = text.replace("$S", &format!("\"{}\"", self.schema));
        self.admin.query_one(&text, &[]).expect(&text).get(0)
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.admin.batch_execute(&format!(
            "DROP SCHEMA IF EXISTS \"{}\" CASCADE",
            self.schema
        ));
    }
}

fn turn(s: &LiveSession, n: u64) {
    s.append_text("turn/start", &format!(r#"{{"turn":{n}}}"#), None)
        .unwrap();
    let user = format!(
        r#"{{"id":"u{n}","role":"user","content":[{{"type":"text","text":"q {n}"}}],"source":{{"kind":"user"}}}}"#
    );
    s.append_text("user/message", &user, Some(r#"{"surfaceOp":"append"}"#))
        .unwrap();
    s.append_text(
        "turn/end",
        &format!(r#"{{"turn":{n},"reason":{{"kind":"completed"}}}}"#),
        None,
    )
    .unwrap();
}

fn texts(store: &Arc<Store>, id: &str) -> Vec<String> {
    let s = store.open_session(id).expect("open").session;
    let out = s.with(|x| Ok(x.events().iter().map(|e| e.text().to_string()).collect()));
    s.close().unwrap();
    out.unwrap()
}

#[test]
fn the_schema_is_created_versioned_and_checked() {
    let Some(mut f) = Fixture::new() else { return };
    let store = f.store();
    let s = store.create(CreateOptions::with_id("a")).unwrap();
    turn(&s, 1);
    s.flush().unwrap();
    drop(s);
    drop(store);
    assert_eq!(
        f.count("SELECT schema_version::bigint FROM $S.store_meta"),
        super::SCHEMA_VERSION as i64
    );
    assert_eq!(f.count("SELECT count(*) FROM $S.events"), 3);
    // The event text is stored as written, not as jsonb.
    assert_eq!(
        f.count("SELECT count(*) FROM $S.events WHERE event LIKE '{\"type\":%'"),
        3
    );
    // A second open finds the same store.
    let before = f.count("SELECT count(*) FROM $S.store_meta");
    drop(f.store());
    assert_eq!(f.count("SELECT count(*) FROM $S.store_meta"), before);

    // Another version: refused, untouched.
    f.sql("UPDATE $S.store_meta SET schema_version = 2");
    let e = Store::open(f.config()).unwrap_err();
    assert_eq!(
        (e.status, e.rule),
        (Status::SchemaMismatch, Rule::PostgresSchemaVersion)
    );
    assert_eq!(
        f.count("SELECT schema_version::bigint FROM $S.store_meta"),
        2
    );
    f.sql("UPDATE $S.store_meta SET schema_version = 1");

    // A foreign object beside ours: refused, untouched.
    f.sql("CREATE TABLE $S.notes (a int); INSERT INTO $S.notes VALUES (7)");
    let e = Store::open(f.config()).unwrap_err();
    assert_eq!(
        (e.status, e.rule),
        (Status::SchemaMismatch, Rule::PostgresSchemaForeign)
    );
    assert_eq!(f.count("SELECT count(*) FROM $S.notes"), 1);
    assert_eq!(f.count("SELECT count(*) FROM $S.events"), 3);
}

#[test]
fn a_foreign_schema_is_refused_and_an_empty_one_is_used() {
    let Some(mut f) = Fixture::new() else { return };
    f.sql("CREATE SCHEMA $S; CREATE TABLE $S.sessions (id text); INSERT INTO $S.sessions VALUES ('x')");
    let e = Store::open(f.config()).unwrap_err();
    assert_eq!(
        (e.status, e.rule),
        (Status::SchemaMismatch, Rule::PostgresSchemaForeign)
    );
    assert_eq!(f.count("SELECT count(*) FROM $S.sessions"), 1);
    assert_eq!(
        f.count("SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND false"),
        0
    );
    f.sql("DROP TABLE $S.sessions");
    // An empty schema (made by an administrator) is taken as is.
    let store = f.store();
    let s = store.create(CreateOptions::with_id("a")).unwrap();
    turn(&s, 1);
    s.close().unwrap();
    assert_eq!(f.count("SELECT count(*) FROM $S.events"), 3);
}

#[test]
fn a_reader_never_creates_and_never_writes() {
    let Some(mut f) = Fixture::new() else { return };
    let e = Store::open(f.config().read_only()).unwrap_err();
    assert_eq!((e.status, e.rule), (Status::NotFound, Rule::StoreNotFound));
    assert_eq!(
        f.count(&format!(
            "SELECT count(*) FROM pg_namespace WHERE nspname = '{}'",
            f.schema
        )),
        0
    );
    let store = f.store();
    let s = store.create(CreateOptions::with_id("a")).unwrap();
    s.append_text("turn/start", r#"{"turn":1}"#, None).unwrap();
    s.flush().unwrap();
    let reader = f.reader();
    // The open turn is closed in memory only: the reader writes nothing.
    let r = reader.open_session("a").unwrap().session;
    assert!(r.with(|x| Ok(x.events().len())).unwrap() >= 1);
    assert_eq!(f.count("SELECT count(*) FROM $S.events"), 1);
    let e = reader.create(CreateOptions::with_id("b")).unwrap_err();
    assert_eq!(e.rule, Rule::StoreReadOnly);
}

/// The `turn/end` events of a stored session.
fn turns(store: &Arc<Store>, id: &str) -> usize {
    texts(store, id)
        .iter()
        .filter(|t| t.starts_with(r#"{"type":"turn/end""#))
        .count()
}

#[test]
fn one_writer_per_session_across_connections() {
    let Some(mut f) = Fixture::new() else { return };
    let a = f.store();
    let sa = a.create(CreateOptions::with_id("s")).unwrap();
    turn(&sa, 1);
    sa.flush().unwrap();
    // A has the session live and holds its writer lock: another store's
    // open (which writes the end-seed marker) waits for it, then fails.
    let b = Store::open(f.config_named("b")).unwrap();
    let e = b.open_session("s").unwrap_err();
    assert_eq!(
        (e.status, e.rule),
        (Status::Conflict, Rule::PostgresSessionLocked)
    );
    sa.close().unwrap();
    let sb = b.open_session("s").unwrap().session;
    // B's connection (and with it its lock) is lost; A takes the session
    // over and writes on.
    f.terminate("b");
    let sa = a.open_session("s").unwrap().session;
    turn(&sa, 2);
    sa.flush().unwrap();
    // B, stale, connects again: it waits for the lock A holds...
    turn(&sb, 2);
    let e = sb.flush().unwrap_err();
    assert!(
        matches!(e.rule, Rule::PostgresSessionLocked | Rule::PostgresConnect),
        "{e:?}"
    );
    let e = if e.rule == Rule::PostgresConnect {
        sb.flush().unwrap_err()
    } else {
        e
    };
    assert_eq!(
        (e.status, e.rule),
        (Status::Conflict, Rule::PostgresSessionLocked)
    );
    // ...and once A lets go, its batch is refused whole: no gap, no
    // duplicate.
    sa.close().unwrap();
    let e = sb.flush().unwrap_err();
    assert_eq!(
        (e.status, e.rule),
        (Status::Conflict, Rule::PostgresAppendSeqMismatch)
    );
    let stored = f.count("SELECT count(*) FROM $S.events");
    assert_eq!(f.count("SELECT next_seq FROM $S.sessions"), stored);
    assert_eq!(f.count("SELECT count(DISTINCT seq) FROM $S.events"), stored);
    // The stale writer let the lock go: A continues from the database.
    let s = a.open_session("s").unwrap().session;
    turn(&s, 3);
    s.close().unwrap();
    assert_eq!(turns(&a, "s"), 3);
    let _ = sb.close();
}

#[test]
fn a_reader_on_another_connection_sees_a_consistent_prefix() {
    let Some(f) = Fixture::new() else { return };
    let store = f.store();
    let s = store.create(CreateOptions::with_id("live")).unwrap();
    turn(&s, 1);
    s.flush().unwrap();
    let reader = f.reader();
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let done = done.clone();
        let s = s.clone();
        std::thread::spawn(move || {
            for n in 2..60 {
                turn(&s, n);
                s.flush().unwrap();
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    let mut reads = Vec::new();
    while !done.load(Ordering::SeqCst) || reads.len() < 3 {
        let r = reader.open_session("live").unwrap().session;
        let log: Vec<String> = r
            .with(|x| Ok(x.events().iter().map(|e| e.text().to_string()).collect()))
            .unwrap();
        r.close().unwrap();
        reads.push(log);
    }
    writer.join().unwrap();
    s.close().unwrap();
    drop(s);
    // Every read is a prefix of the final log (batches end anywhere, not
    // only at flushes), and none is shorter than the one before.
    let r = reader.open_session("live").unwrap().session;
    let last: Vec<String> = r
        .with(|x| Ok(x.events().iter().map(|e| e.text().to_string()).collect()))
        .unwrap();
    for (i, read) in reads.iter().enumerate() {
        assert_eq!(read[..], last[..read.len()], "read {i} is not a prefix");
        assert!(i == 0 || read.len() >= reads[i - 1].len());
    }
    assert_eq!(turns(&store, "live"), 59);
}

#[test]
fn a_lost_connection_resumes_with_no_gap_and_no_duplicate() {
    let Some(mut f) = Fixture::new() else { return };
    let store = Store::open(f.config_named("w")).unwrap();
    let s = store.create(CreateOptions::with_id("s")).unwrap();
    let mut written = 0;
    for round in 0..5 {
        turn(&s, round * 2 + 1);
        s.flush().unwrap();
        // The server ends the store's connection.
        f.terminate("w");
        turn(&s, round * 2 + 2);
        // The first flush may meet the dead connection; the events stay
        // queued and the next one writes them.
        if let Err(e) = s.flush() {
            assert_eq!(e.rule, Rule::PostgresConnect, "{e:?}");
            s.flush().unwrap();
        }
        written += 6;
    }
    s.close().unwrap();
    assert_eq!(f.count("SELECT count(*) FROM $S.events"), written);
    assert_eq!(
        f.count(
            "SELECT count(DISTINCT seq) FROM $S.events WHERE seq < $N"
                .replace("$N", &written.to_string())
                .as_str()
        ),
        written
    );
    assert_eq!(turns(&store, "s") as i64, written / 3);
}

#[test]
fn a_fork_copies_its_prefix_inside_the_database() {
    let Some(mut f) = Fixture::new() else { return };
    let store = f.store();
    let p = store.create(CreateOptions::with_id("p")).unwrap();
    for n in 1..=20 {
        turn(&p, n);
    }
    p.close().unwrap();
    let p = store.open_session("p").unwrap().session;
    // Changed behind the store's back: a copy made inside the database
    // carries the change, one sent by the client would not.
    f.sql("UPDATE $S.events SET event = replace(event, '\"q 2\"', '\"q two\"') WHERE session_id = 'p' AND seq = 4");
    let child = p.fork(ForkOptions::at(29).with_id("c")).unwrap();
    child.close().unwrap();
    assert_eq!(
        f.count("SELECT count(*) FROM $S.events WHERE session_id = 'c' AND event LIKE '%q two%'"),
        1,
        "the prefix was copied by the database"
    );
    assert_eq!(
        f.count("SELECT count(*) FROM $S.events WHERE session_id = 'c'"),
        31
    );
    // A parent whose prefix is not known to be stored is written by the
    // client, in full.
    let q = store.create(CreateOptions::with_id("q")).unwrap();
    turn(&q, 1);
    let qc = q.fork(ForkOptions::at(2).with_id("qc")).unwrap();
    qc.close().unwrap();
    q.close().unwrap();
    let qc = store.open_session("qc").unwrap().session;
    assert_eq!(qc.with(|x| Ok(x.events().len())).unwrap(), 4);
    let _ = p.close();
}

#[test]
fn a_batch_whose_commit_was_lost_is_not_written_twice() {
    use crate::store::backend::Backend;
    let Some(mut f) = Fixture::new() else { return };
    let store = f.store();
    let s = store.create(CreateOptions::with_id("s")).unwrap();
    turn(&s, 1);
    turn(&s, 2);
    let events: Vec<_> = s.with(|x| Ok(x.events().to_vec())).unwrap();
    let header = s.with(|x| Ok(x.header().clone())).unwrap();
    let _ = s.close();
    drop((s, store));
    f.sql("DELETE FROM $S.events; DELETE FROM $S.sessions");
    let mut b = super::PostgresBackend::open(&f.url, &f.schema).unwrap();
    b.append(&header, &events[..3], true).unwrap();
    // Its outcome was lost with the connection (as the backend records a
    // creation that failed so): a retry of the same events, or of more of
    // them, finds its own rows and goes on.
    let incarnation = b.known["s"].incarnation.clone();
    b.retry_incarnation.insert("s".to_string(), incarnation);
    b.suspect.insert("s".to_string());
    b.append(&header, &events[..4], true).unwrap();
    assert_eq!(
        f.count("SELECT count(*) FROM $S.events WHERE session_id = 's'"),
        4
    );
    b.suspect.insert("s".to_string());
    b.append(&header, &events[2..6], false).unwrap();
    assert_eq!(
        f.count("SELECT count(*) FROM $S.events WHERE session_id = 's'"),
        6
    );
    // Rows that are not this writer's are never taken for its own.
    f.sql("UPDATE $S.events SET event = replace(event, '\"q 2\"', '\"other\"') WHERE seq = 4");
    assert_eq!(
        f.count("SELECT count(*) FROM $S.events WHERE event LIKE '%other%'"),
        1
    );
    b.suspect.insert("s".to_string());
    let e = b.append(&header, &events[3..6], false).unwrap_err();
    assert_eq!(e.rule, Rule::PostgresAppendSeqMismatch);
    // Without a lost commit, a batch that does not continue the log is
    // refused.
    b.suspect.clear();
    let e = b.append(&header, &events[5..6], false).unwrap_err();
    assert_eq!(e.rule, Rule::PostgresAppendSeqMismatch);
}

/// The server probes a writer's connection as the client does, so a
/// writer whose host vanished loses its sessions' locks within about 25 s;
/// a URL that sets the server's keepalives itself keeps its own.
#[test]
fn a_writer_connection_has_the_server_probe_it() {
    let Some(f) = Fixture::new() else { return };
    let show = |b: &mut super::PostgresBackend, name: &str| -> String {
        let (db, _) = b.client().unwrap();
        db.query_one(&format!("SHOW {name}"), &[]).unwrap().get(0)
    };
    let mut b = super::PostgresBackend::open(&f.url, &f.schema).unwrap();
    assert_eq!(show(&mut b, "tcp_keepalives_idle"), "10");
    assert_eq!(show(&mut b, "tcp_keepalives_interval"), "5");
    assert_eq!(show(&mut b, "tcp_keepalives_count"), "3");
    drop(b);
    let sep = if f.url.contains('?') { '&' } else { '?' };
    let own = format!("{}{sep}options=-c%20tcp_keepalives_idle%3D7", f.url);
    let mut b = super::PostgresBackend::open(&own, &f.schema).unwrap();
    assert_eq!(show(&mut b, "tcp_keepalives_idle"), "7");
}
