module example.com/dsh-consumer

go 1.19

require github.com/dsh-session/dsh-session/bindings/go v0.0.0

// scripts/test-packaging.sh points this at the checkout under test; a
// project of your own points it at its checkout until the module is
// published.
replace github.com/dsh-session/dsh-session/bindings/go => ../../../bindings/go
