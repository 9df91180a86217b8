//! Sets the shared library's SONAME (Linux) or install name and versions
//! (macOS), as derived by `crates/ffi-impl/build.rs` from the crate
//! version, and, on Linux, links `native/zstd_trace.c` when the build has
//! zstd.

use std::env;

fn main() {
    let soname = env::var("DEP_DSH_SESSION_SONAME").expect("dsh-session-ffi-impl sets it");
    let target_os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    match target_os.as_str() {
        "linux" => println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{soname}"),
        "macos" => {
            // Mach-O's form of the same name: libdsh_session.0.1.dylib,
            // found through the host's rpath.
            let name = soname.replacen(".so.", ".", 1) + ".dylib";
            println!("cargo:rustc-cdylib-link-arg=-Wl,-install_name,@rpath/{name}");
            // The versions dyld compares: a host records the library's
            // compatibility version when it links, and dyld refuses a
            // library whose compatibility version is lower. major.minor.0:
            // an older minor release may lack a function, a patch release
            // adds none.
            let version = |key: &str| env::var(key).expect("cargo sets the package version");
            let (major, minor, patch) = (
                version("CARGO_PKG_VERSION_MAJOR"),
                version("CARGO_PKG_VERSION_MINOR"),
                version("CARGO_PKG_VERSION_PATCH"),
            );
            println!("cargo:rustc-cdylib-link-arg=-Wl,-compatibility_version,{major}.{minor}.0");
            println!("cargo:rustc-cdylib-link-arg=-Wl,-current_version,{major}.{minor}.{patch}");
        }
        _ => {}
    }
    // zstd comes with the sqlite and jsonl backends. On ELF it refers to
    // its tracing hooks weakly; the hidden no-op definitions of
    // native/zstd_trace.c keep them from binding to a host's. Whole
    // archive: a weak reference alone pulls no member out of an archive.
    let zstd = env::var_os("CARGO_FEATURE_SQLITE").is_some()
        || env::var_os("CARGO_FEATURE_JSONL").is_some();
    println!("cargo:rerun-if-changed=native/zstd_trace.c");
    if zstd && target_os == "linux" {
        cc::Build::new()
            .file("native/zstd_trace.c")
            .cargo_metadata(false)
            .compile("dsh_zstd_trace");
        let out_dir = env::var("OUT_DIR").expect("cargo sets OUT_DIR");
        println!("cargo:rustc-link-search=native={out_dir}");
        println!("cargo:rustc-link-lib=static:+whole-archive=dsh_zstd_trace");
    }
}
