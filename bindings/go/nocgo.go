//go:build !cgo

package dshsession

// This package links libdsh_session through cgo. Build with CGO_ENABLED=1 and
// a C compiler; the compile error below names the problem.
var _ = dshsession_requires_cgo_set_CGO_ENABLED_1
