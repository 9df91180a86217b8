module example.com/dsh-consumer

go 1.19

require github.com/dsh-session/dsh-session/bindings/go v0.0.0

// scripts/test-packaging.sh points this at the checkout under test and
// builds with -tags dshsession_system (a checkout's bindings/go has no
// prebuilt lib/); scripts/test-dist.sh makes its own go.mod and gets the
// module from a module proxy instead.
replace github.com/dsh-session/dsh-session/bindings/go => ../../../bindings/go
