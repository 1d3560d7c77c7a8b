//! placeholder
pub use rheostat_algorithms as algorithms;
