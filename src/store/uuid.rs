//! Random UUIDs (v4) for store identities and session incarnations, and
//! the UUID shape stored identities must have.

use crate::error::{Error, Result, Status};
use crate::rule::Rule;

/// Fill `buf` with random bytes from the operating system's generator
/// (the getrandom crate: `getrandom(2)` on Linux, `getentropy` on macOS, …).
fn random_bytes(buf: &mut [u8]) -> Result<()> {
    getrandom::fill(buf).map_err(|e| {
        Error::new(
            Status::Io,
            Rule::IoRead,
            format!("cannot read random bytes: {e}"),
        )
    })
}

/// A random UUID v4 in lowercase hyphenated form.
pub fn new_uuid() -> Result<String> {
    let mut b = [0u8; 16];
    random_bytes(&mut b)?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    ))
}

/// `^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, case-insensitive.
pub fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            14 => (b'1'..=b'8').contains(c),
            19 => matches!(c.to_ascii_lowercase(), b'8' | b'9' | b'a' | b'b'),
            _ => c.is_ascii_hexdigit(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids() {
        for _ in 0..100 {
            let u = new_uuid().unwrap();
            assert!(is_uuid(&u), "{u}");
        }
        assert!(is_uuid("123E4567-E89B-42D3-A456-426614174000"));
        assert!(!is_uuid("123e4567-e89b-92d3-a456-426614174000"));
        assert!(!is_uuid("123e4567-e89b-42d3-c456-426614174000"));
        assert!(!is_uuid("123e4567e89b42d3a456426614174000"));
    }
}
