//! How a tiered shard offloads, retains and caches.

use std::time::Duration;

/// Limits a retention applies, locally or remotely: whole segments from the
/// oldest, by size or by the age of their newest record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TierRetention {
    /// Keep at most this many bytes of segments. Default `None`: no limit.
    pub max_bytes: Option<u64>,
    /// Keep segments whose newest record is younger than this. Default
    /// `None`: no limit.
    pub max_age: Option<Duration>,
}

/// A tiered shard's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TierConfig {
    /// The prefix of every object in the store (`{prefix}/{dir_name}/…`).
    /// Default `"felix"`. Must be non-empty, without leading or trailing
    /// `/`.
    pub prefix: String,
    /// Local retention: sealed segments it would delete are offloaded, then
    /// deleted locally. The shard's own `StoreConfig::retention` must be
    /// off (this layer makes the decision). Default: no limit (nothing is
    /// offloaded until a limit is set).
    pub local: TierRetention,
    /// Remote retention, normally larger than the local one. Default: no
    /// limit (remote segments are kept forever).
    pub remote: TierRetention,
    /// Bytes of fetched remote data the read cache keeps: chunks of
    /// segments, and each read segment's index, kept parsed (16 bytes an
    /// entry: about 8 KiB per MiB of segment at the default 2 KiB index
    /// spacing) so a warm read neither fetches nor parses it again. The least
    /// recently used of either go first. Default 64 MiB; at least one chunk
    /// ([`TierConfig::chunk_bytes`]).
    pub cache_bytes: u64,
    /// Bytes a remote read fetches at once and the cache keeps as one
    /// entry. Default 1 MiB; 4 KiB to 64 MiB.
    pub chunk_bytes: u64,
    /// Part size of multipart uploads; a file up to this size is one put.
    /// Default 8 MiB; 5 MiB (S3's smallest part) to 1 GiB.
    pub part_bytes: u64,
    /// Parts of one upload in flight at once. Default 4; 1 to 64.
    pub upload_concurrency: usize,
    /// Segments an offload uploads at once (each its `.log`, then its
    /// indexes). Many small segments are sent in about the time of the
    /// slowest of each group rather than one request after another; the
    /// manifest listing them is still written once all of them are stored,
    /// and nothing is deleted locally before it is. Requests in flight stay
    /// at most this many puts, or this many times
    /// [`TierConfig::upload_concurrency`] parts for segments above
    /// [`TierConfig::part_bytes`]. Default 4; 1 (one segment after another)
    /// to 64.
    pub offload_concurrency: usize,
}

impl Default for TierConfig {
    fn default() -> Self {
        TierConfig {
            prefix: "felix".to_owned(),
            local: TierRetention::default(),
            remote: TierRetention::default(),
            cache_bytes: 64 << 20,
            chunk_bytes: 1 << 20,
            part_bytes: 8 << 20,
            upload_concurrency: 4,
            offload_concurrency: 4,
        }
    }
}

/// A configuration value out of its range.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TierConfigError {
    /// The prefix is empty or starts or ends with `/`.
    #[error("tier prefix {prefix:?} is empty or starts or ends with '/'")]
    Prefix {
        /// The prefix given.
        prefix: String,
    },
    /// A numeric field is outside its range.
    #[error("tier config {field} is {value}, outside {min}..={max}")]
    Range {
        /// The field.
        field: &'static str,
        /// The value given.
        value: u64,
        /// Smallest allowed.
        min: u64,
        /// Largest allowed.
        max: u64,
    },
}

impl TierConfig {
    /// Checks every field against its documented range.
    pub fn validate(&self) -> Result<(), TierConfigError> {
        if self.prefix.is_empty() || self.prefix.starts_with('/') || self.prefix.ends_with('/') {
            return Err(TierConfigError::Prefix {
                prefix: self.prefix.clone(),
            });
        }
        let check = |field, value: u64, min, max| {
            if (min..=max).contains(&value) {
                Ok(())
            } else {
                Err(TierConfigError::Range {
                    field,
                    value,
                    min,
                    max,
                })
            }
        };
        check("chunk_bytes", self.chunk_bytes, 4 << 10, 64 << 20)?;
        check("cache_bytes", self.cache_bytes, self.chunk_bytes, u64::MAX)?;
        check("part_bytes", self.part_bytes, 5 << 20, 1 << 30)?;
        check("upload_concurrency", self.upload_concurrency as u64, 1, 64)?;
        check(
            "offload_concurrency",
            self.offload_concurrency as u64,
            1,
            64,
        )?;
        Ok(())
    }
}
