//! The SQLite `source_event_seqs` blob codec (docs/formats.md §4.6,
//! docs/errors.md §4.13): the first seq as an unsigned LEB128 varint, every later seq as
//! the zigzag-encoded difference from the previous one.

use crate::error::{Error, Result, Status};
use crate::rule::Rule;

const MAX_SAFE: u64 = (1 << 53) - 1;

fn corrupt(rule: Rule, what: &str) -> Error {
    Error::new(
        Status::Corrupt,
        rule,
        format!("malformed source_event_seqs storage value: {what}"),
    )
}

fn push_varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// Encode seqs (each a non-negative safe integer) into a blob.
pub fn encode(seqs: &[u64]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(seqs.len() * 2);
    let mut prev: i64 = 0;
    for (i, &s) in seqs.iter().enumerate() {
        if s > MAX_SAFE {
            return Err(Error::invalid_argument(
                Rule::CodecEncodeInvalid,
                "sourceEventSeqs must hold non-negative safe integers",
            ));
        }
        let s = s as i64;
        if i == 0 {
            push_varint(&mut out, s as u64);
        } else {
            let d = s - prev;
            push_varint(&mut out, ((d << 1) ^ (d >> 63)) as u64);
        }
        prev = s;
    }
    Ok(out)
}

/// Read one varint at `*pos` whose value may not exceed `limit`.
fn read_varint(bytes: &[u8], pos: &mut usize, limit: u64) -> Result<u64> {
    let mut value: u64 = 0;
    let mut shift = 0u32;
    let start = *pos;
    loop {
        let Some(&b) = bytes.get(*pos) else {
            return Err(corrupt(Rule::CodecTruncated, "truncated varint"));
        };
        *pos += 1;
        let n = *pos - start;
        if n > 9 {
            return Err(corrupt(Rule::CodecVarintOverflow, "varint is out of range"));
        }
        if n == 9 && b & 0x80 != 0 {
            return Err(corrupt(Rule::CodecVarintOverflow, "varint is out of range"));
        }
        value |= u64::from(b & 0x7f) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            if n > 1 && b == 0 {
                return Err(corrupt(Rule::CodecNonCanonical, "non-canonical varint"));
            }
            if value > limit {
                return Err(corrupt(Rule::CodecVarintOverflow, "varint is out of range"));
            }
            return Ok(value);
        }
    }
}

/// Decode a blob into seqs.
pub fn decode(bytes: &[u8]) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    let mut pos = 0;
    let mut prev: i64 = 0;
    while pos < bytes.len() {
        if out.is_empty() {
            let v = read_varint(bytes, &mut pos, MAX_SAFE)?;
            prev = v as i64;
        } else {
            let z = read_varint(bytes, &mut pos, 2 * MAX_SAFE)?;
            let d = (z >> 1) as i64 ^ -((z & 1) as i64);
            let s = prev + d;
            if s < 0 || s as u64 > MAX_SAFE {
                return Err(corrupt(
                    Rule::CodecSeqOutOfRange,
                    "decoded seq is out of range",
                ));
            }
            prev = s;
        }
        out.push(prev as u64);
    }
    Ok(out)
}

/// Encode seqs given as JSON values (the reference encoder's input):
/// every element must be a non-negative safe integer (`codec.encode-invalid`).
pub fn encode_values(values: &[crate::json::Value]) -> Result<Vec<u8>> {
    let seqs = values
        .iter()
        .map(|v| {
            v.as_safe_u64().ok_or_else(|| {
                Error::invalid_argument(
                    Rule::CodecEncodeInvalid,
                    "sourceEventSeqs must hold non-negative safe integers",
                )
            })
        })
        .collect::<Result<Vec<u64>>>()?;
    encode(&seqs)
}
