//! `<scenario> <impl> [--key value]...`: the one argument shape every run
//! takes, so the orchestrator can drive the binary and the peers alike.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::str::FromStr;

use felix_storage::{Durability, Preallocation};

/// A run's scenario, implementation and `--key value` parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    /// The scenario, e.g. `append`.
    pub scenario: String,
    /// The implementation, e.g. `felix`, `limit-write`, `wal-db`.
    pub implementation: String,
    /// Every `--key value` pair, keys without their dashes.
    pub params: BTreeMap<String, String>,
}

impl Args {
    /// Parses `scenario impl --key value ...` (program name excluded).
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, String> {
        let mut args = args.into_iter();
        let scenario = args.next().ok_or("missing scenario")?;
        let implementation = args.next().ok_or("missing implementation")?;
        let mut params = BTreeMap::new();
        while let Some(key) = args.next() {
            let Some(key) = key.strip_prefix("--") else {
                return Err(format!("expected --key, got {key:?}"));
            };
            let value = args
                .next()
                .ok_or_else(|| format!("--{key} needs a value"))?;
            params.insert(key.to_string(), value);
        }
        Ok(Self {
            scenario,
            implementation,
            params,
        })
    }

    /// The process's own arguments.
    pub fn from_env() -> Result<Self, String> {
        Self::parse(std::env::args().skip(1))
    }

    /// `--key`, parsed, or `default` when absent.
    pub fn get<T: FromStr>(&self, key: &str, default: T) -> Result<T, String> {
        match self.params.get(key) {
            None => Ok(default),
            Some(text) => parse_size(text)
                .and_then(|n| n.to_string().parse().ok())
                .or_else(|| text.parse().ok())
                .ok_or_else(|| format!("--{key} {text:?}: not a valid value")),
        }
    }

    /// `--key` as text, or `default`.
    pub fn text(&self, key: &str, default: &str) -> String {
        self.params
            .get(key)
            .cloned()
            .unwrap_or_else(|| default.to_string())
    }

    /// `--dir`, which every scenario needs.
    pub fn dir(&self) -> Result<PathBuf, String> {
        self.params
            .get("dir")
            .map(PathBuf::from)
            .ok_or_else(|| "--dir is required".to_string())
    }
}

/// `64K`, `1M`, `1G` (binary units) as a number; `None` without a suffix.
fn parse_size(text: &str) -> Option<u64> {
    let (digits, shift) = match text.as_bytes().last()? {
        b'K' | b'k' => (&text[..text.len() - 1], 10),
        b'M' | b'm' => (&text[..text.len() - 1], 20),
        b'G' | b'g' => (&text[..text.len() - 1], 30),
        _ => return None,
    };
    digits.parse::<u64>().ok()?.checked_mul(1 << shift)
}

/// The preallocation named `name`: `off` (or `false`), `stepped` (or
/// `true`), `whole`.
pub fn preallocation(name: &str) -> Result<Preallocation, String> {
    match name {
        "off" | "false" => Ok(Preallocation::Off),
        "stepped" | "true" => Ok(Preallocation::Stepped),
        "whole" => Ok(Preallocation::WholeSegment),
        other => Err(format!(
            "--preallocate {other}: expected off, stepped or whole"
        )),
    }
}

/// `none` or `on_commit`.
pub fn durability(name: &str) -> Result<Durability, String> {
    match name {
        "none" => Ok(Durability::None),
        "on_commit" => Ok(Durability::OnCommit),
        other => Err(format!("unknown durability {other:?} (none, on_commit)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_args_reads_scenario_impl_and_sizes() {
        let args = Args::parse(
            [
                "append",
                "felix",
                "--records",
                "10",
                "--bytes",
                "2G",
                "--dir",
                "/x",
            ]
            .map(String::from),
        )
        .unwrap();
        assert_eq!(args.scenario, "append");
        assert_eq!(args.implementation, "felix");
        assert_eq!(args.get("records", 0u64).unwrap(), 10);
        assert_eq!(args.get("bytes", 0u64).unwrap(), 2 << 30);
        assert_eq!(args.get("absent", 7u64).unwrap(), 7);
        assert_eq!(args.dir().unwrap(), PathBuf::from("/x"));
        assert!(Args::parse(["a", "b", "--k"].map(String::from)).is_err());
    }
}
