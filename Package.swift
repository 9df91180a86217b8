// swift-tools-version:5.9
// The Swift binding of dsh-session (libdsh_session, C ABI), usable as
// `.package(url:from:)` or `.package(path:)` of this repository.
//
// `CDshSession` is the C library. On Apple platforms a release's manifest
// names the release's XCFramework (the static library with its header and
// module map; scripts/dist.sh makes it on a Mac), which SwiftPM downloads
// and checks against the checksum, so `.package(url:from:)` needs nothing
// else. Everywhere else, and in a checkout that is not a release, it is a
// system module that SwiftPM finds through pkg-config (`dsh-session.pc`;
// set PKG_CONFIG_PATH to the install prefix's lib/pkgconfig), linking the
// shared library: at run time the loader must find its SONAME (link with
// `-Xlinker -rpath -Xlinker <libdir>` or set LD_LIBRARY_PATH).
// `DshSession` is the Swift API on top (bindings/swift).
import PackageDescription

/// The release this manifest belongs to: its tag's XCFramework and the
/// zip's SHA-256 (the .sha256 file beside it). The release commit fills
/// it in (docs/packaging.md, "Releasing"); nil otherwise.
let releasedXCFramework: (url: String, checksum: String)? = nil

let systemLibrary: Target = .systemLibrary(
    name: "CDshSession",
    path: "bindings/swift/Sources/CDshSession",
    pkgConfig: "dsh-session",
    providers: [
        // What a distribution's package of the library would be called;
        // until one exists, install it with CMake or from a release archive.
        .apt(["libdsh-session-dev"]),
        .brew(["dsh-session"]),
    ]
)

#if canImport(Darwin)
let cLibrary: Target = releasedXCFramework.map {
    .binaryTarget(name: "CDshSession", url: $0.url, checksum: $0.checksum)
} ?? systemLibrary
#else
// SwiftPM links a binary static library on Linux from Swift 6.2 on
// (SE-0482, artifact bundles); the toolchain this is tested with (6.0)
// refuses one, so Linux keeps the system module (docs/packaging.md).
let cLibrary: Target = systemLibrary
#endif

let package = Package(
    name: "DshSession",
    products: [
        .library(name: "DshSession", targets: ["DshSession"]),
    ],
    targets: [
        cLibrary,
        .target(name: "DshSession", dependencies: ["CDshSession"], path: "bindings/swift/Sources/DshSession"),
        .testTarget(
            name: "DshSessionTests",
            dependencies: ["DshSession"],
            path: "bindings/swift/Tests/DshSessionTests"
        ),
    ]
)
