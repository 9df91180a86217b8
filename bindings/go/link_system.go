//go:build dshsession_system || !((linux && (amd64 || arm64)) || (darwin && (amd64 || arm64)))

package dshsession

// An installed library, found through pkg-config (dsh-session.pc): with the
// build tag dshsession_system, and on every platform the module carries no
// prebuilt library for. See "Building" in the package documentation.

// #cgo pkg-config: dsh-session
import "C"
