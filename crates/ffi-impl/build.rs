//! Generates `dsh_session.h` with cbindgen (always into OUT_DIR; into the
//! repository's `include/` only when `DSH_BLESS_HEADER=1`) and derives the
//! ABI version and the shared library's SONAME from the crate version. The
//! SONAME goes to `crates/ffi` (the package that links the library) as
//! `links` metadata (`DEP_DSH_SESSION_SONAME`).

use std::env;
use std::path::PathBuf;

fn main() {
    let major: u32 = env::var("CARGO_PKG_VERSION_MAJOR")
        .unwrap()
        .parse()
        .unwrap();
    let minor: u32 = env::var("CARGO_PKG_VERSION_MINOR")
        .unwrap()
        .parse()
        .unwrap();
    let patch: u32 = env::var("CARGO_PKG_VERSION_PATCH")
        .unwrap()
        .parse()
        .unwrap();
    // Before 1.0 every minor release may break the ABI; after it, every
    // major. The SONAME says so (`.so.0.<minor>`, then `.so.<major>`), and
    // the ABI number changes with it: the minor before 1.0, the major times
    // 1000 after it, so 0.1 and 1.0 never share a number.
    let (abi, soname) = if major == 0 {
        (minor, format!("libdsh_session.so.0.{minor}"))
    } else {
        (major * 1000, format!("libdsh_session.so.{major}"))
    };
    println!("cargo:rustc-env=DSH_ABI_VERSION={abi}");
    println!("cargo:soname={soname}");
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-env-changed=DSH_BLESS_HEADER");

    let crate_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let repo_dir = crate_dir.join("../..");
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    let mut config =
        cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let version = format!("{major}.{minor}.{patch}");
    config.after_includes = Some(format!(
        "{}\n#define DSH_VERSION_MAJOR {major}\n#define DSH_VERSION_MINOR {minor}\n#define DSH_VERSION_PATCH {patch}\n\
         #define DSH_VERSION_STRING \"{version}\"\n#define DSH_VERSION_NUMBER {}\n#define DSH_ABI_VERSION {abi}\n\
         /** The shared library's SONAME: a new one whenever the ABI may break. */\n#define DSH_SONAME \"{soname}\"\n\
         \n/** Initialiser for a `dsh_buf` the library has not filled yet. */\n#define DSH_BUF_INIT {{NULL, 0, 0}}\n",
        config.after_includes.clone().unwrap_or_default(),
        major * 1_000_000 + minor * 1_000 + patch
    ));
    // Only this crate is the ABI: parse just its sources (cbindgen follows
    // the `mod` declarations), so no item of the core can leak into the
    // header.
    let builder = cbindgen::Builder::new()
        .with_config(config)
        .with_src(crate_dir.join("src/lib.rs"));
    match builder.generate() {
        Ok(bindings) => {
            bindings.write_to_file(out_dir.join("dsh_session.h"));
            if env::var("DSH_BLESS_HEADER").as_deref() == Ok("1") {
                bindings.write_to_file(repo_dir.join("include/dsh_session.h"));
            }
        }
        // Let rustc report the real error (usually a syntax error in src/).
        Err(e) => println!("cargo:warning=cbindgen failed: {e}"),
    }
}
