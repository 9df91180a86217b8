//! What the root test binaries share: private temporary directories.
#![allow(dead_code)]

use std::path::PathBuf;

/// A fresh directory (mode 0700, as the stores want their parents) under
/// the system temp dir, removed on drop.
pub struct Temp(pub PathBuf);

impl Temp {
    /// `dsh-<name>-<pid>`, empty.
    pub fn new(name: &str) -> Temp {
        let d = std::env::temp_dir().join(format!("dsh-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        // Windows: a directory nobody else may write already passes.
        #[cfg(unix)]
        std::fs::set_permissions(&d, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        Temp(d)
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A small deterministic generator (no extra crate).
pub struct Lcg(pub u64);

impl Lcg {
    /// A number below `n` (0 for `n` = 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n.max(1)
    }

    /// One of `items`.
    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}
