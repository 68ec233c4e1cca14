//! The generation history of a felix shard.
