//! `megha-task-exec`: runs one exec task for the worker, inside the task's cgroups
//! and as its user; see `worker::exec::helper`. Started by the worker only.

fn main() {
    std::process::exit(worker::exec::helper::main());
}
