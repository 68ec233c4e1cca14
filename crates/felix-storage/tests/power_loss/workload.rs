//! The sweep's random workloads: the operations and the scales they run
//! at (the generator is the plans' `Rng`, shared by every sweep).

use super::plans::Rng;

#[derive(Debug, Clone, Copy)]
pub(crate) enum Op {
    Append {
        count: u64,
        len: usize,
    },
    Sync,
    Truncate {
        back: u64,
    },
    Retention {
        max_bytes: u64,
    },
    Generation,
    Reopen,
    /// `Shard::close` (a clean-shutdown file), then an append on the
    /// closed handle, which must be refused and write nothing, then a
    /// reopen.
    Close,
    /// `Shard::close`, then reopen trusting the record.
    CloseReopen,
    /// `Shard::delete_records_before` this many records below the readable
    /// end (the log-start file).
    DeleteBefore {
        back: u64,
    },
    /// `Shard::reset_to` this far past the next offset.
    Reset {
        ahead: u64,
    },
}

/// The sizes a workload works at.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scale {
    pub(crate) segment_size_bytes: u64,
    /// A batch holds up to this many records with payloads below
    /// `small_payload` bytes...
    pub(crate) max_batch: u64,
    pub(crate) small_payload: u64,
    /// ...or, one batch in `large_one_in`, up to three below this many.
    pub(crate) large_payload: u64,
    pub(crate) large_one_in: u64,
    /// Retention budgets are drawn from `retention.0 + below(retention.1)`.
    pub(crate) retention: (u64, u64),
}

/// Segments of 300 bytes: every write lies in one 4 KiB block, so the
/// sweep is about operation order, tears and zero-filled writes.
pub(crate) const SMALL: Scale = Scale {
    segment_size_bytes: 300,
    max_batch: 3,
    small_payload: 60,
    large_payload: 60,
    large_one_in: 1,
    retention: (300, 600),
};

/// Segments of 24 KiB with batches of up to 40 records of up to 150 bytes,
/// or up to three of up to 5,000: writes span several 4 KiB blocks, so
/// block tears and blocks persisted out of order meet headers (whole or
/// cut by a block boundary), payloads and block boundaries in every mix.
pub(crate) const BLOCKS: Scale = Scale {
    segment_size_bytes: 24 * 1024,
    max_batch: 40,
    small_payload: 150,
    large_payload: 5000,
    large_one_in: 3,
    retention: (24 * 1024, 48 * 1024),
};

pub(crate) fn workload(seed: u64, len: usize, scale: Scale) -> Vec<Op> {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    (0..len)
        .map(|_| match rng.below(15) {
            0..=5 => {
                // (`SMALL` draws no extra number, so its workloads are the
                // ones the sweep always ran.)
                let large = scale.large_one_in > 1 && rng.below(scale.large_one_in) == 0;
                let (max_count, max_len) = if large {
                    (3, scale.large_payload)
                } else {
                    (scale.max_batch, scale.small_payload)
                };
                Op::Append {
                    count: 1 + rng.below(max_count),
                    len: rng.below(max_len) as usize,
                }
            }
            6 => Op::Sync,
            7 => Op::Truncate { back: rng.below(4) },
            8 => Op::Retention {
                max_bytes: scale.retention.0 + rng.below(scale.retention.1),
            },
            9 => Op::Generation,
            10 => Op::Reopen,
            11 => Op::Close,
            12 => Op::CloseReopen,
            13 => Op::DeleteBefore { back: rng.below(4) },
            _ => Op::Reset {
                ahead: rng.below(3),
            },
        })
        .collect()
}
