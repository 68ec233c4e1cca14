//! The crate stack, written down once and checked against every
//! `crates/*/Cargo.toml`.
//!
//! Bytes flow up: felix-format and felix-io (0) < felix-segment (1) <
//! felix-recovery (2) < felix-storage (3) < felix-cli (4) < felix-bench (5),
//! the benchmark suite, which may measure anything and which nothing uses.
//! felix-io, the file system interface, depends on nothing of ours and
//! everything that touches files uses it. felix-epochs sits beside the stack
//! on felix-format and felix-io alone, and only felix-storage, felix-cli and
//! felix-bench may use it. A
//! dependency of any kind (normal, dev, build, target-specific) on a crate
//! that is not below is a violation: a dev-dependency cycle still lets a test
//! of a lower crate lean on behaviour it must not know about. A crate missing
//! from [`PLACES`] fails too, so a new crate gets placed on purpose rather
//! than by whatever it happened to import first.
//!
//! Manifests are read line by line, which is enough for the TOML cargo
//! manifests use and keeps xtask free of a TOML dependency.

use std::fmt;
use std::fs;
use std::path::Path;

/// Every placed crate, its level (for display), and the crates it may use.
pub const PLACES: &[(&str, u8, &[&str])] = &[
    ("felix-format", 0, &[]),
    ("felix-io", 0, &[]),
    ("felix-epochs", 1, &["felix-format", "felix-io"]),
    ("felix-segment", 1, &["felix-format", "felix-io"]),
    (
        "felix-recovery",
        2,
        &["felix-format", "felix-io", "felix-segment"],
    ),
    (
        "felix-storage",
        3,
        &[
            "felix-format",
            "felix-io",
            "felix-segment",
            "felix-recovery",
            "felix-epochs",
        ],
    ),
    (
        "felix-cli",
        4,
        &[
            "felix-format",
            "felix-io",
            "felix-segment",
            "felix-recovery",
            "felix-storage",
            "felix-epochs",
        ],
    ),
    // The benchmark suite: it measures everything and nothing depends on it.
    (
        "felix-bench",
        5,
        &[
            "felix-format",
            "felix-io",
            "felix-segment",
            "felix-recovery",
            "felix-storage",
            "felix-epochs",
        ],
    ),
];

/// The dependency kinds a manifest can declare, under `[...]` or
/// `[target.'cfg(..)'.…]`.
const KINDS: [&str; 3] = ["dependencies", "dev-dependencies", "build-dependencies"];

/// One dependency of a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependency {
    /// The package depended on (the `package = ".."` of a renamed one).
    pub name: String,
    /// The section declaring it, as written: `dev-dependencies`,
    /// `target.'cfg(unix)'.dependencies`.
    pub section: String,
}

/// What the layering check needs from one `crates/<folder>/Cargo.toml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// The folder under `crates/`.
    pub folder: String,
    /// `[package] name`, if the manifest has one.
    pub package: Option<String>,
    /// Every dependency, of every kind, in file order.
    pub dependencies: Vec<Dependency>,
}

/// A way a manifest breaks the layering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// `krate` depends on `dependency`, which is not below it.
    Upward {
        /// The depending crate.
        krate: String,
        /// The crate depended on.
        dependency: String,
        /// Where the dependency is declared.
        section: String,
    },
    /// A crate under `crates/` that [`PLACES`] does not know.
    Unplaced {
        /// The crate's package name.
        krate: String,
    },
    /// A dependency on a `felix-*` crate that [`PLACES`] does not know.
    UnplacedDependency {
        /// The depending crate.
        krate: String,
        /// The unknown crate.
        dependency: String,
        /// Where the dependency is declared.
        section: String,
    },
    /// The folder is not named after the crate, so paths mislead readers.
    FolderName {
        /// The folder under `crates/`.
        folder: String,
        /// The package name inside it.
        package: String,
    },
    /// A manifest without `[package] name`.
    NoPackage {
        /// The folder under `crates/`.
        folder: String,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Upward {
                krate,
                dependency,
                section,
            } => {
                let allowed = place(krate).map_or(&[][..], |(_, allowed)| allowed);
                let allowed = if allowed.is_empty() {
                    "no felix crate".to_string()
                } else {
                    allowed.join(", ")
                };
                write!(
                    f,
                    "{krate} depends on {dependency} in [{section}], which is not below it \
                     ({krate} may depend on {allowed})"
                )
            }
            Self::Unplaced { krate } => write!(
                f,
                "{krate} is not placed in the layering: add it to PLACES in xtask/src/layering.rs \
                 and to ARCHITECTURE.md"
            ),
            Self::UnplacedDependency {
                krate,
                dependency,
                section,
            } => write!(
                f,
                "{krate} depends on {dependency} in [{section}], which is not placed in the \
                 layering: add it to PLACES in xtask/src/layering.rs"
            ),
            Self::FolderName { folder, package } => write!(
                f,
                "crates/{folder} holds package {package}: the folder must be named after the crate"
            ),
            Self::NoPackage { folder } => {
                write!(f, "crates/{folder}/Cargo.toml has no [package] name")
            }
        }
    }
}

/// The level and allowed dependencies of a placed crate.
fn place(krate: &str) -> Option<(u8, &'static [&'static str])> {
    PLACES
        .iter()
        .find(|(name, _, _)| *name == krate)
        .map(|&(_, level, allowed)| (level, allowed))
}

/// Splits `a.'b.c'.d` on dots outside quotes, keeping each piece as written.
fn split_dotted(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut quote = None;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '.') => {
                pieces.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    pieces.push(text[start..].trim());
    pieces
}

fn unquote(text: &str) -> &str {
    text.trim().trim_matches(|c| c == '"' || c == '\'')
}

/// The line without a trailing `# comment` (a `#` inside quotes is kept).
fn strip_comment(line: &str) -> &str {
    let mut quote = None;
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '#') => return &line[..i],
            _ => {}
        }
    }
    line
}

/// `key` and `value` of a `key = value` line; `=` inside quotes does not count.
fn key_value(line: &str) -> Option<(&str, &str)> {
    let mut quote = None;
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '=') => return Some((line[..i].trim(), line[i + 1..].trim())),
            _ => {}
        }
    }
    None
}

/// The string after `package =` in an inline table, if any.
fn renamed_package(value: &str) -> Option<&str> {
    let rest = value.split_once("package")?.1.trim_start();
    let rest = rest.strip_prefix('=')?.trim_start();
    let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let rest = &rest[1..];
    rest.split_once(quote).map(|(name, _)| name)
}

/// What a `[header]` line opens.
enum Section {
    Package,
    /// A dependency table; `dotted` names the dependency of
    /// `[dependencies.<name>]`.
    Dependencies {
        label: String,
        dotted: Option<String>,
    },
    Other,
}

fn section(header: &str) -> Section {
    let pieces = split_dotted(header);
    let (kind_at, target) = match pieces.as_slice() {
        ["package"] => return Section::Package,
        [first, ..] if KINDS.contains(first) => (0, false),
        ["target", _, kind, ..] if KINDS.contains(kind) => (2, true),
        _ => return Section::Other,
    };
    let label = if target {
        pieces[..=kind_at].join(".")
    } else {
        pieces[kind_at].to_string()
    };
    Section::Dependencies {
        label,
        dotted: pieces.get(kind_at + 1).map(|p| unquote(p).to_string()),
    }
}

/// Reads the package name and every dependency from a manifest's text.
pub fn parse_manifest(folder: &str, text: &str) -> Manifest {
    let mut manifest = Manifest {
        folder: folder.to_string(),
        package: None,
        dependencies: Vec::new(),
    };
    let mut current = Section::Other;
    for raw in text.lines() {
        let line = strip_comment(raw).trim();
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = section(header.trim_matches(|c| c == '[' || c == ']'));
            if let Section::Dependencies {
                label,
                dotted: Some(name),
            } = &current
            {
                manifest.dependencies.push(Dependency {
                    name: name.clone(),
                    section: label.clone(),
                });
            }
            continue;
        }
        // Lines without `=` continue a multi-line array; nothing to read.
        let Some((key, value)) = key_value(line) else {
            continue;
        };
        match &current {
            Section::Package if key == "name" => {
                manifest.package = Some(unquote(value).to_string());
            }
            Section::Dependencies {
                dotted: Some(_), ..
            } if key == "package" => {
                if let Some(last) = manifest.dependencies.last_mut() {
                    last.name = unquote(value).to_string();
                }
            }
            Section::Dependencies {
                label,
                dotted: None,
            } => {
                // `felix-format.workspace = true` names felix-format.
                let name = split_dotted(key).first().map_or(key, |k| unquote(k));
                let name = renamed_package(value).unwrap_or(name).to_string();
                let dependency = Dependency {
                    name,
                    section: label.clone(),
                };
                if !manifest.dependencies.contains(&dependency) {
                    manifest.dependencies.push(dependency);
                }
            }
            _ => {}
        }
    }
    manifest
}

/// Every violation in `manifests`, in manifest then dependency order.
pub fn check(manifests: &[Manifest]) -> Vec<Violation> {
    let mut violations = Vec::new();
    for manifest in manifests {
        let Some(krate) = manifest.package.clone() else {
            violations.push(Violation::NoPackage {
                folder: manifest.folder.clone(),
            });
            continue;
        };
        if krate != manifest.folder {
            violations.push(Violation::FolderName {
                folder: manifest.folder.clone(),
                package: krate.clone(),
            });
        }
        let Some((_, allowed)) = place(&krate) else {
            violations.push(Violation::Unplaced { krate });
            continue;
        };
        for dep in &manifest.dependencies {
            let known = place(&dep.name).is_some();
            if !known && !dep.name.starts_with("felix-") {
                continue;
            }
            let violation = if !known {
                Violation::UnplacedDependency {
                    krate: krate.clone(),
                    dependency: dep.name.clone(),
                    section: dep.section.clone(),
                }
            } else if allowed.contains(&dep.name.as_str()) {
                continue;
            } else {
                Violation::Upward {
                    krate: krate.clone(),
                    dependency: dep.name.clone(),
                    section: dep.section.clone(),
                }
            };
            violations.push(violation);
        }
    }
    violations
}

/// Reads every `crates/*/Cargo.toml` under `root`, sorted by folder.
pub fn read_workspace(root: &Path) -> Result<Vec<Manifest>, String> {
    let crates = root.join("crates");
    let entries =
        fs::read_dir(&crates).map_err(|e| format!("read dir {}: {e}", crates.display()))?;
    let mut manifests = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("read dir {}: {e}", crates.display()))?;
        let path = entry.path().join("Cargo.toml");
        if !path.is_file() {
            continue;
        }
        let text =
            fs::read_to_string(&path).map_err(|e| format!("read {}: {e}", path.display()))?;
        let folder = entry.file_name().to_string_lossy().into_owned();
        manifests.push(parse_manifest(&folder, &text));
    }
    manifests.sort_by(|a, b| a.folder.cmp(&b.folder));
    Ok(manifests)
}

/// The graph as text: placed crates top-down, each with its felix deps.
pub fn render_graph(manifests: &[Manifest]) -> String {
    let mut out = String::new();
    let mut places: Vec<_> = PLACES.iter().collect();
    places.sort_by_key(|(name, level, _)| (std::cmp::Reverse(*level), *name));
    for (name, level, _) in places {
        let found = manifests
            .iter()
            .find(|m| m.package.as_deref() == Some(name));
        let deps = found.map(|m| {
            let mut felix: Vec<String> = m
                .dependencies
                .iter()
                .filter(|d| d.name.starts_with("felix-"))
                .map(|d| match d.section.as_str() {
                    "dependencies" => d.name.clone(),
                    section => format!("{} [{section}]", d.name),
                })
                .collect();
            felix.dedup();
            felix
        });
        let line = match deps {
            None => format!("{level}  {name:<16} (not in the workspace yet)\n"),
            Some(deps) if deps.is_empty() => format!("{level}  {name}\n"),
            Some(deps) => format!("{level}  {name:<16} -> {}\n", deps.join(", ")),
        };
        out.push_str(&line);
    }
    for m in manifests {
        if m.package.as_deref().and_then(place).is_none() {
            out.push_str(&format!(
                "?  {:<16} (crates/{}, not placed)\n",
                m.package.as_deref().unwrap_or("?"),
                m.folder
            ));
        }
    }
    out
}

/// `cargo xtask layering`: prints the graph, fails on any violation.
pub fn run(root: &Path) -> Result<(), String> {
    let manifests = read_workspace(root)?;
    print!("{}", render_graph(&manifests));
    let violations = check(&manifests);
    if violations.is_empty() {
        println!("layering ok: {} crates checked", manifests.len());
        return Ok(());
    }
    let lines: Vec<String> = violations.iter().map(|v| format!("  {v}")).collect();
    Err(format!("layering violated:\n{}", lines.join("\n")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upward(krate: &str, dependency: &str, section: &str) -> Violation {
        Violation::Upward {
            krate: krate.into(),
            dependency: dependency.into(),
            section: section.into(),
        }
    }

    #[test]
    fn check_dev_dependency_on_higher_crate_is_reported_exactly() {
        let text = r#"
[package]
name = "felix-segment"

[dependencies]
felix-format.workspace = true
thiserror = { workspace = true } # not a felix crate

[dev-dependencies]
felix-storage = { path = "../felix-storage" }
"#;
        let violations = check(&[parse_manifest("felix-segment", text)]);
        assert_eq!(
            violations,
            [upward("felix-segment", "felix-storage", "dev-dependencies")]
        );
        assert_eq!(
            violations[0].to_string(),
            "felix-segment depends on felix-storage in [dev-dependencies], which is not below it \
             (felix-segment may depend on felix-format, felix-io)"
        );
    }

    #[test]
    fn parse_manifest_every_section_shape_is_read() {
        let text = r#"
[package]
name = "felix-recovery"

[features]
std = ["felix-format/std"]

[dependencies]
seg = { package = "felix-segment", path = "../felix-segment" }
felix-format = { workspace = true, features = [
    "std",
] }

[target.'cfg(unix)'.dev-dependencies]
felix-cli.workspace = true

[build-dependencies.helper]
package = "felix-storage"
"#;
        let manifest = parse_manifest("felix-recovery", text);
        let deps: Vec<(&str, &str)> = manifest
            .dependencies
            .iter()
            .map(|d| (d.name.as_str(), d.section.as_str()))
            .collect();
        assert_eq!(
            deps,
            [
                ("felix-segment", "dependencies"),
                ("felix-format", "dependencies"),
                ("felix-cli", "target.'cfg(unix)'.dev-dependencies"),
                ("felix-storage", "build-dependencies"),
            ]
        );
        assert_eq!(
            check(&[manifest]),
            [
                upward(
                    "felix-recovery",
                    "felix-cli",
                    "target.'cfg(unix)'.dev-dependencies"
                ),
                upward("felix-recovery", "felix-storage", "build-dependencies"),
            ]
        );
    }

    #[test]
    fn check_epochs_beside_the_stack_allows_only_its_edges() {
        let epochs = "[package]\nname = \"felix-epochs\"\n[dependencies]\nfelix-segment = \"*\"\n";
        let segment = "[package]\nname = \"felix-segment\"\n[dependencies]\nfelix-epochs = \"*\"\n";
        let storage = "[package]\nname = \"felix-storage\"\n[dependencies]\nfelix-epochs = \"*\"\n";
        let violations = check(&[
            parse_manifest("felix-epochs", epochs),
            parse_manifest("felix-segment", segment),
            parse_manifest("felix-storage", storage),
        ]);
        assert_eq!(
            violations,
            [
                upward("felix-epochs", "felix-segment", "dependencies"),
                upward("felix-segment", "felix-epochs", "dependencies"),
            ]
        );
    }

    #[test]
    fn check_unknown_felix_crates_are_reported() {
        let wire = "[package]\nname = \"felix-wire\"\n";
        let cli =
            "[package]\nname = \"felix-cli\"\n[dependencies]\nfelix-wire = \"*\"\nserde = \"1\"\n";
        let violations = check(&[
            parse_manifest("felix-wire", wire),
            parse_manifest("cli", cli),
        ]);
        assert_eq!(
            violations,
            [
                Violation::Unplaced {
                    krate: "felix-wire".into()
                },
                Violation::FolderName {
                    folder: "cli".into(),
                    package: "felix-cli".into()
                },
                Violation::UnplacedDependency {
                    krate: "felix-cli".into(),
                    dependency: "felix-wire".into(),
                    section: "dependencies".into()
                },
            ]
        );
    }
}
