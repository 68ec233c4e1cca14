//! Every bit of a small three-segment shard with its indexes and its epochs
//! file, flipped one at a time and opened through `Shard`: damage to a
//! segment is refused or repaired, never read back as data; damage to an
//! index or to the epochs file is harmless (rebuilt, or read as empty).
//!
//! `felix-recovery`'s own sweep checks the kind and site of every segment
//! flip; this one checks what a broker sees.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use felix_io::FileSystem;
use felix_io::sim::{CrashPlan, SimFs};
use felix_storage::{
    Durability, Preallocation, ReadBound, Record, Shard, StorageError, StoreConfig,
};

const DIR: &str = "/shard";

fn config() -> StoreConfig {
    StoreConfig {
        segment_size_bytes: 200,
        index_spacing_bytes: 40,
        preallocate: Preallocation::Off,
        durability: Durability::OnCommit,
        ..StoreConfig::default()
    }
}

fn payload(offset: u64) -> Vec<u8> {
    format!("flip-{offset}-{}", "#".repeat((offset % 7) as usize)).into_bytes()
}

/// Builds the shard on a simulated disk and returns it made durable.
fn build() -> (SimFs, u64) {
    let sim = SimFs::new();
    let fs = FileSystem::new(sim.clone());
    let shard = Shard::options(Path::new(DIR))
        .file_system(fs.clone())
        .config(config())
        .label("flips")
        .open()
        .unwrap();
    shard.begin_generation(1).unwrap();
    for o in 0..5 {
        shard.append(&[Record::new(o, payload(o))]).wait().unwrap();
    }
    shard.begin_generation(2).unwrap();
    for o in 5..9 {
        shard.append(&[Record::new(o, payload(o))]).wait().unwrap();
    }
    assert!(
        shard.segments().len() >= 3,
        "{} segments",
        shard.segments().len()
    );
    let next = shard.offsets().written;
    drop(shard);
    let durable = sim.crash(&CrashPlan::everything(sim.pending().len()));
    (durable, next)
}

fn files(sim: &SimFs) -> BTreeMap<PathBuf, Vec<u8>> {
    use felix_io::Vfs;
    sim.list_dir(Path::new(DIR))
        .unwrap()
        .into_iter()
        .map(|e| Path::new(DIR).join(e.name))
        .filter(|p| !p.ends_with("lock"))
        .map(|p| {
            let bytes = sim.read_file(&p).unwrap();
            (p, bytes)
        })
        .collect()
}

#[derive(Debug, Default)]
struct Tally {
    flips: u64,
    refused: u64,
    opened: u64,
    reads_refused: u64,
}

#[test]
fn open_every_single_bit_flip_is_refused_repaired_or_harmless_never_data() {
    let (pristine, next) = build();
    let original = files(&pristine);
    let history = {
        let shard = Shard::options(Path::new(DIR))
            .file_system(FileSystem::new(pristine.crash(&CrashPlan::durable_only())))
            .config(config())
            .label("flips")
            .open()
            .unwrap();
        shard.generations()
    };
    assert_eq!(history.entries().len(), 2);
    let mut tally = Tally::default();
    for (path, bytes) in &original {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        for bit in 0..bytes.len() * 8 {
            tally.flips += 1;
            let sim = pristine.crash(&CrashPlan::durable_only());
            let mut flipped = bytes.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            sim.write_file(path, &flipped).unwrap();
            let what = format!("{name} bit {bit}");
            let opened = Shard::options(Path::new(DIR))
                .file_system(FileSystem::new(sim))
                .config(config())
                .label("flips")
                .open();
            let shard = match opened {
                Ok(shard) => shard,
                Err(StorageError::Recovery(_)) => {
                    assert!(
                        name.ends_with(".log"),
                        "{what}: only segment damage may refuse an open"
                    );
                    tally.refused += 1;
                    continue;
                }
                Err(other) => panic!("{what}: {other}"),
            };
            tally.opened += 1;
            let harmless = !name.ends_with(".log");
            if harmless {
                assert_eq!(shard.offsets().written, next, "{what}");
            }
            // Every record readable is the one written; damage the open did
            // not see (a sealed segment is only tail-checked) surfaces as an
            // error on read, never as data.
            for offset in shard.offsets().base..shard.offsets().written {
                match shard.read(offset, 1, ReadBound::Committed) {
                    Ok(records) => assert_eq!(
                        records[0].payload,
                        payload(offset),
                        "{what}, offset {offset}"
                    ),
                    Err(err) => {
                        assert!(!harmless, "{what}: a harmless flip broke a read: {err}");
                        tally.reads_refused += 1;
                    }
                }
            }
            if name == "epochs" {
                let got = shard.generations();
                assert!(got.is_empty() || got == history, "{what}: history {got:?}");
            } else {
                assert_eq!(shard.generations(), history, "{what}");
            }
        }
    }
    println!(
        "{} flips: {} opens refused, {} opened ({} reads refused as damage)",
        tally.flips, tally.refused, tally.opened, tally.reads_refused
    );
    assert!(tally.flips > 5000, "{tally:?}");
}
