//go:build !dshsession_system

package dshsession

// The prebuilt static library of the release for darwin/amd64 (lib/darwin_amd64/,
// placed in the module by the release step, scripts/go-module.sh), with
// the header in lib/include. Build with -tags dshsession_system to link an
// installed library through pkg-config instead.

// #cgo CFLAGS: -I${SRCDIR}/lib/include
// #cgo LDFLAGS: ${SRCDIR}/lib/darwin_amd64/libdsh_session.a -lm
import "C"
