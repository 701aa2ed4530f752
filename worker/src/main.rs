//! `worker`: see `worker --help`.

use worker::service::config::WorkerArgs;

fn main() -> std::process::ExitCode {
    let (args, matches) = service_kit::settings::parse::<WorkerArgs>();
    if args.common.print_config {
        let config = args.config.clone();
        return service_kit::settings::print_config(&args, &matches, config.as_deref(), |a| {
            a.resolve().map(drop)
        });
    }
    worker::service::main_with(args)
}
