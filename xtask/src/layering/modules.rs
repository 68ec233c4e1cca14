//! The module order inside felix-storage, written down once and checked
//! against the `use` paths of its sources (`ARCHITECTURE.md`, "Layering").
//!
//! Each module of the crate belongs to one unit of [`STORAGE_UNITS`] (the
//! longest unit path that prefixes the module's path); a path in a
//! non-test source that names an item of another unit (`crate::a::b`,
//! `super::x`, a crate-root re-export) must name a unit that unit may use.
//! Tests (`tests.rs`, `*_tests.rs`, and a file's `mod tests` block) may use
//! the whole crate and are not checked. Comments are skipped.

use std::fmt;
use std::path::{Path, PathBuf};

/// The units of felix-storage, lowest first, and the units each may use.
pub const STORAGE_UNITS: &[(&str, &[&str])] = &[
    ("config", &[]),
    ("clock", &[]),
    ("loom", &[]),
    ("stats", &[]),
    ("error", &["config"]),
    ("metrics", &["config"]),
    ("lock", &["error"]),
    ("pool", &["config", "loom"]),
    ("shard::bounds", &["error"]),
    // The receipt is a plain value: group commit hands it back.
    ("shard::AppendReceipt", &[]),
    (
        "shard::commit",
        &[
            "config",
            "error",
            "loom",
            "metrics",
            "stats",
            "pool",
            "shard::bounds",
            "shard::AppendReceipt",
        ],
    ),
    // What every part reads: the settings, counters, metrics and notes.
    (
        "shard::shared",
        &["config", "clock", "error", "stats", "metrics"],
    ),
    // Beside the log: neither names the other.
    ("shard::generations", &["error", "shard::commit"]),
    (
        "shard::log",
        &[
            "config",
            "error",
            "loom",
            "stats",
            "metrics",
            "lock",
            "shard::bounds",
            "shard::AppendReceipt",
            "shard::commit",
            "shard::shared",
        ],
    ),
    (
        "shard",
        &[
            "config",
            "clock",
            "error",
            "loom",
            "stats",
            "metrics",
            "lock",
            "pool",
            "shard::bounds",
            "shard::AppendReceipt",
            "shard::commit",
            "shard::shared",
            "shard::generations",
            "shard::log",
            "periodic",
            "background_scrub",
        ],
    ),
    ("periodic", &["config"]),
    ("background_scrub", &["error", "periodic", "shard"]),
    (
        "store",
        &[
            "config",
            "clock",
            "error",
            "lock",
            "metrics",
            "stats",
            "pool",
            "shard",
            "periodic",
            "background_scrub",
        ],
    ),
];

/// A path in felix-storage that names a unit its module may not use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleViolation {
    /// The source file, relative to the crate's `src`.
    pub file: String,
    /// The unit the file belongs to.
    pub from: String,
    /// The unit the path names.
    pub to: String,
    /// The path as written.
    pub path: String,
}

impl fmt::Display for ModuleViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let allowed = allowed(&self.from).join(", ");
        write!(
            f,
            "felix-storage {}: `{}` uses {}, which {} may not use (it may use {})",
            self.file,
            self.path,
            self.to,
            self.from,
            if allowed.is_empty() {
                "nothing"
            } else {
                &allowed
            }
        )
    }
}

fn allowed(unit: &str) -> &'static [&'static str] {
    STORAGE_UNITS
        .iter()
        .find(|(name, _)| *name == unit)
        .map_or(&[], |(_, allowed)| allowed)
}

/// The unit a module (or item) path belongs to: the longest unit that
/// prefixes it; `None` for the crate root.
fn unit_of(path: &[String]) -> Option<&'static str> {
    STORAGE_UNITS
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| {
            let parts: Vec<&str> = name.split("::").collect();
            parts.len() <= path.len() && parts.iter().zip(path).all(|(a, b)| *a == b)
        })
        .max_by_key(|name| name.split("::").count())
}

/// The module path of a source file relative to `src`: `shard/log/mod.rs`
/// is `shard::log`, `lib.rs` the root.
fn module_path(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs");
        if stem != "mod" && stem != "lib" {
            parts.push(stem.to_owned());
        }
    }
    parts
}

/// The source without comments and without its `mod tests` block.
fn code_of(source: &str) -> String {
    let mut out = String::new();
    let mut lines = source.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if (trimmed.starts_with("#[cfg(test)]") || trimmed.starts_with("#[cfg(all(test"))
            && let Some(next) = lines.peek()
            && next.trim_start().starts_with("mod tests")
        {
            break;
        }
        let code = line.split("//").next().unwrap_or_default();
        out.push_str(code);
        out.push('\n');
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every path starting at `crate::` or `super::` in `code`, resolved from
/// `module` to absolute item paths, each with the text it was written as.
fn paths_in(code: &str, module: &[String]) -> Vec<(Vec<String>, String)> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < code.len() {
        let rest = &code[i..];
        let at_word = i == 0 || !is_ident(char::from(bytes[i - 1]));
        let starts = rest.starts_with("crate::") || rest.starts_with("super::");
        if !(at_word && starts) {
            i += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        }
        let end = use_tree_end(rest);
        let written = rest[..end].trim_end().to_owned();
        let mut base: Vec<String> = Vec::new();
        let mut tree = written.as_str();
        if let Some(after) = tree.strip_prefix("crate::") {
            tree = after;
        } else {
            base = module.to_vec();
            while let Some(after) = tree.strip_prefix("super::") {
                tree = after;
                base.pop();
            }
        }
        for segments in expand_use_tree(tree) {
            let mut path = base.clone();
            for segment in segments.iter().take(2) {
                if segment.is_empty() || !segment.chars().all(is_ident) {
                    break;
                }
                path.push(segment.clone());
            }
            out.push((path, written.clone()));
        }
        i += end.max(1);
    }
    out
}

/// The length of the path or use tree at the start of `rest`: identifiers
/// and `::`, and a `{..}` group with its nested groups, up to the brace
/// that closes the outermost one.
fn use_tree_end(rest: &str) -> usize {
    let mut depth = 0usize;
    for (at, c) in rest.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return at,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return at + 1;
                }
            }
            c if is_ident(c) || c == ':' => {}
            ',' | ' ' | '\t' | '\n' | '\r' if depth > 0 => {}
            _ => return at,
        }
    }
    rest.len()
}

/// The paths a use tree names, each as its segments, `self` dropped:
/// `a::{b, c::{d, e}}` is `a::b`, `a::c::d` and `a::c::e`.
fn expand_use_tree(tree: &str) -> Vec<Vec<String>> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let segments: Vec<String> = tree
            .split("::")
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty() && s != "self")
            .collect();
        return vec![segments];
    };
    let prefix: Vec<String> = tree[..open]
        .split("::")
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect();
    let inner = tree[open + 1..]
        .strip_suffix('}')
        .unwrap_or(&tree[open + 1..]);
    let mut items = Vec::new();
    let mut depth = 0usize;
    let mut from = 0;
    for (at, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(&inner[from..at]);
                from = at + 1;
            }
            _ => {}
        }
    }
    items.push(&inner[from..]);
    let mut out = Vec::new();
    for item in items.into_iter().filter(|item| !item.trim().is_empty()) {
        for tail in expand_use_tree(item) {
            let mut path = prefix.clone();
            path.extend(tail);
            out.push(path);
        }
    }
    out
}

/// The crate-root re-exports of `lib.rs` (`pub use module::{A, B}`): each
/// item's module.
fn root_exports(lib: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let code = code_of(lib);
    for statement in code.split(';') {
        let statement = statement.trim();
        let Some(rest) = statement.strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, items)) = rest.split_once("::") else {
            continue;
        };
        let items = items.trim().trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            let item = item.trim();
            if !item.is_empty() && item.chars().all(is_ident) {
                out.push((item.to_owned(), module.trim().to_owned()));
            }
        }
    }
    out
}

/// Checks the module order of the sources `files` (each a path relative
/// to `src` and its text; `lib.rs` among them for the root re-exports).
pub fn check_sources(files: &[(PathBuf, String)]) -> Vec<ModuleViolation> {
    let exports = files
        .iter()
        .find(|(path, _)| path == Path::new("lib.rs"))
        .map(|(_, text)| root_exports(text))
        .unwrap_or_default();
    let mut violations = Vec::new();
    for (relative, text) in files {
        let name = relative
            .file_name()
            .map(|n| n.to_string_lossy().into_owned());
        if name
            .as_deref()
            .is_some_and(|n| n == "tests.rs" || n.ends_with("_tests.rs"))
        {
            continue;
        }
        let module = module_path(relative);
        let Some(from) = unit_of(&module) else {
            continue;
        };
        for (mut path, written) in paths_in(&code_of(text), &module) {
            if path.len() == 1
                && let Some((_, home)) = exports.iter().find(|(item, _)| *item == path[0])
            {
                path.insert(0, home.clone());
            }
            let Some(to) = unit_of(&path) else {
                continue;
            };
            if to != from && !allowed(from).contains(&to) {
                violations.push(ModuleViolation {
                    file: relative.display().to_string(),
                    from: from.to_owned(),
                    to: to.to_owned(),
                    path: written,
                });
            }
        }
    }
    violations
}

/// Reads every source file of felix-storage under `root`.
pub fn read_storage_sources(root: &Path) -> Result<Vec<(PathBuf, String)>, String> {
    let src = root.join("crates/felix-storage/src");
    let mut out = Vec::new();
    let mut dirs = vec![src.clone()];
    while let Some(dir) = dirs.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for entry in entries {
            let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                let relative = path.strip_prefix(&src).unwrap_or(&path).to_path_buf();
                out.push((relative, text));
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(list: &[(&str, &str)]) -> Vec<(PathBuf, String)> {
        list.iter()
            .map(|(path, text)| (PathBuf::from(path), (*text).to_owned()))
            .collect()
    }

    #[test]
    fn group_commit_using_the_shard_is_caught() {
        let violations = check_sources(&files(&[
            ("lib.rs", "pub use shard::{Shard, ShardOptions};\n"),
            (
                "shard/commit/job.rs",
                "use super::super::core::Core;\nuse crate::Shard;\n// crate::store::Store in a comment\n",
            ),
        ]));
        assert_eq!(
            violations,
            vec![
                ModuleViolation {
                    file: "shard/commit/job.rs".into(),
                    from: "shard::commit".into(),
                    to: "shard".into(),
                    path: "super::super::core::Core".into(),
                },
                ModuleViolation {
                    file: "shard/commit/job.rs".into(),
                    from: "shard::commit".into(),
                    to: "shard".into(),
                    path: "crate::Shard".into(),
                },
            ]
        );
        assert_eq!(
            violations[0].to_string(),
            "felix-storage shard/commit/job.rs: `super::super::core::Core` uses shard, which \
             shard::commit may not use (it may use config, error, loom, metrics, stats, pool, \
             shard::bounds, shard::AppendReceipt)"
        );
    }

    #[test]
    fn allowed_paths_groups_and_tests_pass() {
        let violations = check_sources(&files(&[
            ("lib.rs", "pub use config::{Durability, StoreConfig};\n"),
            (
                "shard/commit/mod.rs",
                "use crate::{Durability, error::Result};\nuse super::bounds::Tail;\nuse crate::shard::AppendReceipt;\n\
                 #[cfg(test)]\nmod tests {\n    use crate::store::Store;\n}\n",
            ),
            ("shard/commit/loom_tests.rs", "use crate::store::Store;\n"),
            ("store/mod.rs", "use crate::shard::Shard;\n"),
        ]));
        assert_eq!(violations, vec![]);
    }

    #[test]
    fn a_lower_unit_using_a_higher_one_through_a_group_is_caught() {
        let violations = check_sources(&files(&[(
            "pool/mod.rs",
            "use crate::{loom::sync::Mutex, store::Store};\n",
        )]));
        assert_eq!(
            violations
                .iter()
                .map(|v| (v.from.as_str(), v.to.as_str()))
                .collect::<Vec<_>>(),
            vec![("pool", "store")]
        );
    }

    #[test]
    fn the_log_and_the_generations_naming_the_shard_or_each_other_are_caught() {
        let violations = check_sources(&files(&[
            (
                "shard/log/append.rs",
                "use super::{Log, WriterState};
use crate::shard::commit::Commit;
\
                 use crate::shard::core::Core;
use crate::shard::generations::Generations;
",
            ),
            (
                "shard/generations.rs",
                "use super::commit::Commit;
use super::log::WriterState;
",
            ),
            (
                "shard/replica.rs",
                "use super::log::Synced;
use super::generations::Generations;
",
            ),
        ]));
        assert_eq!(
            violations
                .iter()
                .map(|v| (v.from.as_str(), v.to.as_str(), v.path.as_str()))
                .collect::<Vec<_>>(),
            vec![
                ("shard::log", "shard", "crate::shard::core::Core"),
                (
                    "shard::log",
                    "shard::generations",
                    "crate::shard::generations::Generations"
                ),
                (
                    "shard::generations",
                    "shard::log",
                    "super::log::WriterState"
                ),
            ]
        );
    }

    #[test]
    fn nested_groups_are_read_to_their_closing_brace() {
        let violations = check_sources(&files(&[(
            "shard/log/append.rs",
            "use super::super::{\n    bounds::{Tail, readable_end},\n    generations::Generations,\n};\n\
             use crate::{shard::{commit::Commit, core::{Core}}, error::Result};\n",
        )]));
        assert_eq!(
            violations
                .iter()
                .map(|v| (v.from.as_str(), v.to.as_str()))
                .collect::<Vec<_>>(),
            vec![
                ("shard::log", "shard::generations"),
                ("shard::log", "shard")
            ]
        );
        assert_eq!(
            expand_use_tree("a::{b, c::{d, self}}"),
            vec![
                vec!["a".to_owned(), "b".to_owned()],
                vec!["a".to_owned(), "c".to_owned(), "d".to_owned()],
                vec!["a".to_owned(), "c".to_owned()],
            ]
        );
    }

    #[test]
    fn module_paths_follow_the_file_names() {
        assert_eq!(
            module_path(Path::new("shard/log/mod.rs")),
            vec!["shard", "log"]
        );
        assert_eq!(
            module_path(Path::new("shard/log/append.rs")),
            vec!["shard", "log", "append"]
        );
        assert!(module_path(Path::new("lib.rs")).is_empty());
    }
}
