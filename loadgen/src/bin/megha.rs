//! `megha`: the command-line client of a Megha cluster (see `megha --help`).

fn main() -> std::process::ExitCode {
    loadgen::client::main()
}
