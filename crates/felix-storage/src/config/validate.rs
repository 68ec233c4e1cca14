//! The range of every setting, checked once at open so that no value
//! silently does nothing (or spins a core, or fills a disk).

use std::fmt;
use std::time::Duration;

use felix_format::{RECORD_HEADER_LEN, SEGMENT_HEADER_LEN};

use super::{Durability, StoreConfig};

/// The smallest segment size: a segment header plus one record header, so
/// that a segment can hold a record with an empty payload.
pub const MIN_SEGMENT_SIZE_BYTES: u64 = (SEGMENT_HEADER_LEN + RECORD_HEADER_LEN) as u64;
/// The largest segment size: the largest file length a POSIX `off_t` can
/// name. The file system holding the shard may hold less; that is checked
/// against its size at open.
pub const MAX_SEGMENT_SIZE_BYTES: u64 = i64::MAX as u64;
/// The largest index spacing: beyond it an index holds little more than a
/// segment's first record, and reads scan up to this much to find one.
pub const MAX_INDEX_SPACING_BYTES: u64 = 1 << 30;
/// The smallest writeback threshold: one page.
pub const MIN_WRITEBACK_BYTES: u64 = 4096;
/// The shortest background interval (periodic sync, retention): a shorter
/// one keeps a core busy for little gain.
pub const MIN_INTERVAL: Duration = Duration::from_millis(1);
/// The longest background interval.
pub const MAX_INTERVAL: Duration = Duration::from_secs(24 * 3600);
/// The slowest background scrub: a page a second. A scrub reads a chunk
/// (1 MiB) at a time and sleeps between chunks to hold its rate, so any
/// rate down to this one holds on average.
pub const MIN_SCRUB_BYTES_PER_SECOND: u64 = 4096;
/// The most sync threads a store's pool may have: past a few per core they
/// only queue in the kernel.
pub const MAX_SYNC_THREADS: usize = 256;
/// The most appends whose completion may be pending on one shard.
pub const MAX_APPENDS_IN_FLIGHT: usize = 1 << 20;

/// A setting of [`StoreConfig`], as named in an error.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConfigField {
    /// [`StoreConfig::segment_size_bytes`].
    SegmentSizeBytes,
    /// [`StoreConfig::index_spacing_bytes`].
    IndexSpacingBytes,
    /// The interval of [`Durability::Periodic`].
    PeriodicInterval,
    /// [`StoreConfig::writeback_bytes`].
    WritebackBytes,
    /// [`Retention::max_bytes`](crate::Retention::max_bytes).
    RetentionMaxBytes,
    /// [`Retention::max_age`](crate::Retention::max_age).
    RetentionMaxAge,
    /// [`Retention::interval`](crate::Retention::interval).
    RetentionInterval,
    /// [`StoreConfig::scrub_bytes_per_second`].
    ScrubBytesPerSecond,
    /// [`StoreConfig::sync_threads`].
    SyncThreads,
    /// [`StoreConfig::sync_thread_keep_alive`].
    SyncThreadKeepAlive,
    /// [`StoreConfig::max_appends_in_flight`].
    MaxAppendsInFlight,
    /// [`StoreConfig::max_open_shards`].
    MaxOpenShards,
}

impl fmt::Display for ConfigField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::SegmentSizeBytes => "segment_size_bytes",
            Self::IndexSpacingBytes => "index_spacing_bytes",
            Self::PeriodicInterval => "durability Periodic interval",
            Self::WritebackBytes => "writeback_bytes",
            Self::RetentionMaxBytes => "retention.max_bytes",
            Self::RetentionMaxAge => "retention.max_age",
            Self::RetentionInterval => "retention.interval",
            Self::ScrubBytesPerSecond => "scrub_bytes_per_second",
            Self::SyncThreads => "sync_threads",
            Self::SyncThreadKeepAlive => "sync_thread_keep_alive",
            Self::MaxAppendsInFlight => "max_appends_in_flight",
            Self::MaxOpenShards => "max_open_shards",
        })
    }
}

/// A setting outside its range; see each field of [`StoreConfig`].
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A size (in bytes, or a count) outside its range.
    #[error("{field} = {value} is out of range: {}", bytes_range(*min, *max))]
    SizeOutOfRange {
        /// The setting.
        field: ConfigField,
        /// The value given.
        value: u64,
        /// The smallest allowed.
        min: u64,
        /// The largest allowed (`u64::MAX`: no maximum).
        max: u64,
    },
    /// A duration outside its range.
    #[error("{field} = {value:?} is out of range: allowed {min:?} to {max:?}")]
    DurationOutOfRange {
        /// The setting.
        field: ConfigField,
        /// The value given.
        value: Duration,
        /// The shortest allowed.
        min: Duration,
        /// The longest allowed (`Duration::MAX`: no maximum).
        max: Duration,
    },
    /// A count (threads, appends) outside its range.
    #[error("{field} = {value} is out of range: allowed {min} to {max}")]
    CountOutOfRange {
        /// The setting.
        field: ConfigField,
        /// The value given.
        value: usize,
        /// The smallest allowed.
        min: usize,
        /// The largest allowed.
        max: usize,
    },
    /// A segment larger than the file system that is to hold it.
    #[error(
        "segment_size_bytes = {value} is more than the file system holding the shard can store ({capacity} bytes)"
    )]
    SegmentLargerThanFileSystem {
        /// The value given.
        value: u64,
        /// The file system's size in bytes.
        capacity: u64,
    },
    /// A retention interval with no rule to apply.
    #[error(
        "retention.interval = {interval:?} is set, but neither retention.max_bytes nor retention.max_age is: a pass would never delete anything"
    )]
    RetentionIntervalWithoutRule {
        /// The interval given.
        interval: Duration,
    },
}

fn bytes_range(min: u64, max: u64) -> String {
    if max == u64::MAX {
        format!("allowed at least {min}")
    } else {
        format!("allowed {min} to {max}")
    }
}

fn size(field: ConfigField, value: u64, min: u64, max: u64) -> Result<(), ConfigError> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(ConfigError::SizeOutOfRange {
            field,
            value,
            min,
            max,
        })
    }
}

fn count(field: ConfigField, value: usize, min: usize, max: usize) -> Result<(), ConfigError> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(ConfigError::CountOutOfRange {
            field,
            value,
            min,
            max,
        })
    }
}

fn duration(
    field: ConfigField,
    value: Duration,
    min: Duration,
    max: Duration,
) -> Result<(), ConfigError> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(ConfigError::DurationOutOfRange {
            field,
            value,
            min,
            max,
        })
    }
}

impl StoreConfig {
    /// Checks every setting against its documented range; the first one
    /// out of range is the error. Opening a shard or store runs this (and
    /// also checks the segment size against the file system's size).
    ///
    /// ```
    /// use std::time::Duration;
    /// use felix_storage::{ConfigError, ConfigField, Durability, StoreConfig};
    ///
    /// let spin = StoreConfig {
    ///     durability: Durability::Periodic(Duration::ZERO),
    ///     ..StoreConfig::default()
    /// };
    /// assert!(matches!(
    ///     spin.validate(),
    ///     Err(ConfigError::DurationOutOfRange { field: ConfigField::PeriodicInterval, .. })
    /// ));
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        use ConfigField as F;
        size(
            F::SegmentSizeBytes,
            self.segment_size_bytes,
            MIN_SEGMENT_SIZE_BYTES,
            MAX_SEGMENT_SIZE_BYTES,
        )?;
        size(
            F::IndexSpacingBytes,
            self.index_spacing_bytes,
            1,
            MAX_INDEX_SPACING_BYTES,
        )?;
        if let Durability::Periodic(interval) = self.durability {
            duration(F::PeriodicInterval, interval, MIN_INTERVAL, MAX_INTERVAL)?;
        }
        if let Some(bytes) = self.writeback_bytes {
            size(F::WritebackBytes, bytes, MIN_WRITEBACK_BYTES, u64::MAX)?;
        }
        size(F::MaxOpenShards, self.max_open_shards, 1, u64::MAX)?;
        if let Some(rate) = self.scrub_bytes_per_second {
            size(
                F::ScrubBytesPerSecond,
                rate,
                MIN_SCRUB_BYTES_PER_SECOND,
                u64::MAX,
            )?;
        }
        let retention = &self.retention;
        if let Some(bytes) = retention.max_bytes {
            size(F::RetentionMaxBytes, bytes, 1, u64::MAX)?;
        }
        if let Some(age) = retention.max_age {
            duration(
                F::RetentionMaxAge,
                age,
                Duration::from_micros(1),
                Duration::MAX,
            )?;
        }
        if let Some(interval) = retention.interval {
            duration(F::RetentionInterval, interval, MIN_INTERVAL, MAX_INTERVAL)?;
            if retention.max_bytes.is_none() && retention.max_age.is_none() {
                return Err(ConfigError::RetentionIntervalWithoutRule { interval });
            }
        }
        count(F::SyncThreads, self.sync_threads, 1, MAX_SYNC_THREADS)?;
        duration(
            F::SyncThreadKeepAlive,
            self.sync_thread_keep_alive,
            MIN_INTERVAL,
            MAX_INTERVAL,
        )?;
        count(
            F::MaxAppendsInFlight,
            self.max_appends_in_flight,
            1,
            MAX_APPENDS_IN_FLIGHT,
        )?;
        Ok(())
    }

    /// [`Self::validate`], and the segment size against the size of the
    /// file system that is to hold it (`None`: unknown, not checked).
    pub(crate) fn validate_for(&self, capacity: Option<u64>) -> Result<(), ConfigError> {
        self.validate()?;
        match capacity {
            Some(capacity) if self.segment_size_bytes > capacity => {
                Err(ConfigError::SegmentLargerThanFileSystem {
                    value: self.segment_size_bytes,
                    capacity,
                })
            }
            _ => Ok(()),
        }
    }
}
