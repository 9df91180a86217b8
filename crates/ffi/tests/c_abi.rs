//! Builds the C ABI misuse test (`tests/c/abi_misuse.c`) with the system C
//! compiler against the freshly built `libdsh_session.so` and runs it.
//!
//! - Always: a plain `-std=c99 -Wall -Wextra -Werror` build, run directly.
//! - `DSH_VALGRIND=1` (and `valgrind` on PATH): the same binary under
//!   `valgrind --leak-check=full --errors-for-leak-kinds=definite`.
//! - `DSH_ASAN=1`: a second build with `-fsanitize=address,undefined`, run
//!   directly (the Rust library itself is not instrumented, but its
//!   allocations go through the intercepted malloc/free, so LeakSanitizer
//!   and double-free detection cover the buffers it hands out).
//!
//! Every stage prints whether it ran or why it was skipped.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

/// `target/<profile>`: integration tests run from `target/<profile>/deps/`.
fn lib_dir() -> PathBuf {
    let exe = env::current_exe().expect("current_exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("test binary is not in target/<profile>/deps")
        .to_path_buf()
}

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The repository root, where `include/` is.
fn repo_dir() -> PathBuf {
    crate_dir().join("../..")
}

/// `DSH_SONAME` from the committed header.
fn soname(header: &Path) -> String {
    let text = fs::read_to_string(header).expect("read include/dsh_session.h");
    text.lines()
        .find_map(|l| l.strip_prefix("#define DSH_SONAME "))
        .map(|v| v.trim().trim_matches('"').to_string())
        .expect("DSH_SONAME in include/dsh_session.h")
}

fn on_path(tool: &str) -> Option<PathBuf> {
    env::split_paths(&env::var_os("PATH")?)
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
}

fn flag(name: &str) -> bool {
    env::var(name).as_deref() == Ok("1")
}

/// The library's SONAME is the header's `DSH_SONAME`, so the test binary
/// needs that file name at run time; cargo only produces `libdsh_session.so`.
/// Put a symlink into our own directory (atomically, so parallel runs are fine).
fn soname_dir(lib_dir: &Path, lib: &Path, soname: &str) -> PathBuf {
    let dir = lib_dir.join("c_abi");
    fs::create_dir_all(&dir).expect("create target/<profile>/c_abi");
    let link = dir.join(soname);
    let tmp = dir.join(format!(".{soname}.{}", std::process::id()));
    let _ = fs::remove_file(&tmp);
    std::os::unix::fs::symlink(lib, &tmp).expect("symlink the SONAME");
    fs::rename(&tmp, &link).expect("rename the SONAME symlink");
    dir
}

fn compile(out_dir: &Path, lib_dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let cc = env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let src = crate_dir().join("tests/c/abi_misuse.c");
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

/// Run one stage, print its output, and assert it passed with a clean summary line.
fn run(stage: &str, mut cmd: Command) {
    println!("c_abi: running [{stage}]: {cmd:?}");
    let start = Instant::now();
    let out: Output = cmd
        .output()
        .unwrap_or_else(|e| panic!("[{stage}] cannot start: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    if !stderr.is_empty() {
        println!("--- [{stage}] stderr ---\n{stderr}");
    }
    let summary = stdout.lines().last().unwrap_or("");
    println!(
        "c_abi: [{stage}] {} in {:.2?}: {summary}",
        out.status,
        start.elapsed()
    );
    let failures: Vec<&str> = stdout.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert!(
        out.status.success() && summary.ends_with(" passed, 0 failed"),
        "[{stage}] failed ({}), summary {summary:?}\n{}\n{stderr}",
        out.status,
        failures.join("\n")
    );
}

#[test]
fn c_abi_misuse() {
    let lib_dir = lib_dir();
    let lib = lib_dir.join("libdsh_session.so");
    assert!(
        lib.is_file(),
        "{} is missing: the crate's cdylib was not built into {} (run `cargo build` / `cargo test` \
         from the crate; a custom --target puts it elsewhere)",
        lib.display(),
        lib_dir.display()
    );
    let soname = soname(&repo_dir().join("include/dsh_session.h"));
    let out_dir = soname_dir(&lib_dir, &lib, &soname);
    let mut built = Vec::new();

    let bin = compile(&out_dir, &lib_dir, "abi_misuse", &[]);
    built.push(bin.clone());
    run("plain", Command::new(&bin));

    if !flag("DSH_VALGRIND") {
        println!("c_abi: valgrind stage skipped (set DSH_VALGRIND=1 to run it)");
    } else if let Some(valgrind) = on_path("valgrind") {
        let mut cmd = Command::new(valgrind);
        cmd.args([
            "-q",
            "--error-exitcode=1",
            "--leak-check=full",
            "--errors-for-leak-kinds=definite",
        ])
        .arg(&bin);
        run("valgrind", cmd);
    } else {
        println!("c_abi: DSH_VALGRIND=1 but valgrind is not on PATH: valgrind stage SKIPPED");
    }

    if flag("DSH_ASAN") {
        let asan = compile(
            &out_dir,
            &lib_dir,
            "abi_misuse_asan",
            &[
                "-fsanitize=address,undefined",
                "-fno-sanitize-recover=undefined",
                "-fno-omit-frame-pointer",
            ],
        );
        built.push(asan.clone());
        let mut cmd = Command::new(&asan);
        cmd.env("ASAN_OPTIONS", "detect_leaks=1")
            .env("UBSAN_OPTIONS", "print_stacktrace=1");
        run("asan+ubsan", cmd);
    } else {
        println!("c_abi: ASan+UBSan stage skipped (set DSH_ASAN=1 to run it)");
    }

    for bin in built {
        let _ = fs::remove_file(bin);
    }
}
