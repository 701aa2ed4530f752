//! `local-master`: see `local-master --help`.

use local_master::service::config::LmArgs;

fn main() -> std::process::ExitCode {
    let (args, matches) = service_kit::settings::parse::<LmArgs>();
    if args.common.print_config {
        let config = args.config.clone();
        return service_kit::settings::print_config(&args, &matches, config.as_deref(), |a| {
            a.resolve().map(drop)
        });
    }
    local_master::service::main_with(args)
}
