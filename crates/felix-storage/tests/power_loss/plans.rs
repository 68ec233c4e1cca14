//! The crash plans a sweep tries after each power cut.

use std::collections::BTreeSet;

use felix_io::sim::{BLOCK_BYTES, CrashPlan, PendingOp, SimFs, Tear};

/// A small deterministic generator (xorshift64*), so every failure names a
/// seed that reproduces it.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Subsets are enumerated in full up to this many pending operations.
const EXHAUSTIVE_PENDING: usize = 6;
/// Plans sampled when more operations are pending.
const SAMPLED_PLANS: usize = 48;
/// Masks of a write's blocks tried when it spans more blocks than this.
const SAMPLED_MASKS: usize = 14;

/// The crash plans to try for `pending` operations: every subset when few,
/// a seeded sample otherwise; each with the last kept write whole, torn
/// after its first byte, torn in the middle, or left as zeros; and each
/// kept write that spans 4 KiB blocks torn at every block boundary inside
/// it and persisted in every proper subset of its blocks (a seeded sample
/// past four blocks), the file's size ahead of the data — as far as a file
/// system that writes pages back whole could leave that disk.
pub(crate) fn plans(fs: &SimFs, rng: &mut Rng) -> Vec<CrashPlan> {
    let pending = fs.pending();
    let n = pending.len();
    let subsets: Vec<Vec<bool>> = if n <= EXHAUSTIVE_PENDING {
        (0..1u64 << n)
            .map(|bits| (0..n).map(|i| bits >> i & 1 == 1).collect())
            .collect()
    } else {
        let mut s = vec![vec![false; n], vec![true; n]];
        s.extend((0..SAMPLED_PLANS).map(|_| (0..n).map(|_| rng.below(2) == 1).collect()));
        s
    };
    let mut out = Vec::new();
    for keep in subsets {
        let last_write = (0..n)
            .rev()
            .find(|&i| keep[i] && pending[i].kind == "write");
        out.push(CrashPlan {
            keep: keep.clone(),
            tear: None,
        });
        if let Some(i) = last_write {
            let len = pending[i].len;
            for tear in [Tear::Prefix(1), Tear::Prefix(len / 2), Tear::Zeros] {
                out.push(CrashPlan {
                    keep: keep.clone(),
                    tear: Some((i, tear)),
                });
            }
        }
        for i in (0..n).filter(|&i| keep[i] && pending[i].blocks() >= 2) {
            let write = &pending[i];
            let blocks = write.blocks().min(63);
            let all = (1u64 << blocks) - 1;
            // A later kept write to the same file persisted every block it
            // touches, with whatever this write had put there: those blocks
            // of this write persisted too (pages are written back whole).
            let later: Vec<&PendingOp> = (i + 1..n)
                .filter(|&j| keep[j] && pending[j].kind == "write" && pending[j].path == write.path)
                .map(|j| &pending[j])
                .collect();
            let first = write.position / BLOCK_BYTES;
            let forced = (0..blocks)
                .filter(|&b| later.iter().any(|w| touches(w, first + u64::from(b))))
                .fold(0u64, |mask, b| mask | 1 << b);
            let masks: BTreeSet<u64> = if blocks <= 4 {
                (1..all).map(|m| m | forced).collect()
            } else {
                (0..SAMPLED_MASKS)
                    .map(|_| (1 + rng.below(all - 1)) | forced)
                    .collect()
            };
            // Torn at a block boundary, the size ends there: only when no
            // later kept write extended the file past it.
            let prefixes = if later.is_empty() {
                write.block_boundaries()
            } else {
                Vec::new()
            };
            let prefix_mask =
                |n: usize| (1u64 << ((write.position % BLOCK_BYTES + n as u64) / BLOCK_BYTES)) - 1;
            let tears = prefixes
                .into_iter()
                .map(|n| (prefix_mask(n), Tear::Prefix(n)))
                .chain(
                    masks
                        .into_iter()
                        .filter(|&m| m != all)
                        .map(|m| (m, Tear::Blocks(m))),
                )
                .filter(|&(mask, _)| page_consistent(&pending, &keep, i, mask))
                .map(|(_, tear)| tear);
            for tear in tears {
                out.push(CrashPlan {
                    keep: keep.clone(),
                    tear: Some((i, tear)),
                });
            }
        }
    }
    out
}

/// Whether persisting only the `mask` blocks of write `i`, with the
/// writes `keep` names persisted whole and the others lost, is a disk a
/// file system that writes pages back whole could leave: a page on disk is
/// its content at some moment, so the writes whose bytes in it persisted
/// are always the earliest of those that touch it.
fn page_consistent(pending: &[PendingOp], keep: &[bool], i: usize, mask: u64) -> bool {
    let torn = &pending[i];
    let first = torn.position / BLOCK_BYTES;
    (0..torn.blocks()).all(|b| {
        let block = first + u64::from(b);
        let touching = pending
            .iter()
            .enumerate()
            .filter(|(_, w)| w.kind == "write" && w.path == torn.path && touches(w, block));
        let persisted = touching.map(|(j, _)| keep[j] && (j != i || mask >> b & 1 == 1));
        // Persisted ones first, then lost ones.
        let mut seen_lost = false;
        persisted.into_iter().all(|p| {
            let ok = !(p && seen_lost);
            seen_lost |= !p;
            ok
        })
    })
}

/// Whether write `w` puts bytes in 4 KiB block number `block`.
fn touches(w: &PendingOp, block: u64) -> bool {
    w.len > 0
        && (w.position / BLOCK_BYTES..=(w.position + w.len as u64 - 1) / BLOCK_BYTES)
            .contains(&block)
}
