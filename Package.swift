// swift-tools-version:5.9
// The Swift binding of dsh-session (libdsh_session, C ABI), usable as
// `.package(path:)` or `.package(url:)` of this repository.
//
// `CDshSession` is the C library as a system module: SwiftPM finds the header
// and the library through pkg-config (`dsh-session.pc`; set PKG_CONFIG_PATH to
// the install prefix's lib/pkgconfig). `DshSession` is the Swift API on top
// (bindings/swift). At run time the loader must find the library's SONAME:
// link with `-Xlinker -rpath -Xlinker <libdir>` or set LD_LIBRARY_PATH.
import PackageDescription

let package = Package(
    name: "DshSession",
    products: [
        .library(name: "DshSession", targets: ["DshSession"]),
    ],
    targets: [
        .systemLibrary(
            name: "CDshSession",
            path: "bindings/swift/Sources/CDshSession",
            pkgConfig: "dsh-session",
            providers: [
                // What a distribution's package of the library would be
                // called; until one exists, install it with CMake.
                .apt(["libdsh-session-dev"]),
                .brew(["dsh-session"]),
            ]
        ),
        .target(name: "DshSession", dependencies: ["CDshSession"], path: "bindings/swift/Sources/DshSession"),
        .testTarget(
            name: "DshSessionTests",
            dependencies: ["DshSession"],
            path: "bindings/swift/Tests/DshSessionTests"
        ),
    ]
)
