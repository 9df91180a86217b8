//! The byte paths: UTF-8 checked inside the canonical pass
//! ([`canonical_str`], [`canonical_object`]), against std.
use super::*;
use crate::json::Value;
use crate::test_rng::Rng;

/// What the byte path must answer: valid UTF-8 that is canonical.
fn slow(b: &[u8]) -> bool {
    std::str::from_utf8(b).is_ok_and(is_canonical)
}

fn agree(b: &[u8]) {
    let fast = canonical_str(b);
    assert_eq!(fast.is_some(), slow(b), "{:?}", String::from_utf8_lossy(b));
    if let Some(t) = fast {
        assert_eq!(t.as_bytes(), b);
    }
    match canonical_object(b) {
        Some((t, spans)) => {
            let want = canonical_members(t).unwrap();
            let got: Vec<(&str, &str)> = spans
                .iter()
                .map(|&((ks, ke), (vs, ve))| (&t[ks..ke], &t[vs..ve]))
                .collect();
            assert_eq!(got, want);
        }
        None => assert!(!(slow(b) && b.first() == Some(&b'{'))),
    }
}

/// Every sequence of one to four bytes whose first byte is non-ASCII, with
/// continuation bytes drawn from the boundary values, inside a string.
#[test]
fn utf8_sequences_agree_with_std() {
    let tails: [u8; 12] = [
        0x00, 0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xf4, 0xff,
    ];
    for lead in 0x80..=0xffu8 {
        for &a in &tails {
            for &b in &tails {
                for &c in &tails {
                    for len in 1..=4 {
                        let seq = [lead, a, b, c];
                        let mut t = b"{\"k\":\"x".to_vec();
                        t.extend_from_slice(&seq[..len]);
                        t.extend_from_slice(b"y\"}");
                        agree(&t);
                    }
                }
            }
        }
    }
}

/// Canonical texts with bytes broken at random places, inside and outside
/// strings and across long ASCII runs.
#[test]
fn broken_bytes_agree_with_std() {
    let mut r = Rng(0x0bad_c0de_1234_5678);
    let pieces: [&[u8]; 10] = [
        b"\xc3\xa9",
        b"\xe6\x97\xa5",
        b"\xf0\x9f\x98\x80",
        b"\xc3",
        b"\xed\xa0\x80",
        b"\xc0\x80",
        b"\xf4\x90\x80\x80",
        b"\xff",
        b"\x80",
        b"\xe2\x82",
    ];
    for round in 0..3000 {
        let text = "lorem ipsum \"dolor\" sit\namet, résumé 日本語 ".repeat(round % 7 * 3 + 1);
        let v = Value::obj([
            ("type", Value::str("tool/result")),
            ("seq", Value::from(round as u64)),
            (
                "data",
                Value::obj([("text", Value::str(&text)), ("n", Value::Number(1.5))]),
            ),
        ]);
        let mut b = v.to_json().into_bytes();
        agree(&b);
        for _ in 0..r.below(3) {
            let at = r.below(b.len() + 1);
            let piece = r.pick(&pieces);
            match r.below(3) {
                0 => {
                    b.splice(at..at, piece.iter().copied());
                }
                1 if at < b.len() => b[at] = piece[0],
                _ => b.truncate(at),
            }
        }
        agree(&b);
    }
    for b in [
        &b""[..],
        b"\"",
        b"\"\xc3\"",
        b"\"\xc3\xa9\"",
        b"[\"\xe6\x97\xa5\",1]",
        b"\xef\xbb\xbf1",
    ] {
        agree(b);
    }
}
