//! The PostgreSQL figures, each against raw statements on the same server
//! in the same run (three interleaved rounds, medians): write-behind of
//! 100k events against a raw batched insert of the same rows, an open of
//! them against a raw `SELECT` of the same rows, and a fork of them
//! against a raw `INSERT … SELECT`. Needs a server: `DSH_BENCH_POSTGRES_URL`
//! (or `DSH_TEST_POSTGRES_URL`); without one the rows say skipped.

use std::ffi::CString;
use std::ptr;
use std::time::Instant;

use ::dsh_session_ffi::*;
use postgres::{Client, NoTls};
use serde_json::{json, Map, Value};

use crate::abi::{check, cstr, Buf, Session, Store};
use crate::report::{fmt_n, row, Report};
use crate::util::median;
use crate::Ctx;

/// Rows per statement of the raw batched insert (about one write-behind
/// round of the benchmark's stream).
const RAW_BATCH: usize = 4096;

const ROUNDS: usize = 3;

fn url() -> Option<String> {
    ["DSH_BENCH_POSTGRES_URL", "DSH_TEST_POSTGRES_URL"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
}

/// The raw table: the columns of the backend's `events`, no library.
fn raw_table(c: &mut Client, schema: &str) {
    c.batch_execute(&format!(
        "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}; \
         CREATE TABLE {schema}.events (session_id text NOT NULL, seq bigint NOT NULL, \
         type text NOT NULL, time bigint NOT NULL, surface_op text, source_event_seqs text, \
         ignorable boolean NOT NULL, event text NOT NULL, PRIMARY KEY (session_id, seq))"
    ))
    .unwrap();
}

/// The raw batched insert of `lines` as session `id`: one multi-row
/// statement (unnest of arrays) per [`RAW_BATCH`] rows, each its own
/// transaction.
fn raw_insert(c: &mut Client, schema: &str, id: &str, types: &[String], lines: &[&str]) -> f64 {
    let stmt = c
        .prepare(&format!(
            "INSERT INTO {schema}.events (session_id, seq, type, time, surface_op, \
             source_event_seqs, ignorable, event) SELECT $1, u.seq, u.type, 0, NULL, NULL, \
             false, u.ev FROM unnest($2::bigint[], $3::text[], $4::text[]) AS u(seq, type, ev)"
        ))
        .unwrap();
    let t = Instant::now();
    for (k, chunk) in lines.chunks(RAW_BATCH).enumerate() {
        let first = k * RAW_BATCH;
        let seqs: Vec<i64> = (first..first + chunk.len()).map(|i| i as i64).collect();
        let ty: Vec<&str> = types[first..first + chunk.len()]
            .iter()
            .map(String::as_str)
            .collect();
        c.execute(&stmt, &[&id, &seqs, &ty, &chunk]).unwrap();
    }
    t.elapsed().as_secs_f64()
}

fn open_session(store: &Store, id: &str) -> Session {
    let mut s = ptr::null_mut();
    let mut out = Buf::new();
    let c = cstr(id);
    // SAFETY: a live store handle, a NUL-terminated id, valid out pointers.
    let st = unsafe { dsh_session_open(store.0, c.as_ptr(), &mut s, out.out()) };
    check(st, &out, "dsh_session_open");
    Session(s)
}

fn fork(source: &Session, child: &str) -> Session {
    let mut s = ptr::null_mut();
    let mut out = Buf::new();
    let opts = CString::new(json!({ "id": child }).to_string()).unwrap();
    // SAFETY: a live session handle, NUL-terminated options, valid out pointers.
    let st = unsafe { dsh_session_fork(source.0, -1, opts.as_ptr(), &mut s, out.out()) };
    check(st, &out, "dsh_session_fork");
    Session(s)
}

/// The PostgreSQL rows.
pub fn run(cx: &Ctx, rep: &mut Report, extra: &mut Map<String, Value>) {
    let n = cx.big.min(100_000);
    let Some(url) = url() else {
        eprintln!("postgres: skipped (no server: set DSH_BENCH_POSTGRES_URL)");
        rep.push(
            row(
                format!("postgres write-behind {}", fmt_n(n)),
                "wall",
                f64::NAN,
                "s",
            )
            .note("skipped: no PostgreSQL server (DSH_BENCH_POSTGRES_URL)"),
        );
        return;
    };
    let stream = cx.stream;
    let lines = &stream.lines[..n];
    let types: Vec<String> = stream.events[..n]
        .iter()
        .map(|e| e.ty.to_string_lossy().into_owned())
        .collect();
    let mut admin = Client::connect(&url, NoTls).expect("connect to the benchmark server");
    let pid = std::process::id();
    let (raw_schema, ours_schema) = (format!("bench_raw_{pid}"), format!("bench_dsh_{pid}"));
    raw_table(&mut admin, &raw_schema);
    admin
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {ours_schema} CASCADE"))
        .unwrap();
    let config =
        json!({"backend": "postgres", "url": url, "schema": ours_schema, "batchWindowMs": 25})
            .to_string();

    let (mut wb, mut wb_raw) = (Vec::new(), Vec::new());
    let (mut open, mut open_raw) = (Vec::new(), Vec::new());
    let (mut fk, mut fk_raw) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        eprintln!("postgres {} events, round {} ...", fmt_n(n), round + 1);
        // Write-behind: appends, then the flush that makes them durable.
        let store = Store::open(&config);
        let id = format!("p{round}");
        let s = store.create(&id);
        let mut out = Buf::new();
        let t = Instant::now();
        for ev in &stream.events[..n] {
            s.append(ev, &mut out);
        }
        s.flush();
        wb.push(t.elapsed().as_secs_f64());
        s.close();
        wb_raw.push(raw_insert(&mut admin, &raw_schema, &id, &types, lines));

        // Open: the whole stored log into a live session.
        let t = Instant::now();
        let s = open_session(&store, &id);
        open.push(t.elapsed().as_secs_f64());
        let sel = format!(
            "SELECT seq, event FROM {raw_schema}.events WHERE session_id = $1 ORDER BY seq"
        );
        let t = Instant::now();
        let rows: Vec<(i64, String)> = admin
            .query(&sel, &[&id])
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        open_raw.push(t.elapsed().as_secs_f64());
        assert_eq!(rows.len(), n);
        drop(rows);

        // Fork at the last event, made durable.
        let t = Instant::now();
        let child = fork(&s, &format!("{id}-fork"));
        child.flush();
        fk.push(t.elapsed().as_secs_f64());
        child.close();
        s.close();
        let copy = format!(
            "INSERT INTO {raw_schema}.events SELECT $2, seq, type, time, surface_op, \
             source_event_seqs, ignorable, event FROM {raw_schema}.events WHERE session_id = $1"
        );
        let t = Instant::now();
        admin.execute(&copy, &[&id, &format!("{id}-fork")]).unwrap();
        fk_raw.push(t.elapsed().as_secs_f64());
        store.close();
    }
    let (wb, wb_raw) = (median(&mut wb), median(&mut wb_raw));
    let (open, open_raw) = (median(&mut open), median(&mut open_raw));
    let (fk, fk_raw) = (median(&mut fk), median(&mut fk_raw));
    let label = format!("{ROUNDS} rounds, medians, same server");
    rep.push(
        row(
            format!("postgres write-behind {} + flush", fmt_n(n)),
            "wall",
            wb,
            "s",
        )
        .base(
            wb_raw,
            format!("raw batched INSERT ({RAW_BATCH} rows/stmt)"),
        )
        .target("≤ 2.0× (≥ 50% of raw)", wb <= 2.0 * wb_raw)
        .note(format!("{label}; batchWindowMs 25")),
    );
    rep.push(
        row(format!("postgres open {}", fmt_n(n)), "wall", open, "s")
            .base(open_raw, "raw SELECT of the same rows")
            .target("≤ 2.0× (≥ 50% of raw)", open <= 2.0 * open_raw)
            .note(label.clone()),
    );
    rep.push(
        row(
            format!("postgres fork {} + flush", fmt_n(n)),
            "wall",
            fk,
            "s",
        )
        .base(fk_raw, "raw INSERT … SELECT")
        .target("≤ 2.0×", fk <= 2.0 * fk_raw)
        .note(label),
    );
    extra.insert(
        "postgres".into(),
        json!({"events": n, "writeBehind": wb, "rawInsert": wb_raw, "open": open,
               "rawSelect": open_raw, "fork": fk, "rawInsertSelect": fk_raw}),
    );
    let _ = admin.batch_execute(&format!(
        "DROP SCHEMA IF EXISTS {raw_schema} CASCADE; DROP SCHEMA IF EXISTS {ours_schema} CASCADE"
    ));
}
