//! The PostgreSQL schema (version 1): its exact tables, created on a
//! writer's first open of an absent or empty schema, checked on every
//! open; another version or foreign objects are refused and left alone.

use super::client::Db;
use super::conn::{pg_err, Sql};
use crate::error::{Error, Result, Status};
use crate::rule::Rule;

/// The schema version this build writes and reads.
pub const SCHEMA_VERSION: i32 = 1;

/// The tables and their columns, in order: (table, column, SQL type as
/// `information_schema.columns.data_type` names it, nullable).
const COLUMNS: &[(&str, &str, &str, bool)] = &[
    ("events", "session_id", "text", false),
    ("events", "seq", "bigint", false),
    ("events", "type", "text", false),
    ("events", "time", "bigint", false),
    ("events", "surface_op", "text", true),
    ("events", "source_event_seqs", "text", true),
    ("events", "ignorable", "boolean", false),
    ("events", "event", "text", false),
    ("sessions", "id", "text", false),
    ("sessions", "header", "text", false),
    ("sessions", "incarnation", "text", false),
    ("sessions", "revision", "bigint", false),
    ("sessions", "next_seq", "bigint", false),
    ("sessions", "created_at", "bigint", false),
    ("store_meta", "singleton", "boolean", false),
    ("store_meta", "schema_version", "integer", false),
    ("store_meta", "store_id", "text", false),
];

/// The relations of the schema: tables and their primary-key indexes.
const RELATIONS: &[(&str, &str)] = &[
    ("events", "r"),
    ("events_pkey", "i"),
    ("sessions", "r"),
    ("sessions_pkey", "i"),
    ("store_meta", "r"),
    ("store_meta_pkey", "i"),
];

fn ddl(s: &str) -> String {
    format!(
        "CREATE TABLE {s}.store_meta (\
           singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton), \
           schema_version integer NOT NULL, \
           store_id text NOT NULL);\
         CREATE TABLE {s}.sessions (\
           id text PRIMARY KEY, \
           header text NOT NULL, \
           incarnation text NOT NULL, \
           revision bigint NOT NULL, \
           next_seq bigint NOT NULL, \
           created_at bigint NOT NULL);\
         CREATE TABLE {s}.events (\
           session_id text NOT NULL, \
           seq bigint NOT NULL, \
           type text NOT NULL, \
           time bigint NOT NULL, \
           surface_op text, \
           source_event_seqs text, \
           ignorable boolean NOT NULL, \
           event text NOT NULL, \
           PRIMARY KEY (session_id, seq));"
    )
}

fn schema_error(rule: Rule, message: String) -> Error {
    Error::new(Status::SchemaMismatch, rule, message)
}

/// What an open found.
pub enum Found {
    /// No such schema.
    Absent,
    /// The schema exists and holds nothing.
    Empty,
    /// Our schema, with this store id.
    Ours(String),
}

/// Inspect the schema `name` (inside the caller's transaction).
pub fn inspect(client: &mut Db, sql: &Sql) -> Result<Found> {
    let name = sql.schema();
    let exists = client
        .query_opt("SELECT 1 FROM pg_namespace WHERE nspname = $1", &[&name])
        .map_err(pg_err)?
        .is_some();
    if !exists {
        return Ok(Found::Absent);
    }
    let rels: Vec<(String, String)> = client
        .query(
            "SELECT c.relname::text, c.relkind::text FROM pg_class c \
             JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 ORDER BY 1",
            &[&name],
        )
        .map_err(pg_err)?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let routines: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace \
             WHERE n.nspname = $1",
            &[&name],
        )
        .map_err(pg_err)?
        .get(0);
    if rels.is_empty() && routines == 0 {
        return Ok(Found::Empty);
    }
    // The version first: a later version's tables differ.
    let has_meta = rels.iter().any(|(n, k)| n == "store_meta" && k == "r");
    let version_col = client
        .query_opt(
            "SELECT 1 FROM information_schema.columns WHERE table_schema = $1 \
             AND table_name = 'store_meta' AND column_name = 'schema_version'",
            &[&name],
        )
        .map_err(pg_err)?
        .is_some();
    if !has_meta || !version_col {
        return Err(foreign(name, "it has no dsh-session store_meta table"));
    }
    let versions: Vec<Option<i32>> = client
        .query(
            &format!("SELECT schema_version::integer FROM {}.store_meta", sql.q()),
            &[],
        )
        .map_err(pg_err)?
        .iter()
        .map(|r| r.get(0))
        .collect();
    match versions.as_slice() {
        [Some(v)] if *v == SCHEMA_VERSION => {}
        [Some(v)] => {
            return Err(schema_error(
                Rule::PostgresSchemaVersion,
                format!(
                    "schema {name} has dsh-session schema version {v}, incompatible with this build ({SCHEMA_VERSION})"
                ),
            ))
        }
        _ => return Err(foreign(name, "its store_meta table does not hold one version row")),
    }
    let want: Vec<(String, String)> = RELATIONS
        .iter()
        .map(|(n, k)| (n.to_string(), k.to_string()))
        .collect();
    if rels != want || routines != 0 {
        return Err(foreign(
            name,
            "it holds objects other than the dsh-session tables",
        ));
    }
    let cols: Vec<(String, String, String, String)> = client
        .query(
            "SELECT table_name::text, column_name::text, data_type::text, is_nullable::text \
             FROM information_schema.columns WHERE table_schema = $1 \
             ORDER BY table_name, ordinal_position",
            &[&name],
        )
        .map_err(pg_err)?
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    let want: Vec<(String, String, String, String)> = COLUMNS
        .iter()
        .map(|(t, c, ty, null)| {
            let null = if *null { "YES" } else { "NO" };
            (
                t.to_string(),
                c.to_string(),
                ty.to_string(),
                null.to_string(),
            )
        })
        .collect();
    if cols != want {
        return Err(foreign(
            name,
            "its tables' columns differ from the dsh-session schema",
        ));
    }
    let id: String = client
        .query_one(&format!("SELECT store_id FROM {}.store_meta", sql.q()), &[])
        .map_err(pg_err)?
        .get(0);
    if !crate::store::uuid::is_uuid(&id) {
        return Err(Error::new(
            Status::Corrupt,
            Rule::PostgresStoreId,
            format!("schema {name} has no valid store identity (store_id {id:?})"),
        ));
    }
    Ok(Found::Ours(id))
}

fn foreign(name: &str, why: &str) -> Error {
    schema_error(
        Rule::PostgresSchemaForeign,
        format!("schema {name} is not a dsh-session store: {why}; it is left untouched"),
    )
}

/// Open the schema for writing: create it (or its tables in an empty
/// schema) when needed, in one transaction serialized against other
/// creators; return the store id.
pub fn open_for_writing(client: &mut Db, sql: &Sql) -> Result<String> {
    let mut tx = client.begin("BEGIN").map_err(pg_err)?;
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended('dsh-session:schema:' || $1, 0))",
        &[&sql.schema()],
    )
    .map_err(pg_err)?;
    let id = match inspect(&mut tx, sql)? {
        Found::Ours(id) => id,
        found => {
            if matches!(found, Found::Absent) {
                tx.batch_execute(&format!("CREATE SCHEMA {}", sql.q()))
                    .map_err(pg_err)?;
            }
            tx.batch_execute(&ddl(sql.q())).map_err(pg_err)?;
            let id = crate::store::uuid::new_uuid()?;
            tx.execute(
                &format!(
                    "INSERT INTO {}.store_meta (schema_version, store_id) VALUES ($1, $2)",
                    sql.q()
                ),
                &[&SCHEMA_VERSION, &id],
            )
            .map_err(pg_err)?;
            id
        }
    };
    tx.commit().map_err(pg_err)?;
    Ok(id)
}

/// Open the schema for reading: it must exist and be ours
/// (`store.not-found` otherwise; a reader never creates one).
pub fn open_for_reading(client: &mut Db, sql: &Sql) -> Result<String> {
    let mut tx = client.begin("BEGIN").map_err(pg_err)?;
    let found = inspect(&mut tx, sql)?;
    tx.commit().map_err(pg_err)?;
    match found {
        Found::Ours(id) => Ok(id),
        Found::Absent | Found::Empty => Err(Error::new(
            Status::NotFound,
            Rule::StoreNotFound,
            format!(
                "schema {} holds no dsh-session store (a reader never creates one)",
                sql.schema()
            ),
        )),
    }
}
