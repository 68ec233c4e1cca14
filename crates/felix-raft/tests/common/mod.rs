//! What the felix-raft tests share.
#![allow(dead_code, unreachable_pub)]

pub mod net;
pub mod sm;
