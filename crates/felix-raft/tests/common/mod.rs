//! What the felix-raft tests share.
#![allow(dead_code, unreachable_pub)]

pub mod sm;
