//! Dumps of felix storage's additions to the format: the time index and
//! the log-start file.

use felix_format::log_start::{FLAG_OFFLOADED, LOG_START_FILE_LEN, MovedBy, decode_log_start};
use felix_format::raft_snapshot::{RAFT_SNAPSHOT_HEADER_LEN, decode_raft_snapshot};
use felix_format::raft_state::{RAFT_STATE_FILE_LEN, RAFT_STATE_V1_FILE_LEN, decode_raft_state};
use felix_format::time_index::{TIME_INDEX_ENTRY_LEN, TIME_INDEX_HEADER_LEN, decode_time_index};

use super::{Dump, be_u16, be_u32, crc_note, entries, flags, magic, number, plain};
use crate::crc::{crc32, crc32_pair};

pub(super) fn time_index(d: &mut Dump<'_>) {
    let covered = d
        .bytes
        .get(..36)
        .zip(d.bytes.get(TIME_INDEX_HEADER_LEN..))
        .map(|(head, body)| crc32_pair(head, body));
    let dumped = (|| {
        d.blank();
        d.note(format!("time index header ({TIME_INDEX_HEADER_LEN} bytes)"));
        d.field(4, "magic", |raw| magic(raw, b"FLTI"))?;
        d.field(2, "version", plain(1))?;
        d.field(2, "flags", flags)?;
        d.field(8, "base_offset", number)?;
        d.field(8, "next_offset", number)?;
        d.field(8, "segment_len", number)?;
        d.field(4, "count", number)?;
        d.field(4, "crc", |raw| {
            crc_note(
                be_u32(raw),
                covered.unwrap_or_default(),
                "bytes 0..36 and the entries",
            )
        })?;
        entries(d, TIME_INDEX_ENTRY_LEN, "timestamp_micros", "offset")
    })();
    if dumped.is_none() {
        d.note("the file ends inside the field above");
    }
    d.blank();
    match decode_time_index(d.bytes) {
        Ok(view) => d.note(format!(
            "decode_time_index: ok, {} entries, largest timestamp {:?}",
            view.len(),
            view.max_timestamp_micros()
        )),
        Err(err) => d.note(format!("decode_time_index: {}: {err}", err.name())),
    }
}

/// The log-start file's flags: bit 0 says an offload moved the start;
/// any other bit is unexpected.
fn log_start_flags(raw: &[u8]) -> String {
    match be_u16(raw) {
        0 => "0x0000".into(),
        FLAG_OFFLOADED => "0x0001 (bit 0: an offload moved the start)".into(),
        found => format!("{found:#06X} (expected 0x0000 or 0x0001)"),
    }
}

pub(super) fn log_start(d: &mut Dump<'_>) {
    let covered = d.bytes.get(..24).map(crc32);
    let dumped = (|| {
        d.blank();
        d.note(format!("log-start file ({LOG_START_FILE_LEN} bytes)"));
        d.field(4, "magic", |raw| magic(raw, b"FLLS"))?;
        d.field(2, "version", plain(1))?;
        d.field(2, "flags", log_start_flags)?;
        d.field(8, "start_offset", number)?;
        d.field(8, "first_segment_id", number)?;
        d.field(4, "crc", |raw| {
            crc_note(be_u32(raw), covered.unwrap_or_default(), "bytes 0..24")
        })?;
        if !d.rest().is_empty() {
            let extra = d.rest().len();
            d.rows(extra, "trailing");
        }
        Some(())
    })();
    if dumped.is_none() {
        d.note("the file ends inside the field above");
    }
    d.blank();
    match decode_log_start(d.bytes) {
        Ok(start) => d.note(format!(
            "decode_log_start: ok, start_offset {}, first_segment_id {}{}",
            start.start_offset,
            start.first_segment_id,
            match start.moved_by {
                MovedBy::Deletion => "",
                MovedBy::Offload => ", moved by an offload",
            }
        )),
        Err(err) => d.note(format!("decode_log_start: {}: {err}", err.name())),
    }
}

/// A tiered shard's remote manifest (`manifest/{seq:020}` in the object
/// store): header, key, start, count, then one 88-byte entry per segment.
pub(super) fn tier_manifest(d: &mut Dump<'_>) {
    use felix_format::tier_manifest::{MANIFEST_ENTRY_LEN, MANIFEST_HEADER_LEN, decode_manifest};
    let covered = d
        .bytes
        .get(..20)
        .zip(d.bytes.get(MANIFEST_HEADER_LEN..))
        .map(|(head, body)| crc32_pair(head, body));
    let dumped = (|| {
        d.blank();
        d.note(format!("manifest header ({MANIFEST_HEADER_LEN} bytes)"));
        d.field(4, "magic", |raw| magic(raw, b"FLTM"))?;
        d.field(2, "version", plain(1))?;
        d.field(2, "flags", flags)?;
        d.field(8, "seq", number)?;
        d.field(4, "body_len", number)?;
        d.field(4, "crc", |raw| {
            crc_note(
                be_u32(raw),
                covered.unwrap_or_default(),
                "bytes 0..20 and the body",
            )
        })?;
        let key_len = d.rest().get(..4).map(be_u32)? as usize;
        d.field(4, "key_len", number)?;
        let key_rows = key_len.min(d.rest().len());
        d.rows(key_rows, "key (the key file's encoding)");
        d.field(8, "start_offset", number)?;
        d.field(4, "count", number)?;
        let mut i = 0;
        while d.rest().len() >= MANIFEST_ENTRY_LEN {
            d.note(format!("entry {i}"));
            for name in [
                "id",
                "base_offset",
                "next_offset",
                "len",
                "index_len",
                "time_index_len",
                "max_timestamp_micros",
                "upload",
            ] {
                d.field(8, name, number)?;
            }
            for name in ["segment_crc", "index_crc", "time_index_crc"] {
                d.field(4, name, |raw| format!("{:#010x}", be_u32(raw)))?;
            }
            d.rows(12, "reserved");
            i += 1;
        }
        if !d.rest().is_empty() {
            let extra = d.rest().len();
            d.rows(extra, "trailing");
        }
        Some(())
    })();
    if dumped.is_none() {
        d.note("the object ends inside the field above");
    }
    d.blank();
    match decode_manifest(d.bytes) {
        Ok(view) => d.note(format!(
            "decode_manifest: ok, seq {}, start_offset {}, {} segments",
            view.seq,
            view.start_offset,
            view.len()
        )),
        Err(err) => d.note(format!("decode_manifest: {}: {err}", err.name())),
    }
}

pub(super) fn raft_state(d: &mut Dump<'_>) {
    // A 44-byte file is version 1 (felix-raft on openraft 0.9); anything
    // else is dumped as version 2, the layout written now.
    let v1 = d.bytes.len() == RAFT_STATE_V1_FILE_LEN;
    let (len, crc_end) = if v1 {
        (RAFT_STATE_V1_FILE_LEN, 40)
    } else {
        (RAFT_STATE_FILE_LEN, 60)
    };
    let covered = d.bytes.get(..crc_end).map(crc32);
    let dumped = (|| {
        d.blank();
        d.note(format!(
            "raft-state file, version {} ({len} bytes)",
            if v1 { 1 } else { 2 }
        ));
        d.field(4, "magic", |raw| magic(raw, b"FLRS"))?;
        d.field(2, "version", plain(if v1 { 1 } else { 2 }))?;
        d.field(2, "flags", raft_state_flags)?;
        d.field(8, "vote_term", number)?;
        d.field(8, "voted_for", number)?;
        d.field(8, "purged_term", number)?;
        d.field(8, "purged_index", number)?;
        if !v1 {
            d.field(8, "committed_term", number)?;
            d.field(8, "committed_index", number)?;
            d.field(2, "log_encoding", number)?;
            d.field(2, "reserved", number)?;
        }
        d.field(4, "crc", |raw| {
            crc_note(
                be_u32(raw),
                covered.unwrap_or_default(),
                &format!("bytes 0..{crc_end}"),
            )
        })?;
        if !d.rest().is_empty() {
            let extra = d.rest().len();
            d.rows(extra, "trailing");
        }
        Some(())
    })();
    if dumped.is_none() {
        d.note("the file ends inside the field above");
    }
    d.blank();
    match decode_raft_state(d.bytes) {
        Ok(state) => d.note(format!(
            "decode_raft_state: ok, vote {:?}, last purged {:?}, committed {:?}, log encoding {}",
            state.vote, state.last_purged, state.committed, state.log_encoding
        )),
        Err(err) => d.note(format!("decode_raft_state: {}: {err}", err.name())),
    }
}

pub(super) fn raft_snapshot(d: &mut Dump<'_>) {
    let body = d.bytes.get(RAFT_SNAPSHOT_HEADER_LEN..).unwrap_or_default();
    let covered = d.bytes.get(..44).map(|header| crc32_pair(header, body));
    let dumped = (|| {
        d.blank();
        d.note(format!(
            "raft-snapshot file, version 1 ({RAFT_SNAPSHOT_HEADER_LEN}-byte header, then the membership)"
        ));
        d.field(4, "magic", |raw| magic(raw, b"FLSN"))?;
        d.field(2, "version", plain(1))?;
        d.field(2, "flags", |raw| {
            let found = raw.iter().fold(0u16, |acc, &b| (acc << 8) | u16::from(b));
            let named = match found {
                0 => "none (the initial membership)",
                1 => "membership_id",
                _ => "undefined bits",
            };
            format!("{found:#06X}: {named}")
        })?;
        d.field(8, "last_term", number)?;
        d.field(8, "last_index", number)?;
        d.field(8, "membership_term", number)?;
        d.field(8, "membership_index", number)?;
        d.field(4, "body_len", number)?;
        d.field(4, "crc", |raw| {
            crc_note(
                be_u32(raw),
                covered.unwrap_or_default(),
                "bytes 0..44 and the body",
            )
        })?;
        if !d.rest().is_empty() {
            let len = d.rest().len();
            d.rows(len, "membership (postcard of openraft's Membership)");
        }
        Some(())
    })();
    if dumped.is_none() {
        d.note("the file ends inside the field above");
    }
    d.blank();
    match decode_raft_snapshot(d.bytes) {
        Ok(snapshot) => d.note(format!(
            "decode_raft_snapshot: ok, last {:?}, membership of {:?}, {} bytes of membership",
            snapshot.last,
            snapshot.membership_id,
            snapshot.membership.len()
        )),
        Err(err) => d.note(format!("decode_raft_snapshot: {}: {err}", err.name())),
    }
}

/// The raft-state flags, each set bit named.
fn raft_state_flags(raw: &[u8]) -> String {
    let found = raw.iter().fold(0u16, |acc, &b| (acc << 8) | u16::from(b));
    let names = ["vote", "committed", "voted_for", "purged", "committed_id"];
    let mut set: Vec<String> = names
        .iter()
        .enumerate()
        .filter(|(bit, _)| found & (1 << bit) != 0)
        .map(|(_, name)| (*name).to_string())
        .collect();
    if found >> names.len() != 0 {
        set.push("undefined bits".into());
    }
    if set.is_empty() {
        set.push("none".into());
    }
    format!("{found:#06X}: {}", set.join(", "))
}
