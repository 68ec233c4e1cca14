//! The crate stack, written down once and checked against what `cargo
//! metadata` says every crate under `crates/` depends on.
//!
//! Bytes flow up: felix-format (0) < felix-io (1) < felix-segment (2) <
//! felix-recovery (3) < felix-storage (4) < felix-raft, felix-tiered (5) <
//! felix-cluster (6) < felix-cli (7) < felix-bench (8), the benchmark suite,
//! which nothing uses.
//! felix-io, the file system interface, depends on felix-format alone (its
//! one reader of side files decodes their shared frame) and everything
//! that touches files uses it. felix-epochs sits beside the stack
//! on felix-format and felix-io alone, and only felix-storage and the crates
//! above it may use it. felix-raft (replication) and felix-tiered
//! (tiered storage) sit on felix-storage and below, side by side (neither
//! uses the other). felix-cluster (replicated shards: nodes, transport,
//! client) sits on felix-raft; only the operator tool, felix-cli, uses
//! it and felix-tiered: its `stat`, `verify` and `manifest` read a tiered
//! shard's remote copy, its `produce`, `consume` and `cluster` talk to
//! nodes. A
//! dependency of any kind (normal, dev, build, target-specific) on a crate
//! that is not below is a violation: a dev-dependency cycle still lets a test
//! of a lower crate lean on behaviour it must not know about. A crate missing
//! from [`PLACES`] fails too, so a new crate gets placed on purpose rather
//! than by whatever it happened to import first.
//!
//! The dependencies come from `cargo metadata --format-version 1 --no-deps`
//! (every package's dependencies with their kinds and targets, renames
//! resolved to package names), so no manifest is parsed by hand.

use std::fmt;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

pub mod modules;

/// Every placed crate, its level (for display), and the crates it may use.
pub const PLACES: &[(&str, u8, &[&str])] = &[
    ("felix-format", 0, &[]),
    // The one reader of side files decodes felix-format's frame.
    ("felix-io", 1, &["felix-format"]),
    ("felix-epochs", 2, &["felix-format", "felix-io"]),
    ("felix-segment", 2, &["felix-format", "felix-io"]),
    (
        "felix-recovery",
        3,
        &["felix-format", "felix-io", "felix-segment"],
    ),
    (
        "felix-storage",
        4,
        &[
            "felix-format",
            "felix-io",
            "felix-segment",
            "felix-recovery",
            "felix-epochs",
        ],
    ),
    // Replication and tiered storage: brokers' layers over a
    // shard, on felix-storage and below, which only the operator tool above
    // them may use.
    (
        "felix-raft",
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
    (
        "felix-tiered",
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
    // Replicated shards: nodes, their transport and a client, on
    // felix-raft's logs in a felix store.
    (
        "felix-cluster",
        6,
        &[
            "felix-format",
            "felix-io",
            "felix-segment",
            "felix-recovery",
            "felix-storage",
            "felix-epochs",
            "felix-raft",
        ],
    ),
    // The operator tool, over everything an operator inspects: the shard
    // and, for tiered shards, their remote copy, and a cluster's nodes.
    (
        "felix-cli",
        7,
        &[
            "felix-format",
            "felix-io",
            "felix-segment",
            "felix-recovery",
            "felix-storage",
            "felix-epochs",
            "felix-raft",
            "felix-tiered",
            "felix-cluster",
        ],
    ),
    // The benchmark suite: it measures everything and nothing depends on it.
    (
        "felix-bench",
        8,
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

/// One dependency of a crate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependency {
    /// The package depended on (a renamed one's package name).
    pub name: String,
    /// The manifest section declaring it: `dependencies`,
    /// `dev-dependencies`, `build-dependencies`, or one of those under a
    /// target, `target.'cfg(unix)'.dev-dependencies`.
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

/// The crates under `root/crates/` and their dependencies, as `cargo
/// metadata` reports them, sorted by folder.
pub fn read_workspace(root: &Path) -> Result<Vec<Manifest>, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(&cargo)
        .current_dir(root)
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .output()
        .map_err(|e| format!("run {cargo} metadata: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "{cargo} metadata failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    parse_metadata(&String::from_utf8_lossy(&output.stdout), root)
}

/// The crates under `root/crates/` in `cargo metadata --format-version 1`
/// output, sorted by folder: each package whose manifest is
/// `root/crates/<folder>/Cargo.toml`, with every dependency of every kind.
pub fn parse_metadata(json: &str, root: &Path) -> Result<Vec<Manifest>, String> {
    let metadata: Value =
        serde_json::from_str(json).map_err(|e| format!("cargo metadata is not JSON: {e}"))?;
    let packages = metadata
        .get("packages")
        .and_then(Value::as_array)
        .ok_or("cargo metadata lists no packages")?;
    let crates = root.join("crates");
    let mut manifests = Vec::new();
    for package in packages {
        let text = |key: &str| package.get(key).and_then(Value::as_str);
        let manifest_path = Path::new(text("manifest_path").unwrap_or_default());
        let Some(folder) = manifest_path
            .parent()
            .filter(|dir| dir.parent() == Some(crates.as_path()))
            .and_then(Path::file_name)
        else {
            continue;
        };
        let dependencies = package
            .get("dependencies")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|dep| {
                let field = |key: &str| dep.get(key).and_then(Value::as_str);
                let kind = match field("kind") {
                    Some("dev") => "dev-dependencies",
                    Some("build") => "build-dependencies",
                    _ => "dependencies",
                };
                Dependency {
                    name: field("name").unwrap_or_default().to_string(),
                    section: match field("target") {
                        Some(target) => format!("target.'{target}'.{kind}"),
                        None => kind.to_string(),
                    },
                }
            })
            .collect();
        manifests.push(Manifest {
            folder: folder.to_string_lossy().into_owned(),
            package: text("name").map(String::from),
            dependencies,
        });
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

/// `cargo xtask layering`: prints the graph, fails on any violation of
/// the crate stack or of felix-storage's module order.
pub fn run(root: &Path) -> Result<(), String> {
    let manifests = read_workspace(root)?;
    print!("{}", render_graph(&manifests));
    let mut lines: Vec<String> = check(&manifests).iter().map(|v| format!("  {v}")).collect();
    let sources = modules::read_storage_sources(root)?;
    lines.extend(
        modules::check_sources(&sources)
            .iter()
            .map(|v| format!("  {v}")),
    );
    if lines.is_empty() {
        println!(
            "layering ok: {} crates and {} felix-storage sources checked",
            manifests.len(),
            sources.len()
        );
        return Ok(());
    }
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

    /// A dependency: its name, kind (`dev`, `build`) and target.
    type Dep<'a> = (&'a str, Option<&'a str>, Option<&'a str>);
    /// A crate: its folder, its package name, its dependencies.
    type Crate<'a> = (&'a str, &'a str, &'a [Dep<'a>]);

    /// `cargo metadata` output for crates under `/w/crates/`.
    fn metadata(crates: &[Crate<'_>]) -> String {
        let packages: Vec<Value> = crates
            .iter()
            .map(|(folder, name, deps)| {
                serde_json::json!({
                    "name": name,
                    "manifest_path": format!("/w/crates/{folder}/Cargo.toml"),
                    "dependencies": deps.iter().map(|(dep, kind, target)| serde_json::json!({
                        "name": dep, "rename": null, "kind": kind, "target": target,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        serde_json::json!({ "packages": packages, "version": 1 }).to_string()
    }

    fn checked(crates: &[Crate<'_>]) -> Vec<Violation> {
        check(&parse_metadata(&metadata(crates), Path::new("/w")).unwrap())
    }

    #[test]
    fn check_dev_dependency_on_higher_crate_is_reported_exactly() {
        let violations = checked(&[(
            "felix-segment",
            "felix-segment",
            &[
                ("felix-format", None, None),
                ("thiserror", None, None),
                ("felix-storage", Some("dev"), None),
            ],
        )]);
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
    fn parse_metadata_every_kind_and_target_is_read() {
        let json = metadata(&[(
            "felix-recovery",
            "felix-recovery",
            &[
                ("felix-segment", None, None),
                ("felix-cli", Some("dev"), Some("cfg(unix)")),
                ("felix-storage", Some("build"), None),
            ],
        )]);
        // xtask and anything else outside crates/ is not checked.
        let mut value: Value = serde_json::from_str(&json).unwrap();
        value["packages"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({
                "name": "xtask", "manifest_path": "/w/xtask/Cargo.toml", "dependencies": [],
            }));
        let manifests = parse_metadata(&value.to_string(), Path::new("/w")).unwrap();
        assert_eq!(
            manifests,
            [Manifest {
                folder: "felix-recovery".into(),
                package: Some("felix-recovery".into()),
                dependencies: vec![
                    Dependency {
                        name: "felix-segment".into(),
                        section: "dependencies".into()
                    },
                    Dependency {
                        name: "felix-cli".into(),
                        section: "target.'cfg(unix)'.dev-dependencies".into()
                    },
                    Dependency {
                        name: "felix-storage".into(),
                        section: "build-dependencies".into()
                    },
                ],
            }]
        );
        assert_eq!(
            check(&manifests),
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
        let violations = checked(&[
            (
                "felix-epochs",
                "felix-epochs",
                &[("felix-segment", None, None)],
            ),
            (
                "felix-segment",
                "felix-segment",
                &[("felix-epochs", None, None)],
            ),
            (
                "felix-storage",
                "felix-storage",
                &[("felix-epochs", None, None)],
            ),
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
    fn check_raft_and_tiered_sit_on_storage_and_only_the_cli_uses_them() {
        let violations = checked(&[
            (
                "felix-raft",
                "felix-raft",
                &[
                    ("felix-storage", None, None),
                    ("felix-epochs", None, None),
                    ("felix-tiered", Some("dev"), None),
                ],
            ),
            (
                "felix-tiered",
                "felix-tiered",
                &[("felix-storage", None, None), ("felix-cli", None, None)],
            ),
            // The operator tool above them may use both.
            (
                "felix-cli",
                "felix-cli",
                &[("felix-raft", None, None), ("felix-tiered", None, None)],
            ),
            (
                "felix-bench",
                "felix-bench",
                &[("felix-tiered", Some("dev"), None)],
            ),
            (
                "felix-storage",
                "felix-storage",
                &[("felix-raft", Some("dev"), None)],
            ),
        ]);
        // In folder order.
        assert_eq!(
            violations,
            [
                upward("felix-bench", "felix-tiered", "dev-dependencies"),
                upward("felix-raft", "felix-tiered", "dev-dependencies"),
                upward("felix-storage", "felix-raft", "dev-dependencies"),
                upward("felix-tiered", "felix-cli", "dependencies"),
            ]
        );
    }

    #[test]
    fn check_unknown_felix_crates_are_reported() {
        let violations = checked(&[
            ("felix-wire", "felix-wire", &[]),
            (
                "cli",
                "felix-cli",
                &[("felix-wire", None, None), ("serde", None, None)],
            ),
        ]);
        assert_eq!(
            violations,
            [
                Violation::FolderName {
                    folder: "cli".into(),
                    package: "felix-cli".into()
                },
                Violation::UnplacedDependency {
                    krate: "felix-cli".into(),
                    dependency: "felix-wire".into(),
                    section: "dependencies".into()
                },
                Violation::Unplaced {
                    krate: "felix-wire".into()
                },
            ]
        );
    }
}
