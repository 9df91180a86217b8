module github.com/dsh-session/dsh-session/bindings/go

go 1.19
