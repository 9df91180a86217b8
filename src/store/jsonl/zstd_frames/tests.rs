//! Tests of the Zstandard framing: structural scans, streamed scans and
//! decoding in pieces.
use super::*;
use crate::rule::Rule;

/// The plaintext of `f`, its pieces concatenated.
fn all_pieces(decoder: &mut FrameDecoder, f: &[u8], at: usize) -> Result<Vec<u8>> {
    let mut pieces = decoder.pieces(f, at);
    let (mut all, mut buf) = (Vec::new(), Vec::new());
    while pieces.next_into(&mut buf)? {
        all.extend_from_slice(&buf);
    }
    Ok(all)
}

fn frame(plain: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    compress_frame(plain, &mut out).unwrap();
    out
}

#[test]
fn scans_concatenated_checksummed_frames() {
    let a = frame(b"{\"a\":1}\n");
    let b = frame(&b"xyz\n".repeat(100_000));
    let mut all = a.clone();
    all.extend_from_slice(&b);
    let frames = scan_frames(&all, None).unwrap();
    assert_eq!(frames.complete, vec![0..a.len(), a.len()..all.len()]);
    assert_eq!(frames.torn_start, None);
    assert_eq!(
        scan_frames(&all, Some(1)).unwrap().complete,
        vec![0..a.len()]
    );
    assert_eq!(
        decode_frame(&all[a.len()..], Rule::ZstdFrameDecode, 0).unwrap(),
        b"xyz\n".repeat(100_000)
    );
    for cut in a.len() + 1..all.len() {
        let f = scan_frames(&all[..cut], None).unwrap();
        assert_eq!(f.complete.len(), 1);
        assert_eq!(f.torn_start, Some(a.len()));
    }
    // Only the checksum is missing: everything decodes.
    assert_eq!(decode_torn(&b[..b.len() - 4]), b"xyz\n".repeat(100_000));
}

#[test]
fn a_long_frame_is_decoded_in_pieces_that_concatenate_to_its_text() {
    let mut decoder = FrameDecoder::new();
    let long = b"xyz\n".repeat(100_000);
    // A frame that does not state its size goes in pieces too.
    let mut unsized_frame = Vec::new();
    let mut encoder = zstd::stream::Encoder::new(&mut unsized_frame, LEVEL).unwrap();
    encoder.include_checksum(true).unwrap();
    encoder.write_all(b"{}\n").unwrap();
    encoder.finish().unwrap();
    for (plain, f, pieces_at_least) in [
        (&b"{\"a\":1}\n"[..], frame(b"{\"a\":1}\n"), 1),
        (&long[..], frame(&long), long.len() / PIECE),
        (&b"{}\n"[..], unsized_frame.clone(), 1),
    ] {
        let mut pieces = decoder.pieces(&f, 7);
        let mut got = Vec::new();
        let mut n = 0;
        let mut buf = b"left over".to_vec();
        while pieces.next_into(&mut buf).unwrap() {
            assert!(buf.len() <= PIECE.max(WHOLE_MAX), "{}", buf.len());
            got.extend_from_slice(&buf);
            n += 1;
        }
        assert!(pieces.is_done());
        assert_eq!(got, plain);
        assert!(n >= pieces_at_least, "{n} pieces");
    }
    // Bytes that end before the frame's last block, or go on after it.
    let f = frame(&long);
    for bad in [&f[..f.len() - 5], &[&f[..], &[0u8; 3][..]].concat()[..]] {
        let err = all_pieces(&mut decoder, bad, 7).expect_err("a bad frame decoded");
        assert_eq!(err.rule, Rule::ZstdFrameDecode);
    }
    // The decoder starts the next frame afresh after a failed one.
    assert_eq!(all_pieces(&mut decoder, &f, 0).unwrap(), long);
}

/// The file scanned a block at a time gives what the whole-bytes scan
/// gives: frames, torn start, and the same refusal (rule and message),
/// for logs cut anywhere and with bytes flipped anywhere.
#[test]
fn a_scan_of_a_stream_is_the_scan_of_its_bytes() {
    let mut r = crate::test_rng::Rng(0x5CA1_AB1E);
    for round in 0..300 {
        let mut file = Vec::new();
        for k in 0..1 + r.below(5) {
            let text = format!("{{\"k\":{k}}}\n").repeat(1 + r.below(3000));
            file.extend(frame(text.as_bytes()));
        }
        match r.below(3) {
            0 => file.truncate(r.below(file.len() + 1)),
            1 => {
                let i = r.below(file.len());
                file[i] ^= 1 << r.below(8);
            }
            _ => {}
        }
        let whole = scan_frames(&file, None);
        let step = 1 + r.below(5000);
        let mut at = 0;
        let streamed = scan_stream(|buf| {
            let n = step.min(file.len() - at);
            buf.extend_from_slice(&file[at..at + n]);
            at += n;
            Ok(n == 0)
        });
        match (whole, streamed) {
            (Ok(f), Ok((g, rest))) => {
                assert_eq!(f, g, "round {round}");
                let from = f.torn_start.unwrap_or(file.len());
                assert_eq!(rest, &file[from..], "round {round}");
            }
            (Err(e), Err(g)) => {
                assert_eq!((e.rule, &e.message), (g.rule, &g.message), "round {round}");
            }
            (f, g) => panic!("round {round}: {f:?} against {:?}", g.map(|x| x.0)),
        }
    }
}

#[test]
fn frame_decoder_matches_decode_frame() {
    let mut decoder = FrameDecoder::new();
    for plain in [&b""[..], b"{\"a\":1}\n", &b"xyz\n".repeat(100_000)] {
        let f = frame(plain);
        assert_eq!(all_pieces(&mut decoder, &f, 0).unwrap(), plain);
        assert_eq!(decode_frame(&f, Rule::ZstdFrameDecode, 0).unwrap(), plain);
    }
    // A flipped content byte fails the checksum in both.
    let mut f = frame(&b"hello world\n".repeat(1000));
    let k = f.len() - 8;
    f[k] ^= 0x40;
    let e = all_pieces(&mut decoder, &f, 7);
    assert_eq!(e.unwrap_err().rule, Rule::ZstdFrameDecode);
    assert!(decode_frame(&f, Rule::ZstdFrameDecode, 7).is_err());
}

/// One decoder appends frame after frame (short ones whole, a long one in
/// pieces) and checks a frame against a text piece by piece: a text that
/// differs anywhere, or is shorter or longer, is not the frame's.
#[test]
fn one_decoder_appends_frames_and_checks_a_frame_against_its_text() {
    let mut decoder = FrameDecoder::new();
    let long = b"abc\n".repeat(50_000);
    let plains: [&[u8]; 4] = [b"{\"a\":1}\n", &long, b"", b"tail\n"];
    let mut out = b"kept ".to_vec();
    for (i, plain) in plains.iter().enumerate() {
        decoder.decode_append(&frame(plain), i, &mut out).unwrap();
    }
    assert_eq!(out, [&b"kept "[..], plains.concat().as_slice()].concat());

    let f = frame(&long);
    assert!(decoder.decodes_to(&f, &long).unwrap());
    let mut other = long.clone();
    let last = other.len() - 2;
    other[last] = b'x';
    assert!(!decoder.decodes_to(&f, &other).unwrap(), "a byte differs");
    assert!(
        !decoder.decodes_to(&f, &long[..long.len() - 1]).unwrap(),
        "shorter"
    );
    let longer = [&long[..], b"\n"].concat();
    assert!(!decoder.decodes_to(&f, &longer).unwrap(), "longer");
    assert!(decoder.decodes_to(&frame(b""), b"").unwrap());

    // A damaged frame is an error, in both, and the decoder goes on.
    let mut bad = f.clone();
    let k = bad.len() - 8;
    bad[k] ^= 0x40;
    assert_eq!(
        decoder.decodes_to(&bad, &long).unwrap_err().rule,
        Rule::ZstdFrameDecode
    );
    let mut into = Vec::new();
    assert!(decoder.decode_append(&bad, 3, &mut into).is_err());
    into.clear();
    decoder.decode_append(&f, 0, &mut into).unwrap();
    assert_eq!(into, long);
}

#[test]
fn structural_refusals() {
    // Damage refuses, followed by a complete frame or alone at the end;
    // only what a crash leaves (zeros, a frame's prefix) is a torn tail.
    let good = frame(b"after\n");
    let then_good = |bad: &[u8]| [bad, &good[..]].concat();
    assert_eq!(
        scan_frames(&then_good(b"abcd"), None).unwrap_err().rule,
        Rule::ZstdBadMagic
    );
    assert_eq!(
        scan_frames(b"abcd", None).unwrap_err().rule,
        Rule::ZstdBadMagic
    );
    let zeros = scan_frames(&[0; 9], None).unwrap();
    assert_eq!(
        (zeros.torn_start, zeros.torn_kind),
        (Some(0), Some(TornKind::ZeroFilled))
    );
    assert_eq!(
        scan_frames(b"abc", None).unwrap_err().rule,
        Rule::ZstdBadMagic
    );
    let prefix = scan_frames(&good[..3], None).unwrap();
    assert_eq!(prefix.torn_kind, Some(TornKind::IncompleteFrame));
    let mut f = frame(b"hello\n");
    f[4] |= 0x08;
    assert_eq!(
        scan_frames(&then_good(&f), None).unwrap_err().rule,
        Rule::ZstdReservedBit
    );
    assert_eq!(
        scan_frames(&f, None).unwrap_err().rule,
        Rule::ZstdReservedBit
    );
    // A raw block header with type 3.
    let bad = [0x28, 0xB5, 0x2F, 0xFD, 0x20, 0x00, 0x07, 0x00, 0x00];
    assert_eq!(
        scan_frames(&then_good(&bad), None).unwrap_err().rule,
        Rule::ZstdReservedBlock
    );
    let after = [&good[..], &bad[..]].concat();
    assert_eq!(
        scan_frames(&after, None).unwrap_err().rule,
        Rule::ZstdReservedBlock
    );
    let salvaged = scan_stream_with(
        |buf| {
            let done = buf.len() == after.len();
            if !done {
                buf.clear();
                buf.extend_from_slice(&after);
            }
            Ok(done)
        },
        Damage::Salvage,
    )
    .unwrap()
    .0;
    assert_eq!(salvaged.complete, vec![0..good.len()]);
    assert_eq!(
        (salvaged.torn_start, salvaged.torn_kind),
        (Some(good.len()), Some(TornKind::Salvaged))
    );
    // An RLE block of one byte repeated: single segment, FCS 1 byte.
    let rle = [0x28, 0xB5, 0x2F, 0xFD, 0x20, 0x05, 0x2B, 0x00, 0x00, b'x'];
    let frames = scan_frames(&rle, None).unwrap();
    assert_eq!(frames.complete, vec![0..rle.len()]);
    assert_eq!(
        decode_frame(&rle, Rule::ZstdFrameDecode, 0).unwrap(),
        b"xxxxx"
    );
}
