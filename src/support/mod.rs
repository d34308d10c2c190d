//! The bottom layer: what every other layer may use and which uses none of
//! them — the panic boundary, fallible heap allocation, the synchronisation
//! primitives (swappable for loom's), logging and the statistics counters.

pub mod c_enum;
#[cfg(not(loom))]
pub(crate) mod fallible;
#[cfg(not(loom))]
pub mod logging;
#[cfg(not(loom))]
pub(crate) mod page_bytes;
#[cfg(not(loom))]
pub(crate) mod settings;
#[cfg(not(loom))]
pub(crate) mod stats;
pub(crate) mod sync;
#[cfg(not(loom))]
pub(crate) mod unwind;
