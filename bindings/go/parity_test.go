package dshsession

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The bindings' counterparts of every function of include/dsh_session.h.
// TestBindingParity fails when the header declares a function that is not
// in this table, when a Go or Swift name of the table does not exist, and
// when a binding (Go, Swift, or the C++ header) never calls the function.
// Blocking calls also name their context.Context variant (Go) and async
// variant (Swift). "-": no public counterpart of its own, with the reason.
var counterparts = []struct {
	c, goName, swiftName  string
	goContext, swiftAsync string // for the calls that can block
}{
	{c: "dsh_buf_free", goName: "-", swiftName: "-"}, // every call frees its result buffer
	{c: "dsh_status_name", goName: "Status.String", swiftName: "Status.name"},
	{c: "dsh_version", goName: "Version", swiftName: "Library.version"},
	{c: "dsh_abi_version", goName: "ABIVersion", swiftName: "Library.abiVersion"},
	{c: "dsh_build_info", goName: "BuildInfo", swiftName: "Library.buildInfo"},
	{c: "dsh_fold_surface", goName: "FoldSurface", swiftName: "Library.foldSurface"},
	{c: "dsh_derive_messages", goName: "DeriveMessages", swiftName: "Library.deriveMessages"},
	{c: "dsh_repair_events", goName: "RepairEvents", swiftName: "Library.repairEvents"},
	{c: "dsh_derive_event_message", goName: "DeriveEventMessage", swiftName: "Library.deriveEventMessage"},
	{c: "dsh_store_open", goName: "OpenStore", swiftName: "Store.init",
		goContext: "OpenStoreContext", swiftAsync: "Store.open"},
	{c: "dsh_store_close", goName: "Store.Close", swiftName: "Store.close"},
	{c: "dsh_store_list", goName: "Store.List", swiftName: "Store.list"},
	{c: "dsh_store_inspect", goName: "Store.Inspect", swiftName: "Store.inspect"},
	{c: "dsh_store_repair", goName: "Store.Repair", swiftName: "Store.repair"},
	{c: "dsh_store_delete", goName: "Store.Delete", swiftName: "Store.delete"},
	{c: "dsh_store_set_observer", goName: "Store.SetObserver", swiftName: "Store.setObserver"},
	{c: "dsh_session_create", goName: "Store.Create", swiftName: "Store.createSession"},
	{c: "dsh_session_open", goName: "Store.Open", swiftName: "Store.openSession",
		goContext: "Store.OpenContext", swiftAsync: "Store.openSession"},
	{c: "dsh_session_open_windowed", goName: "Store.OpenWindowed", swiftName: "Store.openSessionWindowed",
		goContext: "Store.OpenWindowedContext", swiftAsync: "Store.openSessionWindowed"},
	{c: "dsh_session_fork", goName: "Session.Fork", swiftName: "Session.fork",
		goContext: "Session.ForkContext", swiftAsync: "Session.fork"},
	{c: "dsh_session_close", goName: "Session.Close", swiftName: "Session.close"},
	{c: "dsh_session_append", goName: "Session.Append", swiftName: "Session.append"},
	{c: "dsh_session_append_batch", goName: "Session.AppendBatch", swiftName: "Session.appendBatch"},
	{c: "dsh_session_validate", goName: "Session.Validate", swiftName: "Session.validate"},
	{c: "dsh_session_flush", goName: "Session.Flush", swiftName: "Session.flush",
		goContext: "Session.FlushContext", swiftAsync: "Session.flush"},
	{c: "dsh_session_info", goName: "Session.Info", swiftName: "Session.info"},
	{c: "dsh_session_events", goName: "Session.Events", swiftName: "Session.events"},
	{c: "dsh_session_surface", goName: "Session.Surface", swiftName: "Session.surface"},
	{c: "dsh_session_derive", goName: "Session.Derive", swiftName: "Session.derive"},
	{c: "dsh_session_derive_since", goName: "Session.DeriveSince", swiftName: "Session.deriveSince"},
	{c: "dsh_session_request_header", goName: "Session.RequestHeader", swiftName: "Session.requestHeader"},
	{c: "dsh_session_request_context", goName: "Session.RequestContext", swiftName: "Session.requestContext"},
}

var (
	cComment     = regexp.MustCompile(`(?s)/\*.*?\*/|//[^\n]*`)
	cDeclaration = regexp.MustCompile(`(?m)^(?:const\s+)?[A-Za-z_]\w*[\s*]+(dsh_\w+)\s*\(`)
	callOf       = regexp.MustCompile(`\b(dsh_[a-z0-9_]+)\s*\(`)
	swiftString  = regexp.MustCompile(`"(?:\\.|[^"\\\n])*"`)
	swiftName    = regexp.MustCompile(`\bdsh_[a-z0-9_]+\b`)
)

// headerFunctions lists the functions a C header declares.
func headerFunctions(header string) []string {
	var names []string
	for _, m := range cDeclaration.FindAllStringSubmatch(cComment.ReplaceAllString(header, ""), -1) {
		names = append(names, m[1])
	}
	sort.Strings(names)
	return names
}

// goAPI is what the Go package declares and calls: exported functions and
// methods ("Name", "Type.Name") and the C functions it calls (C.dsh_x in Go
// code, dsh_x(...) in a cgo preamble).
type goAPI struct{ exported, calls map[string]bool }

func parseGoPackage(dir string) (goAPI, error) {
	api := goAPI{map[string]bool{}, map[string]bool{}}
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return api, err
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			return api, err
		}
		for _, d := range f.Decls {
			if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.IMPORT {
				for _, spec := range gd.Specs {
					if is := spec.(*ast.ImportSpec); is.Path.Value == `"C"` && gd.Doc != nil {
						for _, m := range callOf.FindAllStringSubmatch(gd.Doc.Text(), -1) {
							api.calls[m[1]] = true
						}
					}
				}
			}
			fd, ok := d.(*ast.FuncDecl)
			if !ok || !fd.Name.IsExported() {
				continue
			}
			name := fd.Name.Name
			if fd.Recv != nil && len(fd.Recv.List) == 1 {
				t := fd.Recv.List[0].Type
				if star, ok := t.(*ast.StarExpr); ok {
					t = star.X
				}
				if id, ok := t.(*ast.Ident); ok {
					name = id.Name + "." + name
				}
			}
			api.exported[name] = true
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "C" && strings.HasPrefix(sel.Sel.Name, "dsh_") {
					api.calls[sel.Sel.Name] = true
				}
			}
			return true
		})
	}
	return api, nil
}

// swiftCode is Swift source without comments and string literals.
func swiftCode(src string) string {
	return swiftString.ReplaceAllString(cComment.ReplaceAllString(src, ""), `""`)
}

// swiftDeclares reports whether Swift code declares a type (or extension)
// named Type and a member named member (a func, var or let, or init; an
// async func when async is set). Which type holds the member is not checked.
func swiftDeclares(code, qualified string, async bool) bool {
	typ, member, _ := strings.Cut(qualified, ".")
	if !regexp.MustCompile(`\b(class|struct|enum|extension)\s+` + typ + `\b`).MatchString(code) {
		return false
	}
	var decl *regexp.Regexp
	switch {
	case member == "init" && async:
		decl = regexp.MustCompile(`\binit\s*\([^{]*\)\s*async\b`)
	case member == "init":
		decl = regexp.MustCompile(`\binit\s*\(`)
	case async:
		decl = regexp.MustCompile(`\bfunc\s+` + member + `\s*(<[^>]*>)?\s*\([^{]*\)\s*async\b`)
	default:
		decl = regexp.MustCompile(`\b(func|var|let)\s+` + member + `\b`)
	}
	return decl.MatchString(code)
}

// parityProblems lists every function of the header that a binding lacks.
func parityProblems(header string, g goAPI, swift, cpp string) []string {
	var problems []string
	rows := map[string]int{}
	for i, r := range counterparts {
		rows[r.c] = i
	}
	swift = swiftCode(swift)
	swiftCalls := map[string]bool{}
	for _, n := range swiftName.FindAllString(swift, -1) {
		swiftCalls[n] = true
	}
	cppCalls := map[string]bool{}
	for _, m := range callOf.FindAllStringSubmatch(cComment.ReplaceAllString(cpp, ""), -1) {
		cppCalls[m[1]] = true
	}
	for _, fn := range headerFunctions(header) {
		i, ok := rows[fn]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: no Go or Swift counterpart (add it to the bindings and to the table in parity_test.go)", fn))
			continue
		}
		r := counterparts[i]
		if !g.calls[fn] {
			problems = append(problems, fmt.Sprintf("%s: the Go binding never calls it", fn))
		}
		if r.goName != "-" && !g.exported[r.goName] {
			problems = append(problems, fmt.Sprintf("%s: Go %s does not exist", fn, r.goName))
		}
		if r.goContext != "" && !g.exported[r.goContext] {
			problems = append(problems, fmt.Sprintf("%s: Go context variant %s does not exist", fn, r.goContext))
		}
		if !swiftCalls[fn] {
			problems = append(problems, fmt.Sprintf("%s: the Swift binding never calls it", fn))
		}
		if r.swiftName != "-" && !swiftDeclares(swift, r.swiftName, false) {
			problems = append(problems, fmt.Sprintf("%s: Swift %s does not exist", fn, r.swiftName))
		}
		if r.swiftAsync != "" && !swiftDeclares(swift, r.swiftAsync, true) {
			problems = append(problems, fmt.Sprintf("%s: Swift async %s does not exist", fn, r.swiftAsync))
		}
		if !cppCalls[fn] {
			problems = append(problems, fmt.Sprintf("%s: dsh_session.hpp never calls it", fn))
		}
	}
	return problems
}

// readRepo reads a file of the repository this package sits in
// (bindings/go), or skips the test outside a checkout (a module download).
func readRepo(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", rel))
	if os.IsNotExist(err) {
		t.Skipf("%s not found: not in a checkout of the repository", rel)
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func readSwiftSources(t *testing.T) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "swift", "Sources", "DshSession", "*.swift"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Swift sources in bindings/swift/Sources/DshSession (%v)", err)
	}
	var all strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
		all.WriteByte('\n')
	}
	return all.String()
}

// Every function of include/dsh_session.h has its Go, Swift and C++
// counterpart; -v prints the table.
func TestBindingParity(t *testing.T) {
	header := readRepo(t, "include/dsh_session.h")
	cpp := readRepo(t, "include/dsh_session.hpp")
	swift := readSwiftSources(t)
	g, err := parseGoPackage(".")
	if err != nil {
		t.Fatal(err)
	}
	fns := headerFunctions(header)
	if len(fns) < 30 {
		t.Fatalf("found only %d functions in dsh_session.h: %v", len(fns), fns)
	}
	for _, p := range parityProblems(header, g, swift, cpp) {
		t.Error(p)
	}
	rows := map[string]int{}
	for i, r := range counterparts {
		rows[r.c] = i
	}
	for _, fn := range fns {
		if i, ok := rows[fn]; ok {
			r := counterparts[i]
			extra := ""
			if r.goContext != "" {
				extra = fmt.Sprintf("  (blocking: Go %s, Swift async %s)", r.goContext, r.swiftAsync)
			}
			t.Logf("%-28s Go %-22s Swift %-28s%s", fn, r.goName, r.swiftName, extra)
		}
	}
	t.Logf("%d functions in dsh_session.h, each in Go, Swift and dsh_session.hpp", len(fns))
}

// The check itself: a function added to the header and to no binding is
// reported for each of them, and one the Go binding stops calling too.
func TestBindingParityCatchesAMissingFunction(t *testing.T) {
	header := readRepo(t, "include/dsh_session.h")
	cpp := readRepo(t, "include/dsh_session.hpp")
	swift := readSwiftSources(t)
	g, err := parseGoPackage(".")
	if err != nil {
		t.Fatal(err)
	}
	added := header + "\n/** A new call. */\ndsh_status dsh_session_compact(struct dsh_session *session,\n    const char *options_json, struct dsh_buf *out);\n"
	problems := parityProblems(added, g, swift, cpp)
	if len(problems) != 1 || !strings.HasPrefix(problems[0], "dsh_session_compact: no Go or Swift counterpart") {
		t.Fatalf("a new header function gives %q", problems)
	}
	delete(g.calls, "dsh_session_derive_since")
	delete(g.exported, "Session.FlushContext")
	problems = parityProblems(header, g, swift, cpp)
	want := []string{"dsh_session_flush: Go context variant Session.FlushContext does not exist",
		"dsh_session_derive_since: the Go binding never calls it"}
	for _, w := range want {
		found := false
		for _, p := range problems {
			found = found || p == w
		}
		if !found {
			t.Errorf("missing %q in %q", w, problems)
		}
	}
	if len(problems) != len(want) {
		t.Errorf("problems %q, want %q", problems, want)
	}
	if p := parityProblems(header, g, strings.ReplaceAll(swift, "dsh_store_repair(", "other("), cpp); len(p) == 0 {
		t.Error("a Swift binding without dsh_store_repair passes")
	}
}
