//! `cargo xtask`: project automation. Run `cargo xtask help` for the list.

use std::process::ExitCode;

use xtask::{fixtures, layering, workspace_root};

const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  fixtures           regenerate the golden files under fixtures/v2/
  fixtures --check   fail if fixtures/v2/ differs from what the generator produces
  layering           print the crate dependency graph; fail on an upward dependency
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
