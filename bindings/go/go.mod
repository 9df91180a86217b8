module dsh-session/bindings/go

go 1.19
