//go:build !dshsession_debug

package dshsession

// debugGC does nothing; build with -tags dshsession_debug to run a GC before
// every C call on a handle (it flushes out a missing runtime.KeepAlive).
func debugGC() {}
