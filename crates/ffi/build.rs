//! Sets the shared library's SONAME (Linux) or install name (macOS), as
//! derived by `crates/ffi-impl/build.rs` from the crate version.

fn main() {
    let soname = std::env::var("DEP_DSH_SESSION_SONAME").expect("dsh-session-ffi-impl sets it");
    match std::env::var("CARGO_CFG_TARGET_OS").as_deref() {
        Ok("linux") => println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{soname}"),
        Ok("macos") => {
            // Mach-O's form of the same name: libdsh_session.0.1.dylib.
            let name = soname.replacen(".so.", ".", 1) + ".dylib";
            println!("cargo:rustc-cdylib-link-arg=-Wl,-install_name,@rpath/{name}");
        }
        _ => {}
    }
}
