//! Copies of the rows a repair deletes: a SQLite session's torn tail (rows
//! after its last turn end that do not decode into the log) is written to
//! a quarantine file beside the database, one JSON line per row with its
//! columns (blobs as hex), synced before the rows are deleted.

use std::path::{Path, PathBuf};

use rusqlite::types::ValueRef;
use rusqlite::Transaction;

use super::schema::sql_err;
use crate::error::Result;
use crate::json::{JsString, Object, Value};
use crate::store::quarantine;

/// How many rows of session `id` have a seq of at least `from`.
pub(super) fn count_from(tx: &Transaction<'_>, id: &[u8], from: u64) -> Result<u64> {
    tx.prepare_cached("SELECT count(*) FROM events WHERE session_id = ?1 AND seq >= ?2")
        .and_then(|mut s| s.query_row((super::rows::Wtf8(id), from as i64), |r| r.get::<_, i64>(0)))
        .map(|n| n as u64)
        .map_err(sql_err)
}

/// Copy the rows of session `id` from seq `from` on into a quarantine file
/// beside the database at `db` (none for an in-memory database, which
/// keeps nothing on disk): the copy's path and the rows copied.
pub(super) fn keep_rows(
    tx: &Transaction<'_>,
    db: Option<&Path>,
    id: &[u8],
    from: u64,
) -> Result<(Option<PathBuf>, u64)> {
    let mut stmt = tx
        .prepare("SELECT * FROM events WHERE session_id = ?1 AND seq >= ?2 ORDER BY seq")
        .map_err(sql_err)?;
    let names: Vec<String> = stmt.column_names().map(str::to_string).collect();
    let mut rows = stmt
        .query((super::rows::Wtf8(id), from as i64))
        .map_err(sql_err)?;
    let mut text = String::new();
    let mut n = 0;
    while let Some(row) = rows.next().map_err(sql_err)? {
        let mut o = Object::new();
        for (i, name) in names.iter().enumerate() {
            let v = match row.get_ref(i).map_err(sql_err)? {
                ValueRef::Null => Value::Null,
                ValueRef::Integer(x) => Value::Number(x as f64),
                ValueRef::Real(x) => Value::Number(x),
                ValueRef::Text(t) => Value::String(JsString::from_str(&String::from_utf8_lossy(t))),
                ValueRef::Blob(b) => Value::obj([("hex", Value::str(&hex(b)))]),
            };
            o.insert_str(name, v);
        }
        Value::Object(o).write_json(&mut text);
        text.push('\n');
        n += 1;
    }
    let Some((dir, name)) = beside(db) else {
        return Ok((None, n));
    };
    let label = format!("{}-{from}", hex(id));
    let copy = quarantine::keep(dir, &name, &label, text.as_bytes())?;
    Ok((Some(copy), n))
}

/// The copies kept beside the database at `db` of rows cut from session
/// `id`, oldest first.
pub(super) fn kept(db: Option<&Path>, id: &[u8]) -> Result<Vec<PathBuf>> {
    let Some((dir, name)) = beside(db) else {
        return Ok(Vec::new());
    };
    let mine = format!("{name}.cut-{}-", hex(id));
    let all = quarantine::list(dir, &name)?;
    Ok(all
        .into_iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&mine))
        })
        .collect())
}

/// The directory of the database file `db` and the file's name: where its
/// copies are kept, and what they are named after (none for an in-memory
/// database).
fn beside(db: Option<&Path>) -> Option<(&Path, String)> {
    let db = db.filter(|p| !p.as_os_str().is_empty())?;
    let dir = match db.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Some((dir, db.file_name()?.to_string_lossy().into_owned()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
