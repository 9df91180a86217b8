//! The `dsh-session` binary on PostgreSQL stores (STORE a `postgresql://`
//! URL, `--schema`): convert SQLite → PostgreSQL → JSONL with the same
//! events, the reading commands and repair / fork on a PostgreSQL store,
//! and reading an absent schema, which fails and creates nothing. Each
//! test has a schema of its own on the server `DSH_TEST_POSTGRES_URL`
//! names (dropped at the end); without one they say they are skipped.
//! The command-line checks that need no server run always.

mod cli_support;

use std::sync::atomic::{AtomicU64, Ordering};

use cli_support::*;
use dsh_session::store::{BackendConfig, StoreConfig};
use postgres::{Client, NoTls};

/// The test server and the schemas a test used (dropped with it).
struct Pg {
    url: String,
    admin: Client,
    schemas: Vec<String>,
}

impl Pg {
    /// The server of `DSH_TEST_POSTGRES_URL`, or `None` (saying the test
    /// is skipped) without one.
    fn new() -> Option<Pg> {
        let url = match std::env::var("DSH_TEST_POSTGRES_URL") {
            Ok(u) if !u.is_empty() => u,
            _ => {
                eprintln!("skipped: no PostgreSQL server (set DSH_TEST_POSTGRES_URL, as scripts/test.sh does)");
                return None;
            }
        };
        let admin = Client::connect(&url, NoTls).expect("connect to the test server");
        Some(Pg {
            url,
            admin,
            schemas: Vec::new(),
        })
    }

    /// A schema name no other test (or earlier run) uses.
    fn fresh_schema(&mut self) -> String {
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name = format!(
            "cli_{}_{}_{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        self.schemas.push(name.clone());
        name
    }

    /// The backend of the store in `schema`.
    fn backend(&self, schema: &str) -> BackendConfig {
        BackendConfig::postgres(&self.url, schema)
    }

    /// A store in `schema` that writes inside appends.
    fn config(&self, schema: &str) -> StoreConfig {
        let mut config = StoreConfig::new(self.backend(schema));
        config.batch_window_ms = 0;
        config
    }

    /// Whether the server has a schema `name` (tables or not).
    fn schema_exists(&mut self, name: &str) -> bool {
        self.admin
            .query_opt("SELECT 1 FROM pg_namespace WHERE nspname = $1", &[&name])
            .expect("query pg_namespace")
            .is_some()
    }
}

impl Drop for Pg {
    fn drop(&mut self) {
        for s in &self.schemas {
            let _ = self
                .admin
                .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{s}\" CASCADE"));
        }
    }
}

/// The ids `list --json` prints.
fn ids(list: &str) -> Vec<String> {
    json(list)
        .as_array()
        .expect("a JSON array")
        .iter()
        .map(|r| r["id"].as_str().expect("id").to_string())
        .collect()
}

#[test]
fn convert_sqlite_to_postgres_to_jsonl_keeps_every_event() {
    let Some(mut pg) = Pg::new() else { return };
    let schema = pg.fresh_schema();
    let dir = temp_dir("pg-convert");
    let db = dir.join("src.db");
    make_store(config("sqlite", &db, None));
    let back = dir.join("back");
    let url = pg.url.clone();

    // SQLite → PostgreSQL: the schema is created by the writer.
    assert!(!pg.schema_exists(&schema));
    let (code, out, err) = run(&["--json", "convert", s(&db), &url, "--to-schema", &schema]);
    assert_eq!(code, 0, "{err}");
    let out = json(&out);
    assert_eq!(out["events"], 26, "{out}");
    assert_eq!(out["destination"]["backend"], "postgres");
    let place = out["destination"]["path"].as_str().unwrap();
    assert!(place.starts_with("postgresql://"), "{place}");
    assert!(place.ends_with(&format!(" (schema {schema})")), "{place}");
    assert!(pg.schema_exists(&schema));

    // PostgreSQL → JSONL (the postgres:// spelling too).
    let alt = url.replacen("postgresql://", "postgres://", 1);
    let (code, out, err) = run(&["convert", &alt, s(&back), "--from-schema", &schema]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("2 session(s), 26 event(s)"), "{out}");
    assert!(out.contains("(postgres) -> "), "{out}");

    for id in ["demo", "open"] {
        let (h0, e0) = load(&BackendConfig::Sqlite { path: db.clone() }, id);
        let (h1, e1) = load(&pg.backend(&schema), id);
        let (h2, e2) = load(
            &BackendConfig::Jsonl {
                path: back.clone(),
                zstd: true,
            },
            id,
        );
        assert!(!e0.is_empty());
        assert!(e0 == e1 && e0 == e2, "{id}: same events as JSON values");
        let text =
            |v: &[dsh_session::json::Value]| v.iter().map(|e| e.to_json()).collect::<Vec<_>>();
        assert!(text(&e0) == text(&e2), "{id}: byte-identical events");
        assert_eq!(h0, h1, "{id}: same header in PostgreSQL");
        assert_eq!(
            h1.as_object().unwrap().get("id"),
            h2.as_object().unwrap().get("id")
        );
        // What the binary prints of each store is the same too.
        let show = |store: &[&str]| {
            let mut args = vec!["--json", "show"];
            args.extend_from_slice(store);
            args.push(id);
            run(&args).1
        };
        let from_pg = show(&[&url, "--schema", &schema]);
        assert_eq!(from_pg.lines().count(), e0.len());
        assert_eq!(from_pg, show(&[s(&db)]));
        assert_eq!(from_pg, show(&[s(&back)]));
    }

    // A destination that holds sessions is refused, then a session id
    // present in both; a store is not its own destination.
    let (code, _, err) = run(&["convert", s(&db), &url, "--to-schema", &schema]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("--into-existing"), "{err}");
    let (code, _, err) = run(&[
        "convert",
        s(&db),
        &url,
        "--to-schema",
        &schema,
        "--into-existing",
    ]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("convert.exists"), "{err}");
    let (code, _, err) = run(&[
        "convert",
        &url,
        &alt,
        "--from-schema",
        &schema,
        "--to-schema",
        &schema,
    ]);
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("same store"), "{err}");

    // PostgreSQL → PostgreSQL, one session into another schema.
    let other = pg.fresh_schema();
    let (code, _, err) = run(&[
        "convert",
        &url,
        &url,
        "--from-schema",
        &schema,
        "--to-schema",
        &other,
        "--session",
        "open",
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = run(&["--json", "list", &url, "--schema", &other]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(ids(&out), ["open"]);
}

#[test]
fn list_show_derive_verify_repair_and_fork_on_postgres() {
    let Some(mut pg) = Pg::new() else { return };
    let schema = pg.fresh_schema();
    let derived = make_store(pg.config(&schema));
    let url = pg.url.clone();
    let store = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend_from_slice(&[url.as_str(), "--schema", schema.as_str()]);
        all.into_iter().map(str::to_string).collect::<Vec<_>>()
    };
    let run_on = |args: &[&str], rest: &[&str]| {
        let mut all = store(args);
        all.extend(rest.iter().map(|s| s.to_string()));
        let refs: Vec<&str> = all.iter().map(String::as_str).collect();
        run(&refs)
    };

    // list
    let (code, out, err) = run_on(&["--json", "list"], &[]);
    assert_eq!(code, 0, "{err}");
    let list = json(&out);
    let rows = list.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{out}");
    assert_eq!(rows[0]["id"], "demo");
    assert_eq!(rows[0]["events"], 21);
    assert_eq!(rows[0]["openTurn"], serde_json::Value::Null);
    assert_eq!(rows[0]["header"]["cwd"], "/home/demo");
    assert!(rows[0]["revision"]
        .as_str()
        .unwrap()
        .starts_with("postgres:store:"));
    assert_eq!(rows[1]["id"], "open");
    assert_eq!(rows[1]["openTurn"], 1);
    let (code, out, _) = run_on(&["list"], &[]);
    assert_eq!(code, 0);
    assert!(out.starts_with("ID") && out.contains("demo"), "{out}");

    // show: a range and a type filter, read from the database.
    let (code, out, err) = run_on(
        &["--json", "show"],
        &["demo", "--from", "3", "--to", "12", "--type", "assistant/*"],
    );
    assert_eq!(code, 0, "{err}");
    let seqs: Vec<u64> = out
        .lines()
        .map(|l| json(l)["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [4, 5, 6, 11]);
    let (code, out, _) = run_on(&["show"], &["demo", "--type", "tool/call"]);
    assert_eq!(code, 0);
    assert!(out.contains("SEQ") && out.contains("tool/call"), "{out}");
    let (code, _, err) = run_on(&["show"], &["nosuch"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("load.not-found"), "{err}");

    // derive: the library's message list.
    let (code, out, err) = run_on(&["--json", "derive"], &["demo"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out), json(&derived));
    let (code, out, _) = run_on(&["derive"], &["demo", "--surface"]);
    assert_eq!(code, 0);
    assert!(out.contains("replacement"), "{out}");

    // stats
    let (code, out, err) = run_on(&["--json", "stats"], &["demo"]);
    assert_eq!(code, 0, "{err}");
    let st = json(&out);
    assert_eq!(st["events"], 21);
    assert_eq!(st["fileBytes"], serde_json::Value::Null);
    assert_eq!(st["surface"]["replacements"], 1);

    // verify: demo clean, open repairable (it ends inside a turn).
    let (code, out, _) = run_on(&["verify"], &["demo"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("demo: clean"), "{out}");
    let (code, out, _) = run_on(&["--json", "verify"], &[]);
    assert_eq!(code, 1, "{out}");
    let v = json(&out);
    assert_eq!(v["backend"], "postgres");
    assert_eq!(v["status"], "repairable");
    assert_eq!(v["sessions"].as_array().unwrap().len(), 2);
    assert!(out.contains("repair.interrupted-turn"), "{out}");

    // repair: a dry run writes nothing; then the closers are written.
    let (code, out, err) = run_on(&["repair"], &["open", "--dry-run"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("dry run"), "{out}");
    assert_eq!(run_on(&["verify"], &["open"]).0, 1);
    let (code, out, err) = run_on(&["repair"], &["open"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("repaired"), "{out}");
    let (code, out, _) = run_on(&["verify"], &[]);
    assert_eq!(code, 0, "{out}");

    // fork into a new session of the same schema.
    let (code, out, err) = run_on(&["--json", "fork"], &["demo", "--at", "13", "--as", "kid"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["id"], "kid");
    let (code, out, _) = run_on(&["--json", "list"], &[]);
    assert_eq!(code, 0);
    assert_eq!(ids(&out), ["demo", "kid", "open"]);
}

#[test]
fn reading_an_absent_schema_fails_and_creates_nothing() {
    let Some(mut pg) = Pg::new() else { return };
    let schema = pg.fresh_schema();
    let url = pg.url.clone();
    let dir = temp_dir("pg-absent");
    let dst = dir.join("out");
    let commands: [&[&str]; 8] = [
        &["list"],
        &["show", "demo"],
        &["derive", "demo"],
        &["stats", "demo"],
        &["verify"],
        &["verify", "demo"],
        &["repair", "demo", "--dry-run"],
        &["fork", "demo", "--at", "0"],
    ];
    for command in commands {
        let mut args = vec![command[0], &url, "--schema", &schema];
        args.extend_from_slice(&command[1..]);
        let (code, out, err) = run(&args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(
            out.contains("cli.no-store") || err.contains("cli.no-store"),
            "{args:?}: {out}{err}"
        );
        assert!((out.clone() + &err).contains("store.not-found"), "{args:?}");
        assert!(!pg.schema_exists(&schema), "{args:?} created the schema");
    }
    let (code, _, err) = run(&["--json", "list", &url, "--schema", &schema]);
    assert_eq!(code, 2);
    let e = &json(&err)["error"];
    assert_eq!(e["rule"], "cli.no-store");
    assert_eq!(e["status"], "DSH_E_IO");
    assert!(e["file"].as_str().unwrap().contains(&schema), "{e}");
    // A convert out of it fails before the destination is made.
    let (code, _, err) = run(&["convert", &url, s(&dst), "--from-schema", &schema]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cli.no-store"), "{err}");
    assert!(!dst.exists());
    assert!(!pg.schema_exists(&schema));
    // The default schema is `dsh`: an explicit --schema dsh is the same
    // store as none (whatever the server holds there, both agree).
    let (a, _, _) = run(&["--json", "list", &url]);
    let (b, _, _) = run(&["--json", "list", &url, "--schema", "dsh"]);
    assert_eq!(a, b);
}

#[test]
fn postgres_urls_on_the_command_line_need_no_server_to_be_checked() {
    // A password (in the credentials or a parameter) is never printed,
    // even when the server cannot be reached.
    let url = "postgresql://alice:hunter2@127.0.0.1:1/app?password=hunter3&connect_timeout=2";
    for json_flag in [false, true] {
        let mut args = vec!["list", url];
        if json_flag {
            args.insert(0, "--json");
        }
        let (code, out, err) = run(&args);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("postgres.connect"), "{err}");
        assert!(err.contains("127.0.0.1:1/app"), "{err}");
        for secret in ["hunter2", "hunter3", "alice"] {
            assert!(!out.contains(secret) && !err.contains(secret), "{err}");
        }
    }
    let (code, out, err) = run(&["verify", url]);
    assert_eq!(code, 2, "{err}");
    assert!(
        !out.contains("hunter") && !err.contains("hunter"),
        "{out}{err}"
    );

    // Usage errors (64): a schema that is not a plain name, --schema on a
    // path, a backend that contradicts the argument, a URL that does not
    // parse; none repeats the URL's password.
    let dir = temp_dir("pg-usage");
    let db = dir.join("s.db");
    make_store(config("sqlite", &db, None));
    let cases: [&[&str]; 7] = [
        &["list", url, "--schema", "Bad-Name"],
        &["list", url, "--schema", "pg_catalog"],
        &["list", s(&db), "--schema", "dsh"],
        &["list", url, "--backend", "sqlite"],
        &["list", s(&db), "--backend", "postgres"],
        &["convert", s(&db), url, "--from-schema", "dsh"],
        &["list", "postgresql://bob:hunter2@host:notaport/db"],
    ];
    for args in cases {
        let (code, out, err) = run(args);
        assert_eq!(code, 64, "{args:?}: {err}");
        assert!(
            !out.contains("hunter") && !err.contains("hunter"),
            "{args:?}: {err}"
        );
    }
    let (_, _, err) = run(&["convert", s(&db), url, "--from-schema", "dsh"]);
    assert!(err.contains("--from-schema"), "{err}");
    // The help documents URLs and --schema.
    let (code, out, _) = run(&["list", "--help"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("--schema <NAME>") && out.contains("postgresql://"),
        "{out}"
    );
    let (_, out, _) = run(&["convert", "--help"]);
    assert!(
        out.contains("--from-schema") && out.contains("--to-schema"),
        "{out}"
    );
    let (_, out, _) = run(&["--help"]);
    assert!(out.contains("PostgreSQL connection URL"), "{out}");
}
