//! `megha`: the command-line client of a Megha cluster (see `megha --help`).

fn main() -> std::process::ExitCode {
    megha_client::main()
}
