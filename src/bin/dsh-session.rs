//! `dsh-session`: the command-line tool over dsh-session stores (list,
//! show, derive, verify, repair, convert, fork, stats). Everything lives in
//! [`dsh_session::cli`]; see `dsh-session --help`.

fn main() -> std::process::ExitCode {
    dsh_session::cli::main()
}
