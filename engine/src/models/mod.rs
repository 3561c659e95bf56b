//! The stages of MiniMax-Music3, each a struct with `new(config, weights)` and a forward.

pub mod condition;
pub mod depth;
pub mod dit;
pub mod kv_cache;
pub mod linear;
pub mod lm;
pub mod scheduler;
pub mod swiglu;
pub mod table;
pub mod vocoder;
