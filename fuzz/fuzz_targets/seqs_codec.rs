//! The SQLite `source_event_seqs` codec: any bytes decode or refuse with a
//! rule, and what decodes encodes back to bytes that decode the same.
#![no_main]

use ::dsh_session::store::sqlite::codec;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    match codec::decode(input) {
        Ok(seqs) => {
            let bytes = codec::encode(&seqs).expect("decoded seqs encode");
            assert_eq!(codec::decode(&bytes).expect("re-decodes"), seqs);
        }
        Err(e) => assert!(!e.rule.as_str().is_empty()),
    }
    // Seqs read from the input as numbers round-trip when they encode.
    let seqs: Vec<u64> = input
        .chunks(8)
        .map(|c| c.iter().fold(0u64, |a, &b| a << 8 | u64::from(b)))
        .collect();
    if let Ok(bytes) = codec::encode(&seqs) {
        assert_eq!(codec::decode(&bytes).expect("encoded seqs decode"), seqs);
    }
});
