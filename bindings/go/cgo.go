package dshsession

/*
#include <stdlib.h>
#include <string.h>
#include "dsh_session.h"

// This binding is written against ABI 1 of dsh_session.h.
#if DSH_ABI_VERSION != 1
#error "dshsession: this Go binding supports DSH_ABI_VERSION 1 only"
#endif

// The store observer callback, exported from Go in observer.go.
extern void dshGoObserver(void *, char *, char *, char *);

// Installs dshGoObserver with a cgo.Handle as user_data, or removes the
// store's observer when handle is 0 (cgo never hands out handle 0).
static dsh_status dsh_go_set_observer(dsh_store *store, uintptr_t handle, dsh_buf *out) {
	return dsh_store_set_observer(store, handle ? (dsh_observer_fn)dshGoObserver : NULL,
	                              (void *)handle, out);
}
*/
import "C"

import (
	"encoding/json"
	"fmt"
	"unsafe"
)

// HeaderABIVersion is the DSH_ABI_VERSION of the dsh_session.h this package
// was compiled against.
const HeaderABIVersion = uint32(C.DSH_ABI_VERSION)

// A library of another ABI would misread every call: refuse to run at all.
func init() { requireABI(ABIVersion(), HeaderABIVersion) }

// requireABI panics with checkABI's error when the versions differ.
func requireABI(library, header uint32) {
	if err := checkABI(library, header); err != nil {
		panic(err)
	}
}

// checkABI fails when the loaded library's ABI is not the header's.
func checkABI(library, header uint32) error {
	if library != header {
		return fmt.Errorf("dshsession: the loaded libdsh_session has ABI version %d but this package "+
			"was compiled against dsh_session.h with DSH_ABI_VERSION %d; rebuild against the "+
			"installed library or fix the library search path", library, header)
	}
	return nil
}

// ABIVersion returns dsh_abi_version() of the loaded library.
func ABIVersion() uint32 { return uint32(C.dsh_abi_version()) }

// Version returns the library's crate version, e.g. "0.1.0".
func Version() string { return C.GoString(C.dsh_version()) }

// BuildInfo returns {"version","abi","features":[...],"sqlite":"3.x.y"}.
func BuildInfo() (json.RawMessage, error) {
	return call("BuildInfo", func(out *C.dsh_buf) C.dsh_status { return C.dsh_build_info(out) })
}

// libStatusName returns dsh_status_name(s) (used to check Status.String).
func libStatusName(s Status) string { return C.GoString(C.dsh_status_name(C.dsh_status(s))) }

// setObserver installs the exported dshGoObserver on the store with the
// cgo.Handle h as its user_data, or removes the observer when h is 0.
func setObserver(p *C.dsh_store, h uintptr, out *C.dsh_buf) C.dsh_status {
	return C.dsh_go_set_observer(p, C.uintptr_t(h), out)
}

// call runs one C call with a fresh dsh_buf, copies the buffer into Go
// memory, frees it with dsh_buf_free whatever the status, and turns a
// status other than DSH_OK into an *Error.
func call(op string, f func(out *C.dsh_buf) C.dsh_status) ([]byte, error) {
	var out C.dsh_buf
	st := f(&out)
	b := goBytes(&out)
	C.dsh_buf_free(&out)
	if st != C.DSH_OK {
		return nil, newError(op, Status(st), b)
	}
	return b, nil
}

func goBytes(buf *C.dsh_buf) []byte {
	if buf.ptr == nil {
		return nil
	}
	n := int(buf.len)
	b := make([]byte, n)
	copy(b, unsafe.Slice((*byte)(unsafe.Pointer(buf.ptr)), n))
	return b
}

// cText is a NUL-terminated copy of Go text in C memory (what C.CString
// makes, for []byte too); free it with free after the call.
type cText struct{ p *C.char }

func (t cText) free() {
	if t.p != nil {
		C.free(unsafe.Pointer(t.p))
	}
}

// toC copies b into C memory with a terminating NUL. A NUL inside b would
// silently cut the text for C, so it is refused (arg.nul). A nil b gives a
// NULL pointer when nullable.
func toC(op, what string, b []byte, nullable bool) (cText, error) {
	if b == nil && nullable {
		return cText{}, nil
	}
	for _, c := range b {
		if c == 0 {
			return cText{}, bindingError(op, StatusInvalidArgument, "arg.nul", what+" contains a NUL byte")
		}
	}
	p := (*C.char)(C.malloc(C.size_t(len(b) + 1)))
	dst := unsafe.Slice((*byte)(unsafe.Pointer(p)), len(b)+1)
	copy(dst, b)
	dst[len(b)] = 0
	return cText{p}, nil
}

// cStrings converts several inputs at once; on error nothing is left allocated.
func cStrings(op string, args ...cArg) ([]cText, error) {
	out := make([]cText, len(args))
	for i, a := range args {
		t, err := toC(op, a.what, a.b, a.nullable)
		if err != nil {
			freeAll(out)
			return nil, err
		}
		out[i] = t
	}
	return out, nil
}

type cArg struct {
	what     string
	b        []byte
	nullable bool
}

func text(what, s string) cArg           { return cArg{what, []byte(s), false} }
func jsonArg(what string, b []byte) cArg { return cArg{what, b, b == nil} }

func freeAll(ts []cText) {
	for _, t := range ts {
		t.free()
	}
}

// decode unmarshals a result, reporting a shape the binding does not
// expect as an internal error.
func decode(op string, b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return bindingError(op, StatusInternal, "go.decode", fmt.Sprintf("unexpected result %.200q: %v", b, err))
	}
	return nil
}
