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

mod support;

use std::fs;
use std::process::{Command, Output};
use std::time::Instant;

use support::*;

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
    let (lib_dir, out_dir) = library();
    let mut built = Vec::new();

    let bin = compile(&out_dir, &lib_dir, "abi_misuse", "abi_misuse", &[]);
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
            "abi_misuse",
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
