//! Shared by the tests that build C programs against the freshly built
//! `libdsh_session.so` (macOS: `libdsh_session.dylib`): where it is, its
//! SONAME (install name), compiling a program.
#![allow(dead_code)]

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `target/<profile>`: integration tests run from `target/<profile>/deps/`.
pub fn lib_dir() -> PathBuf {
    let exe = env::current_exe().expect("current_exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("test binary is not in target/<profile>/deps")
        .to_path_buf()
}

pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The repository root, where `include/` is.
pub fn repo_dir() -> PathBuf {
    crate_dir().join("../..")
}

/// `DSH_SONAME` from the committed header; on macOS the file name of the
/// install name, Mach-O's form of it (`libdsh_session.0.1.dylib`, as
/// `crates/ffi/build.rs` sets it).
pub fn soname(header: &Path) -> String {
    let text = fs::read_to_string(header).expect("read include/dsh_session.h");
    let soname = text
        .lines()
        .find_map(|l| l.strip_prefix("#define DSH_SONAME "))
        .map(|v| v.trim().trim_matches('"').to_string())
        .expect("DSH_SONAME in include/dsh_session.h");
    if cfg!(target_os = "macos") {
        soname.replacen(".so.", ".", 1) + ".dylib"
    } else {
        soname
    }
}

/// The shared library's file name as cargo makes it.
pub const LIBRARY_FILE: &str = if cfg!(target_os = "macos") {
    "libdsh_session.dylib"
} else {
    "libdsh_session.so"
};

pub fn on_path(tool: &str) -> Option<PathBuf> {
    env::split_paths(&env::var_os("PATH")?)
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
}

pub fn flag(name: &str) -> bool {
    env::var(name).as_deref() == Ok("1")
}

/// The library's SONAME is the header's `DSH_SONAME`, so the test binary
/// needs that file name at run time; cargo only produces [`LIBRARY_FILE`].
/// Put a symlink into our own directory (atomically, so parallel runs are fine).
pub fn soname_dir(lib_dir: &Path, lib: &Path, soname: &str) -> PathBuf {
    let dir = lib_dir.join("c_abi");
    fs::create_dir_all(&dir).expect("create target/<profile>/c_abi");
    let link = dir.join(soname);
    let tmp = dir.join(format!(".{soname}.{}", std::process::id()));
    let _ = fs::remove_file(&tmp);
    std::os::unix::fs::symlink(lib, &tmp).expect("symlink the SONAME");
    fs::rename(&tmp, &link).expect("rename the SONAME symlink");
    dir
}

/// Build `tests/c/<source>.c` into `out_dir/<name>-<pid>` against the
/// library in `lib_dir`.
pub fn compile(
    out_dir: &Path,
    lib_dir: &Path,
    source: &str,
    name: &str,
    extra: &[&str],
) -> PathBuf {
    let cc = env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let src = crate_dir().join(format!("tests/c/{source}.c"));
    let bin = out_dir.join(format!("{name}-{}", std::process::id()));
    let mut cmd = Command::new(&cc);
    cmd.args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-g"])
        .args(extra)
        .arg(format!("-I{}", repo_dir().join("include").display()))
        .arg(&src)
        .arg("-o")
        .arg(&bin)
        .arg(format!("-L{}", lib_dir.display()))
        .args(["-ldsh_session", "-lpthread"])
        .arg(format!("-Wl,-rpath,{}", out_dir.display()))
        .arg(format!("-Wl,-rpath,{}", lib_dir.display()));
    println!("c_abi: compiling: {cmd:?}");
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}`: {e}"));
    assert!(
        out.status.success(),
        "compiling {} failed ({}):\n{}{}",
        src.display(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    bin
}

/// The built library, `target/<profile>/libdsh_session.so` (or `.dylib`),
/// and a directory holding its SONAME link (asserting it was built).
pub fn library() -> (PathBuf, PathBuf) {
    let lib_dir = lib_dir();
    let lib = lib_dir.join(LIBRARY_FILE);
    assert!(
        lib.is_file(),
        "{} is missing: the crate's cdylib was not built into {} (run `cargo build` / `cargo test` \
         from the crate; a custom --target puts it elsewhere)",
        lib.display(),
        lib_dir.display()
    );
    let soname = soname(&repo_dir().join("include/dsh_session.h"));
    let out_dir = soname_dir(&lib_dir, &lib, &soname);
    (lib_dir, out_dir)
}
