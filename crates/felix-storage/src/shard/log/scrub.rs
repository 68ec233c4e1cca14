//! Scrubbing the sealed segments: every record checksum read, every damaged
//! record reported, nothing modified and nothing blocked.
//!
//! An open checks sealed segments' headers, indexes and tails, not their
//! payloads, so rot in the middle of a sealed segment stays hidden until a
//! reader (often a replica catching up) needs the record. A scrub reads each
//! sealed segment with felix-recovery's [`scrub_segment`] — the one record
//! walk at full depth, going on past each damaged payload — through a
//! descriptor of its own, with no lock held while it reads: the writer
//! lock is never taken and the readers' view only long enough to copy the
//! list of sealed segments. A pacing callback sleeps between chunks to hold
//! a rate (the background scrub's, `background_scrub.rs`) and may stop the scrub.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;

use felix_io::OpenMode;
use felix_recovery::{ScrubDamage, SegmentScrub, scrub_segment};
use felix_segment::{SegmentError, SegmentFile};

use super::{Log, Sealed};
use crate::error::Result;
use crate::stats::Counters;

/// What a scrub of a shard's sealed segments found
/// ([`Shard::scrub`](crate::Shard::scrub)).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ScrubReport {
    /// Each sealed segment scrubbed, oldest first. A segment retention
    /// deleted (or a replacement swapped) while the scrub ran is left out.
    pub segments: Vec<SegmentScrub>,
    /// Whether the scrub went through every sealed segment; `false` when it
    /// was stopped first (a background scrub at close).
    pub finished: bool,
}

impl ScrubReport {
    /// Every damaged record found, oldest segment first, each with its
    /// [`CorruptionSite`](crate::recovery::CorruptionSite).
    pub fn damage(&self) -> impl Iterator<Item = &ScrubDamage> {
        self.segments.iter().flat_map(|s| s.damage.iter())
    }

    /// Bytes of records read and checked.
    pub fn bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.bytes).sum()
    }

    /// Whether no damage was found.
    pub fn is_clean(&self) -> bool {
        self.damage().next().is_none()
    }
}

impl Log {
    /// Scrubs every sealed segment there is when it begins, calling `pace`
    /// with the bytes checked so far (across segments) after every chunk.
    pub(crate) fn scrub(
        &self,
        pace: &mut dyn FnMut(u64) -> ControlFlow<()>,
    ) -> Result<ScrubReport> {
        let sealed = self.view().sealed.clone();
        let mut report = ScrubReport {
            segments: Vec::with_capacity(sealed.len()),
            finished: true,
        };
        let mut before = 0u64;
        for segment in &sealed {
            self.check_open()?;
            let mut paced = |bytes: u64| pace(before + bytes);
            let Some(scrub) = self.scrub_sealed(segment, &mut paced)? else {
                continue;
            };
            before += scrub.bytes;
            Counters::add(&self.shared.counters.scrubbed_bytes, scrub.bytes);
            Counters::add(
                &self.shared.counters.scrub_damage,
                scrub.damage.len() as u64,
            );
            self.shared
                .metrics
                .scrubbed(scrub.bytes, scrub.damage.len());
            for damage in &scrub.damage {
                tracing::error!(shard = %self.shared.label, site = %damage.site, offset = damage.offset, kind = %damage.kind, "scrub found a damaged record in a sealed segment");
            }
            let finished = scrub.finished;
            report.segments.push(scrub);
            if !finished {
                report.finished = false;
                break;
            }
        }
        Ok(report)
    }

    /// Scrubs one sealed segment through a descriptor of its own; `None`
    /// when the segment is gone (retention deleted it) or was replaced
    /// since the scrub listed it.
    fn scrub_sealed(
        &self,
        segment: &Sealed,
        pace: &mut dyn FnMut(u64) -> ControlFlow<()>,
    ) -> Result<Option<SegmentScrub>> {
        let opened = SegmentFile::open(
            &self.shared.fs,
            &self.shared.dir,
            segment.extent.id,
            Arc::clone(&self.shared.label),
            OpenMode::Read,
        );
        // A replacement marks the segment before its rename: a scrub that
        // opened the file and then sees no mark opened the old one, which
        // `segment.extent` describes.
        if segment.replaced.load(SeqCst) {
            return Ok(None);
        }
        let (file, file_len) = match opened {
            Ok(opened) => opened,
            Err(SegmentError::Io(err)) if err.kind() == std::io::ErrorKind::NotFound => {
                return Ok(None);
            }
            Err(SegmentError::Corrupt { site, kind }) => {
                // Header damage: nothing after it can be walked.
                return Ok(Some(SegmentScrub {
                    segment: segment.extent.id,
                    bytes: 0,
                    intact_records: 0,
                    next_offset: segment.extent.base_offset,
                    damage: vec![ScrubDamage {
                        kind,
                        offset: segment.extent.base_offset,
                        site,
                    }],
                    unchecked_from: Some(site_start()),
                    finished: true,
                }));
            }
            Err(other) => return Err(self.shared.segment_error(other)),
        };
        scrub_segment(&file, file_len, Some(segment.extent), pace)
            .map(Some)
            .map_err(|e| self.shared.segment_error(e.into()))
    }
}

/// Where a segment's header begins.
fn site_start() -> u64 {
    0
}
