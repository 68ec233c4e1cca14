//! `cargo xtask`: project automation. Run `cargo xtask help` for the list.

use std::process::ExitCode;

use xtask::{bench, fixtures, layering, workspace_root};

const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  fixtures           regenerate the golden files under fixtures/v2/
  fixtures --check   fail if fixtures/v2/ differs from what the generator produces
  layering           print the crate dependency graph; fail on an upward dependency
  bench [--quick]    build felix-bench in release mode, run every scenario against its
                     limit and the peer crates, write target/bench/results.{jsonl,md}
                     and the table in docs/performance.md (--only KEY,... runs some
                     cells and leaves the doc alone; --no-doc never touches it)
  bench --tiered [--mib N] [--rounds N]
                     tiered storage against plain object_store calls on a loopback
                     S3 server (felix-tiered's tier_bench example; default 1024 MiB,
                     3 rounds); prints the table docs/performance.md quotes
  help               print this text";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let root = workspace_root();
    let outcome = match args.as_slice() {
        ["fixtures"] => fixtures::write(&root).map(|diff| {
            if diff.is_empty() {
                println!("{} is up to date", fixtures::FIXTURES_DIR);
            } else {
                print!("{}", diff.as_written());
            }
        }),
        ["fixtures", "--check"] => {
            fixtures::check(&root).map(|()| println!("{} is up to date", fixtures::FIXTURES_DIR))
        }
        ["layering"] => layering::run(&root),
        ["bench", options @ ..] => bench::run_bench(&root, options),
        ["help" | "--help" | "-h"] => {
            println!("{USAGE}");
            Ok(())
        }
        _ => Err(format!("unknown arguments {args:?}\n\n{USAGE}")),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}
