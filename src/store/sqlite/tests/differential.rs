//! Differential tests: the SQLite backend and both JSONL encodings store
//! the same logs and read back the same events, whatever the append
//! partition (docs/formats.md §8: the backends differ only physically).

use std::sync::Arc;

use super::tests::{ev, header, raw, TempDir};
use super::*;
use crate::store::jsonl::{Compression, JsonlBackend};
use crate::test_rng::Rng;

/// The three backends under one temporary directory.
struct Trio {
    dir: TempDir,
    sqlite: SqliteBackend,
    plain: JsonlBackend,
    zstd: JsonlBackend,
}

impl Trio {
    fn new(tag: &str) -> Trio {
        Trio::on(TempDir::new(tag))
    }

    /// The three backends over `dir`.
    fn on(dir: TempDir) -> Trio {
        let (sqlite, plain, zstd) = Trio::backends(&dir);
        Trio {
            dir,
            sqlite,
            plain,
            zstd,
        }
    }

    fn backends(dir: &TempDir) -> (SqliteBackend, JsonlBackend, JsonlBackend) {
        (
            SqliteBackend::open(&dir.db(), 5000).unwrap(),
            JsonlBackend::open(&dir.0.join("plain"), Compression::None).unwrap(),
            JsonlBackend::open(&dir.0.join("zstd"), Compression::Zstd).unwrap(),
        )
    }

    /// Close and reopen every backend (nothing is cached across).
    fn reopen(self) -> Trio {
        let Trio {
            dir,
            sqlite,
            plain,
            zstd,
        } = self;
        // Each backend holds its store's lock until dropped.
        drop((sqlite, plain, zstd));
        Trio::on(dir)
    }

    fn each(&mut self) -> [(&'static str, &mut dyn Backend); 3] {
        [
            ("sqlite", &mut self.sqlite),
            ("jsonl", &mut self.plain),
            ("jsonl-zstd", &mut self.zstd),
        ]
    }

    fn append(&mut self, h: &Value, batch: &[Arc<Event>], first: bool) {
        for (name, b) in self.each() {
            b.append(h, batch, first)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }

    /// Every backend's events of `id` as JSON texts (none torn).
    fn loads(&mut self, id: &str) -> Vec<(&'static str, Vec<String>)> {
        self.each()
            .into_iter()
            .map(|(name, b)| {
                let loaded = b
                    .load(id)
                    .unwrap_or_else(|e| panic!("{name}: {e}"))
                    .unwrap();
                assert!(loaded.torn.is_none(), "{name}: torn");
                let texts = loaded.values().iter().map(Value::to_json).collect();
                (name, texts)
            })
            .collect()
    }
}

/// Append the event `{type, seq, time, data}` + `extra` to `out`.
fn push(out: &mut Vec<Arc<Event>>, ty: &str, t: i64, data: &str, extra: &str) {
    let seq = out.len();
    out.push(ev(&format!(
        r#"{{"type":"{ty}","seq":{seq},"time":{t},"data":{data}{extra}}}"#
    )));
}

/// The JSON texts of `events`.
fn texts(events: &[Arc<Event>]) -> Vec<String> {
    events.iter().map(|e| e.to_value().to_json()).collect()
}

const SAFE: i64 = 9_007_199_254_740_991;

/// A random log of `n` events: delta runs of every packed kind (with time
/// steps up and down, near ±2^53, index / step / call switches and tool
/// names present or absent), off-format deltas, surface fields, ignorable
/// events, large and non-ASCII data.
fn random_log(rng: &mut Rng, n: usize) -> Vec<Arc<Event>> {
    let mut out: Vec<Arc<Event>> = Vec::with_capacity(n);
    let mut time: i64 = 1_700_000_000_000;
    let mut turn = 1;
    let mut step = 1;
    while out.len() < n {
        let seq = out.len() as u64;
        match rng.below(12) {
            0..=5 => {
                // A delta run.
                let cap = if rng.below(8) == 0 { 40 } else { 7 };
                let len = 1 + rng.below(cap);
                let kind = rng.below(4);
                let index = rng.below(2);
                let call = rng.below(2);
                for _ in 0..len {
                    time = match rng.below(20) {
                        0 => SAFE - rng.below(3) as i64,
                        1 => -SAFE + rng.below(3) as i64,
                        2 => 1_700_000_000_000,
                        _ => time
                            .saturating_add(rng.below(11) as i64 - 5)
                            .clamp(-SAFE, SAFE),
                    };
                    let text = match rng.below(6) {
                        0 => "é \\ud83d\\ude00 \\\"q\\\"\\n".to_string(),
                        1 => String::new(),
                        _ => format!("w{}", rng.below(1000)),
                    };
                    let chunk = match kind {
                        0 => format!(r#"{{"type":"text-delta","index":{index},"text":"{text}"}}"#),
                        1 => format!(
                            r#"{{"type":"reasoning-delta","index":{index},"text":"{text}"}}"#
                        ),
                        2 => format!(
                            r#"{{"type":"tool-call-delta","index":{index},"id":"call_{call}","name":"ls","argumentsDelta":"{text}"}}"#
                        ),
                        _ => format!(
                            r#"{{"type":"tool-call-delta","index":{index},"id":"call_{call}","argumentsDelta":"{text}"}}"#
                        ),
                    };
                    // Now and then an off-format member: extra keys, a
                    // non-string text, usage.
                    let chunk = match rng.below(25) {
                        0 => chunk.replacen('{', r#"{"extra":1,"#, 1),
                        1 => format!(r#"{{"type":"text-delta","index":{index},"text":7}}"#),
                        _ => chunk,
                    };
                    let data = if rng.below(30) == 0 {
                        format!(
                            r#"{{"turn":{turn},"step":{step},"chunk":{chunk},"usage":{{"tokens":3}}}}"#
                        )
                    } else {
                        format!(r#"{{"turn":{turn},"step":{step},"chunk":{chunk}}}"#)
                    };
                    push(&mut out, "assistant/chunk", time, &data, "");
                    if out.len() >= n {
                        break;
                    }
                }
            }
            6 => {
                step += 1;
                push(
                    &mut out,
                    "step/start",
                    time,
                    &format!(r#"{{"turn":{turn},"step":{step}}}"#),
                    "",
                );
            }
            7 => {
                let sources: Vec<String> = (0..rng.below(4))
                    .map(|_| (rng.below(seq as usize + 1)).to_string())
                    .collect();
                let op = match rng.below(3) {
                    0 => String::new(),
                    1 => r#","surfaceOp":"append""#.to_string(),
                    _ => r#","surfaceOp":{"kind":"replace"}"#.to_string(),
                };
                push(
                    &mut out,
                    "user/message",
                    time,
                    r#"{"message":{"role":"user","content":"hi \ud800 there"}}"#,
                    &format!(r#","sourceEventSeqs":[{}]{op}"#, sources.join(",")),
                );
            }
            8 => {
                // Ignorable events with chunk-row-shaped data, also ones
                // named like storage tags (differential #1).
                let ty = *rng.pick(&["x/ext", "text-chunks", "tool-call-chunks"]);
                push(
                    &mut out,
                    ty,
                    time,
                    r#"{"turn":1,"step":1,"index":0,"dt":[0,0],"texts":["a","b","c"]}"#,
                    r#","ignorable":true"#,
                );
            }
            9 => {
                // Large data: compressible, or not.
                let body: String = if rng.below(2) == 0 {
                    "abc".repeat(2000)
                } else {
                    (0..6000)
                        .map(|_| char::from(b'!' + rng.below(90) as u8))
                        .filter(|c| *c != '"' && *c != '\\')
                        .collect()
                };
                push(
                    &mut out,
                    "x/big",
                    time,
                    &format!(r#"{{"body":"{body}"}}"#),
                    "",
                );
            }
            10 => {
                push(
                    &mut out,
                    "turn/end",
                    time,
                    &format!(r#"{{"turn":{turn}}}"#),
                    "",
                );
                turn += 1;
                step = 1;
            }
            _ => push(
                &mut out,
                "turn/start",
                time,
                &format!(r#"{{"turn":{turn}}}"#),
                "",
            ),
        }
    }
    out
}

/// differential #3: random logs appended in random partitions to
/// SQLite, JSONL and zstd-JSONL read back identically — to each other and
/// to what was appended — after random partitions and after reopening.
#[test]
fn backends_agree_on_random_logs_and_partitions() {
    let mut packed_rows = 0i64;
    for seed in 1..=24u64 {
        let mut rng = Rng(0x5EED_0000 + seed * 7919);
        let n = 60 + rng.below(240);
        let events = random_log(&mut rng, n);
        let want = texts(&events);
        let mut trio = Trio::new("differential");
        let h = header("r");
        let mut at = 0;
        while at < events.len() {
            let cap = if rng.below(4) == 0 { 120 } else { 12 };
            let len = 1 + rng.below(cap);
            let end = (at + len).min(events.len());
            trio.append(&h, &events[at..end], at == 0);
            at = end;
            if rng.below(6) == 0 {
                trio = trio.reopen();
            }
            if rng.below(4) == 0 {
                for (name, got) in trio.loads("r") {
                    assert_eq!(got, want[..at], "seed {seed}, {name}, after {at}");
                }
            }
        }
        trio = trio.reopen();
        for (name, got) in trio.loads("r") {
            assert_eq!(got, want, "seed {seed}, {name}");
        }
        let dir = trio.dir.0.clone();
        drop((trio.sqlite, trio.plain, trio.zstd));
        packed_rows += raw(&dir.join("store.db"))
            .query_row("SELECT count(*) FROM events WHERE ignorable = 0", [], |r| {
                r.get::<_, i64>(0)
            })
            .unwrap();
    }
    assert!(packed_rows > 0, "the logs exercise the packer");
}
