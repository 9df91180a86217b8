// swift-tools-version:5.9
// The Swift binding of dsh-session (libdsh_session, C ABI).
//
// `CDshSession` is the C library as a system module: SwiftPM finds the header
// and the library through pkg-config (`dsh-session.pc`; set PKG_CONFIG_PATH to
// the install prefix's lib/pkgconfig). `DshSession` is the Swift API on top.
// At run time the loader must find libdsh_session.so.<ABI>: link with
// `-Xlinker -rpath -Xlinker <libdir>` or set LD_LIBRARY_PATH.
import PackageDescription

let package = Package(
    name: "DshSession",
    products: [
        .library(name: "DshSession", targets: ["DshSession"]),
    ],
    targets: [
        .systemLibrary(name: "CDshSession", pkgConfig: "dsh-session"),
        .target(name: "DshSession", dependencies: ["CDshSession"]),
        .testTarget(name: "DshSessionTests", dependencies: ["DshSession"]),
    ]
)
