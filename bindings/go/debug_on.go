//go:build dshsession_debug

package dshsession

import "runtime"

// debugGC runs a garbage collection before every C call on a handle, so a
// missing runtime.KeepAlive shows up as a finalizer closing a live handle.
func debugGC() { runtime.GC() }
