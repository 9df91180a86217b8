//! One connection to the server, whose every wait is bounded: the
//! statements run on `tokio-postgres`, driven by a one-thread runtime of
//! the connection's own (the caller's thread runs it, as the `postgres`
//! crate's blocking client does), and each wait for the server (a
//! statement's reply, the next rows of a read) is a `tokio::time::timeout`
//! of the store's statement timeout. A wait that runs out leaves the
//! connection in an unknown state: it is never used again, so the next
//! call connects again.
//!
//! A server-side `statement_timeout` would not do: it bounds what the
//! server does, never a reply lost with the network. TCP keepalives and
//! `tcp_user_timeout` (set in the configuration) let the kernel notice a
//! dead connection between calls, but not a peer that acknowledges
//! packets and never answers.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::runtime::Runtime;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Config, NoTls, Row, RowStream, Statement, ToStatement};

/// Why a call to the server failed.
#[derive(Debug)]
pub enum PgError {
    /// The server refused it, or the connection failed under it.
    Server(tokio_postgres::Error),
    /// No reply came within the limit (the connection is given up).
    TimedOut(Duration),
    /// The connection's runtime could not be made.
    Runtime(std::io::Error),
}

impl PgError {
    /// The server's SQLSTATE, when the server refused the statement.
    pub fn code(&self) -> Option<&tokio_postgres::error::SqlState> {
        match self {
            PgError::Server(e) => e.code(),
            _ => None,
        }
    }
}

impl std::fmt::Display for PgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PgError::Server(e) => e.fmt(f),
            PgError::TimedOut(limit) => write!(f, "no reply within {} ms", limit.as_millis()),
            PgError::Runtime(e) => write!(f, "cannot start the connection's runtime: {e}"),
        }
    }
}

impl std::error::Error for PgError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PgError::Server(e) => e.source(),
            PgError::Runtime(e) => Some(e),
            PgError::TimedOut(_) => None,
        }
    }
}

/// `f` run on `rt`, failing with [`PgError::TimedOut`] when it has not
/// finished within `limit`.
fn bounded<T>(
    rt: &Runtime,
    limit: Duration,
    f: impl Future<Output = Result<T, tokio_postgres::Error>>,
) -> Result<T, PgError> {
    // The timer is made inside the runtime, which it needs.
    match rt.block_on(async { tokio::time::timeout(limit, f).await }) {
        Ok(r) => r.map_err(PgError::Server),
        Err(_) => Err(PgError::TimedOut(limit)),
    }
}

/// The waits of one connection.
struct Waiter {
    rt: Runtime,
    limit: Duration,
    /// A wait ran out: the connection is never used again.
    broken: bool,
}

impl Waiter {
    /// [`bounded`] by the connection's limit: nothing is sent on a
    /// connection given up, and a wait that runs out gives it up.
    fn settle<T>(
        &mut self,
        f: impl Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<T, PgError> {
        if self.broken {
            // (`f` is dropped unpolled: nothing was sent.)
            return Err(PgError::TimedOut(self.limit));
        }
        let r = bounded(&self.rt, self.limit, f);
        if matches!(r, Err(PgError::TimedOut(_))) {
            self.broken = true;
        }
        r
    }
}

/// A connection whose waits are bounded by its limit.
pub struct Db {
    /// Dropped before the runtime, which then drops the connection's
    /// task and with it the socket.
    client: tokio_postgres::Client,
    waiter: Waiter,
}

impl Db {
    /// Connect with `config` (the whole connection, socket to
    /// authentication, within `connect_limit`); every later wait is
    /// bounded by `limit`.
    pub fn connect(
        config: &Config,
        connect_limit: Duration,
        limit: Duration,
    ) -> Result<Db, PgError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(PgError::Runtime)?;
        let (client, connection) = bounded(&rt, connect_limit, config.connect(NoTls))?;
        // The connection's messages are read while a call waits.
        rt.spawn(async move {
            let _ = connection.await;
        });
        Ok(Db {
            client,
            waiter: Waiter {
                rt,
                limit,
                broken: false,
            },
        })
    }

    /// How long a statement waits for the server.
    #[cfg(test)]
    pub fn limit(&self) -> Duration {
        self.waiter.limit
    }

    /// Whether the connection is lost or given up.
    pub fn is_closed(&self) -> bool {
        self.waiter.broken || self.client.is_closed()
    }

    /// Run `f` with every wait bounded by the limit plus `extra` (a
    /// statement that waits for a lock as long as the server lets it).
    pub fn with_extra<T>(&mut self, extra: Duration, f: impl FnOnce(&mut Db) -> T) -> T {
        self.waiter.limit += extra;
        let r = f(self);
        self.waiter.limit -= extra;
        r
    }

    /// Run `query`; the number of rows it changed.
    pub fn execute<T: ?Sized + ToStatement + Sync>(
        &mut self,
        query: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, PgError> {
        self.waiter.settle(self.client.execute(query, params))
    }

    /// The rows of `query`.
    pub fn query<T: ?Sized + ToStatement + Sync>(
        &mut self,
        query: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, PgError> {
        self.waiter.settle(self.client.query(query, params))
    }

    /// The one row of `query`, if any (more is an error).
    pub fn query_opt<T: ?Sized + ToStatement + Sync>(
        &mut self,
        query: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, PgError> {
        self.waiter.settle(self.client.query_opt(query, params))
    }

    /// The one row of `query` (none or more is an error).
    pub fn query_one<T: ?Sized + ToStatement + Sync>(
        &mut self,
        query: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Row, PgError> {
        self.waiter.settle(self.client.query_one(query, params))
    }

    /// Run the statements of `sql` (no parameters).
    pub fn batch_execute(&mut self, sql: &str) -> Result<(), PgError> {
        self.waiter.settle(self.client.batch_execute(sql))
    }

    /// Prepare `sql` on this connection.
    pub fn prepare(&mut self, sql: &str) -> Result<Statement, PgError> {
        self.waiter.settle(self.client.prepare(sql))
    }

    /// The rows of `statement` as they arrive (each wait for more bounded).
    pub fn rows(
        &mut self,
        statement: &Statement,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Rows<'_>, PgError> {
        let stream = self
            .waiter
            .settle(self.client.query_raw(statement, params.iter().copied()))?;
        Ok(Rows {
            db: self,
            stream: Box::pin(stream),
        })
    }

    /// Begin a transaction (`begin` is its `BEGIN …` statement); it rolls
    /// back unless committed.
    pub fn begin(&mut self, begin: &str) -> Result<Tx<'_>, PgError> {
        self.batch_execute(begin)?;
        Ok(Tx {
            db: self,
            open: true,
        })
    }
}

/// The rows of a read, streamed.
pub struct Rows<'a> {
    db: &'a mut Db,
    stream: Pin<Box<RowStream>>,
}

impl Rows<'_> {
    /// The next row, `None` at the end.
    pub fn next(&mut self) -> Result<Option<Row>, PgError> {
        let next = self.stream.next();
        self.db.waiter.settle(async { next.await.transpose() })
    }
}

/// A transaction: [`Tx::commit`] ends it, dropping it rolls it back.
pub struct Tx<'a> {
    db: &'a mut Db,
    open: bool,
}

impl Tx<'_> {
    /// Commit.
    pub fn commit(mut self) -> Result<(), PgError> {
        self.open = false;
        self.db.batch_execute("COMMIT")
    }
}

impl std::ops::Deref for Tx<'_> {
    type Target = Db;
    fn deref(&self) -> &Db {
        self.db
    }
}

impl std::ops::DerefMut for Tx<'_> {
    fn deref_mut(&mut self) -> &mut Db {
        self.db
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if self.open && !self.db.is_closed() {
            let _ = self.db.batch_execute("ROLLBACK");
        }
    }
}
