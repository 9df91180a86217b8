//! The `sessions` table (docs/formats.md §4.8): a header as columns, the
//! materialization upsert, and decoding a row back into a header
//! (`sqlite.row-session`).

use rusqlite::types::{ToSql, ValueRef};
use rusqlite::{Connection, OptionalExtension};

use super::rows::Wtf8;
use super::schema::sql_err;
use crate::engine::event::MAX_SAFE;
use crate::error::{Error, Result, Status};
use crate::json::{JsString, Object, Value};
use crate::rule::Rule;
use crate::store::uuid::is_uuid;

/// The columns every session query selects, in [`SessionRow::from_row`] order.
const COLUMNS: &str = "id, version, created_at, cwd, parent_session, seed_length, origin, \
                       delegation_depth, agent_preset, incarnation, revision";

/// The WTF-8 bytes of a header's `id` (empty when it has none).
pub fn header_id_bytes(header: &Value) -> &[u8] {
    header
        .as_object()
        .and_then(|h| h.get("id"))
        .and_then(Value::as_js_str)
        .map_or(&[], JsString::as_wtf8)
}

/// One header field as a column value.
enum Col<'a> {
    Null,
    Int(i64),
    Text(&'a [u8]),
}

impl ToSql for Col<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        match self {
            Col::Null => rusqlite::types::Null.to_sql(),
            Col::Int(n) => n.to_sql(),
            Col::Text(t) => Ok(rusqlite::types::ToSqlOutput::Borrowed(ValueRef::Text(t))),
        }
    }
}

fn header_col<'a>(h: &'a Object, key: &str, int: bool, required: bool) -> Result<Col<'a>> {
    let bad = || {
        Error::invalid_argument(
            Rule::SqliteHeaderColumn,
            format!("session header field {key} cannot be stored in the sessions table"),
        )
    };
    match h.get(key) {
        None | Some(Value::Null) if !required => Ok(Col::Null),
        Some(v) if int => v.as_safe_i64().map(Col::Int).ok_or_else(bad),
        Some(Value::String(s)) => Ok(Col::Text(s.as_wtf8())),
        _ => Err(bad()),
    }
}

/// Insert the session row of `header` with a new `incarnation` and revision
/// 0, or (when it exists) update its nine header columns only.
pub fn upsert(conn: &Connection, header: &Value, incarnation: &str) -> Result<()> {
    let empty = Object::new();
    let h = header.as_object().unwrap_or(&empty);
    let cols = [
        header_col(h, "id", false, true)?,
        header_col(h, "version", true, true)?,
        header_col(h, "createdAt", true, true)?,
        header_col(h, "cwd", false, false)?,
        header_col(h, "parentSession", false, false)?,
        header_col(h, "seedLength", true, false)?,
        header_col(h, "origin", false, false)?,
        header_col(h, "delegationDepth", true, false)?,
        header_col(h, "agentPreset", false, false)?,
        Col::Text(incarnation.as_bytes()),
    ];
    let mut stmt = conn
        .prepare_cached(
            "INSERT INTO sessions (id, version, created_at, cwd, parent_session, seed_length, origin, \
             delegation_depth, agent_preset, incarnation, revision) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 0) \
             ON CONFLICT(id) DO UPDATE SET version = excluded.version, created_at = excluded.created_at, \
             cwd = excluded.cwd, parent_session = excluded.parent_session, \
             seed_length = excluded.seed_length, origin = excluded.origin, \
             delegation_depth = excluded.delegation_depth, agent_preset = excluded.agent_preset",
        )
        .map_err(sql_err)?;
    stmt.execute(rusqlite::params_from_iter(cols.iter()))
        .map_err(sql_err)?;
    Ok(())
}

/// `revision += 1` of the session row (`sqlite.metadata-missing` when absent).
pub fn bump_revision(conn: &Connection, id: &[u8]) -> Result<()> {
    let mut stmt = conn
        .prepare_cached("UPDATE sessions SET revision = revision + 1 WHERE id = ?1")
        .map_err(sql_err)?;
    if stmt.execute([Wtf8(id)]).map_err(sql_err)? == 0 {
        return Err(metadata_missing(id));
    }
    Ok(())
}

/// `sqlite.metadata-missing`.
pub fn metadata_missing(id: &[u8]) -> Error {
    Error::new(
        Status::Corrupt,
        Rule::SqliteMetadataMissing,
        format!(
            "session \"{}\" metadata row is missing",
            String::from_utf8_lossy(id)
        ),
    )
}

/// A decoded `sessions` row.
#[derive(Debug, Clone)]
pub struct SessionRow {
    /// The header (`version, id, createdAt, cwd?, parentSession?, seedLength?,
    /// origin?, delegationDepth?, agentPreset?`).
    pub header: Value,
    /// The incarnation UUID.
    pub incarnation: String,
    /// The revision counter.
    pub revision: u64,
}

fn row_session(column: &str, what: &str) -> Error {
    Error::new(
        Status::Corrupt,
        Rule::SqliteRowSession,
        format!("stored sessions.{column} must be {what}"),
    )
}

impl SessionRow {
    /// Decode a row selected with [`COLUMNS`] (`sqlite.row-session`).
    fn from_row(row: &rusqlite::Row<'_>) -> Result<SessionRow> {
        let get = |i: usize| row.get_ref(i).map_err(sql_err);
        let text = |i: usize, name: &str| -> Result<Option<JsString>> {
            match get(i)? {
                ValueRef::Null => Ok(None),
                ValueRef::Text(t) => Ok(Some(JsString::from_wtf8(t))),
                _ => Err(row_session(name, "text")),
            }
        };
        let int = |i: usize, name: &str, min: i64| -> Result<Option<i64>> {
            match get(i)? {
                ValueRef::Null => Ok(None),
                ValueRef::Integer(n) if n >= min && n.unsigned_abs() <= MAX_SAFE => Ok(Some(n)),
                _ => Err(row_session(name, "a safe integer in range")),
            }
        };
        let id = text(0, "id")?
            .filter(|s| !s.is_empty())
            .ok_or_else(|| row_session("id", "non-empty text"))?;
        let version = int(1, "version", -(MAX_SAFE as i64))?
            .ok_or_else(|| row_session("version", "an integer"))?;
        let created =
            int(2, "created_at", 0)?.ok_or_else(|| row_session("created_at", "an integer"))?;
        let cwd = text(3, "cwd")?;
        if cwd
            .as_ref()
            .is_some_and(|c| !crate::engine::cwd::is_absolute(c))
        {
            return Err(row_session("cwd", "an absolute path"));
        }
        let parent = text(4, "parent_session")?;
        let seed_length = int(5, "seed_length", 0)?;
        let origin = text(6, "origin")?;
        if origin.as_ref().is_some_and(|o| *o != "subagent") {
            return Err(row_session("origin", "NULL or \"subagent\""));
        }
        let depth = int(7, "delegation_depth", 0)?;
        let preset = text(8, "agent_preset")?;
        let incarnation = text(9, "incarnation")?
            .and_then(|s| s.as_str().filter(|s| is_uuid(s)).map(str::to_string))
            .ok_or_else(|| row_session("incarnation", "a UUID"))?;
        let revision =
            int(10, "revision", 0)?.ok_or_else(|| row_session("revision", "an integer"))?;
        let mut h = Object::with_capacity(9);
        h.insert_str("version", Value::Number(version as f64));
        h.insert_str("id", Value::String(id));
        h.insert_str("createdAt", Value::Number(created as f64));
        let optional = [
            ("cwd", cwd.map(Value::String)),
            ("parentSession", parent.map(Value::String)),
            ("seedLength", seed_length.map(|n| Value::Number(n as f64))),
            ("origin", origin.map(Value::String)),
            ("delegationDepth", depth.map(|n| Value::Number(n as f64))),
            ("agentPreset", preset.map(Value::String)),
        ];
        for (key, value) in optional {
            if let Some(v) = value {
                h.insert_str(key, v);
            }
        }
        Ok(SessionRow {
            header: Value::Object(h),
            incarnation,
            revision: revision as u64,
        })
    }
}

/// The session row of `id`, if any.
pub fn select(conn: &Connection, id: &[u8]) -> Result<Option<SessionRow>> {
    let mut stmt = conn
        .prepare_cached(&format!("SELECT {COLUMNS} FROM sessions WHERE id = ?1"))
        .map_err(sql_err)?;
    let mut rows = stmt.query([Wtf8(id)]).map_err(sql_err)?;
    rows.next()
        .map_err(sql_err)?
        .map(SessionRow::from_row)
        .transpose()
}

/// True when a session row exists for `id`.
pub fn exists(conn: &Connection, id: &[u8]) -> Result<bool> {
    let mut stmt = conn
        .prepare_cached("SELECT 1 FROM sessions WHERE id = ?1")
        .map_err(sql_err)?;
    let found = stmt
        .query_row([Wtf8(id)], |_| Ok(()))
        .optional()
        .map_err(sql_err)?;
    Ok(found.is_some())
}

/// Every session row (no ORDER BY: practically insertion order).
pub fn select_all(conn: &Connection) -> Result<Vec<Row>> {
    let mut stmt = conn
        .prepare_cached(&format!("SELECT {COLUMNS} FROM sessions"))
        .map_err(sql_err)?;
    let mut rows = stmt.query([]).map_err(sql_err)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(sql_err)? {
        out.push(SessionRow::from_row(row).map_err(|e| {
            let id = match row.get_ref(0) {
                Ok(ValueRef::Text(t)) => Value::String(JsString::from_wtf8(t)),
                _ => Value::Null,
            };
            (id, e)
        }));
    }
    Ok(out)
}

/// One row of [`select_all`]: decoded, or the `id` column as far as it
/// could be read and why the row does not decode.
pub type Row = std::result::Result<SessionRow, (Value, Error)>;
