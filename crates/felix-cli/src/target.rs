//! What a PATH argument names: a shard directory, a root of shard
//! directories, or one segment (or index) file.
//!
//! A directory is a shard directory when it holds anything named like a
//! segment, an index, an `epochs` or a `key` file; otherwise its
//! subdirectories that are shard directories make it a root. A tombstone
//! (`<shard dir>.deleting`, a deleted shard whose removal a crash cut
//! short) is no shard of its root. Names decide, never contents, so
//! resolving a path reads no file and can be done on a shard in use. A
//! subdirectory of a root that cannot be listed counts as a shard, so that
//! it is reported as unreadable rather than passed over.

use std::path::{Path, PathBuf};

use felix_format::{FileKind, ShardFileName, parse_file_name, parse_tombstone_name};

use crate::error::CliError;

/// One shard directory to work on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShardDir {
    /// The directory as the user named it (or as joined under a root).
    pub(crate) dir: PathBuf,
    /// Its file name: the shard's label in reports.
    pub(crate) name: String,
}

/// What a PATH turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Resolved {
    /// A shard directory.
    Shard(ShardDir),
    /// A root holding these shard directories, sorted by name.
    Root(Vec<ShardDir>),
    /// One file of a shard: its directory, its id and its kind.
    File {
        /// The shard directory holding it.
        shard: ShardDir,
        /// The id in its name.
        id: u64,
        /// Segment or index.
        kind: FileKind,
    },
}

impl Resolved {
    /// The shard directories to work on, in order.
    pub(crate) fn shards(&self) -> Vec<ShardDir> {
        match self {
            Self::Shard(shard) | Self::File { shard, .. } => vec![shard.clone()],
            Self::Root(shards) => shards.clone(),
        }
    }
}

/// Resolves `path`, failing (exit 2) when it is none of the three.
pub(crate) fn resolve(path: &Path) -> Result<Resolved, CliError> {
    let meta = std::fs::metadata(path).map_err(|e| CliError::io("open", path, e))?;
    if !meta.is_file() && !meta.is_dir() {
        // A FIFO or device is named as what it is, and never opened.
        let what = felix_io::NotRegularFile {
            file_type: meta.file_type().into(),
            via_symlink: std::fs::symlink_metadata(path).is_ok_and(|m| m.is_symlink()),
        };
        return Err(CliError::Usage(format!(
            "{} is {what}: neither a segment file nor a shard directory; it was not opened",
            path.display()
        )));
    }
    if meta.is_file() {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let Some((id, kind)) = name.as_deref().and_then(parse_file_name) else {
            return Err(CliError::Usage(format!(
                "{} is not named like a segment (<20 digits>.log) or an index (<20 digits>.index)",
                path.display()
            )));
        };
        let dir = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ => PathBuf::from("."),
        };
        return Ok(Resolved::File {
            shard: shard_dir(dir),
            id,
            kind,
        });
    }
    if is_shard_dir(path)? {
        return Ok(Resolved::Shard(shard_dir(path.to_path_buf())));
    }
    let mut shards = Vec::new();
    for entry in read_dir(path)? {
        let entry = entry.map_err(|e| CliError::io("read directory", path, e))?;
        let child = entry.path();
        // The entry's own type first: it needs no system call on the path,
        // which may be one the process cannot reach. Symbolic links are
        // followed, as a shell would.
        let is_dir = match entry.file_type() {
            Ok(kind) if kind.is_symlink() => child.is_dir(),
            Ok(kind) => kind.is_dir(),
            Err(_) => true,
        };
        // A subdirectory that cannot be listed may be a shard: it is kept,
        // so the command reports it as unreadable instead of skipping it
        // silently or giving up on the whole root.
        // A tombstone (a deleted shard whose removal a crash cut short) is
        // not a shard: the next open of the store removes it.
        let tombstone = entry
            .file_name()
            .to_str()
            .and_then(parse_tombstone_name)
            .is_some();
        if is_dir && !tombstone && is_shard_dir(&child).unwrap_or(true) {
            shards.push(shard_dir(child));
        }
    }
    if shards.is_empty() {
        return Err(CliError::Usage(format!(
            "{} holds no segment files: it is neither a shard directory nor a root of shard directories",
            path.display()
        )));
    }
    shards.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Resolved::Root(shards))
}

/// A [`ShardDir`] for `dir`, labelled with its file name (resolved through
/// the file system for `.` and `..`).
pub(crate) fn shard_dir(dir: PathBuf) -> ShardDir {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .or_else(|| {
            std::fs::canonicalize(&dir)
                .ok()
                .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        })
        .unwrap_or_else(|| dir.display().to_string());
    ShardDir { dir, name }
}

/// Segment ids in `dir`, ascending by number (not by name: directory order
/// is filesystem-defined).
pub(crate) fn segment_ids(dir: &Path) -> Result<Vec<u64>, CliError> {
    let mut ids = Vec::new();
    for entry in read_dir(dir)? {
        let entry = entry.map_err(|e| CliError::io("read directory", dir, e))?;
        if let Some((id, FileKind::Segment)) = parse_file_name(&entry.file_name().to_string_lossy())
        {
            ids.push(id);
        }
    }
    ids.sort_unstable();
    Ok(ids)
}

fn is_shard_dir(dir: &Path) -> Result<bool, CliError> {
    for entry in read_dir(dir)? {
        let entry = entry.map_err(|e| CliError::io("read directory", dir, e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if matches!(
            ShardFileName::parse(&name),
            ShardFileName::Segment(_)
                | ShardFileName::Index(_)
                | ShardFileName::Epochs
                | ShardFileName::Key
        ) {
            return Ok(true);
        }
    }
    Ok(false)
}

fn read_dir(dir: &Path) -> Result<std::fs::ReadDir, CliError> {
    std::fs::read_dir(dir).map_err(|e| CliError::io("read directory", dir, e))
}
