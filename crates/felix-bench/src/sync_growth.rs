//! How the write+fdatasync limit's file grows (`--growth`): what decides
//! whether each `fdatasync` also commits file-system metadata.
//!
//! An `fdatasync` after a write that moved the file's size must commit
//! the new size (on ext4, a journal commit with its own flushes); one
//! after a write inside the size need not, unless the write turned
//! allocated-but-unwritten blocks into written ones. The modes:
//!
//! - `grow` (the default, and the limit every row compares with): each
//!   write lands past the end, as felix's appends do;
//! - `keep-size`: the whole file reserved first with
//!   `fallocate(FALLOC_FL_KEEP_SIZE)`, as felix's preallocation does; the
//!   writes still move the size;
//! - `extend`: the file extended ahead with `fallocate` mode 0 in 2 MiB
//!   steps, as raft-engine grows its log files; writes land inside the
//!   size, in blocks still marked unwritten;
//! - `zeroed`: the whole file written with zeros and synced first; writes
//!   overwrite written blocks inside the size.

use std::fs::File;

use rustix::fs::{FallocateFlags, fallocate};

use crate::args::Args;
use crate::felix::Result;

/// raft-engine's step (`FILE_ALLOCATE_SIZE`, 2 MiB).
const EXTEND_STEP: u64 = 2 << 20;

/// How the file grows; see the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Growth {
    /// Every write past the end.
    Grow,
    /// Reserved up front, the size moved by every write.
    KeepSize,
    /// The size moved ahead in 2 MiB steps.
    Extend,
    /// Written with zeros and synced up front.
    Zeroed,
}

impl Growth {
    /// The run's `--growth` (`grow` when not given).
    pub fn from_args(args: &Args) -> Result<Self> {
        match args.text("growth", "grow").as_str() {
            "grow" => Ok(Self::Grow),
            "keep-size" => Ok(Self::KeepSize),
            "extend" => Ok(Self::Extend),
            "zeroed" => Ok(Self::Zeroed),
            other => Err(format!(
                "unknown --growth {other:?} (grow, keep-size, extend, zeroed)"
            )),
        }
    }

    /// The name `--growth` takes.
    pub fn name(self) -> &'static str {
        match self {
            Self::Grow => "grow",
            Self::KeepSize => "keep-size",
            Self::Extend => "extend",
            Self::Zeroed => "zeroed",
        }
    }

    /// Readies the empty `file` for `total` bytes of writes, before any is
    /// timed; returns what [`Grower::ahead`] needs.
    pub fn start(self, file: &File, total: u64) -> Result<Grower> {
        let err = |e: rustix::io::Errno| e.to_string();
        match self {
            Self::Grow | Self::Extend => {}
            Self::KeepSize => fallocate(file, FallocateFlags::KEEP_SIZE, 0, total).map_err(err)?,
            Self::Zeroed => {
                use std::os::unix::fs::FileExt;
                let zeros = vec![0u8; 1 << 20];
                let mut at = 0;
                while at < total {
                    let n = zeros.len().min((total - at) as usize);
                    file.write_all_at(&zeros[..n], at)
                        .map_err(|e| e.to_string())?;
                    at += n as u64;
                }
                file.sync_all().map_err(|e| e.to_string())?;
            }
        }
        Ok(Grower {
            growth: self,
            capacity: 0,
        })
    }
}

/// A file's growth while it is written.
#[derive(Debug)]
pub struct Grower {
    growth: Growth,
    /// For `extend`: the size `fallocate` has moved the file to.
    capacity: u64,
}

impl Grower {
    /// Called before a write ending at `end`: under `extend`, moves the
    /// size another step ahead when the write would pass it (inside the
    /// timed loop, as raft-engine does it on its write path).
    pub fn ahead(&mut self, file: &File, end: u64) -> Result<()> {
        if self.growth == Growth::Extend && end > self.capacity {
            let len = (end - self.capacity).div_ceil(EXTEND_STEP) * EXTEND_STEP;
            fallocate(file, FallocateFlags::empty(), self.capacity, len)
                .map_err(|e| e.to_string())?;
            self.capacity += len;
        }
        Ok(())
    }
}
