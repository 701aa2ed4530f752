//! `global-master`: see `global-master --help`.

use global_master::service::config::GmArgs;

fn main() -> std::process::ExitCode {
    let (args, matches) = service_kit::settings::parse::<GmArgs>();
    if args.common.print_config {
        let config = args.config.clone();
        return service_kit::settings::print_config(&args, &matches, config.as_deref(), |a| {
            a.resolve().map(drop)
        });
    }
    global_master::service::main_with(args)
}
